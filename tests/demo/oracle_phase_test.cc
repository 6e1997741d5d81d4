// The oracle on a demo phase (apps/demo/oracle_phase.h) on a tiny phase: 4
// hosts, one layer, two iterations, so four all-to-alls per iteration, each
// the layer's matrix D or its transpose. Without circuits a floor has a
// closed form, worked out here from D alone: the busiest host's bytes
// (max over hosts of max(row, column), the same for D and its transpose) with
// TCP's framing (1514/1448 wire bytes per payload byte) and ACKs (66 bytes per
// two 1448-byte segments), over its NICs' rate. The split of mixnet's gap is
// checked on hand-made phase figures. Test thread only.
#include "apps/demo/oracle_phase.h"

#include <algorithm>
#include <optional>
#include <vector>

#include "apps/demo/fabric_spec.h"
#include "apps/demo/phase_result.h"
#include "apps/demo/workload.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "runtime/cluster/cluster_spec.h"

namespace mixnet::demo {
namespace {

using ::testing::HasSubstr;

constexpr double kGbps = 0.025;  // the demo's default rate
constexpr double kRate = kGbps * 1e9 / 8;
constexpr double kWire = 1514.0 / 1448.0 + 66.0 / (2 * 1448.0);
// h0-h1 and h2-h3 (host h's OCS NIC is on port h + 1).
const std::vector<cluster::CircuitSpec> kCircuits = {{"ocs0", 1, 2}, {"ocs0", 3, 4}};

class OraclePhaseTest : public ::testing::Test {
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
  }

  cluster::ClusterSpec Spec(FabricKind kind) {
    FabricShape shape;
    shape.hosts = 4;
    shape.ocs_nics = 1;
    shape.gbps = kGbps;
    absl::StatusOr<cluster::ClusterSpec> spec =
        cluster::ClusterSpec::Parse(FabricSpecYaml(kind, shape, kCircuits));
    EXPECT_TRUE(spec.ok()) << spec.status();
    return spec.ok() ? *spec : cluster::ClusterSpec{};
  }

  // Per iteration, the closed-form floor of the four all-to-alls over `nics`
  // NICs per host; the mean over the two iterations, in ms.
  double ClosedFormMs(int nics) {
    double sum = 0;
    for (int64_t it = 0; it < 2; ++it) {
      const TrafficMatrix d = w_->DispatchMatrix(it, 0);
      double busiest = 0;
      for (int h = 0; h < 4; ++h) {
        double row = 0, col = 0;
        for (int k = 0; k < 4; ++k) {
          if (k == h) continue;
          row += d.at(h, k);
          col += d.at(k, h);
        }
        busiest = std::max({busiest, row, col});
      }
      sum += 4 * 1000 * busiest * kWire / (nics * kRate);
    }
    return sum / 2;
  }

  PhaseResult Run(FabricKind kind, const cluster::ClusterSpec& spec, bool loopback = false) {
    PhaseResult r;
    r.fabric = std::string(FabricName(kind));
    r.iterations.resize(2);
    if (kind == FabricKind::kMixnet) {
      for (int64_t it = 0; it < 2; ++it) {
        for (int seq = 0; seq < 4; ++seq) r.routing[{it, seq}].circuits = kCircuits;
      }
    }
    OraclePhase(kind, loopback, spec, *w_, cache_, r);
    return r;
  }

  std::optional<Workload> w_;
  OracleCache cache_;
};

TEST_F(OraclePhaseTest, FabricOfTheSpec) {
  const planner::OracleFabric mix = OracleFabricOf(Spec(FabricKind::kMixnet));
  ASSERT_EQ(mix.hosts(), 4);
  EXPECT_DOUBLE_EQ(mix.eps_Bps[2], kRate);
  EXPECT_EQ(mix.ocs_ports[2], 1);
  EXPECT_DOUBLE_EQ(mix.ocs_port_Bps[2], kRate);
  EXPECT_DOUBLE_EQ(mix.wire_overhead, kWire);
  const planner::OracleFabric nb = OracleFabricOf(Spec(FabricKind::kNonblocking));
  EXPECT_DOUBLE_EQ(nb.eps_Bps[0], 2 * kRate);
  EXPECT_EQ(nb.ocs_ports[0], 0);
}

TEST_F(OraclePhaseTest, WithoutCircuitsTheFloorsAreClosedForms) {
  const PhaseResult nb = Run(FabricKind::kNonblocking, Spec(FabricKind::kNonblocking));
  ASSERT_TRUE(nb.oracle.computed) << nb.oracle.why;
  EXPECT_NEAR(nb.oracle.nonblocking_ms, ClosedFormMs(2), 1e-6);
  EXPECT_NEAR(nb.oracle.installed_ms, ClosedFormMs(2), 1e-6);
  EXPECT_FALSE(nb.oracle.has_best);
  // eps: the OCS NICs stay dark, so one NIC per host carries everything.
  const PhaseResult eps = Run(FabricKind::kEps, Spec(FabricKind::kEps));
  ASSERT_TRUE(eps.oracle.computed) << eps.oracle.why;
  EXPECT_NEAR(eps.oracle.nonblocking_ms, ClosedFormMs(2), 1e-6);
  EXPECT_NEAR(eps.oracle.installed_ms, ClosedFormMs(1), 1e-6);
  EXPECT_FALSE(eps.oracle.has_best);
}

TEST_F(OraclePhaseTest, CircuitFabricsOrderTheirFloors) {
  for (FabricKind kind : {FabricKind::kStatic, FabricKind::kMixnet}) {
    const cluster::ClusterSpec spec = Spec(kind);
    if (kind == FabricKind::kStatic) {
      ASSERT_EQ(spec.circuits.size(), 2u);
    }
    const PhaseResult r = Run(kind, spec);
    ASSERT_TRUE(r.oracle.computed) << r.oracle.why;
    ASSERT_TRUE(r.oracle.has_best);
    EXPECT_NEAR(r.oracle.nonblocking_ms, ClosedFormMs(2), 1e-6);
    EXPECT_LE(r.oracle.nonblocking_ms, r.oracle.lower_bound_ms * (1 + 1e-9));
    EXPECT_LE(r.oracle.lower_bound_ms, r.oracle.best_ms * (1 + 1e-9));
    EXPECT_LE(r.oracle.best_ms, r.oracle.installed_ms * (1 + 1e-9));
    // One circuit per host cannot beat one EPS NIC carrying it all.
    EXPECT_LT(r.oracle.installed_ms, ClosedFormMs(1));
    // The phase's figures are the mean of the iterations'.
    EXPECT_NEAR(r.oracle.installed_ms,
                (r.iterations[0].oracle_installed_ms + r.iterations[1].oracle_installed_ms) / 2,
                1e-9);
    EXPECT_NEAR(r.oracle.best_ms,
                (r.iterations[0].oracle_best_ms + r.iterations[1].oracle_best_ms) / 2, 1e-9);
  }
  // Both phases ran the same circuits on the same matrices.
  EXPECT_NEAR(Run(FabricKind::kStatic, Spec(FabricKind::kStatic)).oracle.installed_ms,
              Run(FabricKind::kMixnet, Spec(FabricKind::kMixnet)).oracle.installed_ms, 1e-9);
  EXPECT_EQ(cache_.best.size(), 2u);  // (iteration, layer): the searches were shared
}

TEST_F(OraclePhaseTest, WhatItCannotComputeItSays) {
  PhaseResult r = Run(FabricKind::kMixnet, Spec(FabricKind::kMixnet), /*loopback=*/true);
  EXPECT_FALSE(r.oracle.computed);
  EXPECT_THAT(r.oracle.why, HasSubstr("loopback"));
  r = Run(FabricKind::kOversub, Spec(FabricKind::kOversub));
  EXPECT_THAT(r.oracle.why, HasSubstr("leaves"));
  PhaseResult missing;
  missing.iterations.resize(2);
  OraclePhase(FabricKind::kMixnet, false, Spec(FabricKind::kMixnet), *w_, cache_, missing);
  EXPECT_FALSE(missing.oracle.computed);
  EXPECT_THAT(missing.oracle.why, HasSubstr("no circuits recorded for all-to-all 0"));
}

// Hand-made figures: mixnet 3000 ms per iteration (all-to-alls 1800, their
// achieved floor 1500, waits 130), oracle a = 1000, c = 1010, b = 1300;
// nonblocking 2000 (all-to-alls 1050, floor 1020). physics 10, planning 290,
// routing (1500 - 1300) - (1020 - 1000) = 180, data plane (1800 - 1500) -
// (1050 - 1020) = 270, reconfiguration 130; the 1000 ms gap leaves 120.
TEST(GapSplitTest, HandWorked) {
  PhaseResult mix, nb;
  mix.iterations.resize(2);
  nb.iterations.resize(2);
  for (IterationStats& s : mix.iterations) {
    s.alltoall_ms = 1800;
    s.loss_ms = 130;
    s.floor_ms = 1500;
  }
  mix.iterations[0].wall_ms = 2900;  // a mean of 3000
  mix.iterations[1].wall_ms = 3100;
  for (IterationStats& s : nb.iterations) {
    s.wall_ms = 2000;
    s.alltoall_ms = 1050;
    s.floor_ms = 1020;
  }
  EXPECT_FALSE(SplitGap(mix, nb).has_value());  // no oracle yet
  mix.oracle.computed = true;
  mix.oracle.has_best = true;
  mix.oracle.nonblocking_ms = 1000;
  mix.oracle.best_ms = 1010;
  mix.oracle.installed_ms = 1300;
  std::optional<GapSplit> g = SplitGap(mix, nb);
  ASSERT_TRUE(g.has_value());
  EXPECT_DOUBLE_EQ(g->mixnet_ms, 3000);
  EXPECT_DOUBLE_EQ(g->nonblocking_ms, 2000);
  EXPECT_DOUBLE_EQ(g->physics_ms, 10);
  EXPECT_DOUBLE_EQ(g->planning_ms, 290);
  EXPECT_DOUBLE_EQ(g->routing_ms, 180);
  EXPECT_DOUBLE_EQ(g->data_plane_ms, 270);
  EXPECT_DOUBLE_EQ(g->reconfiguration_ms, 130);
  EXPECT_DOUBLE_EQ(g->other_ms, 120);
  nb.status = absl::UnavailableError("phase failed");
  EXPECT_FALSE(SplitGap(mix, nb).has_value());
}

// The steady iterations are 1 and 2. mixnet: iterations 4000, 2900, 3100 ms
// (steady 3000), floors 2000, 1400, 1600 (steady 1500), best floors 1100, 1000,
// 1000 (steady 1000); nonblocking: 2500, 2000, 2000 ms, floors 1200, 1000,
// 1000. So floor / best 1.5, floor / nonblocking's floor 1.5, iteration 1.5,
// the first 4000 / 2500 = 1.6.
TEST(SteadyRatiosTest, HandWorked) {
  PhaseResult mix, nb;
  mix.iterations.resize(3);
  nb.iterations.resize(3);
  const double mix_wall[] = {4000, 2900, 3100}, mix_floor[] = {2000, 1400, 1600},
               mix_best[] = {1100, 1000, 1000}, nb_wall[] = {2500, 2000, 2000},
               nb_floor[] = {1200, 1000, 1000};
  for (int i = 0; i < 3; ++i) {
    mix.iterations[i].wall_ms = mix_wall[i];
    mix.iterations[i].floor_ms = mix_floor[i];
    mix.iterations[i].oracle_best_ms = mix_best[i];
    nb.iterations[i].wall_ms = nb_wall[i];
    nb.iterations[i].floor_ms = nb_floor[i];
  }
  EXPECT_FALSE(SteadyRatios(mix, nb).has_value());  // no oracle
  mix.oracle.computed = mix.oracle.has_best = true;
  std::optional<SteadyTargets> t = SteadyRatios(mix, nb);
  ASSERT_TRUE(t.has_value());
  EXPECT_DOUBLE_EQ(t->floor_over_best, 1.5);
  EXPECT_DOUBLE_EQ(t->floor_over_nonblocking_floor, 1.5);
  EXPECT_DOUBLE_EQ(t->iteration_over_nonblocking, 1.5);
  EXPECT_DOUBLE_EQ(t->first_iteration_over_nonblocking, 1.6);
  mix.iterations.resize(1);
  EXPECT_FALSE(SteadyRatios(mix, nb).has_value());  // one iteration: no steady ones
}

}  // namespace
}  // namespace mixnet::demo
