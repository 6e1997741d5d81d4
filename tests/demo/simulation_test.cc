// The demo's emulation-mode charge for a reconfiguration
// (apps/demo/simulation.h), hand-worked on a tiny phase: 4 hosts, one layer
// (per iteration: attention 20 ms, dispatch, expert, combine, head, then
// combine-grad, expert 80 ms, dispatch-grad, attention 40 ms), mixnet's
// recorded routing on epoch 1 for iteration 0 and epoch 2 for iteration 1,
// no circuits. The one new epoch is iteration 1's dispatch, behind the
// forward attention's 20 ms window, so the simulation charges
// max(0, switch_ms + round_overhead_ms - 20) there and nothing elsewhere.
// Test thread only.
#include <vector>

#include "apps/demo/fabric_spec.h"
#include "apps/demo/phase_result.h"
#include "apps/demo/run_config.h"
#include "apps/demo/simulation.h"
#include "apps/demo/workload.h"
#include "gtest/gtest.h"
#include "runtime/cluster/cluster_spec.h"

namespace mixnet::demo {
namespace {

class DemoSimulationTest : public ::testing::Test {
 protected:
  void SetUp() override {
    WorkloadOptions wo;
    wo.hosts = 4;
    wo.layers = 1;
    wo.experts_per_host = 1;
    wo.tokens = 16;
    wo.token_bytes = 1024;
    absl::StatusOr<Workload> w = Workload::Create(wo);
    ASSERT_TRUE(w.ok()) << w.status();
    w_.emplace(std::move(*w));
    FabricShape shape;
    shape.hosts = 4;
    shape.ocs_nics = 1;
    absl::StatusOr<cluster::ClusterSpec> spec =
        cluster::ClusterSpec::Parse(FabricSpecYaml(FabricKind::kMixnet, shape));
    ASSERT_TRUE(spec.ok()) << spec.status();
    spec_ = std::move(*spec);
    c_.fabric = "mixnet";
    c_.iterations = 2;
    c_.router = "v1";
  }

  // Simulates the phase with `switch_ms` and the controller's measured
  // `overhead_ms`; returns each iteration's simulated reconfiguration (ms).
  std::vector<double> Charged(double switch_ms, double overhead_ms) {
    c_.switch_ms = switch_ms;
    PhaseResult r;
    r.fabric = "mixnet";
    r.iterations.resize(2);
    r.round_overhead_ms = overhead_ms;
    for (int64_t it = 0; it < 2; ++it) {
      for (int seq = 0; seq < 4; ++seq) {
        A2aRouting a;
        a.epoch = static_cast<uint64_t>(it + 1);
        r.routing[{it, seq}] = a;
      }
    }
    SimulatePhase(SimulationOf(FabricKind::kMixnet, c_), spec_, *w_, r);
    EXPECT_TRUE(r.simulated) << r.simulated_why;
    std::vector<double> out;
    for (const IterationStats& s : r.iterations) {
      // The iteration is compute + all-to-alls + the charge, nothing else.
      EXPECT_NEAR(s.simulated_ms,
                  c_.compute.PerIterationMs(1) + s.simulated_alltoall_ms + s.simulated_reconfig_ms,
                  1e-9);
      out.push_back(s.simulated_reconfig_ms);
    }
    return out;
  }

  std::optional<Workload> w_;
  cluster::ClusterSpec spec_;
  RunConfig c_;
};

TEST_F(DemoSimulationTest, ChargesTheSwitchingLessTheWindowWithoutAMeasuredOverhead) {
  const std::vector<double> got = Charged(25, 0);
  EXPECT_EQ(got[0], 0);         // the first epoch is the job's warm-up
  EXPECT_DOUBLE_EQ(got[1], 5);  // 25 - 20
}

TEST_F(DemoSimulationTest, AddsTheControllersRoundOverheadToEveryRound) {
  const std::vector<double> got = Charged(25, 12);
  EXPECT_EQ(got[0], 0);
  EXPECT_DOUBLE_EQ(got[1], 17);  // 25 + 12 - 20
}

TEST_F(DemoSimulationTest, ARoundShorterThanItsWindowCostsNothing) {
  EXPECT_EQ(Charged(5, 10)[1], 0);   // 15 ms inside the 20 ms attention
  EXPECT_EQ(Charged(10, 10)[1], 0);  // exactly the window
}

}  // namespace
}  // namespace mixnet::demo
