// The circuit planner against the oracle's (c), the best routed floor over
// every circuit set (label cpu). On fabrics small enough to enumerate every
// circuit multiset the ports allow (4 to 6 hosts, 1 to 3 OCS ports each), (c) is found
// by exhaustive search: the least InstalledFloor (the LP's best routing, two-hop
// relays included) over all of them. That optimum, not the planner's own
// model, is what the planner's plans are measured against; SearchBestFloor
// must find it too. Test thread only.
#include <algorithm>
#include <cstdio>
#include <random>
#include <vector>

#include "absl/strings/str_cat.h"
#include "gtest/gtest.h"
#include "runtime/planner/oracle.h"
#include "runtime/planner/planner.h"
#include "tests/planner/planner_test_util.h"

namespace mixnet::planner {
namespace {

using testing_util::MakeRegionInput;
using testing_util::MustRegion;

constexpr double kEpsBps = 1e9 / 8;  // 1 Gbit/s, as every OCS port

// (c) by enumeration: every multiset of circuits with at most the host's
// ports at each host, scored by the LP.
double ExhaustiveBestFloor(const TrafficMatrix& d, const OracleFabric& f) {
  double best = kInfinity;
  testing_util::ForEachCircuitSet(
      d.hosts(), f.ocs_ports, [&](int a, int) { return f.ocs_port_Bps[a]; },
      [&](const std::vector<UndirectedCircuit>& set) {
        absl::StatusOr<double> t = InstalledFloor(d, f, set);
        EXPECT_TRUE(t.ok()) << t.status();
        if (t.ok()) best = std::min(best, *t);
      });
  return best;
}

// Random all-to-all of MoE shape: every host sends to every other, one hot
// receiver, and a partner per host that takes a larger share.
TrafficMatrix MoeDemand(int n, std::mt19937_64& rng) {
  std::uniform_real_distribution<double> u(0.2, 1.0);
  TrafficMatrix m(n);
  const int hot = static_cast<int>(rng() % n);
  std::vector<int> partner(n);
  for (int i = 0; i < n; ++i) partner[i] = (i + 1 + static_cast<int>(rng() % (n - 1))) % n;
  for (int i = 0; i < n; ++i) {
    for (int j = 0; j < n; ++j) {
      if (i == j) continue;
      m.at(i, j) = 1e6 * u(rng) * (j == hot ? 3 : 1) * (j == partner[i] ? 4 : 1);
    }
  }
  return m;
}

struct Fabric {
  int hosts;
  int ports;
};

class PlannerVsOracleTest : public ::testing::TestWithParam<Fabric> {};

// The improved planner scoring plans by the routing the workers run (relay
// scoring, with its routed local search) against (c): on these 12 matrices
// within 7% of it at worst and 1% on average. The direct model's plans (the
// planner's default scoring) reach 1.37x (c) at worst and 1.08x on average on
// the 5 x 2 fabric, and relay scoring without the routed search 1.37x and
// 1.05x: the direct ones are printed beside it, not asserted.
TEST_P(PlannerVsOracleTest, PlansAgainstTheExhaustiveBestRoutedFloor) {
  const Fabric fab = GetParam();
  const Region region = MustRegion(MakeRegionInput(fab.hosts, fab.ports, 1, kEpsBps), fab.ports);
  const OracleFabric fabric = OracleFabricOf(region);
  std::mt19937_64 rng(7);
  constexpr int kCases = 12;
  double worst[2] = {0, 0}, sum[2] = {0, 0};
  for (int k = 0; k < kCases; ++k) {
    const TrafficMatrix d =
        k % 2 == 0 ? MoeDemand(fab.hosts, rng) : testing_util::RandomDemand(fab.hosts, rng);
    const double best = ExhaustiveBestFloor(d, fabric);
    ASSERT_GT(best, 0);
    absl::StatusOr<BestFloor> search = SearchBestFloor(d, fabric);
    ASSERT_TRUE(search.ok()) << search.status();
    EXPECT_NEAR(search->floor_s, best, 1e-9 * best) << "case " << k;
    EXPECT_LE(search->lower_bound_s, best * (1 + 1e-9)) << "case " << k;
    for (int relay : {0, 1}) {
      PlannerOptions po;
      po.relay = relay == 1;
      po.routed_search_evaluations = 64;
      absl::StatusOr<RegionPlan> plan = PlanRegion(region, d, {}, po);
      ASSERT_TRUE(plan.ok()) << plan.status();
      testing_util::ExpectWellFormed(region, plan->circuits);
      absl::StatusOr<double> b = InstalledFloor(d, fabric, HostCircuitsOf(region, plan->circuits));
      ASSERT_TRUE(b.ok()) << b.status();
      const double ratio = *b / best;
      EXPECT_GE(ratio, 1 - 1e-9) << "case " << k << ": no plan beats (c)";
      worst[relay] = std::max(worst[relay], ratio);
      sum[relay] += ratio;
    }
  }
  std::printf(
      "%d hosts x %d ports: plan (b) / exhaustive (c): direct scoring mean %.4f worst "
      "%.4f; relay scoring mean %.4f worst %.4f\n",
      fab.hosts, fab.ports, sum[0] / kCases, worst[0], sum[1] / kCases, worst[1]);
  EXPECT_LE(worst[1], 1.07);
  EXPECT_LE(sum[1] / kCases, 1.01);
}

INSTANTIATE_TEST_SUITE_P(SmallFabrics, PlannerVsOracleTest,
                         ::testing::Values(Fabric{5, 2}, Fabric{6, 1}, Fabric{4, 3}),
                         [](const ::testing::TestParamInfo<Fabric>& i) {
                           return absl::StrCat(i.param.hosts, "hosts", i.param.ports, "ports");
                         });

}  // namespace
}  // namespace mixnet::planner
