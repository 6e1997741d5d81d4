// Table, CSV, JSON and gnuplot output (see report.h). Main thread.
#include "sim/report.h"

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>
#include <set>

#include "absl/strings/str_cat.h"
#include "fmt/format.h"
#include "nlohmann/json.hpp"

namespace mixnet::sim {

void WriteTable(const std::vector<ResultRow>& rows, std::ostream& out) {
  out << fmt::format(
      "{:<16} {:<8} {:<8} {:>6} {:>5} {:>12} {:>10} {:>9} {:>9} {:>9} {:>8} {:>14} {:>10}\n",
      "model", "fabric", "routing", "gpus", "gbps", "iteration_ms", "a2a_ms", "switch_ms", "dp_ms",
      "pp_ms", "reconf", "cost_usd", "perf/$ vs FT");
  for (const ResultRow& r : rows)
    out << fmt::format(
        "{:<16} {:<8} {:<8} {:>6} {:>5} {:>12.1f} {:>10.1f} {:>9.1f} {:>9.1f} {:>9.1f} {:>8.4g} "
        "{:>14.0f} {:>10.3f}\n",
        r.model, r.fabric, r.routing, r.gpus, r.link_gbps, r.iteration_ms, r.a2a_ms, r.switch_ms,
        r.dp_ms, r.pp_ms, r.reconfigurations, r.cost_usd, r.perf_per_dollar_vs_fattree);
}

void WriteCsv(const std::vector<ResultRow>& rows, std::ostream& out) {
  out << "model,fabric,routing,gpus,link_gbps,iteration_ms,a2a_ms,switch_ms,compute_ms,dp_ms,"
         "pp_ms,reconfigurations,switch_rounds,warmup_reconfigurations,cost_usd,"
         "perf_per_dollar_vs_fattree,wall_s\n";
  for (const ResultRow& r : rows)
    out << fmt::format(
        "{},{},{},{},{},{:.4f},{:.4f},{:.4f},{:.4f},{:.4f},{:.4f},{},{},{},{:.2f},{:.5f},{:.3f}\n",
        r.model, r.fabric, r.routing, r.gpus, r.link_gbps, r.iteration_ms, r.a2a_ms, r.switch_ms,
        r.compute_ms, r.dp_ms, r.pp_ms, r.reconfigurations, r.switch_rounds,
        r.warmup_reconfigurations, r.cost_usd, r.perf_per_dollar_vs_fattree, r.wall_s);
}

std::string ToJsonLine(const ResultRow& r) {
  nlohmann::ordered_json j;
  j["model"] = r.model;
  j["fabric"] = r.fabric;
  j["routing"] = r.routing;
  j["gpus"] = r.gpus;
  j["link_gbps"] = r.link_gbps;
  j["iteration_ms"] = r.iteration_ms;
  j["cost_usd"] = r.cost_usd;
  j["perf_per_dollar_vs_fattree"] = r.perf_per_dollar_vs_fattree;
  j["a2a_ms"] = r.a2a_ms;
  j["switch_ms"] = r.switch_ms;
  j["compute_ms"] = r.compute_ms;
  j["dp_ms"] = r.dp_ms;
  j["pp_ms"] = r.pp_ms;
  j["reconfigurations"] = r.reconfigurations;
  j["switch_rounds"] = r.switch_rounds;
  j["warmup_reconfigurations"] = r.warmup_reconfigurations;
  j["wall_s"] = r.wall_s;
  return j.dump();
}

namespace {

bool GnuplotOnPath() {
  const char* path = std::getenv("PATH");
  if (path == nullptr) return false;
  std::string p = path;
  size_t start = 0;
  while (start <= p.size()) {
    const size_t end = p.find(':', start);
    const std::string dir =
        p.substr(start, end == std::string::npos ? std::string::npos : end - start);
    if (!dir.empty() && std::filesystem::exists(std::filesystem::path(dir) / "gnuplot"))
      return true;
    if (end == std::string::npos) break;
    start = end + 1;
  }
  return false;
}

}  // namespace

absl::Status WritePlots(const std::vector<ResultRow>& rows, const std::string& dir,
                        bool& made_png) {
  made_png = false;
  std::error_code ec;
  std::filesystem::create_directories(dir, ec);
  if (ec) return absl::InternalError(absl::StrCat("mkdir ", dir, ": ", ec.message()));
  std::set<std::string> models, fabrics;
  for (const ResultRow& r : rows) {
    models.insert(r.model);
    fabrics.insert(r.fabric);
  }
  // One data file per (model, fabric): link_gbps iteration_ms perf_per_dollar.
  for (const std::string& m : models)
    for (const std::string& f : fabrics) {
      std::map<double, const ResultRow*> by_speed;
      for (const ResultRow& r : rows)
        if (r.model == m && r.fabric == f) by_speed[r.link_gbps] = &r;
      if (by_speed.empty()) continue;
      const std::string file = absl::StrCat(dir, "/", m, "_", f, ".dat");
      std::ofstream out(file);
      if (!out) return absl::InternalError(absl::StrCat("cannot write ", file));
      for (const auto& [g, r] : by_speed)
        out << fmt::format("{} {:.4f} {:.5f}\n", g, r->iteration_ms, r->perf_per_dollar_vs_fattree);
    }
  {
    const std::string file = dir + "/fabricsim.csv";
    std::ofstream out(file);
    if (!out) return absl::InternalError(absl::StrCat("cannot write ", file));
    WriteCsv(rows, out);
  }
  const std::string script = dir + "/plots.gp";
  std::ofstream gp(script);
  if (!gp) return absl::InternalError(absl::StrCat("cannot write ", script));
  gp << "if (strstrt(GPVAL_TERMINALS, 'pngcairo') > 0) { set terminal pngcairo size 900,600 } "
        "else { set terminal png size 900,600 }\n"
        "set key outside right\nset grid\n"
        "set logscale x 2\nset xlabel 'link speed (Gb/s)'\n";
  for (const std::string& m : models) {
    for (int plot = 0; plot < 2; ++plot) {
      gp << fmt::format("set output '{}/{}_{}.png'\n", dir,
                        plot == 0 ? "iteration" : "perf_per_dollar", m);
      gp << fmt::format("set title '{}: {}'\nset ylabel '{}'\nset yrange [0:*]\n", m,
                        plot == 0 ? "iteration time" : "performance per dollar vs fat-tree",
                        plot == 0 ? "iteration (ms)" : "perf/$ (fat-tree = 1)");
      std::string cmd = "plot ";
      bool first = true;
      for (const std::string& f : fabrics) {
        const std::string file = absl::StrCat(dir, "/", m, "_", f, ".dat");
        if (!std::filesystem::exists(file)) continue;
        cmd += fmt::format("{}'{}' using 1:{} with linespoints title '{}'", first ? "" : ", ", file,
                           plot == 0 ? 2 : 3, f);
        first = false;
      }
      gp << cmd << "\n";
    }
  }
  gp.close();
  if (!GnuplotOnPath()) return absl::OkStatus();
  const std::string cmd = absl::StrCat("gnuplot '", script, "'");
  if (std::system(cmd.c_str()) != 0)
    return absl::InternalError(absl::StrCat("gnuplot failed on ", script));
  made_png = true;
  return absl::OkStatus();
}

}  // namespace mixnet::sim
