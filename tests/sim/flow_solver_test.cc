// Closed-form checks of the max-min flow solver (sim/flow_solver.h).
#include "sim/flow_solver.h"

#include <cmath>

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

}  // namespace
}  // namespace mixnet::sim
