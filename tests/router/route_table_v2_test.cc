// Tests for router v2: v1 tables carry equal weights; v2 weights sum to 1 per
// peer, split a pair's bytes between its circuit and EPS as the fluid model
// says, relay through a host with circuits to both ends, keep v1 paths for
// silent peers and peers outside the region; a seeded property test that the
// split rebuilt from every host's table never finishes later than EPS-only or
// circuit-only routing; bad traffic matrices. Single-threaded.
#include "runtime/router/route_table_v2.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <random>
#include <string>

#include "absl/strings/str_cat.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "runtime/planner/fluid_model.h"
#include "runtime/planner/routing.h"
#include "tests/planner/routing_time.h"

namespace mixnet::router {
namespace {

using cluster::CircuitSpec;
using cluster::ClusterSpec;
using ::testing::HasSubstr;

// Region r of h0..h3 (one EPS NIC, two OCS NICs each, 8 Gb/s = 1e9 B/s),
// and h4 outside any region.
constexpr char kSpec[] = R"(name: v2
ocs_switches:
  - {name: sw, ports: 16}
hosts:
  - name: h0
    nics:
      - {name: eps0, role: eps, address: 10.10.0.1, gbps: 8}
      - {name: ocs0, role: ocs, address: 10.20.0.1, gbps: 8, switch: sw, port: 1}
      - {name: ocs1, role: ocs, address: 10.20.0.2, gbps: 8, switch: sw, port: 2}
  - name: h1
    nics:
      - {name: eps0, role: eps, address: 10.10.0.2, gbps: 8}
      - {name: ocs0, role: ocs, address: 10.20.1.1, gbps: 8, switch: sw, port: 3}
      - {name: ocs1, role: ocs, address: 10.20.1.2, gbps: 8, switch: sw, port: 4}
  - name: h2
    nics:
      - {name: eps0, role: eps, address: 10.10.0.3, gbps: 8}
      - {name: ocs0, role: ocs, address: 10.20.2.1, gbps: 8, switch: sw, port: 5}
      - {name: ocs1, role: ocs, address: 10.20.2.2, gbps: 8, switch: sw, port: 6}
  - name: h3
    nics:
      - {name: eps0, role: eps, address: 10.10.0.4, gbps: 8}
      - {name: ocs0, role: ocs, address: 10.20.3.1, gbps: 8, switch: sw, port: 7}
      - {name: ocs1, role: ocs, address: 10.20.3.2, gbps: 8, switch: sw, port: 8}
  - name: h4
    nics:
      - {name: eps0, role: eps, address: 10.10.0.5, gbps: 8}
regions:
  - {name: r, hosts: [h0, h1, h2, h3]}
)";

ClusterSpec Spec() {
  absl::StatusOr<ClusterSpec> spec = ClusterSpec::Parse(kSpec, "v2.yaml");
  EXPECT_TRUE(spec.ok()) << spec.status();
  return *spec;
}

RouteTable MustV2(const ClusterSpec& spec, const Topology& topo, const std::string& host,
                  const TrafficMatrix& m, bool relay = true) {
  absl::StatusOr<RouteTable> t = BuildRouteTableV2(spec, topo, host, m, RouterV2Options{relay});
  EXPECT_TRUE(t.ok()) << t.status();
  return t.ok() ? *t : RouteTable{};
}

double WeightOf(const std::vector<Path>& paths, PathKind kind) {
  double w = 0;
  for (const Path& p : paths) w += p.kind == kind ? p.weight : 0;
  return w;
}

void ExpectWeightsSumToOne(const RouteTable& t) {
  for (const auto& [peer, paths] : t.all()) {
    ASSERT_FALSE(paths.empty()) << peer;
    double sum = 0;
    for (const Path& p : paths) {
      EXPECT_GT(p.weight, 0) << peer;
      sum += p.weight;
    }
    EXPECT_NEAR(sum, 1, 1e-12) << peer;
  }
}

TEST(RouteTableV2Test, V1HasEqualWeights) {
  ClusterSpec spec = Spec();
  absl::StatusOr<RouteTable> t =
      BuildRouteTable(spec, Topology{1, {{"sw", 1, 3}, {"sw", 2, 4}}}, "h0");
  ASSERT_TRUE(t.ok()) << t.status();
  EXPECT_EQ(t->version(), 1);
  ASSERT_EQ(t->PathsTo("h1").size(), 2u);
  for (const Path& p : t->PathsTo("h1")) EXPECT_DOUBLE_EQ(p.weight, 0.5);
  ExpectWeightsSumToOne(*t);
  EXPECT_EQ(PathKindName(PathKind::kRelay), "relay");
}

TEST(RouteTableV2Test, SplitsHotPairBetweenCircuitAndEps) {
  ClusterSpec spec = Spec();
  TrafficMatrix m(5);
  m.at(0, 1) = 3e9;  // one 1e9 B/s circuit and 1e9 B/s EPS: 1.5 s, half each
  const Topology topo{7, {{"sw", 1, 3}}};
  RouteTable t = MustV2(spec, topo, "h0", m);
  EXPECT_EQ(t.version(), 2);
  EXPECT_EQ(t.epoch(), 7u);
  EXPECT_NEAR(t.predicted_completion_s(), 1.5, 1e-9);
  const std::vector<Path>& p = t.PathsTo("h1");
  EXPECT_NEAR(WeightOf(p, PathKind::kOcs), 0.5, 1e-9);
  EXPECT_NEAR(WeightOf(p, PathKind::kEps), 0.5, 1e-9);
  ExpectWeightsSumToOne(t);
  // Silent peers and the host outside the region keep v1's paths.
  absl::StatusOr<RouteTable> v1 = BuildRouteTable(spec, topo, "h0");
  ASSERT_TRUE(v1.ok());
  for (const std::string peer : {"h0", "h2", "h3", "h4"}) {
    ASSERT_EQ(t.PathsTo(peer).size(), v1->PathsTo(peer).size()) << peer;
    for (size_t i = 0; i < t.PathsTo(peer).size(); ++i) {
      EXPECT_EQ(t.PathsTo(peer)[i].local_nic, v1->PathsTo(peer)[i].local_nic);
      EXPECT_EQ(t.PathsTo(peer)[i].kind, v1->PathsTo(peer)[i].kind);
    }
  }
  // Without traffic on a circuit pair, v1 keeps the circuit; v2 with no bytes too.
  RouteTable silent = MustV2(spec, topo, "h1", TrafficMatrix(5));
  EXPECT_EQ(silent.PathsTo("h0")[0].kind, PathKind::kOcs);
}

TEST(RouteTableV2Test, RelaysThroughAHostWithCircuitsToBothEnds) {
  ClusterSpec spec = Spec();
  TrafficMatrix m(5);
  m.at(0, 2) = 2e9;  // h0 -> h2 has no circuit; h1 joins both
  const Topology topo{1, {{"sw", 1, 3}, {"sw", 4, 5}}};
  RouteTable t = MustV2(spec, topo, "h0", m);
  const std::vector<Path>& p = t.PathsTo("h2");
  // EPS alone: 2 s. EPS plus the relay: 1 s, half each.
  EXPECT_NEAR(t.predicted_completion_s(), 1, 1e-3);
  EXPECT_NEAR(WeightOf(p, PathKind::kRelay), 0.5, 1e-3);
  EXPECT_NEAR(WeightOf(p, PathKind::kEps), 0.5, 1e-3);
  for (const Path& path : p) {
    if (path.kind != PathKind::kRelay) continue;
    EXPECT_EQ(path.relay_host, "h1");
    EXPECT_EQ(path.local_nic, "ocs0");
    EXPECT_EQ(path.remote_nic, "ocs0");
    EXPECT_EQ(path.relay_nic, "ocs1");
    EXPECT_EQ(path.peer_nic, "ocs0");
    EXPECT_EQ(path.peer_address, "10.20.2.1");
  }
  // Relays off: EPS only.
  RouteTable direct = MustV2(spec, topo, "h0", m, /*relay=*/false);
  EXPECT_NEAR(direct.predicted_completion_s(), 2, 1e-9);
  EXPECT_DOUBLE_EQ(WeightOf(direct.PathsTo("h2"), PathKind::kEps), 1);
}

// RouterV2Options::split replaces the water-filling: the table's weights and
// predicted time are the given function's (here a fixed split that sends a
// quarter of h0 -> h2 through h1, where the water-filling sends half), and
// the function sees the region's demand and the relay option.
TEST(RouteTableV2Test, TakesTheSplitOfAGivenFunction) {
  ClusterSpec spec = Spec();
  TrafficMatrix m(5);
  m.at(0, 2) = 2e9;
  const Topology topo{1, {{"sw", 1, 3}, {"sw", 4, 5}}};
  int calls = 0;
  RouterV2Options o;
  o.relay = true;
  o.split = [&calls](const planner::FluidModel& model, const planner::Adjacency&,
                     const planner::RoutingOptions& ro) {
    ++calls;
    EXPECT_TRUE(ro.relay);
    EXPECT_EQ(model.hosts(), 4);  // the region, not h4
    EXPECT_DOUBLE_EQ(model.demand(0, 2), 2e9);
    planner::RegionRouting r;
    r.hosts = model.hosts();
    r.pairs.assign(16, planner::PairSplit{});
    r.at(0, 2).eps = 1.5e9;
    r.at(0, 2).relay = {{1, 0.5e9}};
    r.completion_s = 1.5;
    return r;
  };
  absl::StatusOr<RouteTable> t = BuildRouteTableV2(spec, topo, "h0", m, o);
  ASSERT_TRUE(t.ok()) << t.status();
  EXPECT_EQ(calls, 1);
  EXPECT_DOUBLE_EQ(t->predicted_completion_s(), 1.5);
  EXPECT_NEAR(WeightOf(t->PathsTo("h2"), PathKind::kRelay), 0.25, 1e-12);
  EXPECT_NEAR(WeightOf(t->PathsTo("h2"), PathKind::kEps), 0.75, 1e-12);
  ExpectWeightsSumToOne(*t);
}

TEST(RouteTableV2Test, RelaysWithOneHopOverEps) {
  ClusterSpec spec = Spec();
  const Topology topo{1, {{"sw", 1, 3}}};  // h0 ocs0 - h1 ocs0 only
  // Hot receiver: h2 and h3 send h0 2e9 bytes each. EPS alone: h0's ingress,
  // 4 s. The senders' egress bounds it at 2 s, met by 2e9 bytes over
  // h2|h3 -EPS-> h1 -circuit-> h0 (h1's ingress and the circuit, 2 s each).
  TrafficMatrix in(5);
  in.at(2, 0) = 2e9;
  in.at(3, 0) = 2e9;
  double relayed = 0;
  for (const std::string from : {"h2", "h3"}) {
    RouteTable t = MustV2(spec, topo, from, in);
    EXPECT_NEAR(t.predicted_completion_s(), 2, 2e-3) << from;
    ExpectWeightsSumToOne(t);
    for (const Path& path : t.PathsTo("h0")) {
      if (path.kind != PathKind::kRelay) continue;
      relayed += path.weight * 2e9;
      EXPECT_EQ(path.first_hop, PathKind::kEps) << from;
      EXPECT_EQ(path.second_hop, PathKind::kOcs) << from;
      EXPECT_EQ(path.relay_host, "h1");
      EXPECT_EQ(path.local_nic, "eps0");
      EXPECT_EQ(path.remote_address, "10.10.0.2");
      EXPECT_EQ(path.relay_nic, "ocs0");
      EXPECT_EQ(path.peer_nic, "ocs0");
      EXPECT_EQ(path.peer_address, "10.20.0.1");
    }
  }
  EXPECT_NEAR(relayed, 2e9, 4e6);
  // Hot sender: h0 sends h2 and h3 2e9 bytes each; 2e9 bytes over
  // h0 -circuit-> h1 -EPS-> h2|h3.
  TrafficMatrix out(5);
  out.at(0, 2) = 2e9;
  out.at(0, 3) = 2e9;
  RouteTable t = MustV2(spec, topo, "h0", out);
  EXPECT_NEAR(t.predicted_completion_s(), 2, 2e-3);
  relayed = 0;
  for (const std::string to : {"h2", "h3"}) {
    for (const Path& path : t.PathsTo(to)) {
      if (path.kind != PathKind::kRelay) continue;
      relayed += path.weight * 2e9;
      EXPECT_EQ(path.first_hop, PathKind::kOcs) << to;
      EXPECT_EQ(path.second_hop, PathKind::kEps) << to;
      EXPECT_EQ(path.local_nic, "ocs0");
      EXPECT_EQ(path.remote_nic, "ocs0");
      EXPECT_EQ(path.relay_nic, "eps0");
      EXPECT_EQ(path.peer_nic, "eps0");
      EXPECT_EQ(path.peer_address, to == "h2" ? "10.10.0.3" : "10.10.0.4");
    }
  }
  EXPECT_NEAR(relayed, 2e9, 4e6);
}

// Rebuilds the region-wide split from every host's table and scores it with
// the test's own evaluator (tests/planner/routing_time.h), not the planner's.
double ScoreTables(const ClusterSpec& spec, const Topology& topo, const TrafficMatrix& m,
                   int region_hosts, const std::vector<RouteTable>& tables) {
  const int n = region_hosts;
  TrafficMatrix sub(n);
  std::vector<double> eps(n, 1e9);
  for (int i = 0; i < n; ++i) {
    for (int j = 0; j < n; ++j) sub.at(i, j) = m.at(i, j);
  }
  std::vector<planner::UndirectedCircuit> circuits;
  for (const CircuitSpec& c : topo.circuits) {
    circuits.push_back({(c.port_a - 1) / 2, (c.port_b - 1) / 2, 1e9});
  }
  planner::RegionRouting r;
  r.hosts = n;
  r.pairs.resize(n * n);
  for (int i = 0; i < n; ++i) {
    for (int j = 0; j < n; ++j) {
      if (i == j) continue;
      for (const Path& p : tables[i].PathsTo(spec.hosts[j].name)) {
        const double bytes = p.weight * sub.at(i, j);
        if (p.kind == PathKind::kOcs) r.at(i, j).circuit += bytes;
        if (p.kind == PathKind::kEps) r.at(i, j).eps += bytes;
        if (p.kind == PathKind::kRelay) {
          const int k = p.relay_host[1] - '0';
          (p.first_hop == PathKind::kEps    ? r.at(i, j).eps_circuit
           : p.second_hop == PathKind::kEps ? r.at(i, j).circuit_eps
                                            : r.at(i, j).relay)
              .emplace_back(k, bytes);
        }
      }
    }
  }
  return routing_time::RoutingTime(eps, circuits, r);
}

TEST(RouteTableV2Test, NeverSlowerThanEpsOnlyOrCircuitOnly) {
  ClusterSpec spec = Spec();
  std::mt19937_64 rng(5);
  for (int trial = 0; trial < 40; ++trial) {
    // Random valid circuits over ports 1..8 (hosts 0..3, two ports each).
    std::vector<int> ports = {1, 2, 3, 4, 5, 6, 7, 8};
    std::shuffle(ports.begin(), ports.end(), rng);
    Topology topo{static_cast<uint64_t>(trial), {}};
    for (size_t i = 0; i + 1 < ports.size(); i += 2) {
      if ((ports[i] - 1) / 2 == (ports[i + 1] - 1) / 2 || rng() % 4 == 0) continue;
      topo.circuits.push_back({"sw", ports[i], ports[i + 1]});
    }
    TrafficMatrix m(5);
    std::uniform_real_distribution<double> u(0, 3e9);
    for (int i = 0; i < 4; ++i) {
      for (int j = 0; j < 4; ++j) m.at(i, j) = (i == j || rng() % 3 == 0) ? 0 : u(rng);
    }
    m.at(0, 4) = 1e9;  // outside the region: ignored by the split
    std::vector<RouteTable> tables, v1;
    for (int h = 0; h < 4; ++h) {
      tables.push_back(MustV2(spec, topo, spec.hosts[h].name, m));
      absl::StatusOr<RouteTable> t = BuildRouteTable(spec, topo, spec.hosts[h].name);
      ASSERT_TRUE(t.ok()) << t.status();
      v1.push_back(*t);
      ExpectWeightsSumToOne(tables.back());
      EXPECT_EQ(tables.back().PathsTo("h4").size(), 1u);
    }
    TrafficMatrix sub(4);
    for (int i = 0; i < 4; ++i) {
      for (int j = 0; j < 4; ++j) sub.at(i, j) = m.at(i, j);
    }
    // EPS only: the busiest host's egress or ingress over its 1 GB/s EPS NIC.
    double eps_only = 0;
    for (int h = 0; h < 4; ++h) {
      double out = 0, in = 0;
      for (int j = 0; j < 4; ++j) out += sub.at(h, j), in += sub.at(j, h);
      eps_only = std::max({eps_only, out / 1e9, in / 1e9});
    }
    const double v2 = ScoreTables(spec, topo, m, 4, tables);
    const double circuit_only = ScoreTables(spec, topo, m, 4, v1);  // v1 = circuits if any
    SCOPED_TRACE(testing::Message() << "trial " << trial);
    EXPECT_LE(v2, eps_only * (1 + 1e-6));
    EXPECT_LE(v2, circuit_only * (1 + 1e-6));
    EXPECT_NEAR(v2, tables[0].predicted_completion_s(), 1e-6 * v2);
  }
}

TEST(RouteTableV2Test, BadTraffic) {
  ClusterSpec spec = Spec();
  const Topology topo{1, {}};
  absl::StatusOr<RouteTable> t = BuildRouteTableV2(spec, topo, "h0", TrafficMatrix(4));
  EXPECT_EQ(t.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(t.status().message()),
              HasSubstr("traffic matrix is 4x4 but the spec has 5 hosts"));
  TrafficMatrix m(5);
  m.at(2, 3) = std::numeric_limits<double>::quiet_NaN();
  t = BuildRouteTableV2(spec, topo, "h0", m);
  EXPECT_EQ(t.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(t.status().message()),
              HasSubstr("traffic from host h2 to host h3 is nan"));
  m.at(2, 3) = -1;
  t = BuildRouteTableV2(spec, topo, "h0", m);
  EXPECT_THAT(std::string(t.status().message()), HasSubstr("is -1 bytes"));
  // v1's checks still apply.
  t = BuildRouteTableV2(spec, Topology{1, {{"sw", 1, 2}}}, "h0", TrafficMatrix(5));
  EXPECT_EQ(t.status().code(), absl::StatusCode::kInvalidArgument);
  t = BuildRouteTableV2(spec, topo, "nobody", TrafficMatrix(5));
  EXPECT_EQ(t.status().code(), absl::StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace mixnet::router

namespace mixnet::router {
namespace {

// A plan over a subset of the spec's hosts lands in spec order; EpsShare
// reads the split back (hand-worked: 3e9 B to one 1e9 B/s circuit with 1e9
// B/s of EPS: half each; a pair of v1 circuits: 0; a pair with no circuit: 1).
TEST(RoutingPlanTest, PlanDemandAndEpsShare) {
  ClusterSpec spec = Spec();
  RoutingPlan plan;
  plan.hosts = {"h1", "h0"};
  plan.bytes = {0, 5, 3e9, 0};  // h1 -> h0: 5 B; h0 -> h1: 3e9 B
  absl::StatusOr<TrafficMatrix> m = PlanDemand(spec, plan);
  ASSERT_TRUE(m.ok()) << m.status();
  ASSERT_EQ(m->hosts(), 5);
  EXPECT_EQ(m->at(0, 1), 3e9);
  EXPECT_EQ(m->at(1, 0), 5);
  EXPECT_EQ(m->OffDiagonalTotal(), 3e9 + 5);
  const Topology topo{3, {{"sw", 1, 3}}};
  RouteTable t = MustV2(spec, topo, "h0", *m);
  EXPECT_NEAR(EpsShare(t, "h1"), 0.5, 1e-9);
  EXPECT_EQ(EpsShare(t, "h2"), 1.0);  // no circuit: all EPS
  absl::StatusOr<RouteTable> v1 = BuildRouteTable(spec, topo, "h0");
  ASSERT_TRUE(v1.ok());
  EXPECT_EQ(EpsShare(*v1, "h1"), 0.0);
}

TEST(RoutingPlanTest, PrefersReverseWhenTheCallLooksLikeTheTranspose) {
  // The plan: this host sends peer 0 10 bytes and receives 1 from it; peer 1
  // nothing either way. A call sending 1 and receiving 10 (the combine):
  // 1 x 1 + 10 x 10 = 101 on the reverse against 1 x 10 + 10 x 1 = 20.
  const std::vector<double> to = {10, 0}, from = {1, 0};
  EXPECT_TRUE(PrefersReverse({1, 0}, {10, 0}, to, from));
  EXPECT_FALSE(PrefersReverse({10, 0}, {1, 0}, to, from));  // the dispatch
  // A symmetric plan ties: the plan.
  EXPECT_FALSE(PrefersReverse({1, 5}, {10, 2}, {3, 3}, {3, 3}));
  // Sizes that differ: the plan.
  EXPECT_FALSE(PrefersReverse({1}, {10, 0}, to, from));
}

TEST(RoutingPlanTest, BadPlans) {
  ClusterSpec spec = Spec();
  auto err = [&](RoutingPlan p) { return PlanDemand(spec, p).status(); };
  RoutingPlan ok;
  ok.hosts = {"h0", "h1"};
  ok.bytes = {0, 1, 1, 0};
  RoutingPlan p = ok;
  p.version = 1;
  EXPECT_THAT(err(p).message(), HasSubstr("version 1 is not 2"));
  p = ok;
  p.bytes.push_back(1);
  EXPECT_THAT(err(p).message(), HasSubstr("5 matrix entries for 2 hosts"));
  p = ok;
  p.hosts[1] = "nope";
  EXPECT_THAT(err(p).message(), HasSubstr("host 'nope' is not in cluster spec"));
  p = ok;
  p.hosts[1] = "h0";
  EXPECT_THAT(err(p).message(), HasSubstr("'h0' is listed twice"));
  p = ok;
  p.bytes[1] = std::numeric_limits<double>::quiet_NaN();
  EXPECT_THAT(err(p).message(), HasSubstr("from host h0 to host h1 is nan"));
  EXPECT_EQ(err(p).code(), absl::StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace mixnet::router
