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
// Relays: with h0 - h1 - h2 in a line (no circuit h0-h2) and a plan of D
// from h0 to h2 only, h0 -> h2 can use its EPS (0.2 Gbit/s) and the relay
// through h1 (both hops 0.4 Gbit/s): T = D / 0.6, 2/3 of D through h1 and
// 1/3 over EPS; h1 forwards 2/3 of D on its ocs1 (the hop to h2).
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
          // Fixed pieces: the counters are to show the plan's weights.
          ASSIGN_OR_RETURN(auto comm, Join(rank, world, store, router, 0));
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

// kDataplaneSpec rewired as the line h0 ocs0 - h1 ocs0, h1 ocs1 - h2 ocs0.
std::string LineSpec() {
  const std::string y = kDataplaneSpec;
  return y.substr(0, y.find("circuits:")) +
         "circuits:\n  - {switch: ocs0, ports: [1, 3]}\n  - {switch: ocs0, ports: [4, 5]}\n";
}

TEST_F(SplitFabricTest, NicCountersFollowTheRelayWeights) {
  ASSERT_NO_FATAL_FAILURE(Up("relay", LineSpec()));
  if (IsSkipped()) return;
  constexpr int kWorld = 4;
  constexpr size_t kBytes = 24u << 20;
  auto count = [](int src, int dst) -> size_t { return src == 0 && dst == 2 ? kBytes : 0; };
  // Per relay setting: h0's eps0 and ocs0 and h1's ocs1 transmitted bytes.
  for (bool relay : {true, false}) {
    uint64_t h0_eps = 0, h0_ocs = 0, h1_ocs1 = 0;
    absl::Duration took;
    auto tx = [&](bool after) -> absl::Status {
      ASSIGN_OR_RETURN(uint64_t e, TxBytes("h0", "eps0"));
      ASSIGN_OR_RETURN(uint64_t o, TxBytes("h0", "ocs0"));
      ASSIGN_OR_RETURN(uint64_t f, TxBytes("h1", "ocs1"));
      h0_eps = after ? e - h0_eps : e;
      h0_ocs = after ? o - h0_ocs : o;
      h1_ocs1 = after ? f - h1_ocs1 : f;
      return absl::OkStatus();
    };
    auto statuses =
        RunRanks(kWorld, RankMode::kThreads, [&](int rank, int world, rendezvous::Store& store) {
          ASSIGN_OR_RETURN(auto comm, Join(rank, world, store, "v2"));
          router::RoutingPlan p;
          p.relay = relay;
          p.hosts = {"h0", "h1", "h2", "h3"};
          p.bytes.assign(16, 0.0);
          p.bytes[0 * 4 + 2] = kBytes;
          RETURN_IF_ERROR(comm->SetRouting(p));
          RETURN_IF_ERROR(collectives::Barrier(*comm));
          if (rank == 0) RETURN_IF_ERROR(tx(false));
          RETURN_IF_ERROR(collectives::Barrier(*comm));
          const absl::Time start = absl::Now();
          RETURN_IF_ERROR(CheckedAlltoallv(*comm, 1, count));
          if (rank == 2) took = absl::Now() - start;
          RETURN_IF_ERROR(collectives::Barrier(*comm));
          if (rank == 0) RETURN_IF_ERROR(tx(true));
          return collectives::Barrier(*comm);
        });
    for (int r = 0; r < kWorld; ++r) {
      ASSERT_TRUE(statuses[r].ok()) << "rank " << r << ": " << statuses[r];
    }
    const double eps_share = static_cast<double>(h0_eps) / static_cast<double>(h0_eps + h0_ocs);
    std::cout << "relay " << (relay ? "on" : "off") << ": h0 eps0 " << h0_eps << " B, ocs0 "
              << h0_ocs << " B (EPS share " << eps_share << "), h1 ocs1 " << h1_ocs1
              << " B; h2 received in " << absl::FormatDuration(took)
              << " (floor: " << (relay ? "D / 0.6" : "D / 0.2") << " Gbit/s = "
              << absl::FormatDuration(absl::Seconds(kBytes * 8.0 / (relay ? 0.6e9 : 0.2e9)))
              << ")\n";
    if (relay) {
      EXPECT_NEAR(eps_share, 1.0 / 3.0, 0.03);
      // 2/3 of 24 MiB = 16 MiB on the second hop, plus headers (~3%).
      EXPECT_NEAR(static_cast<double>(h1_ocs1), 16.0 * (1 << 20) * 1.03, 0.03 * 16 * (1 << 20));
    } else {
      EXPECT_GT(eps_share, 0.97) << "no relay: all over EPS";
      EXPECT_LT(h1_ocs1, 1u << 20) << "no relay: h1 forwards nothing";
    }
  }
}

}  // namespace
}  // namespace mixnet::testing
