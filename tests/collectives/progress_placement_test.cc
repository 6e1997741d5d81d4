// Where the Communicator pins its devices' progress threads
// (CommunicatorOptions::progress_cpus, MIXNET_PROGRESS_CPUS): device k of the
// i-th of L ranks on a machine on entry (i + k*L) mod n of the CPU set; "none"
// leaves them alone; a listed CPU that cannot be used fails creation. Ranks run
// as threads and as processes (both on this machine).
#include <sched.h>

#include <algorithm>
#include <cstring>
#include <vector>

#include "gtest/gtest.h"
#include "runtime/collectives/alltoall.h"
#include "runtime/collectives/communicator.h"
#include "runtime/common/cpu_affinity.h"
#include "runtime/common/status.h"
#include "tests/collectives/rank_harness.h"

namespace mixnet::collectives {
namespace {

using testing::RankMode;
using testing::RunRanks;
using testing::TestOptions;

std::string Show(const std::vector<int>& cpus) {
  std::string s;
  for (int c : cpus) absl::StrAppend(&s, s.empty() ? "" : ",", c);
  return "{" + s + "}";
}

// Checks one rank's placement against `cpus` (the policy's CPU list).
absl::Status CheckPlacement(const Communicator& comm, const std::vector<int>& cpus) {
  const auto placed = comm.ProgressThreadCpus();
  if (placed.empty()) return absl::InternalError("no devices");
  const size_t n = cpus.size();
  for (size_t k = 0; k < placed.size(); ++k) {
    const size_t entry = (static_cast<size_t>(comm.local_rank()) + k * comm.local_ranks()) % n;
    const std::vector<int> want{cpus[entry]};
    if (placed[k].second != want) {
      return absl::InternalError(absl::StrCat("rank ", comm.rank(), " device ", k, " (",
                                              placed[k].first, ") runs on ", Show(placed[k].second),
                                              ", want ", Show(want)));
    }
  }
  return absl::OkStatus();
}

class ProgressPlacement : public ::testing::TestWithParam<RankMode> {};

TEST_P(ProgressPlacement, AutoSpreadsLocalRanksOverAllowedCpus) {
  auto allowed = AllowedCpus();
  ASSERT_TRUE(allowed.ok()) << allowed.status();
  constexpr int kWorld = 4;
  auto statuses = RunRanks(kWorld, GetParam(), [&](int rank, int world, rendezvous::Store& store) {
    CommunicatorOptions o = TestOptions(rank, world, &store);
    o.progress_cpus = "auto";
    ASSIGN_OR_RETURN(auto comm, Communicator::Create(std::move(o)));
    if (comm->local_ranks() != world || comm->local_rank() != rank) {
      return absl::InternalError(absl::StrCat("rank ", rank, " is local rank ", comm->local_rank(),
                                              " of ", comm->local_ranks()));
    }
    // The intra-host device comes first in placement order.
    if (comm->ProgressThreadCpus().front().first.rfind("local", 0) != 0) {
      return absl::InternalError("the intra-host device is not placed first");
    }
    RETURN_IF_ERROR(CheckPlacement(*comm, *allowed));
    // And the pinned threads carry an all-to-all correctly.
    const size_t bytes = (1 << 20) + 7;
    std::vector<char> send(bytes * world), recv(bytes * world, 0);
    for (size_t i = 0; i < send.size(); ++i) send[i] = static_cast<char>(rank * 31 + i * 7);
    RETURN_IF_ERROR(Alltoall(*comm, send.data(), recv.data(), bytes));
    for (int from = 0; from < world; ++from) {
      for (size_t i = 0; i < bytes; ++i) {
        const size_t at = static_cast<size_t>(rank) * bytes + i;
        if (recv[from * bytes + i] != static_cast<char>(from * 31 + at * 7)) {
          return absl::DataLossError(absl::StrCat("rank ", rank, ": byte ", i, " from ", from));
        }
      }
    }
    return absl::OkStatus();
  });
  for (int r = 0; r < kWorld; ++r) EXPECT_TRUE(statuses[r].ok()) << statuses[r];
}

TEST_P(ProgressPlacement, NoneLeavesThreadsToTheScheduler) {
  auto allowed = AllowedCpus();
  ASSERT_TRUE(allowed.ok()) << allowed.status();
  auto statuses = RunRanks(2, GetParam(), [&](int rank, int world, rendezvous::Store& store) {
    CommunicatorOptions o = TestOptions(rank, world, &store);
    o.progress_cpus = "none";
    ASSIGN_OR_RETURN(auto comm, Communicator::Create(std::move(o)));
    for (const auto& [name, cpus] : comm->ProgressThreadCpus()) {
      if (cpus != *allowed) {
        return absl::InternalError(
            absl::StrCat(name, " runs on ", Show(cpus), ", want ", Show(*allowed)));
      }
    }
    return absl::OkStatus();
  });
  for (const absl::Status& s : statuses) EXPECT_TRUE(s.ok()) << s;
}

TEST_P(ProgressPlacement, AnExplicitListIsFollowed) {
  auto allowed = AllowedCpus();
  ASSERT_TRUE(allowed.ok()) << allowed.status();
  // Every allowed CPU, last first, so the list's order (not the set's) shows.
  std::vector<int> list(allowed->rbegin(), allowed->rend());
  std::string text;
  for (int c : list) absl::StrAppend(&text, text.empty() ? "" : ",", c);
  auto statuses = RunRanks(3, GetParam(), [&](int rank, int world, rendezvous::Store& store) {
    CommunicatorOptions o = TestOptions(rank, world, &store);
    o.progress_cpus = text;
    ASSIGN_OR_RETURN(auto comm, Communicator::Create(std::move(o)));
    return CheckPlacement(*comm, list);
  });
  for (const absl::Status& s : statuses) EXPECT_TRUE(s.ok()) << s;
}

TEST_P(ProgressPlacement, AnUnusableCpuFailsCreationAndSaysWhich) {
  const int missing = CPU_SETSIZE - 1;  // no test machine has it
  auto statuses = RunRanks(2, GetParam(), [&](int rank, int world, rendezvous::Store& store) {
    CommunicatorOptions o = TestOptions(rank, world, &store);
    o.progress_cpus = std::to_string(missing);
    o.connect_timeout = absl::Seconds(5);
    return Communicator::Create(std::move(o)).status();
  });
  for (const absl::Status& s : statuses) {
    EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument) << s;
    EXPECT_NE(s.message().find(absl::StrCat("CPU ", missing)), std::string::npos) << s;
  }
  statuses = RunRanks(1, GetParam(), [&](int rank, int world, rendezvous::Store& store) {
    CommunicatorOptions o = TestOptions(rank, world, &store);
    o.progress_cpus = "2-1";
    return Communicator::Create(std::move(o)).status();
  });
  EXPECT_EQ(statuses[0].code(), absl::StatusCode::kInvalidArgument) << statuses[0];
}

INSTANTIATE_TEST_SUITE_P(Modes, ProgressPlacement,
                         ::testing::Values(RankMode::kThreads, RankMode::kProcesses),
                         [](const auto& info) { return testing::RankModeName(info.param); });

}  // namespace
}  // namespace mixnet::collectives
