// The route bench's table and JSON lines (see route_report.h).
#include "bench/route_bench/route_report.h"

#include <cmath>

#include "absl/strings/str_format.h"
#include "apps/demo/accounting.h"
#include "nlohmann/json.hpp"

namespace mixnet::bench {
namespace {

nlohmann::ordered_json RowJson(const CaseFigures& c, const RouterFigures& f, const RunInfo& info) {
  nlohmann::ordered_json j = {{"case", c.case_name},
                              {"router", f.router},
                              {"measured_ms", f.measured_ms},
                              {"predicted_ms", f.predicted_ms},
                              {"simulated_ms", f.simulated_ms},
                              {"floor_ms", f.floor_ms},
                              {"utilisation", f.utilisation},
                              {"busiest", f.busiest},
                              {"link_bound", f.utilisation >= demo::kLinkBound},
                              {"measured_min_ms", f.measured_min_ms},
                              {"measured_max_ms", f.measured_max_ms},
                              {"iterations_ms", f.iterations_ms},
                              {"cold_ms", f.cold_ms},
                              {"cold_iterations_ms", f.cold_iterations_ms},
                              {"model_ms", f.model_ms},
                              {"wire_factor", f.wire_factor},
                              {"lower_bound_ms", c.lower_bound_ms},
                              {"oracle_installed_ms", c.oracle_installed_ms},
                              {"oracle_best_ms", c.oracle_best_ms},
                              {"oracle_bound_ms", c.oracle_bound_ms},
                              {"oracle_dataplane_ms", c.oracle_dataplane_ms},
                              {"v2_split_ms", c.v2_split_ms},
                              {"circuits", c.circuits},
                              {"relay", info.relay},
                              {"route_solver", info.route_solver},
                              {"control_tc", info.control_tos},
                              {"init_cwnd", info.init_cwnd},
                              {"iterations", f.iterations},
                              {"warmup", info.warmup},
                              {"retransmits", f.retransmits},
                              {"cpu_idle", f.cpu_idle},
                              {"bytes_bad", f.bytes_bad}};
  if (&f == &c.v2) j["v2_vs_v1"] = c.ratio();
  return j;
}

std::string Pct(double x) { return absl::StrFormat("%.0f%%", 100 * x); }

}  // namespace

void PrintPreamble(const RunInfo& i, bool json, std::ostream& out) {
  if (json) return;
  out << absl::StrFormat(
      "# mixnet_route_bench: router v1 vs v2 on the emulated cluster: %d hosts, 1 EPS + %d OCS "
      "NICs each at %g Gbit/s,\n# %.2f MiB per host per all-to-all, %d warm-up + %d timed "
      "iterations (median), relays %s, v2's split by %s, control class %s,\n# initial TCP "
      "window %d "
      "segments. Each iteration runs each router twice in a row: the first call (cold) finds "
      "its\n# connections idle since the other router's calls (TCP restarts their windows), "
      "the second (warm) in use.\n"
      "# measured: slowest rank's alltoallv, warm calls; predicted: fluid model x wire "
      "bytes/payload; simulated: the\n# simulator's emulation mode (max-min flows, frames, ACKs, "
      "relays' store and "
      "forward); floor: busiest link's bytes / rate;\n# util: floor / measured (link-bound at >= "
      "%s); idle: the "
      "CPUs' idle share during the all-to-alls; cold: the cold calls' median.\n",
      i.hosts, i.ocs_nics, i.gbps, i.bytes_per_host / (1 << 20), i.warmup, i.iters,
      i.relay ? "on" : "off", i.route_solver,
      i.control_tos >= 0 ? absl::StrFormat("TOS %#x (strict priority)", i.control_tos) : "off",
      i.init_cwnd, Pct(demo::kLinkBound));
  out << absl::StrFormat(
      "%-13s %4s %-3s %10s %17s %10s %6s %10s %6s %9s %5s %-14s %7s %5s %6s %8s %6s\n", "case",
      "circ", "rtr", "measured", "(min..max)", "predicted", "m/p", "simulated", "m/s", "floor",
      "util", "busiest", "retrans", "idle", "v2/v1", "cold", "c/p");
  out.flush();
}

void PrintCase(const CaseFigures& c, const RunInfo& info, bool json, std::ostream& out) {
  for (const RouterFigures* f : {&c.v1, &c.v2}) {
    if (json) {
      out << RowJson(c, *f, info).dump() << "\n";
      continue;
    }
    const bool first = f == &c.v1;
    const std::string range =
        absl::StrFormat("(%.0f..%.0f)", f->measured_min_ms, f->measured_max_ms);
    out << absl::StrFormat(
        "%-13s %4s %-3s %10.1f %17s %10.1f %6.2f %10.1f %6.2f %9.1f %5s %-14s %7d %5s %6s %8.1f "
        "%6.2f\n",
        first ? c.case_name : "", first ? absl::StrCat(c.circuits) : "", f->router, f->measured_ms,
        range, f->predicted_ms, f->predicted_ms > 0 ? f->measured_ms / f->predicted_ms : 0.0,
        f->simulated_ms, f->simulated_ms > 0 ? f->measured_ms / f->simulated_ms : 0.0, f->floor_ms,
        Pct(f->utilisation), f->busiest, f->retransmits, f->cpu_idle < 0 ? "?" : Pct(f->cpu_idle),
        first ? "" : absl::StrFormat("%.2f", c.ratio()), f->cold_ms,
        f->predicted_ms > 0 ? f->cold_ms / f->predicted_ms : 0.0);
  }
  if (!json) {
    out << absl::StrFormat(
        "%-13s oracle, payload ms: (b) these circuits %.1f (%.1f on the data plane's paths), (c) "
        "best circuits %.1f (bound %.1f); model v1 %.1f, v2 %.1f (split in %.1f ms)\n",
        "", c.oracle_installed_ms, c.oracle_dataplane_ms, c.oracle_best_ms, c.oracle_bound_ms,
        c.v1.model_ms, c.v2.model_ms, c.v2_split_ms);
  }
  out.flush();
}

void PrintVerdicts(const std::vector<CaseFigures>& cases, bool json, std::ostream& out) {
  const Verdicts v = Judge(cases);
  if (json) {
    nlohmann::ordered_json j = {{"summary", true},
                                {"cases", cases.size()},
                                {"link_bound", v.link_bound},
                                {"cpu_bound", v.cpu_bound},
                                {"min_utilisation", v.min_utilisation}};
    nlohmann::ordered_json ratios = nlohmann::ordered_json::object();
    for (const CaseFigures& c : cases) ratios[c.case_name] = c.ratio();
    j["v2_vs_v1"] = ratios;
    j["gain_target"] = {{"max_ratio", kGainTarget}, {"cases", v.gain_ratio}, {"met", v.gain_met}};
    j["regression_target"] = {{"max_ratio", kRegressionTarget},
                              {"worst_ratio", v.worst_ratio},
                              {"worst_case", v.worst_case},
                              {"met", v.no_regression}};
    j["model_target"] = {{"tolerance", kModelTolerance},
                         {"worst_error", v.worst_model_error},
                         {"worst_row", v.worst_model_row},
                         {"met", v.model_met}};
    j["cold_calls"] = {{"worst_error", v.worst_cold_error}, {"worst_row", v.worst_cold_row}};
    out << j.dump() << "\n";
    out.flush();
    return;
  }
  if (v.link_bound) {
    out << absl::StrFormat("# link-bound: every row's busiest link ran at >= %s (lowest %s).\n",
                           Pct(demo::kLinkBound), Pct(v.min_utilisation));
  } else if (v.cpu_bound) {
    out << absl::StrFormat(
        "# WARNING: not link-bound: a row's busiest link ran at %s (< %s): something other "
        "than the links (CPUs, losses, round trips) set that time; ratios say little.\n",
        Pct(v.min_utilisation), Pct(demo::kCpuBound));
  } else {
    out << absl::StrFormat(
        "# partly link-bound: lowest busiest-link utilisation %s (link-bound at >= %s).\n",
        Pct(v.min_utilisation), Pct(demo::kLinkBound));
  }
  std::string gains;
  for (const auto& [name, r] : v.gain_ratio) gains += absl::StrFormat(" %s %.2f", name, r);
  out << absl::StrFormat("# target v2 <= %.2f x v1 on partner-0.5 and expert8:%s -> %s\n",
                         kGainTarget, gains.empty() ? " (neither ran)" : gains,
                         v.gain_met ? "met" : "MISSED");
  out << absl::StrFormat("# target no case v2 > %.2f x v1: worst %.2f (%s) -> %s\n",
                         kRegressionTarget, v.worst_ratio, v.worst_case,
                         v.no_regression ? "met" : "MISSED");
  out << absl::StrFormat(
      "# target measured within +-%.0f%% of predicted: worst %+.0f%% (%s) -> %s\n",
      100 * kModelTolerance, 100 * v.worst_model_error, v.worst_model_row,
      v.model_met ? "met" : "MISSED");
  if (!v.worst_cold_row.empty()) {
    out << absl::StrFormat(
        "# cold calls (not a target; the model has no restarted windows): worst %+.0f%% (%s)\n",
        100 * v.worst_cold_error, v.worst_cold_row);
  }
  out.flush();
}

}  // namespace mixnet::bench
