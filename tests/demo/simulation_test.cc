// The demo's emulation-mode charge for a reconfiguration
// (apps/demo/simulation.h), hand-worked on a tiny phase: 4 hosts, one layer
// (per iteration: attention 20 ms, dispatch, expert, combine, [report],
// head 20 ms, combine-grad, expert 80 ms, dispatch-grad, [report], attention
// backward 40 ms), mixnet's recorded routing on epoch 1 until a chosen
// all-to-all of iteration 1 and on epoch 2 from there, no circuits. A round
// hides in the compute since the plan request (the report) before it: 20 ms
// (the head) before iteration 1's combine-grad, 40 + 20 ms (attention
// backward, then attention) before iteration 1's dispatch. So the charge is
// max(0, switch_ms + round_overhead_ms - window) there and nothing elsewhere.
// Test thread only.
#include <string>
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
  // `new_from`: the first all-to-all (in step order) of iteration 1 on the
  // new epoch; 2 is the combine-grad, 0 the dispatch.
  // `calibrated_ms` >= 0: a warm-up sweep ran with that median overhead.
  std::vector<double> Charged(double switch_ms, double overhead_ms, int new_from = 2,
                              double calibrated_ms = -1) {
    c_.switch_ms = switch_ms;
    PhaseResult r;
    r.fabric = "mixnet";
    r.iterations.resize(2);
    r.round_overhead_ms = overhead_ms;
    r.round_samples = 1;
    if (calibrated_ms >= 0) {
      r.warm_rounds = 7;
      r.warm_round_overhead_ms = calibrated_ms;
    }
    for (int64_t it = 0; it < 2; ++it) {
      for (int seq = 0; seq < 4; ++seq) {
        A2aRouting a;
        a.epoch = it == 1 && seq >= new_from ? 2 : 1;
        r.routing[{it, seq}] = a;
      }
    }
    SimulatePhase(SimulationOf(FabricKind::kMixnet, c_), spec_, *w_, r);
    EXPECT_TRUE(r.simulated) << r.simulated_why;
    rounds_ = r.simulated_rounds;
    charged_overhead_ms_ = r.simulated_round_overhead_ms;
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
  std::string rounds_;  // the last Charged's PhaseResult::simulated_rounds
  double charged_overhead_ms_ = 0;
};

TEST_F(DemoSimulationTest, ChargesTheSwitchingLessTheWindowWithoutAMeasuredOverhead) {
  const std::vector<double> got = Charged(25, 0);
  EXPECT_EQ(got[0], 0);         // the first epoch is the job's warm-up
  EXPECT_DOUBLE_EQ(got[1], 5);  // 25 - 20 (the head)
}

TEST_F(DemoSimulationTest, AddsTheControllersRoundOverheadToEveryRound) {
  const std::vector<double> got = Charged(25, 12);
  EXPECT_EQ(got[0], 0);
  EXPECT_DOUBLE_EQ(got[1], 17);  // 25 + 12 - 20
}

TEST_F(DemoSimulationTest, AWarmUpSweepsRoundsCalibrateTheChargeInsteadOfTheRunsOwn) {
  // The run's own rounds took 30 ms over the switching, the sweep's 8: the
  // prediction charges the calibration, 25 + 8 - 20, and says so.
  const std::vector<double> got = Charged(25, 30, 2, /*calibrated_ms=*/8);
  EXPECT_EQ(got[0], 0);
  EXPECT_DOUBLE_EQ(got[1], 13);
  EXPECT_EQ(rounds_, "warm-up sweep");
  EXPECT_DOUBLE_EQ(charged_overhead_ms_, 8);
  // Without a sweep the run's own figure is charged, labelled a replay.
  EXPECT_DOUBLE_EQ(Charged(25, 30)[1], 35);
  EXPECT_EQ(rounds_, "replay");
  EXPECT_DOUBLE_EQ(charged_overhead_ms_, 30);
}

TEST_F(DemoSimulationTest, ARoundShorterThanItsWindowCostsNothing) {
  EXPECT_EQ(Charged(5, 10)[1], 0);   // 15 ms inside the 20 ms head
  EXPECT_EQ(Charged(10, 10)[1], 0);  // exactly the window
}

TEST_F(DemoSimulationTest, TheNextIterationsFirstLayerHidesInBothAttentions) {
  // Requested after the dispatch-grad: attention backward 40 + attention 20.
  EXPECT_EQ(Charged(25, 12, /*new_from=*/0)[1], 0);           // 37 < 60
  EXPECT_DOUBLE_EQ(Charged(100, 12, /*new_from=*/0)[1], 52);  // 112 - 60
  EXPECT_EQ(Charged(100, 12, /*new_from=*/0)[0], 0);
}

TEST_F(DemoSimulationTest, AReplannedCombinesRoundHidesInTheExpertCompute) {
  // Iteration 1's combine (seq 1) on a new epoch. Without --replan-combine
  // its round was requested after iteration 0's dispatch-grad: attention
  // backward 40 + attention 20 + expert 40 = 100 ms hide 25 + 30. With it, the
  // request follows the dispatch: only the expert's 40 ms, so 55 - 40 = 15.
  EXPECT_EQ(Charged(25, 30, /*new_from=*/1)[1], 0);
  c_.replan_combine = true;
  EXPECT_DOUBLE_EQ(Charged(25, 30, /*new_from=*/1)[1], 15);
}

}  // namespace
}  // namespace mixnet::demo
