// Launcher environments (runtime/rendezvous/launcher_env.h) from hand-written
// variable sets: what torchrun, srun and mpirun set for one process, partial
// and malformed sets, the optional local rank (torch.distributed's env://
// needs only RANK and WORLD_SIZE), a caller's own store, the store's host and
// port rules, and Slurm host lists.
// Pure; runs on the test thread.
#include "runtime/rendezvous/launcher_env.h"

#include <map>
#include <string>

#include "gtest/gtest.h"

namespace mixnet::rendezvous {
namespace {

using Vars = std::map<std::string, std::string>;

EnvLookup Env(const Vars& vars) {
  return [vars](const std::string& name) -> std::optional<std::string> {
    auto it = vars.find(name);
    if (it == vars.end()) return std::nullopt;
    return it->second;
  };
}

// LaunchFromEnvironment over `vars` alone (the MIXNET_* settings too).
absl::StatusOr<LaunchInfo> Launch(const Vars& vars, StoreNeed need = StoreNeed::kRequired) {
  const EnvLookup env = Env(vars);
  absl::StatusOr<Settings> s = Settings::FromEnv([&](const char* name) { return env(name); });
  if (!s.ok()) return s.status();
  return LaunchFromEnvironment(env, *s, need);
}

TEST(LaunchFromEnvironment, Torchrun) {
  absl::StatusOr<LaunchInfo> i = Launch(Vars({{"RANK", "5"},
                                              {"WORLD_SIZE", "8"},
                                              {"LOCAL_RANK", "1"},
                                              {"MASTER_ADDR", "10.0.0.7"},
                                              {"MASTER_PORT", "29500"}}));
  ASSERT_TRUE(i.ok()) << i.status();
  EXPECT_EQ(i->launcher, "torchrun");
  EXPECT_EQ(i->rank, 5);
  EXPECT_EQ(i->world, 8);
  EXPECT_EQ(i->local_rank, 1);
  EXPECT_EQ(i->store, "tcp://10.0.0.7:29501");  // MASTER_PORT + 1
}

// torch.distributed's env:// needs RANK, WORLD_SIZE, MASTER_ADDR and
// MASTER_PORT only; so does this (examples/moe_pytorch/launch.py sets no
// LOCAL_RANK). The local rank is then unknown (-1).
TEST(LaunchFromEnvironment, LocalRankIsOptionalAsForTorchEnv) {
  absl::StatusOr<LaunchInfo> i = Launch(Vars({{"RANK", "3"},
                                              {"WORLD_SIZE", "4"},
                                              {"MASTER_ADDR", "127.0.0.1"},
                                              {"MASTER_PORT", "29500"}}));
  ASSERT_TRUE(i.ok()) << i.status();
  EXPECT_EQ(i->launcher, "torchrun");
  EXPECT_EQ(i->rank, 3);
  EXPECT_EQ(i->world, 4);
  EXPECT_EQ(i->local_rank, -1);
  EXPECT_EQ(i->store, "tcp://127.0.0.1:29501");
  absl::StatusOr<LaunchInfo> s = Launch(
      Vars({{"SLURM_PROCID", "1"}, {"SLURM_NTASKS", "2"}, {"SLURM_STEP_NODELIST", "n[1-2]"}}));
  ASSERT_TRUE(s.ok()) << s.status();
  EXPECT_EQ(s->local_rank, -1);
  EXPECT_EQ(s->store, "tcp://n1:29501");
}

// A caller with its own store (mixnet.init(store=...), a --store flag) takes
// rank and world size from the launcher and needs no master host.
TEST(LaunchFromEnvironment, ACallersOwnStoreNeedsNoMasterHost) {
  const Vars vars{{"RANK", "1"}, {"WORLD_SIZE", "4"}};
  absl::StatusOr<LaunchInfo> needed = Launch(vars);
  EXPECT_EQ(needed.status().code(), absl::StatusCode::kInvalidArgument) << needed.status();
  EXPECT_NE(needed.status().message().find("MASTER_ADDR"), std::string::npos) << needed.status();
  absl::StatusOr<LaunchInfo> own = Launch(vars, StoreNeed::kOptional);
  ASSERT_TRUE(own.ok()) << own.status();
  EXPECT_EQ(own->rank, 1);
  EXPECT_EQ(own->world, 4);
  EXPECT_EQ(own->store, "");
}

TEST(LaunchFromEnvironment, SlurmTakesTheStepsFirstHost) {
  absl::StatusOr<LaunchInfo> i = LaunchFromEnvironment(Env({{"SLURM_PROCID", "3"},
                                                            {"SLURM_NTASKS", "4"},
                                                            {"SLURM_LOCALID", "1"},
                                                            {"SLURM_STEP_NODELIST", "gpu[07-08]"},
                                                            {"SLURM_JOB_NODELIST", "gpu[01-08]"}}));
  ASSERT_TRUE(i.ok()) << i.status();
  EXPECT_EQ(i->launcher, "slurm");
  EXPECT_EQ(i->rank, 3);
  EXPECT_EQ(i->world, 4);
  EXPECT_EQ(i->local_rank, 1);
  EXPECT_EQ(i->store, "tcp://gpu07:29501");  // no MASTER_PORT: the default
}

TEST(LaunchFromEnvironment, OpenMpiOnOneHostUsesLoopback) {
  Vars v = {{"OMPI_COMM_WORLD_RANK", "2"},
            {"OMPI_COMM_WORLD_SIZE", "4"},
            {"OMPI_COMM_WORLD_LOCAL_RANK", "2"},
            {"OMPI_COMM_WORLD_LOCAL_SIZE", "4"},
            {"MIXNET_STORE_PORT", "31000"}};
  absl::StatusOr<LaunchInfo> i = Launch(v);
  ASSERT_TRUE(i.ok()) << i.status();
  EXPECT_EQ(i->launcher, "openmpi");
  EXPECT_EQ(i->rank, 2);
  EXPECT_EQ(i->store, "tcp://127.0.0.1:31000");
  // Across hosts Open MPI names no master: MASTER_ADDR is needed.
  v["OMPI_COMM_WORLD_LOCAL_SIZE"] = "2";
  i = Launch(v);
  EXPECT_EQ(i.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(i.status().message().find("MASTER_ADDR"), std::string::npos) << i.status();
  v["MASTER_ADDR"] = "node0";
  i = Launch(v);
  ASSERT_TRUE(i.ok()) << i.status();
  EXPECT_EQ(i->store, "tcp://node0:31000");
}

TEST(LaunchFromEnvironment, MixnetStoreWins) {
  absl::StatusOr<LaunchInfo> i = Launch(Vars({{"RANK", "0"},
                                              {"WORLD_SIZE", "2"},
                                              {"LOCAL_RANK", "0"},
                                              {"MASTER_ADDR", "h"},
                                              {"MIXNET_STORE", "file:/tmp/s"}}));
  ASSERT_TRUE(i.ok()) << i.status();
  EXPECT_EQ(i->store, "file:/tmp/s");
}

// mpirun inside a Slurm batch script: the batch step's SLURM_* are inherited
// (SLURM_PROCID 0 in every process); Open MPI's variables are the truth.
TEST(LaunchFromEnvironment, OpenMpiBeforeAnInheritedSlurmStep) {
  absl::StatusOr<LaunchInfo> i = LaunchFromEnvironment(Env({{"SLURM_PROCID", "0"},
                                                            {"SLURM_NTASKS", "1"},
                                                            {"SLURM_LOCALID", "0"},
                                                            {"SLURM_JOB_NODELIST", "n1"},
                                                            {"OMPI_COMM_WORLD_RANK", "3"},
                                                            {"OMPI_COMM_WORLD_SIZE", "4"},
                                                            {"OMPI_COMM_WORLD_LOCAL_RANK", "3"},
                                                            {"OMPI_COMM_WORLD_LOCAL_SIZE", "4"}}));
  ASSERT_TRUE(i.ok()) << i.status();
  EXPECT_EQ(i->launcher, "openmpi");
  EXPECT_EQ(i->rank, 3);
}

TEST(LaunchFromEnvironment, NoLauncherIsNotFound) {
  absl::StatusOr<LaunchInfo> i = Launch(Vars({{"MASTER_ADDR", "h"}}));
  EXPECT_EQ(i.status().code(), absl::StatusCode::kNotFound) << i.status();
}

TEST(LaunchFromEnvironment, PartialOrMalformedIsAnErrorNamingTheVariable) {
  struct Case {
    Vars vars;
    const char* names;  // expected in the message
  } cases[] = {
      {{{"RANK", "1"}, {"MASTER_ADDR", "h"}}, "RANK set but WORLD_SIZE not"},
      {{{"LOCAL_RANK", "0"}, {"MASTER_ADDR", "h"}}, "LOCAL_RANK set but RANK, WORLD_SIZE not"},
      {{{"SLURM_NTASKS", "2"}, {"SLURM_LOCALID", "0"}}, "but SLURM_PROCID not"},
      {{{"RANK", "0"}, {"WORLD_SIZE", "2"}, {"LOCAL_RANK", "x"}, {"MASTER_ADDR", "h"}},
       "LOCAL_RANK = 'x'"},
      {{{"RANK", "x"}, {"WORLD_SIZE", "2"}, {"LOCAL_RANK", "0"}, {"MASTER_ADDR", "h"}},
       "RANK = 'x'"},
      {{{"RANK", "2"}, {"WORLD_SIZE", "2"}, {"LOCAL_RANK", "0"}, {"MASTER_ADDR", "h"}},
       "RANK = 2 is not below WORLD_SIZE = 2"},
      {{{"RANK", "0"}, {"WORLD_SIZE", "0"}, {"LOCAL_RANK", "0"}, {"MASTER_ADDR", "h"}},
       "WORLD_SIZE = '0'"},
      {{{"RANK", "0"}, {"WORLD_SIZE", "2"}, {"LOCAL_RANK", "0"}}, "MASTER_ADDR"},
      {{{"RANK", "0"},
        {"WORLD_SIZE", "2"},
        {"LOCAL_RANK", "0"},
        {"MASTER_ADDR", "h"},
        {"MASTER_PORT", "65535"}},
       "MASTER_PORT 65535"},
      {{{"SLURM_PROCID", "0"},
        {"SLURM_NTASKS", "2"},
        {"SLURM_LOCALID", "0"},
        {"SLURM_STEP_NODELIST", "n[1-"}},
       "node list"},
      {{{"RANK", "0"},
        {"WORLD_SIZE", "2"},
        {"LOCAL_RANK", "0"},
        {"MASTER_ADDR", "h"},
        {"MIXNET_STORE_PORT", "70000"}},
       "MIXNET_STORE_PORT = 70000"},
  };
  for (const Case& c : cases) {
    absl::StatusOr<LaunchInfo> i = Launch(c.vars);
    EXPECT_EQ(i.status().code(), absl::StatusCode::kInvalidArgument) << c.names;
    EXPECT_NE(i.status().message().find(c.names), std::string::npos)
        << "want '" << c.names << "' in: " << i.status();
  }
}

TEST(FirstSlurmHost, HandWorkedLists) {
  EXPECT_EQ(*FirstSlurmHost("node01"), "node01");
  EXPECT_EQ(*FirstSlurmHost("a,b"), "a");
  EXPECT_EQ(*FirstSlurmHost("node[03-05,9]"), "node03");
  EXPECT_EQ(*FirstSlurmHost("node[9,3-5]"), "node9");
  EXPECT_EQ(*FirstSlurmHost("gpu-[1-2]-ib,cpu1"), "gpu-1-ib");
  EXPECT_EQ(*FirstSlurmHost("x[007]"), "x007");
  for (const char* bad : {"", "n[1-", "n]1[", "n[a-b]", "n[[1]]", ",a"}) {
    EXPECT_FALSE(FirstSlurmHost(bad).ok()) << bad;
  }
}

}  // namespace
}  // namespace mixnet::rendezvous
