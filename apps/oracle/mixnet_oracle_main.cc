// mixnet-oracle: the all-to-all oracle (runtime/planner/oracle.h) on one
// matrix read as JSON (runtime/planner/oracle_input.h) from a file or stdin.
// Prints (a) the non-blocking floor, (b) the floor on the given circuits,
// (c) the best floor over every circuit set the ports allow, with the set and
// the relaxation's lower bound; `--json` prints one object instead. Exit 0 on
// success, 2 on bad input, 1 when the solver fails. Single-threaded.
#include <chrono>
#include <cmath>
#include <cstdio>
#include <fstream>
#include <iostream>
#include <sstream>
#include <string>

#include "CLI/CLI.hpp"
#include "absl/strings/str_cat.h"
#include "nlohmann/json.hpp"
#include "runtime/planner/oracle.h"
#include "runtime/planner/oracle_input.h"

namespace {

using mixnet::planner::BestFloor;
using mixnet::planner::OracleInput;

// Milliseconds, or null when a floor is infinite (a pair with no path).
nlohmann::json Ms(double s) {
  return std::isfinite(s) ? nlohmann::json(s * 1e3) : nlohmann::json();
}

std::string MsText(double s) {
  return std::isfinite(s) ? absl::StrCat(s * 1e3) : std::string("unreachable");
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"mixnet-oracle: the best floor of one all-to-all on a fabric of EPS and circuits"};
  std::string input = "-";
  bool json = false, direct_only = false;
  mixnet::planner::OracleOptions options;
  app.add_option("input", input, "the matrix and fabric as JSON (- for stdin)")
      ->capture_default_str();
  app.add_flag("--json", json, "one JSON object instead of the text report");
  app.add_flag("--direct-only", direct_only,
               "each pair on its own circuits and EPS only (no two-hop paths)");
  app.add_option("--max-evaluations", options.max_evaluations,
                 "inner LPs the circuit-set search may solve")
      ->capture_default_str()
      ->check(CLI::PositiveNumber);
  CLI11_PARSE(app, argc, argv);
  options.two_hop = !direct_only;

  std::stringstream text;
  if (input == "-") {
    text << std::cin.rdbuf();
  } else {
    std::ifstream f(input);
    if (!f) {
      std::fprintf(stderr, "mixnet-oracle: cannot open %s\n", input.c_str());
      return 2;
    }
    text << f.rdbuf();
  }
  absl::StatusOr<OracleInput> in = mixnet::planner::ParseOracleInput(text.str());
  if (!in.ok()) {
    std::fprintf(stderr, "mixnet-oracle: %s: %s\n", input.c_str(),
                 std::string(in.status().message()).c_str());
    return 2;
  }
  const auto t0 = std::chrono::steady_clock::now();
  absl::StatusOr<double> nonblocking = mixnet::planner::NonblockingFloor(in->demand, in->fabric);
  absl::StatusOr<double> installed = 0.0;
  if (in->circuits) {
    installed = mixnet::planner::InstalledFloor(in->demand, in->fabric, *in->circuits, options);
  }
  absl::StatusOr<BestFloor> best = mixnet::planner::SearchBestFloor(
      in->demand, in->fabric, in->circuits ? &*in->circuits : nullptr, options);
  const double solve_ms =
      std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
  for (const absl::Status& s : {nonblocking.status(), installed.status(), best.status()}) {
    if (!s.ok()) {
      std::fprintf(stderr, "mixnet-oracle: %s: %s\n", input.c_str(),
                   std::string(s.message()).c_str());
      return s.code() == absl::StatusCode::kInvalidArgument ? 2 : 1;
    }
  }
  nlohmann::json set = nlohmann::json::array();
  for (const auto& c : best->circuits) set.push_back({in->hosts[c.a], in->hosts[c.b]});
  if (json) {
    nlohmann::json out = {{"hosts", in->hosts.size()},
                          {"nonblocking_floor_ms", Ms(*nonblocking)},
                          {"best_floor_ms", Ms(best->floor_s)},
                          {"lower_bound_ms", Ms(best->lower_bound_s)},
                          {"at_bound", best->at_bound},
                          {"best_circuits", set},
                          {"evaluations", best->evaluations},
                          {"two_hop", options.two_hop},
                          {"solve_ms", solve_ms}};
    if (in->circuits) out["installed_floor_ms"] = Ms(*installed);
    std::cout << out.dump() << "\n";
    return 0;
  }
  std::cout << "hosts: " << in->hosts.size()
            << ", paths: " << (options.two_hop ? "direct and two-hop" : "direct only") << "\n";
  std::cout << "(a) non-blocking floor:        " << MsText(*nonblocking) << " ms\n";
  if (in->circuits) {
    std::cout << "(b) floor on the circuits given: " << MsText(*installed) << " ms ("
              << in->circuits->size() << " circuits)\n";
  }
  std::cout << "(c) best floor over circuit sets: " << MsText(best->floor_s) << " ms ("
            << best->evaluations << " LPs" << (best->at_bound ? ", meets the lower bound" : "")
            << ")\n";
  std::cout << "    lower bound (relaxation):     " << MsText(best->lower_bound_s) << " ms\n";
  std::cout << "    best set: " << set.dump() << "\n";
  std::cout << "solved in " << solve_ms << " ms\n";
  return 0;
}
