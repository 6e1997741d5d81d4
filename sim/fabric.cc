// Fabric models over the flow solver (see fabric.h). Main thread.
#include "sim/fabric.h"

#include <algorithm>
#include <numeric>
#include <random>
#include <vector>

#include "absl/strings/str_cat.h"
#include "runtime/planner/fluid_model.h"
#include "runtime/planner/routing.h"
#include "sim/direct_connect.h"
#include "sim/flow_solver.h"
#include "sim/rail_fabric.h"

namespace mixnet::sim {
namespace {

// Server NICs (up and down per server) and, when oversubscribed, pod uplinks.
class Electrical {
 public:
  Electrical(const Layout& l, double server_Bps, int pod_servers, double ratio)
      : servers_(l.servers),
        server_Bps_(server_Bps),
        pod_servers_(std::max(1, pod_servers)),
        ratio_(ratio) {}

  // Adds this fabric's links to `net` (call first, before other links).
  void AddLinks(FlowNetwork& net) const {
    for (int s = 0; s < servers_; ++s) {
      net.AddLink(server_Bps_);  // up: 2s
      net.AddLink(server_Bps_);  // down: 2s + 1
    }
    if (pods() > 0) {
      const double pod_Bps = pod_servers_ * server_Bps_ / ratio_;
      for (int p = 0; p < pods(); ++p) {
        net.AddLink(pod_Bps);  // pod up: 2 servers + 2p
        net.AddLink(pod_Bps);  // pod down
      }
    }
  }
  // The links a flow from src to dst crosses (none within a server: NVLink).
  std::vector<int> Links(int src, int dst) const {
    if (src == dst) return {};
    const int ps = src / pod_servers_, pd = dst / pod_servers_;
    if (pods() > 0 && ps != pd) {
      return {2 * src, 2 * servers_ + 2 * ps, 2 * servers_ + 2 * pd + 1, 2 * dst + 1};
    }
    return {2 * src, 2 * dst + 1};
  }
  void AddFlow(FlowNetwork& net, int src, int dst, double bytes) const {
    if (src == dst) return;  // NVLink
    const std::vector<int> links = Links(src, dst);
    net.AddFlow(bytes, links);
  }
  double server_Bps() const { return server_Bps_; }

 private:
  // Pods only matter when oversubscribed.
  int pods() const { return ratio_ > 1 ? (servers_ + pod_servers_ - 1) / pod_servers_ : 0; }

  int servers_;
  double server_Bps_;
  int pod_servers_;
  double ratio_;
};

class ElectricalFabric final : public Fabric {
 public:
  ElectricalFabric(FabricKind kind, const Layout& l, Electrical eps)
      : kind_(kind), l_(l), eps_(eps) {}
  FabricKind kind() const override { return kind_; }

  absl::StatusOr<PhaseTime> AllToAll(const std::vector<TrafficMatrix>& actual,
                                     const std::vector<TrafficMatrix>&,
                                     const A2AOptions&) override {
    FlowNetwork net;
    eps_.AddLinks(net);
    const int n = l_.region_servers;
    for (int r = 0; r < static_cast<int>(actual.size()); ++r)
      for (int i = 0; i < n; ++i)
        for (int j = 0; j < n; ++j)
          if (i != j) eps_.AddFlow(net, r * n + i, r * n + j, actual[r].at(i, j));
    return PhaseTime{.seconds = SolveMaxMin(net).completion_s};
  }

  double Transfer(const std::vector<ServerFlow>& flows) override {
    FlowNetwork net;
    eps_.AddLinks(net);
    for (const ServerFlow& f : flows) eps_.AddFlow(net, f.src, f.dst, f.bytes);
    return SolveMaxMin(net).completion_s;
  }

 private:
  FabricKind kind_;
  Layout l_;
  Electrical eps_;
};

class CircuitFabric final : public Fabric {
 public:
  // `start`: per region, the circuits the job starts from; empty: mixnet's
  // random alpha-regular graph, mixnet-static's none (until Prepare).
  CircuitFabric(const FabricOptions& o, const Layout& l, planner::ClusterPlanner cp,
                std::vector<std::vector<planner::PlannedCircuit>> start)
      : o_(o),
        l_(l),
        eps_(l, (o.nics_per_server - o.alpha) * o.link_gbps * kBytesPerGbit, 1, 1),
        planner_(std::move(cp)),
        current_(std::move(start)) {
    current_.resize(l.regions);
    if (o.kind == FabricKind::kMixNet && o.initial_circuits.empty()) RandomRegular();
  }
  FabricKind kind() const override { return o_.kind; }
  std::vector<std::vector<planner::PlannedCircuit>> LiveCircuits() const override {
    return current_;
  }
  std::string Routing() const override { return RoutingName(o_.router, o_.relay); }

  // mixnet-static: one plan per region from the job's mean matrix.
  absl::Status Prepare(const JobTraffic& job) override {
    if (o_.kind != FabricKind::kMixNetStatic) return absl::OkStatus();
    if (static_cast<int>(job.a2a_mean.size()) != l_.regions)
      return absl::InvalidArgumentError(absl::StrCat(
          "mixnet-static: ", job.a2a_mean.size(), " mean matrices for ", l_.regions, " regions"));
    for (int r = 0; r < l_.regions; ++r) {
      auto plan = planner::PlanRegion(planner_.regions()[r], job.a2a_mean[r], {}, o_.planner);
      if (!plan.ok()) return plan.status();
      current_[r] = plan->circuits;
    }
    return absl::OkStatus();
  }

  absl::StatusOr<PhaseTime> AllToAll(const std::vector<TrafficMatrix>& actual,
                                     const std::vector<TrafficMatrix>& predicted,
                                     const A2AOptions& a) override {
    PhaseTime out;
    if (o_.kind == FabricKind::kMixNet && a.plan) {
      planner::DecideOptions d{.switch_s = o_.switch_s, .overlap_s = a.overlap_s, .uses = a.uses};
      auto decision = planner_.Plan(predicted, current_, o_.planner, d);
      if (!decision.ok()) return decision.status();
      for (int r = 0; r < l_.regions; ++r) {
        const auto& rd = decision->regions[r];
        if (!rd.decision.reconfigure) continue;
        current_[r] = rd.plan.circuits;
        ++out.reconfigured_regions;
      }
      if (out.reconfigured_regions > 0) out.switch_s = std::max(0.0, o_.switch_s - a.overlap_s);
    }
    FlowNetwork net;
    eps_.AddLinks(net);
    const int n = l_.region_servers;
    std::vector<int> cl(static_cast<size_t>(n) * n);
    for (int r = 0; r < static_cast<int>(actual.size()); ++r) {
      const planner::Region& region = planner_.regions()[r];
      const planner::Adjacency adj = region.ToAdjacency(current_[r]);
      std::fill(cl.begin(), cl.end(), -1);
      for (int h = 0; h < n; ++h)
        for (const planner::CircuitLink& c : adj[h]) cl[h * n + c.peer] = net.AddLink(c.Bps);
      const planner::RegionRouting routing =
          SplitForRegion(region, current_[r], predicted[r], o_.router, o_.relay);
      const int base = r * n;
      for (int i = 0; i < n; ++i)
        for (int j = 0; j < n; ++j) {
          const double bytes = i == j ? 0 : actual[r].at(i, j);
          if (!(bytes > 0)) continue;
          const planner::PairSplit& s = routing.at(i, j);
          const double predicted_total = s.total();
          const int direct = cl[i * n + j];
          if (!(predicted_total > 0)) {  // not expected: circuits if any, else EPS
            if (direct >= 0) {
              net.AddFlow(bytes, {direct});
            } else {
              eps_.AddFlow(net, base + i, base + j, bytes);
            }
            continue;
          }
          const double scale = bytes / predicted_total;
          if (s.circuit > 0) {
            if (direct >= 0) {
              net.AddFlow(s.circuit * scale, {direct});
            } else {
              eps_.AddFlow(net, base + i, base + j, s.circuit * scale);
            }
          }
          if (s.eps > 0) eps_.AddFlow(net, base + i, base + j, s.eps * scale);
          for (const auto& [k, b] : s.relay) {
            const int l1 = cl[i * n + k], l2 = cl[k * n + j];
            if (l1 >= 0 && l2 >= 0) {
              net.AddFlow(b * scale, {l1, l2});
            } else {
              eps_.AddFlow(net, base + i, base + j, b * scale);
            }
          }
          // Relays with one hop over EPS: the EPS links of that hop and the
          // circuit of the other (EPS end to end when the circuit is gone).
          for (const auto& [k, b] : s.eps_circuit) {
            const int l2 = cl[k * n + j];
            if (l2 < 0) {
              eps_.AddFlow(net, base + i, base + j, b * scale);
              continue;
            }
            std::vector<int> links = eps_.Links(base + i, base + k);
            links.push_back(l2);
            net.AddFlow(b * scale, links);
          }
          for (const auto& [k, b] : s.circuit_eps) {
            const int l1 = cl[i * n + k];
            if (l1 < 0) {
              eps_.AddFlow(net, base + i, base + j, b * scale);
              continue;
            }
            std::vector<int> links = {l1};
            for (int l : eps_.Links(base + k, base + j)) links.push_back(l);
            net.AddFlow(b * scale, links);
          }
        }
    }
    out.seconds = SolveMaxMin(net).completion_s + out.switch_s;
    return out;
  }

  double Transfer(const std::vector<ServerFlow>& flows) override {
    FlowNetwork net;  // DP and PP traffic stays on EPS
    eps_.AddLinks(net);
    for (const ServerFlow& f : flows) eps_.AddFlow(net, f.src, f.dst, f.bytes);
    return SolveMaxMin(net).completion_s;
  }

 private:
  // The paper's initial topology: per region, alpha random perfect matchings
  // (round k uses every host's port k; with an odd host count one host sits
  // each round out).
  void RandomRegular() {
    std::mt19937_64 rng(12345);
    const int n = l_.region_servers;
    std::vector<int> order(n);
    for (int r = 0; r < l_.regions; ++r) {
      for (int k = 0; k < o_.alpha; ++k) {
        std::iota(order.begin(), order.end(), 0);
        std::shuffle(order.begin(), order.end(), rng);
        for (int i = 0; i + 1 < n; i += 2)
          current_[r].push_back({.a = {order[i], k}, .b = {order[i + 1], k}});
      }
    }
  }

  FabricOptions o_;
  Layout l_;
  Electrical eps_;
  planner::ClusterPlanner planner_;
  std::vector<std::vector<planner::PlannedCircuit>> current_;
};

}  // namespace

planner::RegionRouting SplitForRegion(const planner::Region& region,
                                      const std::vector<planner::PlannedCircuit>& circuits,
                                      const TrafficMatrix& predicted, Router router, bool relay) {
  const planner::FluidModel model(predicted, region.input().eps_Bps);
  if (router == Router::kV1)
    return planner::CircuitOnlyRouting(model, region.ToAdjacency(circuits));
  return planner::OptimiseRouting(model, region.ToAdjacency(circuits), {.relay = relay});
}

absl::StatusOr<Router> ParseRouter(std::string_view name) {
  if (name == "v1") return Router::kV1;
  if (name == "v2") return Router::kV2;
  return absl::InvalidArgumentError(
      absl::StrCat("unknown router '", std::string(name), "' (v1 or v2)"));
}

std::string RoutingName(Router router, bool relay) {
  if (router == Router::kV1) return "v1";
  return relay ? "v2+relay" : "v2";
}

std::string_view FabricName(FabricKind k) {
  switch (k) {
    case FabricKind::kFatTree:
      return "fattree";
    case FabricKind::kOversub:
      return "oversub";
    case FabricKind::kRail:
      return "rail";
    case FabricKind::kTopoOpt:
      return "topoopt";
    case FabricKind::kMixNetStatic:
      return "mixnet-static";
    case FabricKind::kMixNet:
      return "mixnet";
  }
  return "?";
}

absl::StatusOr<FabricKind> ParseFabric(std::string_view name) {
  for (FabricKind k : {FabricKind::kFatTree, FabricKind::kOversub, FabricKind::kRail,
                       FabricKind::kTopoOpt, FabricKind::kMixNetStatic, FabricKind::kMixNet})
    if (FabricName(k) == name) return k;
  return absl::InvalidArgumentError(
      absl::StrCat("unknown fabric '", std::string(name),
                   "' (fattree, oversub, rail, topoopt, mixnet-static, mixnet)"));
}

absl::StatusOr<std::unique_ptr<Fabric>> MakeFabric(const FabricOptions& options, const Layout& l) {
  if (!(options.link_gbps > 0)) return absl::InvalidArgumentError("link speed must be > 0 Gb/s");
  if (options.router == Router::kV1 && options.relay)
    return absl::InvalidArgumentError("relays need router v2 (router v1 has no relay paths)");
  FabricOptions o = options;
  // The planner scores topologies with the routing the workers run.
  o.planner.circuit_only = o.router == Router::kV1;
  o.planner.relay = o.router == Router::kV2 && o.relay;
  const double server_Bps = o.nics_per_server * o.link_gbps * kBytesPerGbit;
  switch (o.kind) {
    case FabricKind::kFatTree:
      return std::make_unique<ElectricalFabric>(o.kind, l, Electrical(l, server_Bps, 1, 1));
    case FabricKind::kRail:
      return MakeRailFabric(o, l);
    case FabricKind::kTopoOpt:
      return MakeTopoOptFabric(o, l);
    case FabricKind::kOversub:
      if (!(o.oversub >= 1))
        return absl::InvalidArgumentError(
            absl::StrCat("oversubscription ratio ", o.oversub, " < 1"));
      return std::make_unique<ElectricalFabric>(
          o.kind, l, Electrical(l, server_Bps, o.pod_servers, o.oversub));
    case FabricKind::kMixNetStatic:
    case FabricKind::kMixNet: {
      // At least one EPS NIC: DP and pipeline traffic only takes EPS.
      if (o.alpha < 1 || o.alpha >= o.nics_per_server)
        return absl::InvalidArgumentError(
            absl::StrCat("alpha ", o.alpha, " not in [1, ", o.nics_per_server - 1,
                         "] (a server needs an EPS NIC for DP and pipeline traffic)"));
      std::vector<planner::RegionInput> regions(l.regions);
      const double eps_Bps = (o.nics_per_server - o.alpha) * o.link_gbps * kBytesPerGbit;
      for (int r = 0; r < l.regions; ++r) {
        planner::RegionInput& in = regions[r];
        in.name = absl::StrCat("region", r);
        const std::string sw = absl::StrCat("ocs", r);
        for (int h = 0; h < l.region_servers; ++h) {
          const int server = r * l.region_servers + h;
          in.hosts.push_back(absl::StrCat("s", server));
          in.eps_Bps.push_back(eps_Bps);
          std::vector<planner::OcsPort> ports;
          for (int k = 0; k < o.alpha; ++k)
            ports.push_back({.nic = absl::StrCat("s", server, "-nic", k),
                             .ocs_switch = sw,
                             .port = h * o.alpha + k + 1,
                             .gbps = o.link_gbps});
          in.ports.push_back(std::move(ports));
        }
      }
      auto cp = planner::ClusterPlanner::FromRegions(std::move(regions), o.alpha);
      if (!cp.ok()) return cp.status();
      std::vector<std::vector<planner::PlannedCircuit>> start;
      if (!o.initial_circuits.empty()) {
        auto split = cp->SplitCircuits(o.initial_circuits);
        if (!split.ok())
          return absl::InvalidArgumentError(
              absl::StrCat("start topology: ", split.status().message()));
        start = *std::move(split);
      }
      return std::make_unique<CircuitFabric>(o, l, std::move(*cp), std::move(start));
    }
  }
  return absl::InvalidArgumentError("unknown fabric");
}

}  // namespace mixnet::sim
