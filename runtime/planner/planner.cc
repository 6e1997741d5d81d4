// Region validation, circuit conversions, PlanRegion and Decide (see
// planner.h). Pure functions over immutable Regions; any thread.
#include "runtime/planner/planner.h"

#include <algorithm>
#include <cmath>
#include <map>
#include <utility>

#include "absl/strings/str_cat.h"
#include "runtime/common/absl_view.h"
#include "runtime/common/status.h"
#include "runtime/planner/plan_graph.h"
#include "runtime/planner/routing.h"

namespace mixnet::planner {
namespace {

std::string PortName(std::string_view sw, int port) { return absl::StrCat(Av(sw), ":", port); }

}  // namespace

std::string_view AlgorithmName(Algorithm a) {
  return a == Algorithm::kGreedy ? "greedy" : "improved";
}

absl::StatusOr<Algorithm> ParseAlgorithm(std::string_view name) {
  if (name == "greedy") return Algorithm::kGreedy;
  if (name == "improved") return Algorithm::kImproved;
  return absl::InvalidArgumentError(
      absl::StrCat("planner algorithm '", Av(name), "': expected greedy or improved"));
}

absl::StatusOr<Region> Region::Create(RegionInput input, int alpha) {
  const std::string what = absl::StrCat("region '", input.name, "'");
  if (alpha < 1) {
    return absl::InvalidArgumentError(absl::StrCat(what, ": alpha must be >= 1, got ", alpha));
  }
  const size_t n = input.hosts.size();
  if (n == 0) return absl::InvalidArgumentError(absl::StrCat(what, ": no hosts"));
  if (input.ports.size() != n || input.eps_Bps.size() != n) {
    return absl::InvalidArgumentError(absl::StrCat(what, ": ", n, " hosts but ", input.ports.size(),
                                                   " port lists and ", input.eps_Bps.size(),
                                                   " EPS capacities"));
  }
  Region r;
  r.alpha_ = alpha;
  std::map<std::pair<std::string, int>, std::pair<size_t, size_t>> cabled;
  std::map<std::string, int> switch_index;
  r.port_switch_.resize(n);
  r.host_rate_Bps_.assign(n, 0);
  r.ocs_total_Bps_.assign(n, 0);
  for (size_t h = 0; h < n; ++h) {
    const std::string& host = input.hosts[h];
    const double eps = input.eps_Bps[h];
    if (!std::isfinite(eps) || eps < 0) {
      return absl::InvalidArgumentError(absl::StrCat(what, ": host ", host, ": EPS capacity ", eps,
                                                     " bytes/s; must be finite and >= 0"));
    }
    const std::vector<OcsPort>& ports = input.ports[h];
    if (static_cast<int>(ports.size()) > alpha) {
      return absl::InvalidArgumentError(absl::StrCat(what, ": host ", host, " has ", ports.size(),
                                                     " OCS ports, more than alpha ", alpha));
    }
    double slowest = 0;
    for (size_t p = 0; p < ports.size(); ++p) {
      const OcsPort& port = ports[p];
      const std::string name = absl::StrCat("host ", host, " NIC ", port.nic);
      if (port.ocs_switch.empty() || port.port < 1) {
        return absl::InvalidArgumentError(absl::StrCat(what, ": ", name, ": bad OCS port '",
                                                       PortName(port.ocs_switch, port.port), "'"));
      }
      if (!std::isfinite(port.gbps) || port.gbps <= 0) {
        return absl::InvalidArgumentError(
            absl::StrCat(what, ": ", name, ": line rate ", port.gbps, " Gb/s; must be > 0"));
      }
      auto [it, fresh] =
          cabled.emplace(std::make_pair(port.ocs_switch, port.port), std::make_pair(h, p));
      if (!fresh) {
        const auto& [oh, op] = it->second;
        return absl::InvalidArgumentError(absl::StrCat(
            what, ": OCS port ", PortName(port.ocs_switch, port.port), " is cabled twice: host ",
            input.hosts[oh], " NIC ", input.ports[oh][op].nic, " and ", name));
      }
      auto [sit, added] =
          switch_index.emplace(port.ocs_switch, static_cast<int>(r.switch_names_.size()));
      if (added) r.switch_names_.push_back(port.ocs_switch);
      r.port_switch_[h].push_back(sit->second);
      const double Bps = port.gbps * 1e9 / 8;
      slowest = p == 0 ? Bps : std::min(slowest, Bps);
      r.ocs_total_Bps_[h] += Bps;
    }
    r.host_rate_Bps_[h] = slowest;
  }
  r.pair_Bps_.assign(n * n, 0);
  for (size_t a = 0; a < n; ++a) {
    for (size_t b = 0; b < n; ++b) {
      if (a != b) r.pair_Bps_[a * n + b] = std::min(r.host_rate_Bps_[a], r.host_rate_Bps_[b]);
    }
  }
  const int S = static_cast<int>(r.switch_names_.size());
  r.by_switch_.assign(n * std::max(S, 1), {});
  for (size_t h = 0; h < n; ++h) {
    for (size_t p = 0; p < r.port_switch_[h].size(); ++p) {
      r.by_switch_[h * S + r.port_switch_[h][p]].push_back(static_cast<int>(p));
    }
  }
  r.in_ = std::move(input);
  return r;
}

double Region::circuit_Bps(int a, int b) const {
  return std::min(host_rate_Bps_[a], host_rate_Bps_[b]);
}

absl::StatusOr<std::vector<PlannedCircuit>> Region::FromSpecs(
    const std::vector<cluster::CircuitSpec>& circuits) const {
  std::map<std::pair<std::string_view, int>, PortRef> owner;
  for (int h = 0; h < hosts(); ++h) {
    for (int p = 0; p < static_cast<int>(in_.ports[h].size()); ++p) {
      owner.emplace(
          std::make_pair(std::string_view(in_.ports[h][p].ocs_switch), in_.ports[h][p].port),
          PortRef{h, p});
    }
  }
  std::vector<std::vector<char>> used(hosts());
  for (int h = 0; h < hosts(); ++h) used[h].assign(in_.ports[h].size(), 0);
  std::vector<PlannedCircuit> out;
  out.reserve(circuits.size());
  for (size_t i = 0; i < circuits.size(); ++i) {
    const cluster::CircuitSpec& c = circuits[i];
    const std::string what = absl::StrCat("region '", in_.name, "': circuits[", i, "] (",
                                          c.ocs_switch, " ", c.port_a, "-", c.port_b, ")");
    PortRef ends[2];
    const int ports[2] = {c.port_a, c.port_b};
    for (int e = 0; e < 2; ++e) {
      auto it = owner.find(std::make_pair(std::string_view(c.ocs_switch), ports[e]));
      if (it == owner.end()) {
        return absl::InvalidArgumentError(
            absl::StrCat(what, ": port ", PortName(c.ocs_switch, ports[e]),
                         " is not an OCS port of this region (circuit outside the region)"));
      }
      ends[e] = it->second;
      if (used[ends[e].host][ends[e].port]) {
        return absl::InvalidArgumentError(absl::StrCat(
            what, ": port ", PortName(c.ocs_switch, ports[e]), " is used by another circuit"));
      }
      used[ends[e].host][ends[e].port] = 1;
    }
    if (ends[0].host == ends[1].host) {
      return absl::InvalidArgumentError(
          absl::StrCat(what, ": both ends are on host ", in_.hosts[ends[0].host]));
    }
    out.push_back(PlannedCircuit{ends[0], ends[1]});
  }
  return out;
}

cluster::CircuitSpec Region::ToSpec(const PlannedCircuit& c) const {
  const OcsPort& a = in_.ports[c.a.host][c.a.port];
  const OcsPort& b = in_.ports[c.b.host][c.b.port];
  return cluster::CircuitSpec{a.ocs_switch, std::min(a.port, b.port), std::max(a.port, b.port)};
}

Adjacency Region::ToAdjacency(const std::vector<PlannedCircuit>& circuits) const {
  std::vector<UndirectedCircuit> u;
  u.reserve(circuits.size());
  for (const PlannedCircuit& c : circuits) {
    u.push_back({c.a.host, c.b.host, circuit_Bps(c.a.host, c.b.host)});
  }
  return MakeAdjacency(hosts(), u);
}

absl::Status Region::ValidateDemand(const TrafficMatrix& demand) const {
  if (demand.hosts() != hosts() || demand.data().size() != static_cast<size_t>(hosts()) * hosts()) {
    return absl::InvalidArgumentError(absl::StrCat("region '", in_.name, "': traffic matrix is ",
                                                   demand.hosts(), "x", demand.hosts(),
                                                   " but the region has ", hosts(), " hosts"));
  }
  for (int i = 0; i < hosts(); ++i) {
    for (int j = 0; j < hosts(); ++j) {
      const double v = demand.at(i, j);
      if (!std::isfinite(v) || v < 0) {
        return absl::InvalidArgumentError(
            absl::StrCat("region '", in_.name, "': traffic from host ", in_.hosts[i], " to host ",
                         in_.hosts[j], " is ", v, " bytes; must be finite and >= 0"));
      }
    }
  }
  return absl::OkStatus();
}

namespace {

double ScoreAdjacency(const FluidModel& model, const Adjacency& adj, bool relay,
                      double relay_chunk_bytes = 0) {
  if (!relay) return model.Completion(adj);
  return OptimiseRouting(model, adj,
                         RoutingOptions{.relay = true, .relay_chunk_bytes = relay_chunk_bytes})
      .completion_s;
}

double ScoreAdjacency(const FluidModel& model, const Adjacency& adj,
                      const PlannerOptions& options) {
  if (options.circuit_only) return CircuitOnlyRouting(model, adj).completion_s;
  return ScoreAdjacency(model, adj, options.relay, options.relay_chunk_bytes);
}

}  // namespace

double ScoreCircuits(const Region& region, const FluidModel& model,
                     const std::vector<PlannedCircuit>& circuits, bool relay) {
  return ScoreAdjacency(model, region.ToAdjacency(circuits), relay);
}

absl::StatusOr<RegionPlan> PlanRegion(const Region& region, const TrafficMatrix& demand,
                                      const std::vector<PlannedCircuit>& current,
                                      const PlannerOptions& options) {
  RETURN_IF_ERROR(region.ValidateDemand(demand));
  const FluidModel model(demand, region.input().eps_Bps);
  RegionPlan plan;
  plan.algorithm = options.algorithm;
  plan.lower_bound_s = model.LowerBound(region.ocs_Bps());
  plan.current_completion_s = ScoreAdjacency(model, region.ToAdjacency(current), options);
  if (options.algorithm == Algorithm::kImproved &&
      plan.current_completion_s <= plan.lower_bound_s * (1 + 1e-12)) {
    // Nothing beats the bound: keep the current topology.
    plan.circuits = current;
    plan.circuits_kept = static_cast<int>(current.size());
    plan.completion_s = plan.current_completion_s;
    return plan;
  }
  internal::PlanGraph greedy(region);
  internal::PaperGreedy(model, greedy);
  internal::PortAssignment ports;
  if (options.algorithm == Algorithm::kGreedy) {
    ports = internal::AssignPorts(region, greedy, current);
    plan.completion_s = ScoreAdjacency(model, greedy.adjacency(), options);
  } else {
    internal::PlanGraph g(region);
    internal::ImprovedPlan(model, region, internal::CurrentCounts(region, current), options, g);
    plan.completion_s = ScoreAdjacency(model, g.adjacency(), options);
    double greedy_s = ScoreAdjacency(model, greedy.adjacency(), options);
    if (options.relay && !options.circuit_only && options.routed_search_evaluations > 1) {
      // Refine the better of the two under the routing itself.
      internal::PlanGraph& start = greedy_s < plan.completion_s ? greedy : g;
      const double refined = internal::RoutedSearch(
          model, RoutingOptions{.relay = true, .relay_chunk_bytes = options.relay_chunk_bytes},
          plan.lower_bound_s, options.routed_search_evaluations, start);
      (&start == &greedy ? greedy_s : plan.completion_s) = refined;
    }
    if (greedy_s < plan.completion_s) {
      ports = internal::AssignPorts(region, greedy, current);
      plan.completion_s = greedy_s;
      plan.used_greedy = true;
    } else {
      ports = internal::AssignPorts(region, g, current);
      if (greedy_s == plan.completion_s) {
        // Equal scores: the plan that changes fewer ports.
        internal::PortAssignment gp = internal::AssignPorts(region, greedy, current);
        if (gp.ports_changed < ports.ports_changed) {
          ports = std::move(gp);
          plan.used_greedy = true;
        }
      }
    }
  }
  // The improved planner keeps the current topology outright when nothing it
  // found is better (no port needs to change).
  if (options.algorithm == Algorithm::kImproved && ports.ports_changed > 0 &&
      plan.current_completion_s <= plan.completion_s * (1 + 1e-12)) {
    ports.circuits = current;
    ports.kept = static_cast<int>(current.size());
    ports.ports_changed = 0;
    plan.completion_s = plan.current_completion_s;
    plan.used_greedy = false;
  }
  plan.circuits = std::move(ports.circuits);
  plan.circuits_kept = ports.kept;
  plan.ports_changed = ports.ports_changed;
  return plan;
}

Decision Decide(const RegionPlan& plan, const DecideOptions& options) {
  Decision d;
  if (plan.ports_changed == 0) return d;
  const double cur = plan.current_completion_s;
  const double now = plan.completion_s;
  if (std::isinf(cur) && std::isfinite(now)) {
    d.gain_s = kInfinity;
  } else if (std::isfinite(cur) && std::isfinite(now)) {
    d.gain_s = (cur - now) * options.uses;
  }
  d.cost_s = std::max(0.0, options.switch_s + options.protocol_s - options.overlap_s);
  d.reconfigure = d.gain_s > d.cost_s;
  return d;
}

}  // namespace mixnet::planner
