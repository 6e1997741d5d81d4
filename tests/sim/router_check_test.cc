// The simulator's byte split (SplitForRegion) and the runtime's router
// weights (BuildRouteTableV2; BuildRouteTable for router v1) against hand-worked cases of the fluid
// model (runtime/planner/fluid_model.h, routing.h): per pair the shares over circuits, EPS and
// relays, and the completion time, worked out in closed form below. A random case checks both
// against a load evaluator written here from the model's definition: the weights achieve the time
// they predict.
#include <algorithm>
#include <array>
#include <map>
#include <random>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "gtest/gtest.h"
#include "runtime/planner/cluster_planner.h"
#include "runtime/router/route_table_v2.h"
#include "sim/fabric.h"

namespace mixnet::sim {
namespace {

constexpr double kGbps = 100;
constexpr double kBps = kGbps * 1e9 / 8;  // one NIC, bytes/s per direction

// n hosts, each with `eps` EPS NICs and `alpha` OCS NICs (all kGbps) on switch
// "ocs"; host h's OCS NIC k is on port h * alpha + k + 1.
cluster::ClusterSpec Spec(int n, int eps, int alpha) {
  cluster::ClusterSpec s;
  s.name = "simcheck";
  s.ocs_switches.push_back({.name = "ocs", .ports = n * alpha, .switch_ms = 25});
  cluster::RegionSpec region;
  region.name = "r0";
  for (int h = 0; h < n; ++h) {
    cluster::HostSpec host;
    host.name = absl::StrCat("h", h);
    host.gpus = 8;
    for (int k = 0; k < eps + alpha; ++k) {
      cluster::NicSpec nic;
      const bool is_eps = k < eps;
      nic.name = is_eps ? absl::StrCat("eps", k) : absl::StrCat("ocs", k - eps);
      nic.role = is_eps ? cluster::NicRole::kEps : cluster::NicRole::kOcs;
      nic.address = absl::StrCat(is_eps ? "10.1." : "10.2.", h, ".", k + 1);
      nic.gbps = kGbps;
      if (!is_eps) {
        nic.ocs_switch = "ocs";
        nic.ocs_port = h * alpha + (k - eps) + 1;
      }
      host.nics.push_back(nic);
    }
    host.region = "r0";
    region.hosts.push_back(host.name);
    s.hosts.push_back(std::move(host));
  }
  s.regions.push_back(region);
  return s;
}

// One hand-built case: circuits given as (host a, its OCS NIC, host b, its OCS NIC).
struct Case {
  int n = 0;
  int eps = 1;
  int alpha = 1;
  std::vector<std::array<int, 4>> circuits;
  TrafficMatrix demand{1};
  bool relay = true;
  Router router = Router::kV2;
};

// What the simulator and the router make of a case.
struct Result {
  cluster::ClusterSpec spec;
  planner::RegionRouting split;            // the simulator's
  std::vector<router::RouteTable> tables;  // the router's, per host
};

Result RunCase(const Case& c) {
  Result r;
  r.spec = Spec(c.n, c.eps, c.alpha);
  auto cp = planner::ClusterPlanner::Create(r.spec, c.alpha);
  EXPECT_TRUE(cp.ok()) << cp.status();
  if (!cp.ok()) return r;
  std::vector<planner::PlannedCircuit> planned;
  router::Topology topo;
  topo.epoch = 1;
  for (const auto& [a, ka, b, kb] : c.circuits) {
    planned.push_back({.a = {a, ka}, .b = {b, kb}});
    topo.circuits.push_back(
        {.ocs_switch = "ocs", .port_a = a * c.alpha + ka + 1, .port_b = b * c.alpha + kb + 1});
  }
  r.split = SplitForRegion(cp->regions()[0], planned, c.demand, c.router, c.relay);
  for (int h = 0; h < c.n; ++h) {
    auto t = c.router == Router::kV1 ? router::BuildRouteTable(r.spec, topo, r.spec.hosts[h].name)
                                     : router::BuildRouteTableV2(r.spec, topo, r.spec.hosts[h].name,
                                                                 c.demand, {.relay = c.relay});
    EXPECT_TRUE(t.ok()) << t.status();
    if (!t.ok()) return r;
    r.tables.push_back(*std::move(t));
  }
  return r;
}

struct Shares {
  double ocs = 0;
  double eps = 0;
  double relay = 0;
};

Shares RouterShares(const Result& r, int src, int dst) {
  Shares s;
  for (const router::Path& p : r.tables[src].PathsTo(r.spec.hosts[dst].name)) {
    (p.kind == router::PathKind::kOcs   ? s.ocs
     : p.kind == router::PathKind::kEps ? s.eps
                                        : s.relay) += p.weight;
  }
  return s;
}

Shares SimShares(const Result& r, int src, int dst) {
  const planner::PairSplit& p = r.split.at(src, dst);
  double relay = 0;
  for (const auto& list : {p.relay, p.eps_circuit, p.circuit_eps}) {
    for (const auto& [k, bytes] : list) relay += bytes;
  }
  const double total = p.total();
  return {.ocs = p.circuit / total, .eps = p.eps / total, .relay = relay / total};
}

void ExpectShares(const Result& r, int src, int dst, Shares want, double tol) {
  for (const auto& [who, got] : {std::pair{"simulator", SimShares(r, src, dst)},
                                 std::pair{"router", RouterShares(r, src, dst)}}) {
    EXPECT_NEAR(got.ocs, want.ocs, tol) << who << " h" << src << "->h" << dst;
    EXPECT_NEAR(got.eps, want.eps, tol) << who << " h" << src << "->h" << dst;
    EXPECT_NEAR(got.relay, want.relay, tol) << who << " h" << src << "->h" << dst;
  }
}

// Both completion times in [want, want * (1 + rel)]: relay routing binary-searches
// its target down to 1e-4 of the optimum (routing.cc), direct routing is exact.
void ExpectCompletion(const Result& r, double want, double rel) {
  EXPECT_GE(r.split.completion_s, want * (1 - 1e-12));
  EXPECT_LE(r.split.completion_s, want * (1 + rel));
  for (const router::RouteTable& t : r.tables) {
    EXPECT_GE(t.predicted_completion_s(), want * (1 - 1e-12));
    EXPECT_LE(t.predicted_completion_s(), want * (1 + rel));
  }
}

// Two hosts, one circuit (c = kBps), two EPS NICs (E = 2 kBps), D each way.
// Direct optimum: D = T c + T E, so T = D / (3 kBps); shares c/(c+E) = 1/3 and 2/3.
TEST(SimRouterCheckTest, OneCircuitAndEpsShareByRate) {
  Case c{.n = 2, .eps = 2, .alpha = 1, .circuits = {{0, 0, 1, 0}}, .demand = TrafficMatrix(2)};
  const double d = 3e9;
  c.demand.at(0, 1) = c.demand.at(1, 0) = d;
  const Result r = RunCase(c);
  ASSERT_EQ(r.tables.size(), 2u);
  ExpectShares(r, 0, 1, {.ocs = 1.0 / 3, .eps = 2.0 / 3}, 1e-12);
  ExpectShares(r, 1, 0, {.ocs = 1.0 / 3, .eps = 2.0 / 3}, 1e-12);
  ExpectCompletion(r, d / (3 * kBps), 1e-12);
}

// Four hosts, two circuits 0-1 and two 2-3, one EPS NIC, D between every pair.
// No relay exists (no circuit joins {0,1} to {2,3}). Host 0's EPS carries D to
// h2 and D to h3: T = 2D / E; at that T the two circuits (2c T = 4D) take all of
// D to h1, each circuit path half (same rate).
TEST(SimRouterCheckTest, PairsWithoutCircuitsGoOverEps) {
  Case c{.n = 4,
         .eps = 1,
         .alpha = 2,
         .circuits = {{0, 0, 1, 0}, {0, 1, 1, 1}, {2, 0, 3, 0}, {2, 1, 3, 1}},
         .demand = TrafficMatrix(4)};
  const double d = 1e9;
  for (int i = 0; i < 4; ++i)
    for (int j = 0; j < 4; ++j)
      if (i != j) c.demand.at(i, j) = d;
  const Result r = RunCase(c);
  ASSERT_EQ(r.tables.size(), 4u);
  for (auto [i, j] : std::vector<std::pair<int, int>>{{0, 1}, {1, 0}, {2, 3}, {3, 2}}) {
    ExpectShares(r, i, j, {.ocs = 1}, 1e-12);
    const auto& paths = r.tables[i].PathsTo(r.spec.hosts[j].name);
    ASSERT_EQ(paths.size(), 2u) << i << "->" << j;
    for (const router::Path& p : paths) EXPECT_DOUBLE_EQ(p.weight, 0.5);
  }
  for (auto [i, j] : std::vector<std::pair<int, int>>{
           {0, 2}, {0, 3}, {1, 2}, {1, 3}, {2, 0}, {2, 1}, {3, 0}, {3, 1}})
    ExpectShares(r, i, j, {.eps = 1}, 1e-12);
  ExpectCompletion(r, 2 * d / kBps, 1e-12);
}

// Triangle of circuits (c = E = kBps), only h0 -> h2 has bytes (D). Direct:
// T0 = D / (c + E). With the relay h0 -> h1 -> h2 (idle circuits): the direct
// circuit, the relay and EPS each carry T c = T E, so T = D / (3 kBps), a third
// each (the search stops within 1e-4 of T: shares within 1e-4).
Case Triangle(double d, bool relay) {
  Case c{.n = 3,
         .eps = 1,
         .alpha = 2,
         .circuits = {{0, 0, 1, 0}, {1, 1, 2, 0}, {0, 1, 2, 1}},
         .demand = TrafficMatrix(3),
         .relay = relay};
  c.demand.at(0, 2) = d;
  return c;
}

TEST(SimRouterCheckTest, IdleCircuitsRelayAThird) {
  const double d = 3e9;
  const Result r = RunCase(Triangle(d, true));
  ASSERT_EQ(r.tables.size(), 3u);
  ExpectShares(r, 0, 2, {.ocs = 1.0 / 3, .eps = 1.0 / 3, .relay = 1.0 / 3}, 2e-4);
  ExpectCompletion(r, d / (3 * kBps), 1e-4);
  bool relay_via_h1 = false;
  for (const router::Path& p : r.tables[0].PathsTo("h2"))
    relay_via_h1 |= p.kind == router::PathKind::kRelay && p.relay_host == "h1";
  EXPECT_TRUE(relay_via_h1);
  ASSERT_EQ(r.split.at(0, 2).relay.size(), 1u);
  EXPECT_EQ(r.split.at(0, 2).relay[0].first, 1);
}

TEST(SimRouterCheckTest, WithoutRelaysHalfOverTheCircuitHalfOverEps) {
  const double d = 3e9;
  const Result r = RunCase(Triangle(d, false));
  ASSERT_EQ(r.tables.size(), 3u);
  ExpectShares(r, 0, 2, {.ocs = 0.5, .eps = 0.5}, 1e-12);
  ExpectCompletion(r, d / (2 * kBps), 1e-12);
}

// The triangle with x bytes h0 -> h1 already on circuit 0-1: the relay gets
// only its spare T c - x. h0's egress bound (D + x) / (2c + E) is met:
// T = (D + x) / (3 kBps). With D = 3e9, x = 0.75e9: T = 0.1 s, T c = 1.25e9, so
// h0 -> h2 sends 1.25e9 direct, 0.5e9 relayed, 1.25e9 over EPS; h0 -> h1 all direct.
TEST(SimRouterCheckTest, RelayUsesOnlyTheSpareOfABusyCircuit) {
  Case c = Triangle(3e9, true);
  c.demand.at(0, 1) = 0.75e9;
  const Result r = RunCase(c);
  ASSERT_EQ(r.tables.size(), 3u);
  ExpectShares(r, 0, 2, {.ocs = 5.0 / 12, .eps = 5.0 / 12, .relay = 1.0 / 6}, 2e-4);
  ExpectShares(r, 0, 1, {.ocs = 1}, 1e-12);
  ExpectCompletion(r, 0.1, 1e-4);
}

// Router v1 on the triangle (h0 -> h2 only, D): a pair with a circuit sends
// everything over it, so T = D / c with c = kBps (v2 would halve it, see
// above); the table's single circuit path to h2 carries it all.
TEST(SimRouterCheckTest, RouterV1SendsOverTheCircuitOnly) {
  const double d = 3e9;
  Case c = Triangle(d, false);
  c.router = Router::kV1;
  const Result r = RunCase(c);
  ASSERT_EQ(r.tables.size(), 3u);
  EXPECT_EQ(r.tables[0].version(), 1);
  ExpectShares(r, 0, 2, {.ocs = 1}, 1e-12);
  EXPECT_NEAR(r.split.completion_s, d / kBps, 1e-12 * d / kBps);
}

// Router v1 where a pair has no circuit (h0 -> h2 of the four-host case):
// all over EPS, as BuildRouteTable's EPS paths. Host 0 sends D to h1 over its
// two circuits (D / 2c) and D to h2, D to h3 over one EPS NIC: T = 2D / E.
TEST(SimRouterCheckTest, RouterV1PairsWithoutCircuitsGoOverEps) {
  Case c{.n = 4,
         .eps = 1,
         .alpha = 2,
         .circuits = {{0, 0, 1, 0}, {0, 1, 1, 1}, {2, 0, 3, 0}, {2, 1, 3, 1}},
         .demand = TrafficMatrix(4),
         .relay = false,
         .router = Router::kV1};
  const double d = 1e9;
  for (int i = 0; i < 4; ++i)
    for (int j = 0; j < 4; ++j)
      if (i != j) c.demand.at(i, j) = d;
  const Result r = RunCase(c);
  ASSERT_EQ(r.tables.size(), 4u);
  ExpectShares(r, 0, 1, {.ocs = 1}, 1e-12);
  ExpectShares(r, 0, 2, {.eps = 1}, 1e-12);
  ExpectShares(r, 3, 1, {.eps = 1}, 1e-12);
  EXPECT_NEAR(r.split.completion_s, 2 * d / kBps, 1e-12);
}

// The largest load / rate of a region's split in bytes per link: every
// circuit direction (`load` over `cap`, per ordered host pair) and every
// host's EPS egress and ingress over `eps_Bps` (the fluid model's definition).
double Achieved(int n, const std::vector<double>& load, const std::vector<double>& cap,
                const std::vector<double>& eps_out, const std::vector<double>& eps_in,
                double eps_Bps) {
  double t = 0;
  for (int x = 0; x < n * n; ++x) {
    if (load[x] <= 0) continue;
    EXPECT_GT(cap[x], 0) << "bytes on host pair " << x / n << "," << x % n << " without circuits";
    t = std::max(t, load[x] / cap[x]);
  }
  for (int h = 0; h < n; ++h) t = std::max({t, eps_out[h] / eps_Bps, eps_in[h] / eps_Bps});
  return t;
}

// Random demand on a planned 8-host region: whatever the split, the time the
// router and the simulator predict must be the time their bytes take,
// evaluated here from the model's definition; it is no better than the
// all-NICs bound and better than EPS only.
TEST(SimRouterCheckTest, RandomCaseSplitsAchieveThePredictedTime) {
  const int n = 8, alpha = 6, eps = 2;
  const double e = eps * kBps;
  const cluster::ClusterSpec spec = Spec(n, eps, alpha);
  auto cp = planner::ClusterPlanner::Create(spec, alpha);
  ASSERT_TRUE(cp.ok()) << cp.status();
  const planner::Region& region = cp->regions()[0];
  std::mt19937 rng(7);
  std::uniform_real_distribution<double> u(0.2, 1.0);
  TrafficMatrix m(n);
  for (int i = 0; i < n; ++i)
    for (int j = 0; j < n; ++j)
      if (i != j) m.at(i, j) = u(rng) * 1e8 * (j == 3 ? 6 : 1);  // host 3 is hot
  auto plan = planner::PlanRegion(region, m, {});
  ASSERT_TRUE(plan.ok()) << plan.status();

  // Circuit rate per ordered host pair, from the spec's cabling (port -> host).
  router::Topology topo;
  topo.epoch = 1;
  std::vector<double> cap(n * n, 0);
  std::map<int, int> host_of_port;
  std::map<std::string, int> host_index;
  for (int h = 0; h < n; ++h) {
    host_index[spec.hosts[h].name] = h;
    for (const auto& nic : spec.hosts[h].nics)
      if (nic.role == cluster::NicRole::kOcs) host_of_port[nic.ocs_port] = h;
  }
  for (const auto& pc : plan->circuits) {
    const cluster::CircuitSpec cs = region.ToSpec(pc);
    topo.circuits.push_back(cs);
    const int a = host_of_port.at(cs.port_a), b = host_of_port.at(cs.port_b);
    cap[a * n + b] += kBps;
    cap[b * n + a] += kBps;
  }

  // The router's weights times the bytes, on every link.
  std::vector<double> load(n * n, 0), eps_out(n, 0), eps_in(n, 0);
  int relayed = 0;
  double predicted = -1;
  for (int h = 0; h < n; ++h) {
    auto table = router::BuildRouteTableV2(spec, topo, spec.hosts[h].name, m);
    ASSERT_TRUE(table.ok()) << table.status();
    if (h == 0) predicted = table->predicted_completion_s();
    EXPECT_EQ(table->predicted_completion_s(), predicted) << "h" << h << " disagrees with h0";
    for (int j = 0; j < n; ++j) {
      if (j == h) continue;
      double sum = 0;
      for (const router::Path& p : table->PathsTo(spec.hosts[j].name)) {
        const double bytes = p.weight * m.at(h, j);
        sum += p.weight;
        if (p.kind == router::PathKind::kOcs) {
          load[h * n + j] += bytes;
        } else if (p.kind == router::PathKind::kEps) {
          eps_out[h] += bytes;
          eps_in[j] += bytes;
        } else {
          const int k = host_index.at(p.relay_host);
          if (p.first_hop == router::PathKind::kEps) {
            eps_out[h] += bytes;
            eps_in[k] += bytes;
          } else {
            load[h * n + k] += bytes;
          }
          if (p.second_hop == router::PathKind::kEps) {
            eps_out[k] += bytes;
            eps_in[j] += bytes;
          } else {
            load[k * n + j] += bytes;
          }
          ++relayed;
        }
      }
      EXPECT_NEAR(sum, 1, 1e-12) << h << "->" << j;
    }
  }
  EXPECT_NEAR(Achieved(n, load, cap, eps_out, eps_in, e), predicted, 1e-9 * predicted);
  EXPECT_GT(relayed, 0);  // the hot host's extra bytes take relays: all three kinds used

  // The simulator's bytes, on every link.
  const planner::RegionRouting split = SplitForRegion(region, plan->circuits, m, Router::kV2, true);
  std::fill(load.begin(), load.end(), 0);
  std::fill(eps_out.begin(), eps_out.end(), 0);
  std::fill(eps_in.begin(), eps_in.end(), 0);
  for (int i = 0; i < n; ++i) {
    for (int j = 0; j < n; ++j) {
      if (i == j) continue;
      const planner::PairSplit& p = split.at(i, j);
      EXPECT_NEAR(p.total(), m.at(i, j), 1e-6) << i << "->" << j;
      load[i * n + j] += p.circuit;
      eps_out[i] += p.eps;
      eps_in[j] += p.eps;
      for (const auto& [k, bytes] : p.relay) {
        load[i * n + k] += bytes;
        load[k * n + j] += bytes;
      }
      for (const auto& [k, bytes] : p.eps_circuit) {
        eps_out[i] += bytes;
        eps_in[k] += bytes;
        load[k * n + j] += bytes;
      }
      for (const auto& [k, bytes] : p.circuit_eps) {
        load[i * n + k] += bytes;
        eps_out[k] += bytes;
        eps_in[j] += bytes;
      }
    }
  }
  EXPECT_NEAR(Achieved(n, load, cap, eps_out, eps_in, e), split.completion_s,
              1e-9 * split.completion_s);

  // No split beats every host's bytes over all its NICs; EPS alone is slower.
  double bound = 0, eps_only = 0;
  for (int h = 0; h < n; ++h) {
    double out = 0, in = 0;
    for (int j = 0; j < n; ++j) out += m.at(h, j), in += m.at(j, h);
    bound = std::max(bound, std::max(out, in) / (e + alpha * kBps));
    eps_only = std::max(eps_only, std::max(out, in) / e);
  }
  for (double t : {predicted, split.completion_s}) {
    EXPECT_GE(t, bound * (1 - 1e-12));
    EXPECT_LT(t, eps_only);
  }
}

}  // namespace
}  // namespace mixnet::sim
