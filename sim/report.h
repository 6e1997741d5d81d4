// Output of the fabric simulator: a text table, CSV, one JSON object per line,
// and gnuplot plots (iteration time per fabric against link speed; perf per
// dollar), the PNGs made only when `gnuplot` is on the PATH. Main thread.
#pragma once

#include <ostream>
#include <string>
#include <vector>

#include "absl/status/status.h"

namespace mixnet::sim {

struct ResultRow {
  std::string model;
  std::string fabric;
  int gpus = 0;
  double link_gbps = 0;
  double iteration_ms = 0;
  double cost_usd = 0;
  double perf_per_dollar_vs_fattree = 0;
  double a2a_ms = 0;
  double switch_ms = 0;
  double compute_ms = 0;
  double dp_ms = 0;
  double pp_ms = 0;
  double reconfigurations = 0;  // region switches per iteration
  double switch_rounds = 0;     // phases per iteration with a switch
  int warmup_reconfigurations = 0;
  std::string routing;  // "v1", "v2", "v2+relay" (circuit fabrics) or "eps"
  double wall_s = 0;
};

void WriteTable(const std::vector<ResultRow>& rows, std::ostream& out);
void WriteCsv(const std::vector<ResultRow>& rows, std::ostream& out);
std::string ToJsonLine(const ResultRow& row);
// Writes <dir>/fabricsim.csv, <dir>/plots.gp and, when gnuplot is found,
// <dir>/iteration_<model>.png and <dir>/perf_per_dollar_<model>.png.
// `made_png` tells whether gnuplot ran. Internal error naming the file on I/O failure.
absl::Status WritePlots(const std::vector<ResultRow>& rows, const std::string& dir, bool& made_png);

}  // namespace mixnet::sim
