// The all-to-all oracle (runtime/planner/oracle.h) on hand-worked cases: 8
// hosts, 1 EPS NIC and 3 OCS NICs each, every NIC one byte/s, so every
// expected floor below is a fraction worked out on paper from the matrix and
// the circuits, not read from the code.
#include "runtime/planner/oracle.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cmath>
#include <vector>

namespace mixnet::planner {
namespace {

using ::testing::HasSubstr;

constexpr int kHosts = 8;

OracleFabric Fabric(int hosts = kHosts, int ports = 3) {
  OracleFabric f;
  f.eps_Bps.assign(hosts, 1.0);
  f.ocs_ports.assign(hosts, ports);
  f.ocs_port_Bps.assign(hosts, 1.0);
  return f;
}

std::vector<UndirectedCircuit> Circuits(std::initializer_list<std::pair<int, int>> pairs) {
  std::vector<UndirectedCircuit> out;
  for (auto [a, b] : pairs) out.push_back({a, b, 1.0});
  return out;
}

// Each host sends 3/4 of its byte to its partner (0-1, 2-3, 4-5, 6-7) and
// 1/24 to each of the other six.
TrafficMatrix PartnerMatrix() {
  TrafficMatrix m(kHosts);
  for (int i = 0; i < kHosts; ++i) {
    for (int j = 0; j < kHosts; ++j) {
      if (i != j) m.at(i, j) = (j == (i ^ 1)) ? 0.75 : 0.25 / 6;
    }
  }
  return m;
}

// Hosts 1..7 send one byte each to host 0.
TrafficMatrix IncastMatrix() {
  TrafficMatrix m(kHosts);
  for (int i = 1; i < kHosts; ++i) m.at(i, 0) = 1;
  return m;
}

// 1/7 of a byte from every host to every other.
TrafficMatrix UniformMatrix() {
  TrafficMatrix m(kHosts);
  for (int i = 0; i < kHosts; ++i) {
    for (int j = 0; j < kHosts; ++j) {
      if (i != j) m.at(i, j) = 1.0 / 7;
    }
  }
  return m;
}

// Partners: three circuits per pair carry the 3/4 in 1/4 s, EPS the six
// 1/24s in 1/4 s: the non-blocking floor (1 byte over 4 NICs) is met.
TEST(OracleTest, PartnerTrafficMeetsTheNonblockingFloor) {
  const OracleFabric f = Fabric();
  const TrafficMatrix m = PartnerMatrix();
  EXPECT_DOUBLE_EQ(*NonblockingFloor(m, f), 0.25);
  absl::StatusOr<double> installed = InstalledFloor(m, f,
                                                    Circuits({{0, 1},
                                                              {0, 1},
                                                              {0, 1},
                                                              {2, 3},
                                                              {2, 3},
                                                              {2, 3},
                                                              {4, 5},
                                                              {4, 5},
                                                              {4, 5},
                                                              {6, 7},
                                                              {6, 7},
                                                              {6, 7}}));
  ASSERT_TRUE(installed.ok()) << installed.status();
  EXPECT_NEAR(*installed, 0.25, 1e-9);
  absl::StatusOr<BestFloor> best = SearchBestFloor(m, f);
  ASSERT_TRUE(best.ok()) << best.status();
  EXPECT_NEAR(best->floor_s, 0.25, 1e-9);
  EXPECT_NEAR(best->lower_bound_s, 0.25, 1e-9);
  EXPECT_TRUE(best->at_bound);
  EXPECT_EQ(best->circuits.size(), 12u);
}

// Incast: host 0 takes 7 bytes over its 4 NICs, 7/4 s, but only when its
// three circuit partners also forward the four other senders' bytes (EPS,
// then their circuit). With direct paths alone those four share host 0's one
// EPS NIC: 4 s. Without any circuit at host 0 all 7 bytes cross its EPS NIC.
TEST(OracleTest, IncastNeedsEpsThenCircuitRelays) {
  const OracleFabric f = Fabric();
  const TrafficMatrix m = IncastMatrix();
  EXPECT_DOUBLE_EQ(*NonblockingFloor(m, f), 7.0 / 4);
  const std::vector<UndirectedCircuit> star = Circuits({{0, 1}, {0, 2}, {0, 3}});
  EXPECT_NEAR(*InstalledFloor(m, f, star), 7.0 / 4, 1e-9);
  EXPECT_NEAR(*InstalledFloor(m, f, star, {.two_hop = false}), 4.0, 1e-9);
  EXPECT_NEAR(*InstalledFloor(m, f, Circuits({{1, 2}, {3, 4}, {5, 6}})), 7.0, 1e-9);
  absl::StatusOr<BestFloor> best = SearchBestFloor(m, f);
  ASSERT_TRUE(best.ok()) << best.status();
  EXPECT_NEAR(best->floor_s, 7.0 / 4, 1e-9);
  EXPECT_TRUE(best->at_bound);
  absl::StatusOr<BestFloor> direct = SearchBestFloor(m, f, nullptr, {.two_hop = false});
  ASSERT_TRUE(direct.ok()) << direct.status();
  EXPECT_NEAR(direct->floor_s, 4.0, 1e-9);
}

// Uniform: with three circuit peers a host sends 3/7 direct on circuits, e on
// EPS (e <= T) and relays the other 4/7 - e over two hops; per host the
// egress links then carry e + 3/7 + 2 (4/7 - e) <= 4 T, so T >= 11/35 when e
// = T: 1.257x the non-blocking 1/4. The relaxation (3/7 of a circuit per
// pair, no relays needed) gives 1/4.
TEST(OracleTest, UniformCostsElevenThirtyFifths) {
  const OracleFabric f = Fabric();
  const TrafficMatrix m = UniformMatrix();
  EXPECT_DOUBLE_EQ(*NonblockingFloor(m, f), 0.25);
  absl::StatusOr<BestFloor> best = SearchBestFloor(m, f);
  ASSERT_TRUE(best.ok()) << best.status();
  EXPECT_NEAR(best->floor_s, 11.0 / 35, 1e-9);
  EXPECT_NEAR(best->lower_bound_s, 0.25, 1e-9);
  EXPECT_FALSE(best->at_bound);
  // A ring with chords (i ~ i+1, i ~ i+4) reaches it too.
  std::vector<UndirectedCircuit> ring;
  for (int i = 0; i < kHosts; ++i) ring.push_back({i, (i + 1) % kHosts, 1.0});
  for (int i = 0; i < kHosts / 2; ++i) ring.push_back({i, i + 4, 1.0});
  EXPECT_NEAR(*InstalledFloor(m, f, ring), 11.0 / 35, 1e-9);
}

// A start worse than the best set: the search never returns anything worse
// than it and still finds the partners' floor.
TEST(OracleTest, NeverWorseThanItsStart) {
  const OracleFabric f = Fabric();
  const TrafficMatrix m = PartnerMatrix();
  const std::vector<UndirectedCircuit> apart =
      Circuits({{0, 2}, {0, 4}, {0, 6}, {1, 3}, {1, 5}, {1, 7}, {2, 4}, {3, 5}, {6, 7}});
  absl::StatusOr<double> start = InstalledFloor(m, f, apart);
  ASSERT_TRUE(start.ok()) << start.status();
  EXPECT_GT(*start, 0.25);
  absl::StatusOr<BestFloor> best = SearchBestFloor(m, f, &apart);
  ASSERT_TRUE(best.ok()) << best.status();
  EXPECT_LE(best->floor_s, *start);
  EXPECT_NEAR(best->floor_s, 0.25, 1e-9);
  EXPECT_LE(best->evaluations, OracleOptions{}.max_evaluations);
}

TEST(OracleTest, EmptyAndDegenerateInputsHaveClearAnswers) {
  // No bytes: every floor is 0.
  const OracleFabric f = Fabric();
  const TrafficMatrix zero(kHosts);
  EXPECT_EQ(*NonblockingFloor(zero, f), 0);
  EXPECT_EQ(*InstalledFloor(zero, f, {}), 0);
  absl::StatusOr<BestFloor> best = SearchBestFloor(zero, f);
  ASSERT_TRUE(best.ok()) << best.status();
  EXPECT_EQ(best->floor_s, 0);
  EXPECT_TRUE(best->at_bound);
  // One host: nothing crosses the network.
  TrafficMatrix one(1);
  one.at(0, 0) = 5;
  EXPECT_EQ(*InstalledFloor(one, Fabric(1), {}), 0);
  EXPECT_EQ(SearchBestFloor(one, Fabric(1))->floor_s, 0);
  // No OCS ports: EPS alone, the busiest host's bytes over its EPS NIC.
  const OracleFabric eps_only = Fabric(kHosts, 0);
  EXPECT_NEAR(*InstalledFloor(UniformMatrix(), eps_only, {}), 1.0, 1e-9);
  absl::StatusOr<BestFloor> eps_best = SearchBestFloor(UniformMatrix(), eps_only);
  ASSERT_TRUE(eps_best.ok()) << eps_best.status();
  EXPECT_NEAR(eps_best->floor_s, 1.0, 1e-9);
  EXPECT_TRUE(eps_best->circuits.empty());
  // A host with neither EPS nor a circuit cannot be reached.
  OracleFabric dark = Fabric();
  dark.eps_Bps[0] = 0;
  EXPECT_TRUE(std::isinf(*InstalledFloor(IncastMatrix(), dark, {})));
  // Wire overhead scales every floor.
  OracleFabric framed = Fabric();
  framed.wire_overhead = 1.5;
  EXPECT_NEAR(*InstalledFloor(UniformMatrix(), framed, {}), 1.5, 1e-9);
  EXPECT_DOUBLE_EQ(*NonblockingFloor(UniformMatrix(), framed), 1.5 / 4);
}

TEST(OracleTest, BadInputIsNamed) {
  const OracleFabric f = Fabric();
  const TrafficMatrix m = UniformMatrix();
  absl::StatusOr<double> r = InstalledFloor(m, f, Circuits({{0, 0}}));
  EXPECT_EQ(r.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(r.status().message(), HasSubstr("itself"));
  r = InstalledFloor(m, f, Circuits({{0, 8}}));
  EXPECT_THAT(r.status().message(), HasSubstr("outside"));
  r = InstalledFloor(m, f, Circuits({{0, 1}, {0, 2}, {0, 3}, {0, 4}}));
  EXPECT_THAT(r.status().message(), HasSubstr("host 0 has more circuits than its 3 OCS ports"));
  r = InstalledFloor(TrafficMatrix(4), f, {});
  EXPECT_THAT(r.status().message(), HasSubstr("the matrix has 4 hosts, the fabric 8"));
  TrafficMatrix negative = UniformMatrix();
  negative.at(2, 3) = -1;
  EXPECT_EQ(InstalledFloor(negative, f, {}).status().code(), absl::StatusCode::kInvalidArgument);
  OracleFabric bad = Fabric();
  bad.eps_Bps[5] = -1;
  EXPECT_THAT(NonblockingFloor(m, bad).status().message(), HasSubstr("host 5: eps_Bps"));
  bad = Fabric();
  bad.wire_overhead = 0.5;
  EXPECT_THAT(SearchBestFloor(m, bad).status().message(), HasSubstr("wire_overhead"));
  bad = Fabric();
  bad.ocs_ports.pop_back();
  EXPECT_THAT(RelaxedFloor(m, bad).status().message(), HasSubstr("ocs_ports 7"));
}

// The routing behind (b). Two hosts, EPS 1 and one circuit: host 0 sends 2
// units to host 1; both paths are needed and equally, floor 1, weights 1/2.
TEST(OracleRoutingTest, SplitsOverEpsAndTheCircuit) {
  const OracleFabric f = Fabric(2, 1);
  TrafficMatrix m(2);
  m.at(0, 1) = 2;
  absl::StatusOr<OracleRouting> r = InstalledRouting(m, f, Circuits({{0, 1}}));
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_NEAR(r->floor_s, 1.0, 1e-9);
  const std::vector<OraclePath>& p = r->paths[0 * 2 + 1];
  ASSERT_EQ(p.size(), 2u);
  for (const OraclePath& path : p) EXPECT_NEAR(path.weight, 0.5, 1e-9);
  EXPECT_TRUE(r->paths[1 * 2 + 0].empty());
}

// Incast through a star of circuits at the receiver: whatever optimum the
// solver picks, every pair's weights sum to 1, the loads they put on every
// link fit its capacity at the floor (7/4), and some sender without a circuit
// reaches host 0 EPS-then-circuit through one of its circuit partners (with
// direct paths alone the floor is 4).
TEST(OracleRoutingTest, IncastRoutesThroughTheReceiversPartners) {
  const OracleFabric f = Fabric();
  const TrafficMatrix m = IncastMatrix();
  absl::StatusOr<OracleRouting> r = InstalledRouting(m, f, Circuits({{0, 1}, {0, 2}, {0, 3}}));
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_NEAR(r->floor_s, 7.0 / 4, 1e-9);
  // Loads per link direction: EPS out / in per host, circuit h -> 0 and 0 -> h.
  std::vector<double> eps_out(kHosts), eps_in(kHosts), to0(kHosts), from0(kHosts);
  bool relayed = false;
  for (int s = 1; s < kHosts; ++s) {
    double sum = 0;
    for (const OraclePath& p : r->paths[s * kHosts + 0]) {
      sum += p.weight;
      const double b = p.weight * m.at(s, 0);
      switch (p.kind) {
        case OraclePathKind::kEps:
          eps_out[s] += b;
          eps_in[0] += b;
          break;
        case OraclePathKind::kCircuit:
          ASSERT_LE(s, 3);
          to0[s] += b;
          break;
        case OraclePathKind::kEpsCircuit:
          ASSERT_GE(p.via, 1);
          ASSERT_LE(p.via, 3);
          eps_out[s] += b;
          eps_in[p.via] += b;
          to0[p.via] += b;
          relayed = relayed || s >= 4;
          break;
        case OraclePathKind::kCircuitEps:
          ADD_FAILURE() << "no circuit-then-EPS path exists into host 0 here";
          break;
        case OraclePathKind::kCircuitCircuit:
          ADD_FAILURE() << "no circuit-circuit path exists into host 0 here";
          break;
      }
    }
    EXPECT_NEAR(sum, 1.0, 1e-9) << "sender " << s;
  }
  const double cap = 7.0 / 4 * (1 + 1e-7);
  for (int h = 0; h < kHosts; ++h) {
    EXPECT_LE(eps_out[h], cap) << h;
    EXPECT_LE(eps_in[h], cap) << h;
    EXPECT_LE(to0[h], cap) << h;
  }
  EXPECT_TRUE(relayed);
  EXPECT_EQ(OraclePathKindName(OraclePathKind::kEpsCircuit), "eps-circuit");
}

// A solver that stops early is an error naming GLPK's reason, never a figure.
TEST(OracleTest, SolverFailureIsNamed) {
  const OracleOptions one_iteration{.max_simplex_iterations = 1};
  absl::StatusOr<BestFloor> best =
      SearchBestFloor(UniformMatrix(), Fabric(), nullptr, one_iteration);
  EXPECT_EQ(best.status().code(), absl::StatusCode::kInternal);
  EXPECT_THAT(best.status().message(), HasSubstr("GLPK simplex: iteration limit (GLP_EITLIM)"));
}

}  // namespace
}  // namespace mixnet::planner
