// Router v2's split from the LP (runtime/planner/lp_routing.h) on
// hand-worked cases, every rate 1 byte/s, fluid relays (chunk 0):
//  - where the water-filling keeps a pair's bytes on its circuit that a
//    relayed pair needed, the LP moves them to EPS and reaches the optimum;
//  - among optimal routings it relays the fewest bytes;
//  - no one-sided relay goes through a host that shares a circuit with the
//    EPS hop's other end (the data plane would send that hop over the
//    circuit), on a matrix where the physics LP uses one;
//  - BestRouting is never slower in the model than the water-filling.
// The LP keeps the best time within a slack of 1e-6 while it cuts relayed
// bytes, so times and shares match to 1e-5.
#include "runtime/planner/lp_routing.h"

#include <gtest/gtest.h>

#include <random>
#include <vector>

#include "runtime/planner/oracle.h"

namespace mixnet::planner {
namespace {

// 4 hosts, circuits h0-h1 and h1-h2, h3 on EPS only; demand h0 -> h1 1,
// h0 -> h2 1, h3 -> h2 1; two-circuit relays only.
//  - Optimum: T = 1. h3's byte fills h2's EPS ingress, so h0 -> h2 goes
//    h0 -> h1 -> h2 over the circuits (1 each) and h0 -> h1 over EPS (h0's
//    EPS egress 1). Every resource at 1: no routing does better (h0 sends 2
//    over EPS + one circuit).
//  - Water-filling: at a target T each circuit keeps its direct bytes
//    min(1, T) first, so the h0-h1 circuit offers T - 1 to relays for T > 1,
//    and h2's EPS ingress needs 2 - x <= T with x <= T - 1: T >= 1.5.
TEST(LpRouting, MovesDirectBytesOffACircuitARelayNeeds) {
  TrafficMatrix d(4);
  d.at(0, 1) = 1;
  d.at(0, 2) = 1;
  d.at(3, 2) = 1;
  const FluidModel model(d, {1, 1, 1, 1});
  const Adjacency adj = MakeAdjacency(4, {{0, 1, 1.0}, {1, 2, 1.0}});
  const RoutingOptions o{.relay = true, .eps_relay = false};
  EXPECT_NEAR(OptimiseRouting(model, adj, o).completion_s, 1.5, 1e-3);
  absl::StatusOr<RegionRouting> lp = LpRouting(model, adj, o);
  ASSERT_TRUE(lp.ok()) << lp.status();
  EXPECT_NEAR(lp->completion_s, 1.0, 1e-5);
  EXPECT_NEAR(lp->at(0, 1).eps, 1.0, 1e-5);
  EXPECT_NEAR(lp->at(0, 1).circuit, 0.0, 1e-5);
  ASSERT_EQ(lp->at(0, 2).relay.size(), 1u);
  EXPECT_EQ(lp->at(0, 2).relay[0].first, 1);
  EXPECT_NEAR(lp->at(0, 2).relay[0].second, 1.0, 1e-5);
  EXPECT_NEAR(lp->at(3, 2).eps, 1.0, 1e-5);
  EXPECT_NEAR(BestRouting(model, adj, o, RouteSolver::kLp).completion_s, 1.0, 1e-5);
  EXPECT_NEAR(BestRouting(model, adj, o, RouteSolver::kWaterFilling).completion_s, 1.5, 1e-3);
}

// 3 hosts in a line (circuits h0-h1, h1-h2), demand h0 -> h2 1 and
// h0 -> h1 1/4. h0 -> h2 relays x through h1 (the one-sided paths through h1
// are not data-plane paths: h1 shares a circuit with both ends), h0 -> h1
// puts e on EPS. h0's EPS egress carries 1 - x + e, its circuit 1/4 - e + x,
// h2's EPS ingress 1 - x, the h1-h2 circuit x. h0 sends 5/4 over two
// resources, so T >= 5/8, and T = 5/8 holds exactly for x = 3/8 + e,
// e in [0, 1/4]: the optimum that relays the fewest bytes has e = 0 and
// relays 3/8 (another optimal vertex relays 5/8).
TEST(LpRouting, RelaysNoMoreThanTheOptimumNeeds) {
  TrafficMatrix d(3);
  d.at(0, 2) = 1;
  d.at(0, 1) = 0.25;
  const FluidModel model(d, {1, 1, 1});
  const Adjacency adj = MakeAdjacency(3, {{0, 1, 1.0}, {1, 2, 1.0}});
  absl::StatusOr<RegionRouting> lp = LpRouting(model, adj, RoutingOptions{});
  ASSERT_TRUE(lp.ok()) << lp.status();
  EXPECT_NEAR(lp->completion_s, 5.0 / 8, 1e-6);
  double relayed = 0;
  for (const auto& r : lp->at(0, 2).relay) relayed += r.second;
  for (const auto& r : lp->at(0, 2).eps_circuit) relayed += r.second;
  for (const auto& r : lp->at(0, 2).circuit_eps) relayed += r.second;
  EXPECT_NEAR(relayed, 3.0 / 8, 1e-6);
  EXPECT_NEAR(lp->at(0, 1).circuit, 0.25, 1e-6);
}

// Every one-sided relay of the LP's routing goes through a host with no
// circuit on its EPS hop's pair, and BestRouting never loses to the
// water-filling, over random matrices on a ring of 6 hosts plus chords.
TEST(LpRouting, OneSidedRelaysOnlyWhereTheDataPlaneRunsThemAndNeverWorse) {
  std::mt19937 rng(7);
  std::uniform_real_distribution<double> u(0, 1);
  const int n = 6;
  const Adjacency adj = MakeAdjacency(
      n,
      {{0, 1, 1.0}, {1, 2, 1.0}, {2, 3, 1.0}, {3, 4, 1.0}, {4, 5, 1.0}, {5, 0, 1.0}, {0, 3, 1.0}});
  auto has_circuit = [&](int a, int b) {
    for (const CircuitLink& l : adj[a]) {
      if (l.peer == b) return true;
    }
    return false;
  };
  int one_sided = 0;
  for (int trial = 0; trial < 20; ++trial) {
    TrafficMatrix d(n);
    const int hot = trial % n;
    for (int i = 0; i < n; ++i) {
      for (int j = 0; j < n; ++j) {
        if (i != j) d.at(i, j) = u(rng) * (j == hot ? 4 : 1);
      }
    }
    const FluidModel model(d, std::vector<double>(n, 1.0));
    absl::StatusOr<RegionRouting> lp = LpRouting(model, adj, RoutingOptions{});
    ASSERT_TRUE(lp.ok()) << lp.status();
    for (int i = 0; i < n; ++i) {
      for (int j = 0; j < n; ++j) {
        if (i == j) continue;
        for (const auto& [k, b] : lp->at(i, j).eps_circuit) {
          EXPECT_FALSE(has_circuit(i, k)) << "trial " << trial << ": " << i << "->" << k << "->"
                                          << j << " EPS hop on a circuit pair";
          EXPECT_TRUE(has_circuit(k, j));
          one_sided += b > 0;
        }
        for (const auto& [k, b] : lp->at(i, j).circuit_eps) {
          EXPECT_FALSE(has_circuit(k, j)) << "trial " << trial;
          EXPECT_TRUE(has_circuit(i, k));
          one_sided += b > 0;
        }
        EXPECT_NEAR(lp->at(i, j).total(), d.at(i, j), 1e-9 * (1 + d.at(i, j)));
      }
    }
    const double wf = OptimiseRouting(model, adj, RoutingOptions{}).completion_s;
    EXPECT_LE(BestRouting(model, adj, RoutingOptions{}, RouteSolver::kLp).completion_s, wf);
  }
  EXPECT_GT(one_sided, 0) << "no case used a one-sided relay: the check above saw nothing";
}

TEST(LpRouting, MixedCircuitRatesAreRefusedAndBestRoutingFallsBack) {
  TrafficMatrix d(3);
  d.at(0, 2) = 1;
  const FluidModel model(d, {1, 1, 1});
  const Adjacency adj = MakeAdjacency(3, {{0, 1, 1.0}, {1, 2, 2.0}});
  absl::StatusOr<RegionRouting> lp = LpRouting(model, adj, RoutingOptions{});
  EXPECT_EQ(lp.status().code(), absl::StatusCode::kInvalidArgument) << lp.status();
  EXPECT_NEAR(BestRouting(model, adj, RoutingOptions{}, RouteSolver::kLp).completion_s,
              OptimiseRouting(model, adj, RoutingOptions{}).completion_s, 1e-12);
}

}  // namespace
}  // namespace mixnet::planner
