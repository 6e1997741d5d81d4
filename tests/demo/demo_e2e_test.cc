// End-to-end tests of mixnet-demo on the emulated cluster (label netns,
// root). They check the accounting, not timing:
//   - all five fabrics on a short run: per fabric the busiest link's
//     utilisation in [0, 1.05], the floor at most the all-to-all time, the
//     bytes verified equal to a closed form of the workload's parameters
//     (every rank sends all its tokens in each of the 4 x layers
//     all-to-alls of an iteration: iterations x 4 x layers x hosts x tokens x
//     token_bytes per fabric), none lost, the summary's keys, and no
//     namespace left behind;
//   - the simulator's prediction beside each measurement: a tiny run of the
//     five fabrics whose simulated all-to-all time must match the floor the
//     NIC counters measure within 10% (the model routes the same bytes over
//     the same links, mixnet's as its workers recorded them), and
//     `mixnet-demo simulate` on its kept run dir predicting the same;
//   - a MixNet-only run with continuous checksummed all-to-alls commits at
//     least 100 planned reconfigurations with nothing lost;
//   - the controller killed and restarted mid-run: nothing lost, a higher
//     epoch after the restart;
//   - bad input: exit code 2 with a message, nothing left behind.
// The test thread runs the binary and waits (bounded by `timeout`).
#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <map>
#include <sstream>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "apps/demo/workload.h"
#include "emulation/emulated_fabric.h"
#include "gtest/gtest.h"
#include "mixnet_build_paths.h"  // MIXNET_DEMO_BINARY
#include "nlohmann/json.hpp"
#include "ocs_driver/netns/netns.h"
#include "tests/common/run_binary.h"
#include "tests/emulation/netns_test_util.h"

namespace mixnet::demo {
namespace {

using DemoRun = testing::BinaryRun;

DemoRun RunDemo(const std::string& args, int limit_s) {
  return testing::RunBinary(MIXNET_DEMO_BINARY, args, limit_s);
}

// Workload flags of a demo run: small compute times (the accounting, not
// the timing, is checked).
std::string WorkloadArgs(const WorkloadOptions& w, int iterations) {
  return absl::StrCat("--json --no-progress --iterations ", iterations, " --hosts ", w.hosts,
                      " --layers ", w.layers, " --experts-per-host ", w.experts_per_host,
                      " --tokens ", w.tokens, " --token-bytes ", w.token_bytes, " --seed ", w.seed,
                      " --drift-every ", w.drift_every,
                      " --attention-ms 5 --expert-ms 5 --head-ms 5 --expert-bwd-ms 5 "
                      "--attention-bwd-ms 5");
}

// Closed form (not the demo's functions): top-1 routing sends every token
// of every rank somewhere in each all-to-all, and an iteration has 4
// all-to-alls per layer (dispatch, combine, and their gradients).
uint64_t ClosedFormBytes(const WorkloadOptions& w, int iterations) {
  return static_cast<uint64_t>(iterations) * 4 * w.layers * w.hosts * w.tokens * w.token_bytes;
}

std::vector<nlohmann::json> JsonLines(const std::string& out) {
  std::vector<nlohmann::json> v;
  std::stringstream ss(out);
  std::string line;
  while (std::getline(ss, line)) {
    if (line.empty() || line[0] != '{') continue;
    nlohmann::json j = nlohmann::json::parse(line, nullptr, false);
    if (j.is_object()) v.push_back(std::move(j));
  }
  return v;
}

std::vector<std::string> Namespaces(const std::string& prefix) {
  return netns::ListNamespaces(prefix).value_or(std::vector<std::string>{});
}

TEST(DemoE2E, AllFabricsAccountingHolds) {
  MIXNET_SKIP_UNLESS_NETNS();
  const std::string prefix = testing::UniquePrefix("demo");
  WorkloadOptions w;
  w.hosts = 4;
  w.layers = 2;
  w.experts_per_host = 2;
  w.tokens = 64;
  w.token_bytes = 2048;
  w.seed = 3;
  w.drift_every = 2;
  const int iterations = 2;
  const std::string args =
      absl::StrCat(WorkloadArgs(w, iterations),
                   " --ocs-nics 2 --gbps 0.05 --leaf-hosts 2 --prefix ", prefix, " --timeout-s 60");
  const DemoRun r = RunDemo(args, 200);
  const std::vector<std::string> left = Namespaces(prefix);
  for (const char* p : {"ep", "ov", "st", "mi", "no"}) {
    (void)emulation::EmulatedFabric::DownPrefix(prefix + p);  // in case the demo was killed
  }
  ASSERT_EQ(r.exit_code, 0) << "stdout:\n"
                            << r.out << "\nstderr (tail):\n"
                            << r.err.substr(r.err.size() > 6000 ? r.err.size() - 6000 : 0);
  EXPECT_TRUE(left.empty()) << "namespaces left: " << left.front();
  const std::vector<nlohmann::json> lines = JsonLines(r.out);
  ASSERT_EQ(lines.size(), 6u) << r.out;
  std::map<std::string, nlohmann::json> by;
  for (size_t i = 0; i < 5; ++i) by[lines[i]["fabric"].get<std::string>()] = lines[i];
  for (const char* f : {"eps", "oversub", "static", "mixnet", "nonblocking"}) {
    ASSERT_TRUE(by.count(f)) << f << "\n" << r.out;
    const nlohmann::json& j = by[f];
    std::printf("%s\n", j.dump().c_str());
    for (const char* key :
         {"fabric", "iteration_ms", "first_iteration_ms", "steady_iteration_ms", "steady_floor_ms",
          "alltoall_ms", "reconfig_loss_ms", "floor_ms", "busiest_nic_utilisation",
          "reconfigurations", "bytes_verified", "bytes_lost"}) {
      EXPECT_TRUE(j.contains(key)) << f << ": " << key;
    }
    const double util = j["busiest_nic_utilisation"].get<double>();
    EXPECT_GE(util, 0) << f;
    EXPECT_LE(util, 1.05) << f;
    EXPECT_GT(j["floor_ms"].get<double>(), 0) << f;
    EXPECT_LE(j["floor_ms"].get<double>(), j["alltoall_ms"].get<double>()) << f;
    EXPECT_LE(j["alltoall_ms"].get<double>(), j["iteration_ms"].get<double>()) << f;
    EXPECT_EQ(j["bytes_verified"].get<uint64_t>(), ClosedFormBytes(w, iterations)) << f;
    EXPECT_EQ(j["bytes_lost"].get<uint64_t>(), 0u) << f;
    if (std::string(f) != "mixnet") {
      EXPECT_EQ(j["reconfigurations"].get<int64_t>(), 0) << f;
      EXPECT_EQ(j["reconfig_loss_ms"].get<double>(), 0) << f;
    }
  }
  EXPECT_GT(by["mixnet"]["reconfigurations"].get<int64_t>(), 0);
  // The controller timed its rounds (GetStatus medians): each took at least
  // the switching time (the default 25 ms), and the overhead is the rest
  // (one switch, so the median of the differences is the difference).
  const nlohmann::json& mix = by["mixnet"];
  ASSERT_TRUE(mix.contains("round_ms") && mix.contains("round_overhead_ms")) << mix.dump();
  EXPECT_GE(mix["round_ms"].get<double>(), 25.0);
  EXPECT_NEAR(mix["round_overhead_ms"].get<double>(), mix["round_ms"].get<double>() - 25.0, 1e-6);
  // The simulator's prediction beside each measurement (emulation mode);
  // mixnet's replays the circuits and plans its workers ran.
  for (const char* f : {"eps", "oversub", "static", "mixnet", "nonblocking"}) {
    ASSERT_TRUE(by[f]["simulated_ms"].is_number()) << f << ": " << by[f].dump();
    EXPECT_GT(by[f]["simulated_alltoall_ms"].get<double>(), 0) << f;
    EXPECT_LT(by[f]["simulated_alltoall_ms"].get<double>(), by[f]["simulated_ms"].get<double>())
        << f;
  }
  const nlohmann::json& s = lines[5];
  std::printf("%s\n", s.dump().c_str());
  for (const char* key : {"cpu_bound", "mixnet_vs_nonblocking", "mixnet_vs_eps",
                          "mixnet_vs_oversub", "mixnet_vs_static"}) {
    EXPECT_TRUE(s.contains(key)) << key;
  }
  EXPECT_EQ(s["bytes_lost"].get<uint64_t>(), 0u);
  EXPECT_EQ(s["bytes_verified"].get<uint64_t>(), 5 * ClosedFormBytes(w, iterations));
}

// A tiny emulated run against its simulation (issue 22 item 5): 4 hosts, 2 MiB
// per rank per all-to-all at 50 Mbit/s. What is checked is what the model
// must get right whatever the CPUs do: the bytes it routes over each link.
// How close its times come to the measured ones (the +-15% target) is a
// performance figure: the demo prints it beside each measurement, and it
// holds only where the data plane runs its busiest link near its rate.
// The run dir is kept (--keep-dir) for `mixnet-demo simulate`, whose run
// on it is kept beside the live one; then the dir goes.
struct TinyRuns {
  DemoRun live;
  DemoRun replay;
};
const TinyRuns& TinyRunAndReplay() {
  static const TinyRuns runs = [] {
    const std::string prefix = testing::UniquePrefix("demosim");
    const std::string args = absl::StrCat(
        "--json --no-progress --fabrics eps,oversub,static,mixnet,nonblocking --iterations 2 "
        "--hosts 4 "
        "--layers 2 --experts-per-host 2 --tokens 256 --token-bytes 8192 --seed 3 "
        "--drift-every 2 --attention-ms 5 --expert-ms 5 --head-ms 5 --expert-bwd-ms 5 "
        "--attention-bwd-ms 5 --ocs-nics 2 --gbps 0.05 --leaf-hosts 2 --switch-ms 40 --keep-dir "
        "--prefix ",
        prefix, " --timeout-s 120");
    TinyRuns t;
    t.live = RunDemo(args, 300);
    for (const char* p : {"ep", "ov", "st", "mi", "no"}) {
      (void)emulation::EmulatedFabric::DownPrefix(prefix + p);
    }
    const std::string mark = "# --keep-dir: run dir ";
    const size_t at = t.live.out.find(mark);
    if (at != std::string::npos) {
      const size_t from = at + mark.size();
      const std::string dir = t.live.out.substr(from, t.live.out.find(' ', from) - from);
      t.replay = RunDemo(absl::StrCat("simulate --json --run-dir ", dir), 60);
      std::error_code ec;
      std::filesystem::remove_all(dir, ec);
    }
    return t;
  }();
  return runs;
}
const DemoRun& TinyRun() { return TinyRunAndReplay().live; }

std::map<std::string, nlohmann::json> TinyRunFabrics() {
  const DemoRun& r = TinyRun();
  EXPECT_EQ(r.exit_code, 0) << r.out << "\n"
                            << r.err.substr(r.err.size() > 4000 ? r.err.size() - 4000 : 0);
  std::map<std::string, nlohmann::json> by;
  for (const nlohmann::json& j : JsonLines(r.out)) {
    if (j.contains("fabric")) by[j["fabric"].get<std::string>()] = j;
  }
  return by;
}

// The simulator routes the same bytes over the same links as the data plane:
// its all-to-all time is the busiest link's load over its rate, which the
// NIC counters measure as the floor (they count ACKs and retransmissions
// too, which the model leaves out).
TEST(DemoE2E, SimulationPredictsTheFloorOfATinyRun) {
  MIXNET_SKIP_UNLESS_NETNS();
  const std::map<std::string, nlohmann::json> by = TinyRunFabrics();
  for (const char* f : {"eps", "oversub", "static", "mixnet", "nonblocking"}) {
    ASSERT_TRUE(by.count(f)) << f;
    const nlohmann::json& j = by.at(f);
    std::printf("%s\n", j.dump().c_str());
    ASSERT_TRUE(j["simulated_ms"].is_number()) << f;
    const double sim = j["simulated_alltoall_ms"].get<double>();
    const double floor = j["floor_ms"].get<double>();
    EXPECT_NEAR(sim, floor, 0.1 * floor) << f;
  }
}

// `mixnet-demo simulate` on the kept run dir predicts what the live demo
// predicted (the same SimulatePhase on what the orchestrator wrote down:
// config, spec, the workers' results with mixnet's recorded routing) and
// reads back the same measurements. The run's switching time (40 ms) and
// leaves (2 hosts each) are not the defaults, so a replay that missed them
// would predict other mixnet and oversub times.
TEST(DemoE2E, SimulateOnTheKeptRunDirPredictsAsTheLiveRunDid) {
  MIXNET_SKIP_UNLESS_NETNS();
  const std::map<std::string, nlohmann::json> live = TinyRunFabrics();
  const DemoRun& replay = TinyRunAndReplay().replay;
  ASSERT_EQ(replay.exit_code, 0) << replay.out << replay.err;
  std::map<std::string, nlohmann::json> by;
  for (const nlohmann::json& j : JsonLines(replay.out)) {
    if (j.contains("fabric")) by[j["fabric"].get<std::string>()] = j;
  }
  for (const char* f : {"eps", "oversub", "static", "mixnet", "nonblocking"}) {
    ASSERT_TRUE(by.count(f) && live.count(f)) << f << "\n" << replay.out;
    const nlohmann::json& r = by.at(f);
    const nlohmann::json& l = live.at(f);
    ASSERT_TRUE(r["ok"].get<bool>()) << r.dump();
    for (const char* key :
         {"iteration_ms", "alltoall_ms", "floor_ms", "simulated_ms", "simulated_alltoall_ms"}) {
      const double want = l[key].get<double>();
      EXPECT_NEAR(r[key].get<double>(), want, 1e-9 * want) << f << " " << key;
    }
    const double error = r["simulated_ms"].get<double>() / r["iteration_ms"].get<double>() - 1;
    EXPECT_NEAR(r["error"].get<double>(), error, 1e-12) << f;
  }
  // mixnet's round overhead came back from the run dir (results/controller.json).
  ASSERT_TRUE(by["mixnet"].contains("round_overhead_ms")) << by["mixnet"].dump();
  EXPECT_EQ(by["mixnet"]["round_overhead_ms"].get<double>(),
            live.at("mixnet")["round_overhead_ms"].get<double>());
  // Rounds were charged the warm-up sweep's calibration, live and replayed.
  const nlohmann::json& replayed = by["mixnet"];
  for (const nlohmann::json* j : {&replayed, &live.at("mixnet")}) {
    ASSERT_TRUE(j->contains("simulated_rounds")) << j->dump();
    EXPECT_EQ((*j)["simulated_rounds"], "warm-up sweep");
  }
  EXPECT_EQ(by["mixnet"]["simulated_round_overhead_ms"].get<double>(),
            live.at("mixnet")["simulated_round_overhead_ms"].get<double>());
}

TEST(DemoE2E, SimulateOnAFolderWithoutPhasesExitsTwo) {
  const std::string dir = absl::StrCat("/tmp/mixnet_demo_empty_run_", getpid());
  std::filesystem::create_directories(dir);
  const DemoRun r = RunDemo(absl::StrCat("simulate --run-dir ", dir), 20);
  std::filesystem::remove_all(dir);
  EXPECT_EQ(r.exit_code, 2) << r.out << r.err;
  EXPECT_NE(r.err.find(absl::StrCat(dir, " holds no phase folder")), std::string::npos) << r.err;
}

TEST(DemoE2E, HundredReconfigurationsUnderChecksummedAlltoallNothingLost) {
  MIXNET_SKIP_UNLESS_NETNS();
  const std::string prefix = testing::UniquePrefix("demo");
  WorkloadOptions w;
  w.hosts = 8;
  w.layers = 4;
  w.experts_per_host = 2;
  // Enough bytes that a switch pays for itself: the controller plans with
  // the netns switch's measured Apply time (~8 ms idle, tens of ms when the
  // CPUs are shared with other tests), not the spec's 5 ms.
  w.tokens = 128;
  w.token_bytes = 4096;
  w.seed = 7;
  w.drift_every = 3;
  const int iterations = 28;
  const std::string args =
      absl::StrCat("--fabrics mixnet ", WorkloadArgs(w, iterations),
                   " --ocs-nics 3 --gbps 0.05 --switch-ms 5 --prefix ", prefix, " --timeout-s 150");
  const DemoRun r = RunDemo(args, 160);
  (void)emulation::EmulatedFabric::DownPrefix(prefix + "mi");  // in case the demo was killed
  ASSERT_EQ(r.exit_code, 0) << "stdout:\n"
                            << r.out << "\nstderr (tail):\n"
                            << r.err.substr(r.err.size() > 6000 ? r.err.size() - 6000 : 0);
  const std::vector<nlohmann::json> lines = JsonLines(r.out);
  ASSERT_EQ(lines.size(), 2u) << r.out;
  const nlohmann::json& j = lines[0];
  std::printf("mixnet-demo result: %s\n", j.dump().c_str());
  EXPECT_EQ(j["fabric"], "mixnet");
  EXPECT_GE(j["reconfigurations"].get<int64_t>(), 100) << r.out;
  EXPECT_EQ(j["bytes_lost"].get<uint64_t>(), 0u);
  EXPECT_EQ(j["bytes_verified"].get<uint64_t>(), ClosedFormBytes(w, iterations));
  // Issue 63: the warm-up sweep lit each of the C(8, 2) * 3 * 3 NIC pairs
  // once ((8 - 1) * 3 perfect matchings of the 24 ports, then the topology
  // the job started on), so the 100+ rounds of the timed iterations open
  // and reset no TCP connection on any host: they resume suspended paths.
  ASSERT_TRUE(j.contains("warm_rounds")) << j.dump();
  EXPECT_TRUE(j["warm_complete"].get<bool>());
  EXPECT_EQ(j["warm_rounds"].get<int64_t>(), 7 * 3 + 1);
  EXPECT_EQ(j["tcp_opens"].get<uint64_t>(), 0u);
  EXPECT_EQ(j["tcp_resets"].get<uint64_t>(), 0u);
}

// Issue 5: the controller killed mid-run. The workers keep running on the
// topology they have (no byte lost), re-register when it returns, and the
// restarted controller resumes above every epoch it issued before.
TEST(DemoE2E, ControllerKilledMidRunWorkersContinueAndItResumesHigher) {
  MIXNET_SKIP_UNLESS_NETNS();
  const std::string prefix = testing::UniquePrefix("demo");
  WorkloadOptions w;
  w.hosts = 4;
  w.layers = 2;
  w.experts_per_host = 2;
  w.tokens = 128;
  w.token_bytes = 1024;
  w.seed = 11;
  w.drift_every = 2;
  const int iterations = 30;
  const std::string args = absl::StrCat(
      "--fabrics mixnet ", WorkloadArgs(w, iterations),
      " --ocs-nics 2 --gbps 0.05 --switch-ms 5 --plan-wait-ms 500 --kill-controller-after-s 2",
      " --controller-down-s 2 --prefix ", prefix, " --timeout-s 60");
  const DemoRun r = RunDemo(args, 75);
  (void)emulation::EmulatedFabric::DownPrefix(prefix + "mi");
  ASSERT_EQ(r.exit_code, 0) << "stdout:\n"
                            << r.out << "\nstderr (tail):\n"
                            << r.err.substr(r.err.size() > 6000 ? r.err.size() - 6000 : 0);
  const std::vector<nlohmann::json> lines = JsonLines(r.out);
  ASSERT_EQ(lines.size(), 2u) << r.out;
  const nlohmann::json& f = lines[0];
  std::printf("mixnet-demo result: %s\n", f.dump().c_str());
  EXPECT_EQ(f["bytes_lost"].get<uint64_t>(), 0u);
  EXPECT_EQ(f["bytes_verified"].get<uint64_t>(), ClosedFormBytes(w, iterations));
  EXPECT_TRUE(f["workers_ran_through_outage"].get<bool>());
  // Not merely alive: all-to-alls completed while no controller ran.
  EXPECT_GT(f["layers_during_outage"].get<int64_t>(), 0);
  const uint64_t before = f["controller_killed_at_epoch"].get<uint64_t>();
  const uint64_t after = f["controller_restarted_at_epoch"].get<uint64_t>();
  EXPECT_GT(before, 1u) << "no round before the kill";
  EXPECT_GT(after, before) << "the restarted controller must never reuse an epoch";
  EXPECT_GT(f["final_epoch"].get<uint64_t>(), after) << "no round after the restart";
}

// Bad input: a clear message, exit code 2, nothing started or left behind.
class DemoBadInput : public ::testing::TestWithParam<std::pair<const char*, const char*>> {};

TEST_P(DemoBadInput, ExitsTwoWithAMessage) {
  const auto& [args, message] = GetParam();
  const std::string prefix = testing::UniquePrefix("demo");
  const DemoRun r = RunDemo(absl::StrCat(args, " --prefix ", prefix), 20);
  EXPECT_EQ(r.exit_code, 2) << r.out << r.err;
  EXPECT_NE(r.err.find(message), std::string::npos) << "stderr: " << r.err;
  if (geteuid() == 0) {
    EXPECT_TRUE(Namespaces(prefix).empty());
  }
}

INSTANTIATE_TEST_SUITE_P(
    Flags, DemoBadInput,
    ::testing::Values(std::pair{"--fabrics nosuch", "unknown fabric 'nosuch'"},
                      std::pair{"--affine-share 1.5", "affine_share 1.5"},
                      std::pair{"--affine-share -0.1", "affine_share -0.1"},
                      std::pair{"--attention-ms -1", "--attention-ms -1"},
                      std::pair{"--switch-ms -5", "--switch-ms -5"},
                      std::pair{"--burst-ms 0", "--burst-ms 0"},
                      std::pair{"--tokens 0", "--tokens 0"},
                      std::pair{"--iterations 0", "--iterations 0"},
                      // Relays default on, for router v2 only: v1 runs
                      // without them unless they are asked for.
                      std::pair{"--router v1 --relay on", "--relay on needs --router v2"},
                      std::pair{"--router v1 --iterations 0", "--iterations 0"},
                      std::pair{"--route-solver simplex", "--route-solver"}));

TEST(DemoE2E, MalformedTraceNamesLineAndField) {
  const std::string path = absl::StrCat("/tmp/mixnet_demo_bad_trace_", getpid(), ".jsonl");
  {
    std::ofstream out(path);
    out << "\n{\"iteration\": 0, \"entries\": \"nope\"}\n";
  }
  const DemoRun r = RunDemo(absl::StrCat("--trace ", path), 20);
  std::remove(path.c_str());
  EXPECT_EQ(r.exit_code, 2) << r.out << r.err;
  EXPECT_NE(r.err.find(absl::StrCat(path, ":2")), std::string::npos) << r.err;
}

}  // namespace
}  // namespace mixnet::demo
