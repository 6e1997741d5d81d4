// Seeded property tests of the planner on random regions (sizes, alpha, port
// counts, rates, traffic, current circuits): plans are well formed (no host
// over alpha, ports used once, symmetric, inside the region), kept circuits
// keep their ports, the improved planner is never worse than greedy by the
// model (direct and relay scoring), scores are reproducible, and every pair
// has a route. Also bad input: every culprit named, InvalidArgument.
// Single-threaded.
#include <cmath>
#include <limits>
#include <random>
#include <set>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "runtime/planner/cluster_planner.h"
#include "runtime/planner/planner.h"
#include "runtime/planner/routing.h"
#include "tests/planner/planner_test_util.h"

namespace mixnet::planner {
namespace {

using ::testing::HasSubstr;
using testing_util::ExpectWellFormed;
using testing_util::MakeRegionInput;
using testing_util::MustRegion;

TEST(PlannerPropertyTest, RandomRegions) {
  std::mt19937_64 rng(2024);
  for (int trial = 0; trial < 150; ++trial) {
    const int n = 2 + static_cast<int>(rng() % 15);
    const int alpha = 1 + static_cast<int>(rng() % 6);
    RegionInput in = MakeRegionInput(n, alpha, 100, 0);
    for (int h = 0; h < n; ++h) {
      // Some hosts have fewer ports than alpha, some a slower NIC, some no EPS.
      const int ports = static_cast<int>(in.ports[h].size()) - static_cast<int>(rng() % 2);
      in.ports[h].resize(std::max(0, ports));
      if (rng() % 5 == 0 && !in.ports[h].empty()) in.ports[h][0].gbps = 50;
      in.eps_Bps[h] = rng() % 6 == 0 ? 0 : 12.5e9 * (1 + rng() % 3);
    }
    Region r = MustRegion(in, alpha);
    TrafficMatrix m = testing_util::RandomDemand(n, rng, 1e9);
    const std::vector<PlannedCircuit> current = testing_util::RandomCircuits(r, rng);
    const FluidModel model(m, r.input().eps_Bps);
    SCOPED_TRACE(testing::Message() << "trial " << trial << " n " << n << " alpha " << alpha);
    for (bool relay : {false, true}) {
      PlannerOptions o;
      o.relay = relay;
      o.algorithm = Algorithm::kGreedy;
      absl::StatusOr<RegionPlan> greedy = PlanRegion(r, m, current, o);
      o.algorithm = Algorithm::kImproved;
      absl::StatusOr<RegionPlan> best = PlanRegion(r, m, current, o);
      ASSERT_TRUE(greedy.ok()) << greedy.status();
      ASSERT_TRUE(best.ok()) << best.status();
      for (const RegionPlan* p : {&*greedy, &*best}) {
        ExpectWellFormed(r, p->circuits);
        const double again = ScoreCircuits(r, model, p->circuits, relay);
        if (std::isinf(again)) {
          EXPECT_TRUE(std::isinf(p->completion_s));
        } else {
          EXPECT_NEAR(p->completion_s, again, 1e-9 * again);
        }
        const double cur = ScoreCircuits(r, model, current, relay);
        if (std::isinf(cur)) {
          EXPECT_TRUE(std::isinf(p->current_completion_s));
        } else {
          EXPECT_NEAR(p->current_completion_s, cur, 1e-9 * cur);
        }
        EXPECT_GE(p->completion_s, p->lower_bound_s * (1 - 1e-9));
        // Kept circuits keep their ports: every current circuit whose two
        // ports are joined again counts, and nothing else does.
        std::set<std::pair<int, int>> now;
        for (const PlannedCircuit& c : p->circuits) {
          now.insert({c.a.host * 64 + c.a.port, c.b.host * 64 + c.b.port});
          now.insert({c.b.host * 64 + c.b.port, c.a.host * 64 + c.a.port});
        }
        int kept = 0;
        for (const PlannedCircuit& c : current) {
          kept += now.count({c.a.host * 64 + c.a.port, c.b.host * 64 + c.b.port});
        }
        EXPECT_EQ(kept, p->circuits_kept);
      }
      EXPECT_LE(best->completion_s, greedy->completion_s * (1 + 1e-9))
          << (relay ? "relay" : "direct");
      // Every pair has a route: with relay routing over the plan the time is
      // finite whenever some routing could finish at all (all hosts have EPS).
      bool all_eps = true;
      for (double e : r.input().eps_Bps) all_eps &= e > 0;
      if (all_eps) {
        EXPECT_TRUE(std::isfinite(best->completion_s));
      }
    }
  }
}

TEST(PlannerPropertyTest, WholeClusterPlansStayInsideRegions) {
  std::mt19937_64 rng(99);
  std::vector<RegionInput> inputs;
  for (int r = 0; r < 6; ++r) {
    inputs.push_back(MakeRegionInput(3 + r, 3, 100, 25e9, "r" + std::to_string(r), 1 + 32 * r));
  }
  absl::StatusOr<ClusterPlanner> cp = ClusterPlanner::FromRegions(inputs, 3);
  ASSERT_TRUE(cp.ok()) << cp.status();
  std::vector<TrafficMatrix> demands;
  std::vector<cluster::CircuitSpec> current;
  for (const Region& r : cp->regions()) {
    demands.push_back(testing_util::RandomDemand(r.hosts(), rng, 1e9));
    for (const PlannedCircuit& c : testing_util::RandomCircuits(r, rng)) {
      current.push_back(r.ToSpec(c));
    }
  }
  absl::StatusOr<ClusterDecision> d = cp->Plan(demands, current, {}, {});
  ASSERT_TRUE(d.ok()) << d.status();
  absl::StatusOr<std::vector<std::vector<PlannedCircuit>>> split = cp->SplitCircuits(d->circuits);
  ASSERT_TRUE(split.ok()) << split.status();
  for (size_t r = 0; r < split->size(); ++r) {
    ExpectWellFormed(cp->regions()[r], (*split)[r]);
    const RegionDecision& rd = d->regions[r];
    EXPECT_EQ((*split)[r].size(), rd.decision.reconfigure
                                      ? rd.plan.circuits.size()
                                      : (*cp->SplitCircuits(current))[r].size());
  }
}

// ---- bad input ----

void ExpectInvalid(const absl::Status& s, const std::string& culprit) {
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument) << s;
  EXPECT_THAT(std::string(s.message()), HasSubstr(culprit));
}

TEST(PlannerValidationTest, BadRegions) {
  ExpectInvalid(Region::Create(MakeRegionInput(2, 1, 100, 1), 0).status(), "alpha must be >= 1");
  ExpectInvalid(Region::Create(MakeRegionInput(2, 3, 100, 1), 2).status(),
                "host r0h0 has 3 OCS ports, more than alpha 2");
  RegionInput twice = MakeRegionInput(2, 2, 100, 1);
  twice.ports[1][1].port = twice.ports[0][0].port;
  ExpectInvalid(Region::Create(twice, 2).status(),
                "OCS port sw:1 is cabled twice: host r0h0 NIC ocs0 and host r0h1 NIC ocs1");
  RegionInput nan_eps = MakeRegionInput(2, 1, 100, 1);
  nan_eps.eps_Bps[1] = std::numeric_limits<double>::quiet_NaN();
  ExpectInvalid(Region::Create(nan_eps, 1).status(), "host r0h1: EPS capacity nan");
  RegionInput bad_rate = MakeRegionInput(2, 1, 100, 1);
  bad_rate.ports[0][0].gbps = -1;
  ExpectInvalid(Region::Create(bad_rate, 1).status(), "host r0h0 NIC ocs0: line rate -1");
  RegionInput short_lists = MakeRegionInput(2, 1, 100, 1);
  short_lists.eps_Bps.pop_back();
  ExpectInvalid(Region::Create(short_lists, 1).status(), "2 hosts but 2 port lists and 1 EPS");
  // Cabled twice across two regions of one cluster.
  ExpectInvalid(
      ClusterPlanner::FromRegions(
          {MakeRegionInput(2, 1, 100, 1, "ra"), MakeRegionInput(2, 1, 100, 1, "rb")}, 1)
          .status(),
      "OCS port sw:1 is cabled twice: host rah0 of region 'ra' and host rbh0 of region 'rb'");
}

TEST(PlannerValidationTest, BadTraffic) {
  Region r = MustRegion(MakeRegionInput(3, 1, 100, 1), 1);
  ExpectInvalid(PlanRegion(r, TrafficMatrix(2), {}).status(),
                "traffic matrix is 2x2 but the region has 3 hosts");
  TrafficMatrix neg(3);
  neg.at(1, 2) = -5;
  ExpectInvalid(PlanRegion(r, neg, {}).status(), "traffic from host r0h1 to host r0h2 is -5");
  TrafficMatrix nan(3);
  nan.at(2, 0) = std::numeric_limits<double>::quiet_NaN();
  ExpectInvalid(PlanRegion(r, nan, {}, PlannerOptions{.algorithm = Algorithm::kGreedy}).status(),
                "traffic from host r0h2 to host r0h0 is nan");
  TrafficMatrix inf(3);
  inf.at(0, 1) = std::numeric_limits<double>::infinity();
  ExpectInvalid(PlanRegion(r, inf, {}).status(), "to host r0h1 is inf");
}

TEST(PlannerValidationTest, BadCircuits) {
  Region r = MustRegion(MakeRegionInput(3, 2, 100, 1), 2);  // ports sw:1..6
  ExpectInvalid(r.FromSpecs({{"sw", 1, 9}}).status(),
                "circuits[0] (sw 1-9): port sw:9 is not an OCS port of this region");
  ExpectInvalid(r.FromSpecs({{"other", 1, 3}}).status(), "port other:1 is not an OCS port");
  ExpectInvalid(r.FromSpecs({{"sw", 1, 3}, {"sw", 3, 5}}).status(),
                "circuits[1] (sw 3-5): port sw:3 is used by another circuit");
  ExpectInvalid(r.FromSpecs({{"sw", 1, 2}}).status(), "both ends are on host r0h0");
  absl::StatusOr<ClusterPlanner> cp = ClusterPlanner::FromRegions(
      {MakeRegionInput(2, 1, 100, 1, "ra", 1), MakeRegionInput(2, 1, 100, 1, "rb", 10)}, 1);
  ASSERT_TRUE(cp.ok()) << cp.status();
  ExpectInvalid(cp->SplitCircuits({{"sw", 1, 2}, {"sw", 10, 11}, {"sw", 2, 11}}).status(),
                "circuits[2] (sw 2-11): port sw:2 is used by another circuit");
  ExpectInvalid(cp->SplitCircuits({{"sw", 11, 10}, {"sw", 10, 1}}).status(),
                "circuits[1] (sw 10-1): port sw:10 is used by another circuit");
  ExpectInvalid(cp->SplitCircuits({{"sw", 10, 1}}).status(),
                "circuits[0] (sw 10-1): crosses regions 'rb' and 'ra'");
  ExpectInvalid(cp->Plan({TrafficMatrix(2)}, std::vector<cluster::CircuitSpec>{}, {}, {}).status(),
                "2 regions but 1 traffic matrices");
}

}  // namespace
}  // namespace mixnet::planner
