// Router v2 in the data plane, on loopback: ranks as threads, one per host of
// a spec whose hosts have an EPS NIC (1 Gbit/s) and two OCS NICs (2 Gbit/s) on
// 127.x addresses. Checks that a rank splits each peer's bytes over its
// circuits and EPS by the weights of the controller's plan (SetRouting),
// counted on the rank's direct-link byte counter against hand-worked shares;
// that router v1 ignores plans; that v1 and v2 ranks interoperate; that a
// Commit falls back to v1 until the next plan; that a circuit killed while a
// split transfer runs loses nothing; and the piece cutting (SplitPair).
#include <iostream>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
#include "gtest/gtest.h"
#include "runtime/collectives/alltoall.h"
#include "runtime/collectives/alltoall_internal.h"
#include "runtime/collectives/sync.h"
#include "runtime/common/status.h"
#include "tests/collectives/checked_alltoallv.h"
#include "tests/collectives/lo_ocs_spec.h"
#include "tests/collectives/rank_harness.h"

namespace mixnet::collectives {
namespace {

using internal::PieceSpec;
using internal::SplitPair;
using testing::CheckedAlltoallv;
using testing::RankMode;
using testing::RunRanks;

constexpr size_t kMiB = 1 << 20;

std::string Spec(int hosts, const std::string& circuits) {
  return testing::LoOcsSpec("lo-split", hosts, circuits);
}

// `pull_chunk` 0: each path carries its planned share whole, which is what
// the weight tests count; the receiver-paced pieces (alltoall_pull.cc) move
// bytes between paths as loopback's paths happen to run.
absl::StatusOr<std::unique_ptr<Communicator>> MakeComm(int rank, int world,
                                                       rendezvous::Store& store,
                                                       const std::string& spec_yaml,
                                                       const std::string& router,
                                                       size_t pull_chunk = 0) {
  return testing::MakeLoOcsComm(rank, world, store, spec_yaml, router,
                                [&](CommunicatorOptions& o) { o.pull_chunk_bytes = pull_chunk; });
}

// The plan's demand: `d` bytes each way between h0-h1 and h2-h3 (the pairs the
// circuits join), nothing else. Hand-worked split (fluid model, direct
// routing): each host's only traffic is D to its circuit peer, so the
// completion time is T = D / (c + E) with c = 2 Gbit/s (circuit) and
// E = 1 Gbit/s (EPS); the circuit carries T c = 2/3 of D, EPS 1/3.
router::RoutingPlan PairPlan(int hosts, double d) {
  router::RoutingPlan p;
  p.version = 2;
  for (int h = 0; h < hosts; ++h) p.hosts.push_back(absl::StrCat("h", h));
  p.bytes.assign(static_cast<size_t>(hosts) * hosts, 0.0);
  for (int h = 0; h + 1 < hosts; h += 2) {
    p.bytes[h * hosts + h + 1] = d;
    p.bytes[(h + 1) * hosts + h] = d;
  }
  return p;
}

// The circuit partner of rank r (h0-h1, h2-h3) and what every pair sends: 3 MiB
// to the partner, 1 MiB + 5 to the others (EPS only: no circuit).
int Partner(int r) { return r ^ 1; }
size_t PairBytes(int src, int dst) { return dst == Partner(src) ? 3 * kMiB : kMiB + 5; }

const char* kCircuits4 =
    "  - {switch: s0, ports: [1, 3]}\n"   // h0 ocs0 - h1 ocs0
    "  - {switch: s0, ports: [5, 7]}\n";  // h2 ocs0 - h3 ocs0

struct RankResult {
  uint64_t direct = 0;
  double share = -1;
};

// Runs 4 ranks; rank r uses routers[r]; `with_plan`: every rank gets PairPlan.
std::vector<RankResult> RunSplit(const std::vector<std::string>& routers, bool with_plan,
                                 std::vector<absl::Status>* statuses) {
  const int world = static_cast<int>(routers.size());
  const std::string spec = Spec(world, kCircuits4);
  std::vector<RankResult> out(world);
  *statuses = RunRanks(world, RankMode::kThreads, [&](int rank, int n, rendezvous::Store& store) {
    ASSIGN_OR_RETURN(auto comm, MakeComm(rank, n, store, spec, routers[rank]));
    if (with_plan) RETURN_IF_ERROR(comm->SetRouting(PairPlan(n, 3.0 * kMiB)));
    out[rank].share = comm->eps_share(Partner(rank));
    RETURN_IF_ERROR(CheckedAlltoallv(*comm, 1, PairBytes));
    out[rank].direct = comm->direct_bytes_sent();
    return Barrier(*comm);
  });
  return out;
}

TEST(SplitRouting, V2SplitsByThePlansWeights) {
  std::vector<absl::Status> st;
  const std::vector<RankResult> r = RunSplit({"v2", "v2", "v2", "v2"}, true, &st);
  for (int i = 0; i < 4; ++i) {
    ASSERT_TRUE(st[i].ok()) << "rank " << i << ": " << st[i];
    EXPECT_NEAR(r[i].share, 1.0 / 3.0, 1e-9) << "rank " << i;
    // 3 MiB to the partner: 2/3 (2 MiB) over the circuit, 1 MiB over EPS.
    EXPECT_EQ(r[i].direct, 2 * kMiB) << "rank " << i;
  }
}

TEST(SplitRouting, V1IgnoresThePlan) {
  std::vector<absl::Status> st;
  const std::vector<RankResult> r = RunSplit({"v1", "v1", "v1", "v1"}, true, &st);
  for (int i = 0; i < 4; ++i) {
    ASSERT_TRUE(st[i].ok()) << "rank " << i << ": " << st[i];
    EXPECT_EQ(r[i].share, 0.0);
    EXPECT_EQ(r[i].direct, 3 * kMiB) << "rank " << i << ": v1 sends all over the circuit";
  }
}

TEST(SplitRouting, V2WithoutAPlanRunsV1) {
  std::vector<absl::Status> st;
  const std::vector<RankResult> r = RunSplit({"v2", "v2", "v2", "v2"}, false, &st);
  for (int i = 0; i < 4; ++i) {
    ASSERT_TRUE(st[i].ok()) << "rank " << i << ": " << st[i];
    EXPECT_EQ(r[i].direct, 3 * kMiB) << "rank " << i;
  }
}

TEST(SplitRouting, V1AndV2RanksInteroperate) {
  std::vector<absl::Status> st;
  // h0 (v2) pairs with h1 (v1); h2 (v1) with h3 (v2): every circuit pair mixed.
  const std::vector<RankResult> r = RunSplit({"v2", "v1", "v1", "v2"}, true, &st);
  for (int i = 0; i < 4; ++i) ASSERT_TRUE(st[i].ok()) << "rank " << i << ": " << st[i];
  EXPECT_EQ(r[0].direct, 2 * kMiB);
  EXPECT_EQ(r[1].direct, 3 * kMiB);
  EXPECT_EQ(r[2].direct, 3 * kMiB);
  EXPECT_EQ(r[3].direct, 2 * kMiB);
}

TEST(SplitRouting, CommitFallsBackToV1UntilTheNextPlan) {
  const std::string spec = Spec(2, "  - {switch: s0, ports: [1, 3]}\n");
  std::vector<uint64_t> after_commit(2), after_plan(2);
  auto st = RunRanks(2, RankMode::kThreads, [&](int rank, int n, rendezvous::Store& store) {
    ASSIGN_OR_RETURN(auto comm, MakeComm(rank, n, store, spec, "v2"));
    RETURN_IF_ERROR(comm->SetRouting(PairPlan(n, 3.0 * kMiB)));
    // Epoch 1 adds a second circuit (ocs1 - ocs1); its plan has not come yet.
    const router::Topology t{1, {{"s0", 1, 3}, {"s0", 2, 4}}};
    RETURN_IF_ERROR(comm->Commit(t, absl::Now() + absl::Seconds(10)));
    if (comm->eps_share(1 - rank) != 0.0) return absl::InternalError("share survived the Commit");
    RETURN_IF_ERROR(CheckedAlltoallv(*comm, 1, [](int, int) { return 3 * kMiB; }));
    after_commit[rank] = comm->direct_bytes_sent();
    // The plan for epoch 1: two circuits, c = 4 Gbit/s: circuits 4/5, EPS 1/5.
    RETURN_IF_ERROR(comm->SetRouting(PairPlan(n, 5.0 * kMiB)));
    RETURN_IF_ERROR(CheckedAlltoallv(*comm, 2, [](int, int) { return 5 * kMiB; }));
    after_plan[rank] = comm->direct_bytes_sent() - after_commit[rank];
    return Barrier(*comm);
  });
  for (int i = 0; i < 2; ++i) {
    ASSERT_TRUE(st[i].ok()) << "rank " << i << ": " << st[i];
    EXPECT_EQ(after_commit[i], 3 * kMiB) << "rank " << i;
    EXPECT_EQ(after_plan[i], 4 * kMiB) << "rank " << i;
  }
}

TEST(SplitRouting, BadPlansAreRefusedAndTheRoutingKept) {
  const std::string spec = Spec(2, "  - {switch: s0, ports: [1, 3]}\n");
  auto st = RunRanks(2, RankMode::kThreads, [&](int rank, int n, rendezvous::Store& store) {
    ASSIGN_OR_RETURN(auto comm, MakeComm(rank, n, store, spec, "v2"));
    RETURN_IF_ERROR(comm->SetRouting(PairPlan(n, 3.0 * kMiB)));
    router::RoutingPlan unknown = PairPlan(n, 1.0);
    unknown.hosts[1] = "h9";
    router::RoutingPlan negative = PairPlan(n, -1.0);
    router::RoutingPlan short_matrix = PairPlan(n, 1.0);
    short_matrix.bytes.pop_back();
    router::RoutingPlan v3 = PairPlan(n, 1.0);
    v3.version = 3;
    for (const auto& [plan, needle] : std::vector<std::pair<router::RoutingPlan, std::string>>{
             {unknown, "'h9'"},
             {negative, "-1 bytes"},
             {short_matrix, "3 matrix entries"},
             {v3, "version 3"}}) {
      absl::Status s = comm->SetRouting(plan);
      if (s.code() != absl::StatusCode::kInvalidArgument ||
          s.message().find(needle) == std::string::npos) {
        return absl::InternalError(
            absl::StrCat("expected InvalidArgument with ", needle, ": ", s.ToString()));
      }
    }
    if (std::abs(comm->eps_share(1 - rank) - 1.0 / 3.0) > 1e-9) {
      return absl::InternalError("a refused plan changed the routing");
    }
    return Barrier(*comm);
  });
  for (int i = 0; i < 2; ++i) EXPECT_TRUE(st[i].ok()) << "rank " << i << ": " << st[i];
}

// A circuit killed while a split transfer runs: its pieces are re-sent over
// EPS (fixed pieces: after the receipt; receiver-paced: asked for again at
// once), every byte checked, and the next call works.
class KilledCircuit : public ::testing::TestWithParam<size_t> {};

TEST_P(KilledCircuit, DuringASplitLosesNothing) {
  const std::string spec = Spec(2, "  - {switch: s0, ports: [1, 3]}\n");
  std::vector<uint64_t> resent(2);
  auto st = RunRanks(2, RankMode::kThreads, [&](int rank, int n, rendezvous::Store& store) {
    ASSIGN_OR_RETURN(auto comm, MakeComm(rank, n, store, spec, "v2", GetParam()));
    RETURN_IF_ERROR(comm->SetRouting(PairPlan(n, 3.0 * kMiB)));
    std::thread killer;
    if (rank == 0) {
      killer = testing::KillDirectLinkWhen(
          *comm, [&] { return comm->transfer_active(); }, 1, absl::Milliseconds(5));
    }
    absl::Status s = CheckedAlltoallv(*comm, 7, [](int, int) { return (64 * kMiB) + 5; });
    if (killer.joinable()) killer.join();
    RETURN_IF_ERROR(s);
    resent[rank] = comm->pieces_resent();
    RETURN_IF_ERROR(CheckedAlltoallv(*comm, 8, [](int, int) { return kMiB; }));
    RETURN_IF_ERROR(comm->health());
    return Barrier(*comm);
  });
  for (int i = 0; i < 2; ++i) EXPECT_TRUE(st[i].ok()) << "rank " << i << ": " << st[i];
  EXPECT_GT(resent[0] + resent[1], 0u) << "nothing was re-sent over EPS";
  std::cout << "pieces re-sent over EPS: " << resent[0] << " + " << resent[1] << "\n";
}
INSTANTIATE_TEST_SUITE_P(SplitRouting, KilledCircuit, ::testing::Values(0, 128 << 10),
                         [](const auto& info) {
                           return std::string(info.param == 0 ? "FixedPieces" : "ReceiverPaced");
                         });

// SplitPair, hand-worked.
TEST(SplitPair, CutsByTheSendersShare) {
  auto expect = [](const std::vector<PieceSpec>& got, const std::vector<PieceSpec>& want) {
    ASSERT_EQ(got.size(), want.size());
    for (size_t i = 0; i < want.size(); ++i) {
      EXPECT_EQ(got[i].offset, want[i].offset) << "piece " << i;
      EXPECT_EQ(got[i].len, want[i].len) << "piece " << i;
      EXPECT_EQ(got[i].direct, want[i].direct) << "piece " << i;
      EXPECT_EQ(got[i].index, want[i].index) << "piece " << i;
    }
  };
  const size_t M = kMiB;
  // v2: one third of 3 MiB over EPS, after the circuit's 2 MiB.
  expect(SplitPair(100, 3 * M, {1}, {2}, 1.0 / 3.0),
         {{100, 2 * M, true, 0}, {100 + 2 * M, M, false, 0}});
  // A share a hair off one third still rounds to whole 4 KiB pages.
  expect(SplitPair(0, 3 * M, {1}, {2}, 1.0 / 3.0 - 1e-12),
         {{0, 2 * M, true, 0}, {2 * M, M, false, 0}});
  // v1 (share 0): all over the circuits, by speed (2:1 Gbit/s -> 2 MiB : 1 MiB).
  expect(SplitPair(0, 3 * M, {1}, {2, 1}, 0), {{0, 2 * M, true, 0}, {2 * M, M, true, 1}});
  // No common circuit: all over EPS, whatever the share.
  expect(SplitPair(0, 3 * M, {1, 1}, {}, 0.5),
         {{0, 1536 * 1024, false, 0}, {1536 * 1024, 1536 * 1024, false, 1}});
  // Share 1: everything over EPS, the empty circuit piece left out.
  expect(SplitPair(0, 3 * M, {1}, {2}, 1.0), {{0, 3 * M, false, 0}});
  // 5000 bytes at share 0.5: round(2500 / 4096) = 1 page over EPS.
  expect(SplitPair(0, 5000, {1}, {2}, 0.5), {{0, 904, true, 0}, {904, 4096, false, 0}});
  // 1000 bytes at share 0.3: round(0.07) = 0 pages over EPS.
  expect(SplitPair(0, 1000, {1}, {2}, 0.3), {{0, 1000, true, 0}});
  // Nothing to send: one empty piece (the receipt protocol needs one).
  expect(SplitPair(0, 0, {1}, {2}, 0.5), {{0, 0, true, 0}});
}

}  // namespace
}  // namespace mixnet::collectives
