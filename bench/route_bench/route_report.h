// The route bench's output: a human table (default) or one JSON object per
// line (--json): per case and router {"case", "router", "measured_ms",
// "predicted_ms", "floor_ms", "utilisation", "busiest", ...}, then one
// summary object {"summary": true, "link_bound", ...} with the verdicts.
// Rows are printed as each case finishes. Main thread of the launcher.
#pragma once

#include <ostream>
#include <string>
#include <vector>

#include "bench/route_bench/route_results.h"

namespace mixnet::bench {

// What the run was (human mode: a few lines; JSON mode: nothing).
struct RunInfo {
  int hosts = 0;
  int ocs_nics = 0;
  double gbps = 0;
  double bytes_per_host = 0;
  int warmup = 0;
  int iters = 0;
  bool relay = false;
  std::string route_solver = "water-filling";  // router v2's split
  int control_tos = -1;                        // the control class (-1: none)
  int init_cwnd = 10;                          // the hosts' initial TCP window, segments
};

void PrintPreamble(const RunInfo& info, bool json, std::ostream& out);
// Both routers' rows of one case.
void PrintCase(const CaseFigures& c, const RunInfo& info, bool json, std::ostream& out);
void PrintVerdicts(const std::vector<CaseFigures>& cases, bool json, std::ostream& out);

}  // namespace mixnet::bench
