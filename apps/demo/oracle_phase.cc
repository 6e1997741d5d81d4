// The oracle on a demo phase and the split of mixnet's gap (oracle_phase.h).
#include "apps/demo/oracle_phase.h"

#include <algorithm>
#include <chrono>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "apps/demo/step.h"
#include "sim/emulated_cluster.h"

namespace mixnet::demo {
namespace {

double MsSince(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
}

// The recorded circuits as host pairs of the spec.
absl::StatusOr<std::vector<planner::UndirectedCircuit>> HostCircuits(
    const cluster::ClusterSpec& spec, const std::vector<cluster::CircuitSpec>& circuits) {
  std::vector<planner::UndirectedCircuit> out;
  auto index = [&](const cluster::HostSpec* h) { return static_cast<int>(h - spec.hosts.data()); };
  for (const cluster::CircuitSpec& c : circuits) {
    auto a = spec.FindPort(c.ocs_switch, c.port_a);
    auto b = spec.FindPort(c.ocs_switch, c.port_b);
    if (!a || !b) {
      return absl::InvalidArgumentError(absl::StrCat("circuit ", c.ocs_switch, ":", c.port_a, "-",
                                                     c.port_b, " names a port no host is on"));
    }
    out.push_back({index(a->host), index(b->host), 0});
  }
  return out;
}

absl::Status Compute(FabricKind kind, const cluster::ClusterSpec& spec, const Workload& w,
                     OracleCache& cache, PhaseResult& r) {
  const planner::OracleFabric fabric = OracleFabricOf(spec);
  const bool has_ports =
      std::any_of(fabric.ocs_ports.begin(), fabric.ocs_ports.end(), [](int p) { return p > 0; });
  // The phase's fixed circuits: static runs the spec's; eps keeps its OCS
  // NICs dark; nonblocking has none.
  std::vector<planner::UndirectedCircuit> fixed;
  if (kind == FabricKind::kStatic) {
    absl::StatusOr<std::vector<planner::UndirectedCircuit>> c = HostCircuits(spec, spec.circuits);
    if (!c.ok()) return c.status();
    fixed = std::move(*c);
  }
  planner::OracleFabric installed_fabric = fabric;
  if (kind == FabricKind::kEps)
    std::fill(installed_fabric.ocs_ports.begin(), installed_fabric.ocs_ports.end(), 0);
  for (IterationStats& s : r.iterations) {
    s.oracle_nonblocking_ms = s.oracle_installed_ms = s.oracle_best_ms = 0;
  }
  OracleFigures f;
  f.has_best = has_ports && kind != FabricKind::kEps;
  const int64_t iterations = static_cast<int64_t>(r.iterations.size());
  for (int64_t it = 0; it < iterations; ++it) {
    int seq = 0;
    for (const StepItem& item : IterationSteps(it, iterations, w.layers(), ComputeOptions{})) {
      if (item.kind != StepItem::Kind::kAlltoall) continue;
      const auto t0 = std::chrono::steady_clock::now();
      const std::string name = absl::StrCat("all-to-all ", seq, " (", item.name, ", layer ",
                                            item.layer, ") of iteration ", it);
      TrafficMatrix m = w.DispatchMatrix(it, item.layer);
      if (item.transpose) m = m.Transposed();
      const std::vector<planner::UndirectedCircuit>* circuits = &fixed;
      std::vector<planner::UndirectedCircuit> recorded;
      if (kind == FabricKind::kMixnet) {
        auto found = r.routing.find({it, seq});
        if (found == r.routing.end()) {
          return absl::DataLossError(absl::StrCat("no circuits recorded for ", name));
        }
        absl::StatusOr<std::vector<planner::UndirectedCircuit>> c =
            HostCircuits(spec, found->second.circuits);
        if (!c.ok())
          return absl::Status(c.status().code(), absl::StrCat(name, ": ", c.status().message()));
        recorded = std::move(*c);
        circuits = &recorded;
      }
      ++seq;
      absl::StatusOr<double> a = planner::NonblockingFloor(m, fabric);
      absl::StatusOr<double> b = planner::InstalledFloor(m, installed_fabric, *circuits);
      for (const absl::Status& s : {a.status(), b.status()}) {
        if (!s.ok()) return absl::Status(s.code(), absl::StrCat(name, ": ", s.message()));
      }
      IterationStats& stats = r.iterations[static_cast<size_t>(it)];
      f.nonblocking_ms += 1000 * *a;
      f.installed_ms += 1000 * *b;
      stats.oracle_nonblocking_ms += 1000 * *a;
      stats.oracle_installed_ms += 1000 * *b;
      if (f.has_best) {
        auto key = std::make_pair(it, item.layer);
        auto found = cache.best.find(key);
        if (found == cache.best.end()) {
          absl::StatusOr<planner::BestFloor> c = planner::SearchBestFloor(m, fabric);
          if (!c.ok()) {
            return absl::Status(c.status().code(), absl::StrCat(name, ": ", c.status().message()));
          }
          found = cache.best.emplace(key, std::move(*c)).first;
        }
        f.best_ms += 1000 * found->second.floor_s;
        stats.oracle_best_ms += 1000 * found->second.floor_s;
        f.lower_bound_ms += 1000 * found->second.lower_bound_s;
      }
      f.slowest_solve_ms = std::max(f.slowest_solve_ms, MsSince(t0));
    }
  }
  if (iterations > 0) {
    for (double* v : {&f.nonblocking_ms, &f.installed_ms, &f.best_ms, &f.lower_bound_ms}) {
      *v /= static_cast<double>(iterations);
    }
  }
  f.computed = true;
  r.oracle = std::move(f);
  return absl::OkStatus();
}

}  // namespace

planner::OracleFabric OracleFabricOf(const cluster::ClusterSpec& spec) {
  planner::OracleFabric f;
  for (const cluster::HostSpec& h : spec.hosts) {
    double eps = 0, ocs = 0;
    int ports = 0;
    for (const cluster::NicSpec& n : h.nics) {
      const double Bps = n.gbps * 1e9 / 8;
      if (n.role == cluster::NicRole::kEps) {
        eps += Bps;
      } else {
        ocs = ports == 0 ? Bps : std::min(ocs, Bps);
        ++ports;
      }
    }
    f.eps_Bps.push_back(eps);
    f.ocs_ports.push_back(ports);
    f.ocs_port_Bps.push_back(ocs);
  }
  f.wire_overhead = sim::kTcpFrameOverhead + sim::kTcpAckPerPayload;
  return f;
}

void OraclePhase(FabricKind kind, bool loopback, const cluster::ClusterSpec& spec,
                 const Workload& w, OracleCache& cache, PhaseResult& r) {
  r.oracle = OracleFigures{};
  if (loopback) {
    r.oracle.why = "loopback: no link rates";
    return;
  }
  if (kind == FabricKind::kOversub) {
    r.oracle.why = "oversub: the oracle does not model the leaves' uplinks";
    return;
  }
  if (absl::Status s = Compute(kind, spec, w, cache, r); !s.ok()) {
    r.oracle = OracleFigures{};
    r.oracle.why = absl::StrCat("oracle failed: ", s.ToString());
    for (IterationStats& it : r.iterations) {
      it.oracle_nonblocking_ms = it.oracle_installed_ms = it.oracle_best_ms = 0;
    }
  }
}

std::optional<SteadyTargets> SteadyRatios(const PhaseResult& mix, const PhaseResult& nb) {
  if (!mix.status.ok() || !nb.status.ok() || !mix.oracle.computed || !mix.oracle.has_best ||
      !mix.has_steady() || !nb.has_steady()) {
    return std::nullopt;
  }
  const double best = mix.Steady(&IterationStats::oracle_best_ms);
  const double nb_floor = nb.Steady(&IterationStats::floor_ms);
  const double nb_iter = nb.Steady(&IterationStats::wall_ms);
  const double nb_first = nb.First(&IterationStats::wall_ms);
  if (best <= 0 || nb_floor <= 0 || nb_iter <= 0 || nb_first <= 0) return std::nullopt;
  SteadyTargets t;
  t.floor_over_best = mix.Steady(&IterationStats::floor_ms) / best;
  t.floor_over_nonblocking_floor = mix.Steady(&IterationStats::floor_ms) / nb_floor;
  t.iteration_over_nonblocking = mix.Steady(&IterationStats::wall_ms) / nb_iter;
  t.first_iteration_over_nonblocking = mix.First(&IterationStats::wall_ms) / nb_first;
  return t;
}

std::optional<GapSplit> SplitGap(const PhaseResult& mix, const PhaseResult& nb) {
  if (!mix.status.ok() || !nb.status.ok() || !mix.oracle.computed || !mix.oracle.has_best ||
      mix.iterations.empty() || nb.iterations.empty()) {
    return std::nullopt;
  }
  GapSplit g;
  g.mixnet_ms = mix.Mean(&IterationStats::wall_ms);
  g.nonblocking_ms = nb.Mean(&IterationStats::wall_ms);
  const double a = mix.oracle.nonblocking_ms, c = mix.oracle.best_ms, b = mix.oracle.installed_ms;
  const double f = mix.Mean(&IterationStats::floor_ms), t = mix.Mean(&IterationStats::alltoall_ms);
  const double f_nb = nb.Mean(&IterationStats::floor_ms);
  const double t_nb = nb.Mean(&IterationStats::alltoall_ms);
  g.physics_ms = c - a;
  g.planning_ms = b - c;
  g.routing_ms = (f - b) - (f_nb - a);
  g.data_plane_ms = (t - f) - (t_nb - f_nb);
  g.reconfiguration_ms = mix.Mean(&IterationStats::loss_ms) - nb.Mean(&IterationStats::loss_ms);
  g.other_ms = (g.mixnet_ms - g.nonblocking_ms) - (g.physics_ms + g.planning_ms + g.routing_ms +
                                                   g.data_plane_ms + g.reconfiguration_ms);
  return g;
}

}  // namespace mixnet::demo
