// Closed-form checks of the max-min flow solver (sim/flow_solver.h).
#include "sim/flow_solver.h"

#include <algorithm>
#include <cmath>
#include <random>
#include <vector>

#include "gtest/gtest.h"

namespace mixnet::sim {
namespace {

TEST(FlowSolverTest, OneFlowTakesBytesOverCapacity) {
  FlowNetwork net;
  const int l = net.AddLink(100);
  net.AddFlow(1000, {l});
  const SolveResult r = SolveMaxMin(net);
  EXPECT_DOUBLE_EQ(r.completion_s, 10.0);
  EXPECT_EQ(r.components, 1);
}

TEST(FlowSolverTest, IncastSharesTheReceiverLink) {
  FlowNetwork net;
  const int down = net.AddLink(100);
  for (int i = 0; i < 5; ++i) {
    const int up = net.AddLink(100);
    net.AddFlow(200, {up, down});
  }
  const SolveResult r = SolveMaxMin(net);
  EXPECT_NEAR(r.completion_s, 5 * 200 / 100.0, 1e-9);      // 10 s
  for (double f : r.finish_s) EXPECT_NEAR(f, 10.0, 1e-9);  // fair: all end together
}

TEST(FlowSolverTest, MaxMinRatesGiveSpareToTheUnconstrainedFlow) {
  FlowNetwork net;
  const int a = net.AddLink(10), b = net.AddLink(4);
  net.AddFlow(1, {a});     // f0
  net.AddFlow(1, {a, b});  // f1, limited to 4 by b
  const std::vector<double> rate = MaxMinRates(net);
  EXPECT_DOUBLE_EQ(rate[1], 4.0);
  EXPECT_DOUBLE_EQ(rate[0], 6.0);
}

TEST(FlowSolverTest, RatesAreRecomputedWhenAFlowFinishes) {
  FlowNetwork net;
  const int l = net.AddLink(10);
  net.AddFlow(10, {l});  // 5 B/s until t = 2
  net.AddFlow(30, {l});  // 10 left... 20 left at t = 2, then 10 B/s: t = 4
  const SolveResult r = SolveMaxMin(net);
  EXPECT_NEAR(r.finish_s[0], 2.0, 1e-12);
  EXPECT_NEAR(r.finish_s[1], 4.0, 1e-12);
  EXPECT_EQ(r.events, 2);
}

TEST(FlowSolverTest, IndependentFlowsAreSeparateComponents) {
  FlowNetwork net;
  const int a = net.AddLink(1), b = net.AddLink(2);
  net.AddFlow(3, {a});
  net.AddFlow(3, {b});
  EXPECT_EQ(net.AddFlow(0, {a}), -1);  // empty flows are dropped
  const SolveResult r = SolveMaxMin(net);
  EXPECT_EQ(r.components, 2);
  EXPECT_DOUBLE_EQ(r.completion_s, 3.0);
}

TEST(FlowSolverTest, ZeroCapacityNeverFinishes) {
  FlowNetwork net;
  const int a = net.AddLink(0), b = net.AddLink(5);
  net.AddFlow(1, {a});
  net.AddFlow(5, {b});
  const SolveResult r = SolveMaxMin(net);
  EXPECT_TRUE(std::isinf(r.completion_s));
  EXPECT_DOUBLE_EQ(r.finish_s[1], 1.0);
}

TEST(FlowSolverTest, FlowWithoutLinksTakesNoTime) {
  FlowNetwork net;
  net.AddLink(1);
  net.AddFlow(100, std::span<const int>());
  EXPECT_DOUBLE_EQ(SolveMaxMin(net).completion_s, 0.0);
}

// Random networks checked against the definition of max-min fairness, not
// against another implementation: no link carries more than its capacity,
// and every flow has a bottleneck, a saturated link on which no flow gets
// more than it. 200 networks of 1-40 links and 1-120 flows over 1-4 links,
// capacities 1-10 with many ties (integers), as the simulator's fabrics have.
TEST(FlowSolverTest, RandomNetworksAreMaxMinFair) {
  std::mt19937 rng(20261202);
  for (int round = 0; round < 200; ++round) {
    const int nl = 1 + static_cast<int>(rng() % 40);
    std::vector<double> cap(nl);
    for (int l = 0; l < nl; ++l) cap[l] = 1 + static_cast<double>(rng() % 10);
    FlowNetwork built;
    for (int l = 0; l < nl; ++l) built.AddLink(cap[l]);
    const int nf = 1 + static_cast<int>(rng() % 120);
    std::vector<std::vector<int>> paths(nf);
    for (int f = 0; f < nf; ++f) {
      const int hops = 1 + static_cast<int>(rng() % 4);
      for (int h = 0; h < hops; ++h) {
        const int l = static_cast<int>(rng() % nl);
        if (std::find(paths[f].begin(), paths[f].end(), l) == paths[f].end()) {
          paths[f].push_back(l);
        }
      }
      built.AddFlow(1.0, paths[f]);
    }
    const std::vector<double> rate = MaxMinRates(built);
    ASSERT_EQ(static_cast<int>(rate.size()), nf);
    std::vector<double> load(nl, 0.0), top(nl, 0.0);
    for (int f = 0; f < nf; ++f) {
      for (int l : paths[f]) {
        load[l] += rate[f];
        top[l] = std::max(top[l], rate[f]);
      }
    }
    for (int l = 0; l < nl; ++l) {
      EXPECT_LE(load[l], cap[l] * (1 + 1e-9)) << "round " << round << " link " << l;
    }
    for (int f = 0; f < nf; ++f) {
      bool bottleneck = false;
      for (int l : paths[f]) {
        bottleneck |= load[l] >= cap[l] * (1 - 1e-9) && rate[f] >= top[l] * (1 - 1e-9);
      }
      EXPECT_TRUE(bottleneck) << "round " << round << ": flow " << f << " at " << rate[f]
                              << " has no bottleneck link";
    }
  }
}

}  // namespace
}  // namespace mixnet::sim
