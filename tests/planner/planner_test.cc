// Tests for the circuit planner: hand-made regions with known optimal
// topologies, the paper's greedy on cases it gets wrong, port assignment
// (kept circuits keep their ports, freed ports before idle ones), preference
// for current circuits on ties, Decide, and whole-cluster planning from a
// spec. Single-threaded.
#include "runtime/planner/planner.h"

#include <random>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "runtime/planner/cluster_planner.h"
#include "tests/planner/planner_test_util.h"

namespace mixnet::planner {
namespace {

using ::testing::HasSubstr;
using testing_util::BruteForceOptimum;
using testing_util::ExpectWellFormed;
using testing_util::MakeRegionInput;
using testing_util::MustRegion;

// 8 Gb/s = 1e9 B/s per circuit, EPS 1e9 B/s per host.
constexpr double kGbps = 8;
constexpr double kEps = 1e9;

RegionPlan MustPlan(const Region& r, const TrafficMatrix& m, Algorithm algo,
                    const std::vector<PlannedCircuit>& current = {}) {
  PlannerOptions o;
  o.algorithm = algo;
  absl::StatusOr<RegionPlan> p = PlanRegion(r, m, current, o);
  EXPECT_TRUE(p.ok()) << p.status();
  return p.ok() ? *p : RegionPlan{};
}

int CountBetween(const std::vector<PlannedCircuit>& cs, int a, int b) {
  int n = 0;
  for (const PlannedCircuit& c : cs) {
    n += (c.a.host == a && c.b.host == b) || (c.a.host == b && c.b.host == a);
  }
  return n;
}

TEST(PlannerTest, AlgorithmNames) {
  EXPECT_EQ(AlgorithmName(Algorithm::kGreedy), "greedy");
  EXPECT_EQ(*ParseAlgorithm("improved"), Algorithm::kImproved);
  EXPECT_EQ(ParseAlgorithm("best").status().code(), absl::StatusCode::kInvalidArgument);
}

TEST(PlannerTest, TwoHostsGetAllPorts) {
  Region r = MustRegion(MakeRegionInput(2, 3, kGbps, kEps), 3);
  TrafficMatrix m(2);
  m.at(0, 1) = 8e9;
  for (Algorithm a : {Algorithm::kGreedy, Algorithm::kImproved}) {
    RegionPlan p = MustPlan(r, m, a);
    EXPECT_EQ(p.circuits.size(), 3u);
    // 3 circuits + EPS = 4e9 B/s: 2 s, which is also the lower bound.
    EXPECT_DOUBLE_EQ(p.completion_s, 2);
    EXPECT_DOUBLE_EQ(p.lower_bound_s, 2);
    ExpectWellFormed(r, p.circuits);
  }
}

// Scoring with router v1's routing (circuit_only), hand-worked: one pair
// sends D over EPS of 1e9 B/s and k circuits of 1e9 B/s each.
TEST(PlannerTest, CircuitOnlyScoresTheRoutingOfRouterV1) {
  for (Algorithm a : {Algorithm::kGreedy, Algorithm::kImproved}) {
    PlannerOptions v1;
    v1.algorithm = a;
    v1.circuit_only = true;
    PlannerOptions v2 = v1;
    v2.circuit_only = false;
    // k = 1, D = 2e9: split 2e9 / 2e9 B/s = 1 s; circuit only 2e9 / 1e9 = 2 s,
    // no better than EPS alone (2 s): v1 gains nothing from the circuit.
    Region one = MustRegion(MakeRegionInput(2, 1, kGbps, kEps), 1);
    TrafficMatrix m(2);
    m.at(0, 1) = 2e9;
    absl::StatusOr<RegionPlan> split = PlanRegion(one, m, {}, v2);
    absl::StatusOr<RegionPlan> only = PlanRegion(one, m, {}, v1);
    ASSERT_TRUE(split.ok() && only.ok());
    EXPECT_DOUBLE_EQ(split->completion_s, 1);
    EXPECT_DOUBLE_EQ(split->current_completion_s, 2);
    EXPECT_DOUBLE_EQ(only->current_completion_s, 2);
    EXPECT_DOUBLE_EQ(only->completion_s, 2);
    if (a == Algorithm::kImproved) {
      EXPECT_TRUE(only->circuits.empty()) << "nothing to gain under v1: keep the topology";
      EXPECT_FALSE(Decide(*only, DecideOptions{.switch_s = 0.001}).reconfigure);
    }
    EXPECT_TRUE(Decide(*split, DecideOptions{.switch_s = 0.001}).reconfigure);
    // k = 3, D = 4e9: split 4e9 / 4e9 = 1 s; circuit only 4e9 / 3e9 s.
    Region three = MustRegion(MakeRegionInput(2, 3, kGbps, kEps), 3);
    m.at(0, 1) = 4e9;
    split = PlanRegion(three, m, {}, v2);
    only = PlanRegion(three, m, {}, v1);
    ASSERT_TRUE(split.ok() && only.ok());
    EXPECT_DOUBLE_EQ(split->completion_s, 1);
    EXPECT_NEAR(only->completion_s, 4.0 / 3.0, 1e-12);
    EXPECT_DOUBLE_EQ(only->current_completion_s, 4);
    EXPECT_EQ(only->circuits.size(), 3u);
  }
}

TEST(PlannerTest, PerfectMatchingOnHeavyPairs) {
  // alpha 1: the optimum joins the heavy pairs 0-1 and 2-3.
  Region r = MustRegion(MakeRegionInput(4, 1, kGbps, kEps), 1);
  TrafficMatrix m(4);
  m.at(0, 1) = m.at(1, 0) = 4e9;
  m.at(2, 3) = m.at(3, 2) = 4e9;
  m.at(0, 2) = m.at(1, 3) = 1e9;
  RegionPlan p = MustPlan(r, m, Algorithm::kImproved);
  EXPECT_EQ(CountBetween(p.circuits, 0, 1), 1);
  EXPECT_EQ(CountBetween(p.circuits, 2, 3), 1);
  // Host 0: 4e9 to host 1 split circuit/EPS, 1e9 to host 2 on EPS: 2.5 s.
  EXPECT_DOUBLE_EQ(p.completion_s, 2.5);
  EXPECT_DOUBLE_EQ(p.completion_s, BruteForceOptimum(r, FluidModel(m, r.input().eps_Bps)));
}

TEST(PlannerTest, ImprovedDoublesTheHotPairWhereGreedySpreads) {
  // Three hosts, two ports each. Pair 0-1 is hot; the light pairs fit on EPS.
  // Greedy makes a triangle (one circuit per pair); the optimum puts both
  // ports of 0 and 1 on their pair.
  Region r = MustRegion(MakeRegionInput(3, 2, kGbps, kEps), 2);
  TrafficMatrix m(3);
  m.at(0, 1) = m.at(1, 0) = 9e9;
  m.at(0, 2) = m.at(2, 0) = m.at(1, 2) = m.at(2, 1) = 1e9;
  const FluidModel model(m, r.input().eps_Bps);
  RegionPlan greedy = MustPlan(r, m, Algorithm::kGreedy);
  RegionPlan best = MustPlan(r, m, Algorithm::kImproved);
  EXPECT_EQ(CountBetween(greedy.circuits, 0, 1), 1);
  EXPECT_EQ(CountBetween(greedy.circuits, 0, 2), 1);
  EXPECT_EQ(CountBetween(greedy.circuits, 1, 2), 1);
  EXPECT_EQ(CountBetween(best.circuits, 0, 1), 2);
  // 10e9 bytes over 3e9 B/s.
  EXPECT_DOUBLE_EQ(best.completion_s, 10.0 / 3);
  EXPECT_DOUBLE_EQ(best.completion_s, BruteForceOptimum(r, model));
  EXPECT_GT(greedy.completion_s, best.completion_s * 1.1);
  EXPECT_FALSE(best.used_greedy);
}

TEST(PlannerTest, GreedyIsThePapersAlgorithm) {
  // Weights (symmetrised): 0-1: 10, 2-3: 8, 0-2: 6, 1-3: 1. alpha 2.
  // Greedy: 0-1 (then demoted to 0.1), 2-3 (demoted to 0.08), 0-2, 1-3; all
  // ports used, so no second circuit anywhere.
  Region r = MustRegion(MakeRegionInput(4, 2, kGbps, kEps), 2);
  TrafficMatrix m(4);
  m.at(0, 1) = 10;
  m.at(2, 3) = 8;
  m.at(2, 0) = 6;
  m.at(3, 1) = 1;
  RegionPlan p = MustPlan(r, m, Algorithm::kGreedy);
  EXPECT_EQ(p.circuits.size(), 4u);
  EXPECT_EQ(CountBetween(p.circuits, 0, 1), 1);
  EXPECT_EQ(CountBetween(p.circuits, 2, 3), 1);
  EXPECT_EQ(CountBetween(p.circuits, 0, 2), 1);
  EXPECT_EQ(CountBetween(p.circuits, 1, 3), 1);
  // A pair without traffic never gets a circuit from greedy.
  TrafficMatrix one(4);
  one.at(0, 1) = 5;
  RegionPlan q = MustPlan(r, one, Algorithm::kGreedy);
  EXPECT_EQ(q.circuits.size(), 2u);
  EXPECT_EQ(CountBetween(q.circuits, 0, 1), 2);
}

TEST(PlannerTest, MatchesExhaustiveOptimumOnTinyRegions) {
  std::mt19937_64 rng(7);
  int optimal = 0, total = 0;
  for (int trial = 0; trial < 60; ++trial) {
    const int n = 3 + static_cast<int>(rng() % 2);
    const int alpha = 1 + static_cast<int>(rng() % 2);
    Region r = MustRegion(MakeRegionInput(n, alpha, kGbps, kEps * (0.2 + (rng() % 3))), alpha);
    TrafficMatrix m = testing_util::RandomDemand(n, rng, 4e9);
    const FluidModel model(m, r.input().eps_Bps);
    const double opt = BruteForceOptimum(r, model);
    RegionPlan p = MustPlan(r, m, Algorithm::kImproved);
    EXPECT_GE(p.completion_s, opt * (1 - 1e-9));
    // A heuristic, but on these sizes it should rarely miss, and never by much.
    EXPECT_LE(p.completion_s, opt * 1.25) << "trial " << trial;
    ++total;
    optimal += p.completion_s <= opt * (1 + 1e-9);
  }
  EXPECT_GE(optimal, total * 9 / 10) << optimal << " of " << total << " optimal";
}

TEST(PlannerTest, LocalSearchBudgetAndRoundsOnlyCutTheSearch) {
  // A budget too small for a second round, or no rounds at all, still gives
  // well-formed plans no worse than greedy's; without a budget the search
  // does at least as well as with one.
  std::mt19937_64 rng(7);
  for (int trial = 0; trial < 20; ++trial) {
    Region r = MustRegion(MakeRegionInput(16, 4, kGbps, kEps), 4);
    const TrafficMatrix m = testing_util::RandomDemand(16, rng, 1e9);
    const std::vector<PlannedCircuit> current = testing_util::RandomCircuits(r, rng);
    PlannerOptions o;
    o.algorithm = Algorithm::kGreedy;
    absl::StatusOr<RegionPlan> greedy = PlanRegion(r, m, current, o);
    o.algorithm = Algorithm::kImproved;
    absl::StatusOr<RegionPlan> full = PlanRegion(r, m, current, o);
    o.local_search_budget_us = 1e-3;
    absl::StatusOr<RegionPlan> budget = PlanRegion(r, m, current, o);
    o.local_search_budget_us = 0;
    o.local_search_rounds = 0;
    absl::StatusOr<RegionPlan> none = PlanRegion(r, m, current, o);
    ASSERT_TRUE(greedy.ok() && full.ok() && budget.ok() && none.ok());
    for (const RegionPlan* p : {&*full, &*budget, &*none}) {
      ExpectWellFormed(r, p->circuits);
      EXPECT_LE(p->completion_s, greedy->completion_s * (1 + 1e-9)) << "trial " << trial;
    }
    EXPECT_LE(full->completion_s, none->completion_s * (1 + 1e-9)) << "trial " << trial;
  }
}

TEST(PlannerTest, KeepsCurrentCircuitsAndTheirPortsOnTies) {
  // Uniform traffic on 4 hosts with 1 port: any perfect matching is optimal;
  // the current one must be kept, port for port.
  Region r = MustRegion(MakeRegionInput(4, 1, kGbps, kEps), 1);
  TrafficMatrix m(4);
  for (int i = 0; i < 4; ++i) {
    for (int j = 0; j < 4; ++j) m.at(i, j) = i == j ? 0 : 1e9;
  }
  const std::vector<PlannedCircuit> current = {{{0, 0}, {3, 0}}, {{1, 0}, {2, 0}}};
  RegionPlan p = MustPlan(r, m, Algorithm::kImproved, current);
  EXPECT_EQ(p.ports_changed, 0);
  EXPECT_EQ(p.circuits_kept, 2);
  EXPECT_EQ(CountBetween(p.circuits, 0, 3), 1);
  EXPECT_EQ(CountBetween(p.circuits, 1, 2), 1);
  EXPECT_DOUBLE_EQ(p.completion_s, p.current_completion_s);
  EXPECT_FALSE(Decide(p, DecideOptions{.switch_s = 0.001}).reconfigure);
}

TEST(PlannerTest, NewCircuitsReuseFreedPortsBeforeIdleOnes) {
  // Host 0 has ports 0,1,2; currently port 1 joins host 1 and ports 0, 2 are
  // idle. The traffic now wants 0-2 only: the new circuit should take the
  // port freed by 0-1 (port 1), leaving the idle ports untouched.
  RegionInput in = MakeRegionInput(3, 3, kGbps, kEps);
  Region r = MustRegion(in, 3);
  TrafficMatrix m(3);
  m.at(0, 2) = 1e9;
  const std::vector<PlannedCircuit> current = {{{0, 1}, {1, 1}}, {{2, 1}, {1, 2}}};
  PlannerOptions o;
  o.algorithm = Algorithm::kGreedy;
  absl::StatusOr<RegionPlan> p = PlanRegion(r, m, current, o);
  ASSERT_TRUE(p.ok()) << p.status();
  // Greedy: three circuits 0-2 (all ports of hosts 0 and 2).
  EXPECT_EQ(CountBetween(p->circuits, 0, 2), 3);
  ExpectWellFormed(r, p->circuits);
  // Every port of hosts 0 and 2 changes (all were idle or re-pointed); host
  // 1's ports 1 and 2 go dark; its idle port 0 stays untouched.
  EXPECT_EQ(p->ports_changed, 3 + 3 + 2);
  // The first new circuit uses the freed ports (0,1) and (2,1).
  bool freed_pair = false;
  for (const PlannedCircuit& c : p->circuits) {
    freed_pair |= (c.a == PortRef{0, 1} && c.b == PortRef{2, 1}) ||
                  (c.a == PortRef{2, 1} && c.b == PortRef{0, 1});
  }
  EXPECT_TRUE(freed_pair);
}

TEST(PlannerTest, ReplanningTheSameTrafficChangesNothing) {
  std::mt19937_64 rng(11);
  for (int trial = 0; trial < 20; ++trial) {
    const int n = 4 + static_cast<int>(rng() % 9);
    Region r = MustRegion(MakeRegionInput(n, 4, kGbps, kEps), 4);
    TrafficMatrix m = testing_util::RandomDemand(n, rng, 4e9);
    for (Algorithm a : {Algorithm::kGreedy, Algorithm::kImproved}) {
      RegionPlan first = MustPlan(r, m, a, testing_util::RandomCircuits(r, rng));
      RegionPlan again = MustPlan(r, m, a, first.circuits);
      EXPECT_EQ(again.ports_changed, 0) << "trial " << trial;
      EXPECT_EQ(again.circuits_kept, static_cast<int>(first.circuits.size()));
      EXPECT_DOUBLE_EQ(again.completion_s, first.completion_s);
      EXPECT_FALSE(Decide(again, DecideOptions{.switch_s = 0}).reconfigure);
    }
  }
}

TEST(DecideTest, GainAgainstSwitchingCost) {
  RegionPlan p;
  p.current_completion_s = 0.100;
  p.completion_s = 0.060;
  p.ports_changed = 4;
  Decision d = Decide(p, DecideOptions{.switch_s = 0.025});
  EXPECT_TRUE(d.reconfigure);
  EXPECT_DOUBLE_EQ(d.gain_s, 0.040);
  EXPECT_DOUBLE_EQ(d.cost_s, 0.025);
  d = Decide(p, DecideOptions{.switch_s = 0.050});
  EXPECT_FALSE(d.reconfigure);
  // Served twice (dispatch and combine): 80 ms of gain pays for 50 ms.
  EXPECT_TRUE(Decide(p, DecideOptions{.switch_s = 0.050, .uses = 2}).reconfigure);
  // Switching hidden behind backward compute costs nothing.
  d = Decide(p, DecideOptions{.switch_s = 0.1, .overlap_s = 0.2});
  EXPECT_DOUBLE_EQ(d.cost_s, 0);
  EXPECT_TRUE(d.reconfigure);
  // The protocol's time adds to the switching: 25 + 20 ms = 45 ms, over the
  // 40 ms gain; a 10 ms window hides 10 of it (35 ms, so it pays again).
  d = Decide(p, DecideOptions{.switch_s = 0.025, .protocol_s = 0.020});
  EXPECT_DOUBLE_EQ(d.cost_s, 0.045);
  EXPECT_FALSE(d.reconfigure);
  d = Decide(p, DecideOptions{.switch_s = 0.025, .protocol_s = 0.020, .overlap_s = 0.010});
  EXPECT_NEAR(d.cost_s, 0.035, 1e-12);
  EXPECT_TRUE(d.reconfigure);
  // No port changes: nothing to do.
  p.ports_changed = 0;
  EXPECT_FALSE(Decide(p, DecideOptions{.switch_s = 0}).reconfigure);
  // A current topology that cannot finish is always worth leaving.
  p.ports_changed = 2;
  p.current_completion_s = kInfinity;
  EXPECT_TRUE(Decide(p, DecideOptions{.switch_s = 10}).reconfigure);
}

constexpr char kSpec[] = R"(name: two-regions
ocs_switches:
  - {name: sw, ports: 16}
hosts:
  - name: a0
    nics:
      - {name: eps0, role: eps, address: 10.10.0.1, gbps: 8}
      - {name: ocs0, role: ocs, address: 10.20.0.1, gbps: 8, switch: sw, port: 1}
      - {name: ocs1, role: ocs, address: 10.20.0.2, gbps: 8, switch: sw, port: 2}
  - name: a1
    nics:
      - {name: eps0, role: eps, address: 10.10.0.2, gbps: 8}
      - {name: ocs0, role: ocs, address: 10.20.1.1, gbps: 8, switch: sw, port: 3}
      - {name: ocs1, role: ocs, address: 10.20.1.2, gbps: 8, switch: sw, port: 4}
  - name: a2
    nics:
      - {name: eps0, role: eps, address: 10.10.0.3, gbps: 8}
      - {name: ocs0, role: ocs, address: 10.20.2.1, gbps: 8, switch: sw, port: 5}
      - {name: ocs1, role: ocs, address: 10.20.2.2, gbps: 8, switch: sw, port: 6}
  - name: b0
    nics:
      - {name: eps0, role: eps, address: 10.10.1.1, gbps: 8}
      - {name: ocs0, role: ocs, address: 10.21.0.1, gbps: 8, switch: sw, port: 9}
  - name: b1
    nics:
      - {name: eps0, role: eps, address: 10.10.1.2, gbps: 8}
      - {name: ocs0, role: ocs, address: 10.21.1.1, gbps: 8, switch: sw, port: 10}
regions:
  - {name: ra, hosts: [a0, a1, a2]}
  - {name: rb, hosts: [b0, b1]}
circuits:
  - {switch: sw, ports: [1, 3]}
  - {switch: sw, ports: [9, 10]}
)";

TEST(ClusterPlannerTest, PlansEachRegionFromTheSpec) {
  absl::StatusOr<cluster::ClusterSpec> spec = cluster::ClusterSpec::Parse(kSpec, "test.yaml");
  ASSERT_TRUE(spec.ok()) << spec.status();
  absl::StatusOr<ClusterPlanner> cp = ClusterPlanner::Create(*spec, 2);
  ASSERT_TRUE(cp.ok()) << cp.status();
  ASSERT_EQ(cp->regions().size(), 2u);
  EXPECT_DOUBLE_EQ(cp->regions()[0].input().eps_Bps[0], 1e9);
  TrafficMatrix ma(3), mb(2);
  ma.at(0, 2) = ma.at(2, 0) = 8e9;  // a0-a2 hot; the current a0-a1 circuit is useless
  mb.at(0, 1) = 1e9;
  absl::StatusOr<ClusterDecision> d =
      cp->Plan({ma, mb}, spec->circuits, PlannerOptions{}, DecideOptions{.switch_s = 0.025});
  ASSERT_TRUE(d.ok()) << d.status();
  ASSERT_EQ(d->regions.size(), 2u);
  EXPECT_TRUE(d->regions[0].decision.reconfigure);
  EXPECT_EQ(CountBetween(d->regions[0].plan.circuits, 0, 2), 2);
  // Region rb already has its only possible circuit: nothing changes.
  EXPECT_FALSE(d->regions[1].decision.reconfigure);
  EXPECT_EQ(d->regions[1].plan.ports_changed, 0);
  // The topology to apply is valid for the spec (ports, regions).
  EXPECT_TRUE(cluster::ValidateCircuits(*spec, d->circuits).ok());
  EXPECT_EQ(d->circuits.size(), 3u);
  // Host groups instead of the spec's regions.
  absl::StatusOr<ClusterPlanner> groups = ClusterPlanner::Create(*spec, 2, {{"a0", "a1"}});
  ASSERT_TRUE(groups.ok()) << groups.status();
  EXPECT_EQ(groups->regions().size(), 1u);
  EXPECT_THAT(std::string(groups->SplitCircuits(spec->circuits).status().message()),
              HasSubstr("sw:9 is not an OCS port of any region"));
}

}  // namespace
}  // namespace mixnet::planner
