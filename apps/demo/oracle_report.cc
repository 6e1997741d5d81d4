// The demo's oracle output (see oracle_report.h).
#include "apps/demo/oracle_report.h"

#include <cstdio>
#include <optional>
#include <string>

#include "apps/demo/oracle_phase.h"

namespace mixnet::demo {
namespace {

std::optional<SteadyTargets> Steady(const std::vector<PhaseResult>& phases) {
  const PhaseResult* mix = FindPhase(phases, "mixnet");
  const PhaseResult* nb = FindPhase(phases, "nonblocking");
  if (mix == nullptr || nb == nullptr) return std::nullopt;
  return SteadyRatios(*mix, *nb);
}

std::optional<GapSplit> Split(const std::vector<PhaseResult>& phases) {
  const PhaseResult* mix = FindPhase(phases, "mixnet");
  const PhaseResult* nb = FindPhase(phases, "nonblocking");
  if (mix == nullptr || nb == nullptr) return std::nullopt;
  return SplitGap(*mix, *nb);
}

}  // namespace

void PrintOracle(const std::vector<PhaseResult>& phases) {
  bool any = false;
  for (const PhaseResult& p : phases) any = any || p.oracle.computed;
  if (!any) return;
  std::printf(
      "\n# oracle (ms per iteration, summed over the all-to-alls; floors of the same matrices "
      "with TCP's framing):\n#   (a) every NIC non-blocking, (b) the best routing on the circuits "
      "the phase ran, (c) the best circuit set,\n#   bound: no circuit set beats it; achieved: "
      "the busiest link (NIC counters); time: the all-to-alls\n");
  std::printf("%-12s %9s %9s %9s %9s %9s %9s %12s\n", "fabric", "(a)", "(b)", "(c)", "bound",
              "achieved", "time", "solve max");
  for (const PhaseResult& p : phases) {
    if (!p.status.ok()) continue;
    if (!p.oracle.computed) {
      std::printf("%-12s %s\n", p.fabric.c_str(), p.oracle.why.c_str());
      continue;
    }
    auto best = [&](double v) {
      char buf[32];
      std::snprintf(buf, sizeof buf, "%.1f", v);
      return p.oracle.has_best ? std::string(buf) : std::string("-");
    };
    std::printf("%-12s %9.1f %9.1f %9s %9s %9.1f %9.1f %9.0f ms\n", p.fabric.c_str(),
                p.oracle.nonblocking_ms, p.oracle.installed_ms, best(p.oracle.best_ms).c_str(),
                best(p.oracle.lower_bound_ms).c_str(), p.Mean(&IterationStats::floor_ms),
                p.Mean(&IterationStats::alltoall_ms), p.oracle.slowest_solve_ms);
  }
  for (const PhaseResult& p : phases) {
    if (!p.status.ok() || !p.oracle.computed || !p.oracle.has_best) continue;
    std::printf("%s per iteration, (b) / (a) and (c) / (a):", p.fabric.c_str());
    for (const IterationStats& s : p.iterations) {
      if (s.oracle_nonblocking_ms <= 0) continue;
      std::printf(" %.2f/%.2f", s.oracle_installed_ms / s.oracle_nonblocking_ms,
                  s.oracle_best_ms / s.oracle_nonblocking_ms);
    }
    std::printf("\n");
  }
  if (std::optional<GapSplit> g = Split(phases)) {
    std::printf(
        "mixnet over nonblocking: %+.1f ms per iteration (%.1f against %.1f) = physics %+.1f "
        "(c-a) + planning %+.1f (b-c) + routing %+.1f + data plane %+.1f + reconfiguration "
        "%+.1f + other %+.1f\n",
        g->mixnet_ms - g->nonblocking_ms, g->mixnet_ms, g->nonblocking_ms, g->physics_ms,
        g->planning_ms, g->routing_ms, g->data_plane_ms, g->reconfiguration_ms, g->other_ms);
  }
  if (std::optional<SteadyTargets> t = Steady(phases)) {
    std::printf(
        "steady iterations (all but the first): mixnet's achieved floor %.2fx the oracle's best "
        "floor (target <= 1.10x) and %.2fx nonblocking's floor (<= 1.15x); its iteration %.2fx "
        "nonblocking's (<= 1.15x); the first iteration %.2fx\n",
        t->floor_over_best, t->floor_over_nonblocking_floor, t->iteration_over_nonblocking,
        t->first_iteration_over_nonblocking);
  }
}

void AddOracleJson(const PhaseResult& p, nlohmann::ordered_json& j) {
  const OracleFigures& o = p.oracle;
  if (!o.computed) {
    j["oracle_nonblocking_floor_ms"] = nullptr;
    j["oracle_why"] = o.why;
    return;
  }
  j["oracle_nonblocking_floor_ms"] = o.nonblocking_ms;
  j["oracle_installed_floor_ms"] = o.installed_ms;
  j["oracle_best_floor_ms"] = o.has_best ? nlohmann::ordered_json(o.best_ms) : nullptr;
  j["oracle_lower_bound_ms"] = o.has_best ? nlohmann::ordered_json(o.lower_bound_ms) : nullptr;
  j["oracle_slowest_solve_ms"] = o.slowest_solve_ms;
}

nlohmann::ordered_json SteadyTargetsJson(const std::vector<PhaseResult>& phases) {
  std::optional<SteadyTargets> t = Steady(phases);
  if (!t) return nullptr;
  return {{"floor_over_best", t->floor_over_best},
          {"floor_over_nonblocking_floor", t->floor_over_nonblocking_floor},
          {"iteration_over_nonblocking", t->iteration_over_nonblocking},
          {"first_iteration_over_nonblocking", t->first_iteration_over_nonblocking}};
}

nlohmann::ordered_json GapSplitJson(const std::vector<PhaseResult>& phases) {
  std::optional<GapSplit> g = Split(phases);
  if (!g) return nullptr;
  return {{"mixnet_ms", g->mixnet_ms},
          {"nonblocking_ms", g->nonblocking_ms},
          {"physics_ms", g->physics_ms},
          {"planning_ms", g->planning_ms},
          {"routing_ms", g->routing_ms},
          {"data_plane_ms", g->data_plane_ms},
          {"reconfiguration_ms", g->reconfiguration_ms},
          {"other_ms", g->other_ms}};
}

}  // namespace mixnet::demo
