// Tests for the fluid completion-time model and the water-filling split:
// hand-made cases with known answers, then seeded random properties (the
// optimised split never loses to EPS-only, circuit-only or direct routing,
// conserves every pair's bytes and relays only over circuits). Single-threaded.
#include "runtime/planner/fluid_model.h"

#include <algorithm>
#include <cmath>
#include <random>
#include <vector>

#include "gtest/gtest.h"
#include "runtime/planner/routing.h"
#include "tests/planner/routing_time.h"

namespace mixnet::planner {
namespace {

TEST(SideTimeTest, EpsOnly) {
  EXPECT_DOUBLE_EQ(SideTime(100, 10, nullptr, nullptr, 0), 10);
  EXPECT_DOUBLE_EQ(SideTime(0, 0, nullptr, nullptr, 0), 0);
  EXPECT_TRUE(std::isinf(SideTime(1, 0, nullptr, nullptr, 0)));
}

TEST(SideTimeTest, CircuitSaturatesThenEpsFinishes) {
  // 100 bytes, EPS 10 B/s, a 20 B/s circuit to a peer that gets 60 of them:
  // the circuit is done at t=3, EPS carries the other 40 by t=4.
  const double d[] = {60}, c[] = {20};
  EXPECT_DOUBLE_EQ(SideTime(100, 10, d, c, 1), 4);
}

TEST(SideTimeTest, SplitBalancesCircuitAndEps) {
  // 90 of 100 bytes to the circuit peer: both paths busy until 100 / 30.
  const double d[] = {90}, c[] = {20};
  EXPECT_DOUBLE_EQ(SideTime(100, 10, d, c, 1), 100.0 / 30);
}

TEST(SideTimeTest, NoEpsAllOnCircuits) {
  const double d[] = {10, 40}, c[] = {10, 10};
  EXPECT_DOUBLE_EQ(SideTime(50, 0, d, c, 2), 4);
  // A byte for a peer without a circuit cannot leave.
  EXPECT_TRUE(std::isinf(SideTime(51, 0, d, c, 2)));
}

// The solver against the definition: bisection on the decreasing function
// total - sum_k min(d_k, T c_k) - T eps, random sides of 0 to 80 circuits
// (past the solver's on-stack sizes), some at rate 0, eps 0 or not.
TEST(SideTimeTest, MatchesBisectionOnRandomSides) {
  std::mt19937_64 rng(7);
  std::uniform_real_distribution<double> u(0, 1);
  for (int trial = 0; trial < 2000; ++trial) {
    const int k = static_cast<int>(rng() % 81);
    std::vector<double> d(k), c(k);
    double sum_d = 0;
    for (int i = 0; i < k; ++i) {
      d[i] = u(rng) < 0.1 ? 0 : u(rng) * 1e9;
      c[i] = u(rng) < 0.1 ? 0 : (1 + u(rng)) * 1e10;
      sum_d += d[i];
    }
    const double eps = u(rng) < 0.2 ? 0 : u(rng) * 2e10;
    const double total = sum_d + (u(rng) < 0.3 ? 0 : u(rng) * 1e9);
    const double t = SideTime(total, eps, d.data(), c.data(), k);
    auto left = [&](double T) {
      double x = total - T * eps;
      for (int i = 0; i < k; ++i) x -= std::min(d[i], T * c[i]);
      return x;
    };
    bool stranded = false;  // bytes for a peer with no circuit and no EPS
    for (int i = 0; i < k; ++i) stranded |= c[i] == 0 && d[i] > 0;
    stranded |= total > sum_d;
    if (eps == 0 && stranded) {
      EXPECT_TRUE(std::isinf(t)) << "trial " << trial;
      continue;
    }
    ASSERT_TRUE(std::isfinite(t)) << "trial " << trial;
    double lo = 0, hi = 1;
    while (left(hi) > 1e-9 * total) hi *= 2;
    for (int it = 0; it < 200; ++it) {
      const double mid = (lo + hi) / 2;
      (left(mid) > 1e-9 * total ? lo : hi) = mid;
    }
    EXPECT_NEAR(t, hi, 1e-6 * hi + 1e-12) << "trial " << trial << ", k " << k;
  }
}

TEST(SideTimeTest, ZeroRateCircuitIgnored) {
  const double d[] = {50}, c[] = {0};
  EXPECT_DOUBLE_EQ(SideTime(50, 5, d, c, 1), 10);
}

TEST(FluidModelTest, IngressBottleneck) {
  // Hosts 1 and 2 both send 30 bytes to host 0; EPS 10 B/s each, no circuits:
  // host 0's ingress needs 60 / 10.
  TrafficMatrix m(3);
  m.at(1, 0) = 30;
  m.at(2, 0) = 30;
  FluidModel model(m, {10, 10, 10});
  FluidEstimate e = model.Estimate(Adjacency(3));
  EXPECT_DOUBLE_EQ(e.completion_s, 6);
  EXPECT_EQ(e.bottleneck_host, 0);
  EXPECT_DOUBLE_EQ(e.host_s[1], 3);
  // A 20 B/s circuit 0-1: host 0 takes 30 on it by 1.5 and 30 on EPS by 3.
  Adjacency adj = MakeAdjacency(3, {{0, 1, 20}});
  EXPECT_DOUBLE_EQ(model.Estimate(adj).completion_s, 3);
}

TEST(FluidModelTest, DiagonalIgnoredAndLowerBound) {
  TrafficMatrix m(2);
  m.at(0, 0) = 1000;
  m.at(0, 1) = 40;
  FluidModel model(m, {10, 10});
  EXPECT_DOUBLE_EQ(model.egress_bytes(0), 40);
  EXPECT_DOUBLE_EQ(model.Estimate(Adjacency(2)).completion_s, 4);
  EXPECT_DOUBLE_EQ(model.LowerBound({30, 30}), 1);
  // Two parallel circuits aggregate.
  Adjacency adj = MakeAdjacency(2, {{0, 1, 15}, {1, 0, 15}});
  ASSERT_EQ(adj[0].size(), 1u);
  EXPECT_DOUBLE_EQ(adj[0][0].Bps, 30);
  EXPECT_DOUBLE_EQ(model.Estimate(adj).completion_s, 1);
}

TEST(RoutingTest, RelayMakesUnreachablePairFinish) {
  // No EPS anywhere; circuits A-B and B-C; A sends C one byte: only the relay
  // through B gets it there, in 1 s.
  TrafficMatrix m(3);
  m.at(0, 2) = 1;
  FluidModel model(m, {0, 0, 0});
  Adjacency adj = MakeAdjacency(3, {{0, 1, 1}, {1, 2, 1}});
  EXPECT_TRUE(std::isinf(model.Estimate(adj).completion_s));
  RegionRouting direct = OptimiseRouting(model, adj, RoutingOptions{.relay = false});
  EXPECT_TRUE(std::isinf(direct.completion_s));
  RegionRouting r = OptimiseRouting(model, adj);
  EXPECT_NEAR(r.completion_s, 1, 1e-3);
  ASSERT_EQ(r.at(0, 2).relay.size(), 1u);
  EXPECT_EQ(r.at(0, 2).relay[0].first, 1);
  EXPECT_NEAR(r.at(0, 2).total(), 1, 1e-9);
}

TEST(RoutingTest, RelayAndEpsShareEvenly) {
  // A sends C 2 bytes; EPS 1 B/s everywhere; circuits A-B, B-C at 1 B/s.
  // Optimum: 1 byte over EPS, 1 over the relay, done at t=1 (EPS alone: 2).
  TrafficMatrix m(3);
  m.at(0, 2) = 2;
  const std::vector<UndirectedCircuit> circuits = {{0, 1, 1}, {1, 2, 1}};
  FluidModel model(m, {1, 1, 1});
  Adjacency adj = MakeAdjacency(3, circuits);
  EXPECT_DOUBLE_EQ(model.Estimate(adj).completion_s, 2);
  RegionRouting r = OptimiseRouting(model, adj);
  EXPECT_NEAR(r.completion_s, 1, 1e-3);
  EXPECT_NEAR(r.at(0, 2).eps, 1, 1e-3);
  ASSERT_EQ(r.at(0, 2).relay.size(), 1u);
  EXPECT_NEAR(r.at(0, 2).relay[0].second, 1, 1e-3);
  // The time claimed is the time the split takes (scored apart from EvaluateRouting).
  EXPECT_NEAR(routing_time::RoutingTime({1, 1, 1}, circuits, r), r.completion_s, 1e-12);
}

// Bytes of a list of (relay host, bytes) through host k.
double Through(const std::vector<std::pair<int, double>>& list, int k) {
  double b = 0;
  for (const auto& [via, bytes] : list) b += via == k ? bytes : 0;
  return b;
}

TEST(RoutingTest, AHotReceiverIsFedThroughItsPartnerEpsThenCircuit) {
  // Four hosts, EPS 1 B/s each, one circuit h0-h1 at 2 B/s. h2 and h3 send
  // h0 1 byte each and have no circuit. Over EPS alone h0's ingress takes
  // 2 s. The bound is 1 s (h2's and h3's egress); it is met by sending 1 byte
  // h2|h3 -EPS-> h1 -circuit-> h0 (h1's ingress 1 byte, the circuit 1 of 2).
  TrafficMatrix m(4);
  m.at(2, 0) = 1;
  m.at(3, 0) = 1;
  const std::vector<UndirectedCircuit> circuits = {{0, 1, 2}};
  const FluidModel model(m, {1, 1, 1, 1});
  const Adjacency adj = MakeAdjacency(4, circuits);
  EXPECT_DOUBLE_EQ(OptimiseRouting(model, adj, {.eps_relay = false}).completion_s, 2);
  const RegionRouting r = OptimiseRouting(model, adj);
  EXPECT_NEAR(r.completion_s, 1, 1e-3);
  const double fed = Through(r.at(2, 0).eps_circuit, 1) + Through(r.at(3, 0).eps_circuit, 1);
  EXPECT_NEAR(fed, 1, 2e-3);
  for (int i : {2, 3}) {
    EXPECT_TRUE(r.at(i, 0).relay.empty());
    EXPECT_TRUE(r.at(i, 0).circuit_eps.empty());
    EXPECT_NEAR(r.at(i, 0).total(), 1, 1e-9);
  }
  EXPECT_NEAR(routing_time::RoutingTime({1, 1, 1, 1}, circuits, r), r.completion_s, 1e-12);
}

TEST(RoutingTest, AHotSenderSpillsCircuitThenEps) {
  // The mirror case: h0 sends h2 and h3 1 byte each; h0's egress is what
  // binds (2 s over EPS); 1 byte h0 -circuit-> h1 -EPS-> h2|h3 meets 1 s.
  TrafficMatrix m(4);
  m.at(0, 2) = 1;
  m.at(0, 3) = 1;
  const std::vector<UndirectedCircuit> circuits = {{0, 1, 2}};
  const FluidModel model(m, {1, 1, 1, 1});
  const Adjacency adj = MakeAdjacency(4, circuits);
  const RegionRouting r = OptimiseRouting(model, adj);
  EXPECT_NEAR(r.completion_s, 1, 1e-3);
  EXPECT_NEAR(Through(r.at(0, 2).circuit_eps, 1) + Through(r.at(0, 3).circuit_eps, 1), 1, 2e-3);
  EXPECT_TRUE(r.at(0, 2).eps_circuit.empty());
  EXPECT_NEAR(routing_time::RoutingTime({1, 1, 1, 1}, circuits, r), r.completion_s, 1e-12);
}

TEST(RoutingTest, ARelayWhoseEpsIngressIsFullIsNotChosen) {
  // Six hosts, EPS 1 B/s; circuits h0-h1 and h0-h4 at 2 B/s. h2 and h3 send
  // h0 1 byte each; h5 sends h1 1 byte, which fills h1's EPS ingress for
  // 1 s. Feeding h0 through h1 would push h1 over 1 s; through h4 (idle
  // ingress) it meets the 1 s bound.
  TrafficMatrix m(6);
  m.at(2, 0) = 1;
  m.at(3, 0) = 1;
  m.at(5, 1) = 1;
  const std::vector<UndirectedCircuit> circuits = {{0, 1, 2}, {0, 4, 2}};
  const FluidModel model(m, std::vector<double>(6, 1));
  const RegionRouting r = OptimiseRouting(model, MakeAdjacency(6, circuits));
  EXPECT_NEAR(r.completion_s, 1, 1e-3);
  double via1 = 0, via4 = 0;
  for (int i : {2, 3}) {
    via1 += Through(r.at(i, 0).eps_circuit, 1);
    via4 += Through(r.at(i, 0).eps_circuit, 4);
  }
  // At most the target's slack (the search stops within 1e-4 of the bound).
  EXPECT_LT(via1, 2e-3);
  EXPECT_NEAR(via4, 1, 3e-3);
  EXPECT_NEAR(routing_time::RoutingTime(std::vector<double>(6, 1), circuits, r), r.completion_s,
              1e-12);
}

TEST(RoutingTest, OneSidedRelaysAvoidAPairWithACircuitOnTheEpsHop) {
  // h2 -> h0 over EPS-circuit through h1 is not offered when h2 and h1 share
  // a circuit (the data plane would send that hop over the circuit); a relay
  // over both circuits is used instead. Circuits h0-h1 and h1-h2 at 2 B/s;
  // h2 and h3 send h0 1 byte each.
  TrafficMatrix m(4);
  m.at(2, 0) = 1;
  m.at(3, 0) = 1;
  const std::vector<UndirectedCircuit> circuits = {{0, 1, 2}, {1, 2, 2}};
  const FluidModel model(m, {1, 1, 1, 1});
  const RegionRouting r = OptimiseRouting(model, MakeAdjacency(4, circuits));
  EXPECT_NEAR(r.completion_s, 1, 1e-3);
  EXPECT_TRUE(r.at(2, 0).eps_circuit.empty());
  EXPECT_NEAR(routing_time::RoutingTime({1, 1, 1, 1}, circuits, r), r.completion_s, 1e-12);
}

TEST(RoutingTest, BaselinesAndEvaluation) {
  TrafficMatrix m(2);
  m.at(0, 1) = 30;
  FluidModel model(m, {10, 10});
  Adjacency adj = MakeAdjacency(2, {{0, 1, 20}});
  EXPECT_DOUBLE_EQ(EpsOnlyRouting(model).completion_s, 3);
  EXPECT_DOUBLE_EQ(CircuitOnlyRouting(model, adj).completion_s, 1.5);
  RegionRouting best = OptimiseRouting(model, adj);
  EXPECT_DOUBLE_EQ(best.completion_s, 1);
  EXPECT_DOUBLE_EQ(best.at(0, 1).circuit, 20);
  EXPECT_DOUBLE_EQ(best.at(0, 1).eps, 10);
}

TEST(RoutingTest, MakeAdjacencyCountsCircuits) {
  Adjacency adj = MakeAdjacency(3, {{0, 1, 10}, {1, 2, 10}, {2, 1, 10}});
  ASSERT_EQ(adj[1].size(), 2u);
  for (const CircuitLink& l : adj[1]) {
    EXPECT_EQ(l.circuits, l.peer == 2 ? 2 : 1) << "peer " << l.peer;
    EXPECT_DOUBLE_EQ(l.Bps, l.peer == 2 ? 20 : 10);
  }
}

// Relays store and forward whole chunks (routing.h): A sends C 1000 bytes
// through B over circuits A-B (100 B/s) and B-C (two circuits of 100 B/s).
// Hop A -> B takes 10 s; the last chunk then crosses one B -> C circuit.
TEST(RoutingTest, StoreAndForwardAddsTheLastChunkOnTheSecondHop) {
  TrafficMatrix m(3);
  m.at(0, 2) = 1000;
  FluidModel model(m, {0, 0, 0});
  Adjacency adj = MakeAdjacency(3, {{0, 1, 100}, {1, 2, 100}, {1, 2, 100}});
  RegionRouting r;
  r.hosts = 3;
  r.pairs.resize(9);
  r.at(0, 2).relay = {{1, 1000}};
  EXPECT_DOUBLE_EQ(EvaluateRouting(model, adj, r), 10);         // fluid
  EXPECT_DOUBLE_EQ(EvaluateRouting(model, adj, r, 250), 12.5);  // 10 + 250 / 100
  EXPECT_DOUBLE_EQ(EvaluateRouting(model, adj, r, 4000), 20);   // one chunk: 10 + 1000 / 100
  // The pair's own direct bytes on A -> B delay the relayed ones: 15 s + 2.5.
  m.at(0, 1) = 500;
  FluidModel loaded(m, {0, 0, 0});
  r.at(0, 1).circuit = 500;
  EXPECT_DOUBLE_EQ(EvaluateRouting(loaded, adj, r, 250), 17.5);
}

// The same split as RelayAndEpsShareEvenly, scaled: A sends C 1000 bytes,
// EPS 100 B/s everywhere, circuits A-B and B-C at 100 B/s. Relaying x bytes
// takes max((1000 - x) / 100, x / 100 + min(chunk, x) / 100):
//   fluid: x = 500, 5 s; chunk 250: x = 375, 6.25 s; chunk >= every piece:
//   x = 333.3, 6.667 s (direct, EPS alone: 10 s).
TEST(RoutingTest, StoreAndForwardRelaysLessWhenItsTailsBind) {
  TrafficMatrix m(3);
  m.at(0, 2) = 1000;
  FluidModel model(m, {100, 100, 100});
  Adjacency adj = MakeAdjacency(3, {{0, 1, 100}, {1, 2, 100}});
  struct Case {
    double chunk, time, relayed;
  };
  for (const Case& c : {Case{0, 5, 500}, Case{250, 6.25, 375}, Case{1e6, 20.0 / 3, 1000.0 / 3}}) {
    SCOPED_TRACE(c.chunk);
    const RegionRouting r = OptimiseRouting(model, adj, {.relay_chunk_bytes = c.chunk});
    EXPECT_NEAR(r.completion_s, c.time, 2e-3 * c.time);
    ASSERT_EQ(r.at(0, 2).relay.size(), 1u);
    EXPECT_NEAR(r.at(0, 2).relay[0].second, c.relayed, 2e-3 * 1000);
    EXPECT_NEAR(r.at(0, 2).total(), 1000, 1e-9);
    EXPECT_DOUBLE_EQ(r.completion_s, EvaluateRouting(model, adj, r, c.chunk));
  }
}

TEST(RoutingPropertyTest, NeverWorseThanBaselinesAndConservesBytes) {
  std::mt19937_64 rng(42);
  for (int trial = 0; trial < 300; ++trial) {
    const int n = 2 + static_cast<int>(rng() % 10);
    TrafficMatrix m(n);
    std::uniform_real_distribution<double> bytes(0, 100);
    for (int i = 0; i < n; ++i) {
      for (int j = 0; j < n; ++j)
        m.at(i, j) = (rng() % 4 == 0) ? 0 : bytes(rng) * (1 + (i == 0) * 5);
    }
    std::vector<double> eps(n);
    for (double& e : eps) e = (rng() % 8 == 0) ? 0 : 1 + static_cast<double>(rng() % 10);
    std::vector<UndirectedCircuit> circuits;
    const int k = static_cast<int>(rng() % (2 * n + 1));
    for (int c = 0; c < k; ++c) {
      const int a = static_cast<int>(rng() % n), b = static_cast<int>(rng() % n);
      if (a != b) circuits.push_back({a, b, 5.0 + static_cast<double>(rng() % 20)});
    }
    const Adjacency adj = MakeAdjacency(n, circuits);
    const FluidModel model(m, eps);
    const RegionRouting direct = OptimiseRouting(model, adj, RoutingOptions{.relay = false});
    const RegionRouting relay = OptimiseRouting(model, adj);
    const double eps_only = EpsOnlyRouting(model).completion_s;
    const double circuit_only = CircuitOnlyRouting(model, adj).completion_s;
    SCOPED_TRACE(testing::Message() << "trial " << trial << " n " << n);
    const double exact = model.Estimate(adj).completion_s;
    if (std::isinf(exact)) {
      EXPECT_TRUE(std::isinf(direct.completion_s));
    } else {
      EXPECT_NEAR(direct.completion_s, exact, 1e-9 * exact);
    }
    EXPECT_LE(direct.completion_s, eps_only * (1 + 1e-9));
    EXPECT_LE(direct.completion_s, circuit_only * (1 + 1e-9));
    EXPECT_LE(relay.completion_s, direct.completion_s);
    // Both claimed times are what their splits take, scored by the test's own
    // evaluator (routing_time.h), and EvaluateRouting agrees with it.
    for (const RegionRouting* r : {&direct, &relay}) {
      const double t = routing_time::RoutingTime(eps, circuits, *r);
      if (std::isinf(t)) {
        EXPECT_TRUE(std::isinf(r->completion_s));
        EXPECT_TRUE(std::isinf(EvaluateRouting(model, adj, *r)));
      } else {
        EXPECT_NEAR(r->completion_s, t, 1e-12 * t);
        EXPECT_NEAR(EvaluateRouting(model, adj, *r), t, 1e-12 * t);
      }
    }
    std::vector<double> ocs(n, 0);
    for (const UndirectedCircuit& c : circuits) {
      ocs[c.a] += c.Bps;
      ocs[c.b] += c.Bps;
    }
    EXPECT_GE(relay.completion_s, model.LowerBound(ocs) * (1 - 1e-9));
    // With store and forward (10-byte chunks against 5-25 B/s circuits, so
    // the tails matter): never worse than direct routing, never better than
    // fluid relays (within the search's 1e-4), its claim its evaluation.
    const RegionRouting store = OptimiseRouting(model, adj, {.relay_chunk_bytes = 10});
    EXPECT_LE(store.completion_s, direct.completion_s);
    EXPECT_GE(store.completion_s, relay.completion_s * (1 - 1e-3));
    EXPECT_EQ(store.completion_s, EvaluateRouting(model, adj, store, 10));
    for (int i = 0; i < n; ++i) {
      for (int j = 0; j < n; ++j) {
        if (i != j) {
          EXPECT_NEAR(store.at(i, j).total(), m.at(i, j), 1e-9 * (1 + m.at(i, j)));
        }
      }
    }
    for (int i = 0; i < n; ++i) {
      for (int j = 0; j < n; ++j) {
        if (i == j) continue;
        const PairSplit& p = relay.at(i, j);
        EXPECT_NEAR(p.total(), m.at(i, j), 1e-9 * (1 + m.at(i, j)));
        EXPECT_GE(p.eps, -1e-9);
        EXPECT_GE(p.circuit, -1e-9);
        auto joined = [&](int a, int b) {
          for (const CircuitLink& l : adj[a]) {
            if (l.peer == b) return true;
          }
          return false;
        };
        for (const auto& [via, b] : p.relay) {
          EXPECT_GT(b, 0);
          EXPECT_TRUE(joined(i, via) && joined(via, j)) << i << "->" << via << "->" << j;
        }
        // One-sided relays: a circuit on the circuit hop, none on the EPS hop.
        for (const auto& [via, b] : p.eps_circuit) {
          EXPECT_GT(b, 0);
          EXPECT_TRUE(!joined(i, via) && joined(via, j)) << i << "-EPS->" << via << "->" << j;
        }
        for (const auto& [via, b] : p.circuit_eps) {
          EXPECT_GT(b, 0);
          EXPECT_TRUE(joined(i, via) && !joined(via, j)) << i << "->" << via << "-EPS->" << j;
        }
      }
    }
  }
}

}  // namespace
}  // namespace mixnet::planner
