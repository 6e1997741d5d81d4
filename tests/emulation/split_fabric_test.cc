// Router v2's split on the emulated cluster (label netns; needs root, skips
// with the reason otherwise). Four ranks (threads, each in its host's
// namespace) exchange a large checksummed alltoallv with their circuit
// partner (h0-h1 over two circuits, h2-h3 over one, see dataplane_fabric.h);
// the NIC byte counters show how each host's bytes left: under router v2 with
// the plan's demand, the EPS NIC carries the fluid model's share; under v1
// (or without a plan) next to nothing.
//
// Hand-worked shares (direct routing: the split that minimises the
// region's completion time T, each pair putting min(D, T c) on its circuits
// and the rest on EPS). h2-h3 is the slowest pair: one 0.4 Gbit/s circuit
// and 0.2 Gbit/s of EPS, so T = D / 0.6 and h2, h3 send 0.2 / 0.6 = 1/3 of D
// over EPS. h0-h1 has two circuits (0.8 Gbit/s): T c = 4/3 D >= D, so all
// of D stays on its circuits (EPS 0). Counters include headers and ACKs,
// which scale with the bytes on each NIC in both directions alike, so the
// share of a host's transmitted bytes that left through eps0 is compared
// within 3 points.
//
// Threads: rank threads run the collectives; the test thread reads counters.
#include <iostream>

#include "runtime/collectives/alltoall.h"
#include "runtime/collectives/sync.h"
#include "runtime/router/route_table_v2.h"
#include "tests/collectives/checked_alltoallv.h"
#include "tests/emulation/dataplane_fabric.h"

namespace mixnet::testing {
namespace {

class SplitFabricTest : public DataplaneFabricTest {
 protected:
  // Runs one 24 MiB-per-partner alltoallv with every rank on `router`
  // (v2: after SetRouting with the partner demand); returns per host the
  // share of its transmitted bytes that left through eps0.
  std::vector<double> EpsShares(const std::string& router, bool plan) {
    constexpr int kWorld = 4;
    constexpr size_t kBytes = 24u << 20;
    auto count = [](int src, int dst) -> size_t { return src / 2 == dst / 2 ? kBytes : 0; };
    std::vector<uint64_t> eps0(kWorld), ocs(kWorld);
    std::vector<absl::Duration> took(kWorld);
    auto sample = [&](int rank, bool after) -> absl::Status {
      const std::string h = absl::StrCat("h", rank);
      ASSIGN_OR_RETURN(uint64_t e, TxBytes(h, "eps0"));
      ASSIGN_OR_RETURN(uint64_t o0, TxBytes(h, "ocs0"));
      ASSIGN_OR_RETURN(uint64_t o1, TxBytes(h, "ocs1"));
      eps0[rank] = after ? e - eps0[rank] : e;
      ocs[rank] = after ? o0 + o1 - ocs[rank] : o0 + o1;
      return absl::OkStatus();
    };
    auto statuses =
        RunRanks(kWorld, RankMode::kThreads, [&](int rank, int world, rendezvous::Store& store) {
          ASSIGN_OR_RETURN(auto comm, Join(rank, world, store, router));
          if (plan) {
            router::RoutingPlan p;
            p.hosts = {"h0", "h1", "h2", "h3"};
            p.bytes.assign(16, 0.0);
            for (int s = 0; s < 4; ++s) p.bytes[s * 4 + (s ^ 1)] = kBytes;
            RETURN_IF_ERROR(comm->SetRouting(p));
          }
          RETURN_IF_ERROR(collectives::Barrier(*comm));
          RETURN_IF_ERROR(sample(rank, false));
          const absl::Time start = absl::Now();
          RETURN_IF_ERROR(CheckedAlltoallv(*comm, 1, count));
          took[rank] = absl::Now() - start;
          RETURN_IF_ERROR(collectives::Barrier(*comm));
          RETURN_IF_ERROR(sample(rank, true));
          return collectives::Barrier(*comm);
        });
    std::vector<double> share(kWorld, -1);
    for (int r = 0; r < kWorld; ++r) {
      EXPECT_TRUE(statuses[r].ok()) << "rank " << r << ": " << statuses[r];
      share[r] = static_cast<double>(eps0[r]) / static_cast<double>(eps0[r] + ocs[r]);
      std::cout << router << (plan ? " with plan" : "") << ": h" << r << " eps0 " << eps0[r]
                << " B, ocs " << ocs[r] << " B, EPS share " << share[r] << ", call "
                << absl::FormatDuration(took[r]) << "\n";
    }
    return share;
  }
};

TEST_F(SplitFabricTest, NicCountersFollowTheSplitWeights) {
  ASSERT_NO_FATAL_FAILURE(Up("split"));
  if (IsSkipped()) return;
  const std::vector<double> v2 = EpsShares("v2", true);
  const std::vector<double> want = {0, 0, 1.0 / 3.0, 1.0 / 3.0};
  for (int r = 0; r < 4; ++r) EXPECT_NEAR(v2[r], want[r], 0.03) << "h" << r << " under v2";
  for (const auto& [router, plan] : {std::pair<std::string, bool>{"v1", true}, {"v2", false}}) {
    const std::vector<double> v1 = EpsShares(router, plan);
    for (int r = 0; r < 4; ++r) {
      EXPECT_LT(v1[r], 0.02) << "h" << r << " under " << router << (plan ? " with" : " without")
                             << " a plan: circuits only";
    }
  }
}

}  // namespace
}  // namespace mixnet::testing
