// LpRouting and BestRouting (lp_routing.h). Any thread.
#include "runtime/planner/lp_routing.h"

#include <algorithm>
#include <cmath>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "runtime/planner/oracle.h"

namespace mixnet::planner {
namespace {

// Keeps a pair's kLpMaxRelaysPerPair largest relay routes (all kinds
// together) and moves the others' bytes onto EPS.
void CapRelays(PairSplit& split) {
  std::vector<std::pair<double, std::pair<int, int>>> all;  // (bytes, (kind, index))
  auto collect = [&](const std::vector<std::pair<int, double>>& v, int kind) {
    for (size_t i = 0; i < v.size(); ++i) all.push_back({v[i].second, {kind, static_cast<int>(i)}});
  };
  collect(split.relay, 0);
  collect(split.eps_circuit, 1);
  collect(split.circuit_eps, 2);
  if (all.size() <= static_cast<size_t>(kLpMaxRelaysPerPair)) return;
  std::sort(all.begin(), all.end(), [](const auto& a, const auto& b) { return a.first > b.first; });
  std::vector<bool> keep[3] = {std::vector<bool>(split.relay.size(), false),
                               std::vector<bool>(split.eps_circuit.size(), false),
                               std::vector<bool>(split.circuit_eps.size(), false)};
  for (size_t r = 0; r < all.size(); ++r) {
    if (r < static_cast<size_t>(kLpMaxRelaysPerPair)) {
      keep[all[r].second.first][all[r].second.second] = true;
    } else {
      split.eps += all[r].first;
    }
  }
  std::vector<std::pair<int, double>>* lists[3] = {&split.relay, &split.eps_circuit,
                                                   &split.circuit_eps};
  for (int kind = 0; kind < 3; ++kind) {
    std::vector<std::pair<int, double>> kept;
    for (size_t i = 0; i < lists[kind]->size(); ++i) {
      if (keep[kind][i]) kept.push_back((*lists[kind])[i]);
    }
    *lists[kind] = std::move(kept);
  }
}

}  // namespace

absl::StatusOr<RegionRouting> LpRouting(const FluidModel& model, const Adjacency& adjacency,
                                        const RoutingOptions& options) {
  const int n = model.hosts();
  // One rate per circuit, the same for all (the oracle's fabric has one rate
  // per port and a circuit runs at the slower end's).
  double rate = 0;
  OracleFabric fabric;
  fabric.eps_Bps.resize(n);
  fabric.ocs_ports.assign(n, 0);
  std::vector<UndirectedCircuit> circuits;
  for (int h = 0; h < n; ++h) {
    fabric.eps_Bps[h] = model.eps_Bps(h);
    for (const CircuitLink& l : adjacency[h]) {
      if (l.circuits <= 0) continue;
      const double one = l.Bps / l.circuits;
      if (rate == 0) rate = one;
      if (std::abs(one - rate) > 1e-9 * rate) {
        return absl::InvalidArgumentError(
            absl::StrCat("LP routing: host ", h, "'s circuits to host ", l.peer, " run at ", one,
                         " B/s, others at ", rate, " B/s; it needs one circuit rate"));
      }
      fabric.ocs_ports[h] += l.circuits;
      if (h < l.peer) {
        for (int c = 0; c < l.circuits; ++c) circuits.push_back({h, l.peer, one});
      }
    }
  }
  fabric.ocs_port_Bps.assign(n, rate);
  TrafficMatrix demand(n);
  for (int i = 0; i < n; ++i) {
    for (int j = 0; j < n; ++j) demand.at(i, j) = i == j ? 0 : model.demand(i, j);
  }
  OracleOptions o;
  o.two_hop = options.relay;
  o.one_sided = options.eps_relay;
  o.data_plane_paths = true;
  o.fewest_relayed = true;
  absl::StatusOr<OracleRouting> lp = InstalledRouting(demand, fabric, circuits, o);
  if (!lp.ok()) return lp.status();

  RegionRouting out;
  out.hosts = n;
  out.pairs.assign(static_cast<size_t>(n) * n, PairSplit{});
  for (int i = 0; i < n; ++i) {
    for (int j = 0; j < n; ++j) {
      const double d = demand.at(i, j);
      if (i == j || d <= 0) continue;
      PairSplit& split = out.at(i, j);
      const std::vector<OraclePath>& paths = lp->paths[static_cast<size_t>(i) * n + j];
      if (paths.empty()) {
        split.eps = d;  // no finite routing (or none needed): as the water-filling would
        continue;
      }
      for (const OraclePath& p : paths) {
        const double b = p.weight * d;
        switch (p.kind) {
          case OraclePathKind::kEps:
            split.eps += b;
            break;
          case OraclePathKind::kCircuit:
            split.circuit += b;
            break;
          case OraclePathKind::kCircuitCircuit:
            split.relay.push_back({p.via, b});
            break;
          case OraclePathKind::kEpsCircuit:
            split.eps_circuit.push_back({p.via, b});
            break;
          case OraclePathKind::kCircuitEps:
            split.circuit_eps.push_back({p.via, b});
            break;
        }
      }
      CapRelays(split);
    }
  }
  out.completion_s = EvaluateRouting(model, adjacency, out, options.relay_chunk_bytes);
  return out;
}

RegionRouting BestRouting(const FluidModel& model, const Adjacency& adjacency,
                          const RoutingOptions& options, RouteSolver solver) {
  RegionRouting wf = OptimiseRouting(model, adjacency, options);
  if (solver != RouteSolver::kLp) return wf;
  absl::StatusOr<RegionRouting> lp = LpRouting(model, adjacency, options);
  if (!lp.ok() || !(lp->completion_s < wf.completion_s)) return wf;
  return *std::move(lp);
}

absl::StatusOr<RouteSolver> ParseRouteSolver(std::string_view name) {
  if (name == "water-filling") return RouteSolver::kWaterFilling;
  if (name == "lp") return RouteSolver::kLp;
  return absl::InvalidArgumentError(
      absl::StrCat("route solver '", std::string(name), "': want water-filling or lp"));
}

RoutingFunction RoutingFunctionFor(RouteSolver solver) {
  return
      [solver](const FluidModel& model, const Adjacency& adjacency, const RoutingOptions& options) {
        return BestRouting(model, adjacency, options, solver);
      };
}

}  // namespace mixnet::planner
