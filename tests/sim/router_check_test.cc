// The simulator splits bytes exactly as the runtime's router v2 weights its
// paths: for a region built from a cluster spec, planned by the runtime
// planner, SplitForRegion's per-pair shares equal BuildRouteTableV2's kOcs,
// kEps and kRelay weights on every host.
#include <random>

#include "absl/strings/str_cat.h"
#include "gtest/gtest.h"
#include "runtime/planner/cluster_planner.h"
#include "runtime/router/route_table_v2.h"
#include "sim/fabric.h"

namespace mixnet::sim {
namespace {

// n hosts, each with `eps` EPS NICs and `alpha` OCS NICs on one switch.
cluster::ClusterSpec Spec(int n, int eps, int alpha, double gbps) {
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
      nic.gbps = gbps;
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

double Weight(const std::vector<router::Path>& paths, router::PathKind kind) {
  double w = 0;
  for (const auto& p : paths) w += p.kind == kind ? p.weight : 0;
  return w;
}

TEST(SimRouterCheckTest, SplitEqualsRouterV2Weights) {
  const int n = 8, alpha = 6;
  const cluster::ClusterSpec spec = Spec(n, 2, alpha, 400);
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
  const planner::RegionRouting split = SplitForRegion(region, plan->circuits, m, true);
  router::Topology topo;
  topo.epoch = 1;
  for (const auto& c : plan->circuits) topo.circuits.push_back(region.ToSpec(c));
  int relayed = 0;
  for (int h = 0; h < n; ++h) {
    auto table = router::BuildRouteTableV2(spec, topo, spec.hosts[h].name, m);
    ASSERT_TRUE(table.ok()) << table.status();
    for (int j = 0; j < n; ++j) {
      if (j == h) continue;
      const planner::PairSplit& s = split.at(h, j);
      const double total = s.total();
      ASSERT_GT(total, 0);
      double relay = 0;
      for (const auto& r : s.relay) relay += r.second;
      relayed += relay > 0;
      const auto& paths = table->PathsTo(spec.hosts[j].name);
      EXPECT_NEAR(Weight(paths, router::PathKind::kOcs), s.circuit / total, 1e-9) << h << "->" << j;
      EXPECT_NEAR(Weight(paths, router::PathKind::kEps), s.eps / total, 1e-9) << h << "->" << j;
      EXPECT_NEAR(Weight(paths, router::PathKind::kRelay), relay / total, 1e-9) << h << "->" << j;
    }
  }
  // The router's model estimate is the split's.
  auto t0 = router::BuildRouteTableV2(spec, topo, "h0", m);
  ASSERT_TRUE(t0.ok());
  EXPECT_NEAR(t0->predicted_completion_s(), split.completion_s, 1e-12);
  EXPECT_GT(relayed, 0);  // the hot host's extra bytes take relays: all three kinds checked
}

}  // namespace
}  // namespace mixnet::sim
