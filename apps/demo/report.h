// The demo's output: the header (workload, fabrics, how the equal-cost EPS
// was derived), the per-iteration table, the per-fabric summary with what
// bounds each fabric (floor, busiest link's utilisation, retransmissions, CPU
// idle), the ratios (only when every fabric is link-bound enough), the JSON
// lines, the gnuplot figure and the sweep tables. Main thread.
#pragma once

#include <string>
#include <vector>

#include "absl/status/status.h"
#include "apps/demo/baselines.h"
#include "apps/demo/orchestrator.h"
#include "apps/demo/phase_result.h"
#include "apps/demo/workload.h"
#include "sim/cost_model.h"

namespace mixnet::demo {

void PrintHeader(const DemoOptions& o, const Workload& w, const OversubInfo& oversub);
void PrintReport(const DemoOptions& o, const OversubInfo& oversub,
                 const std::vector<PhaseResult>& phases);
// <plot_dir>/iterations.dat, iterations.gp and iterations.png (gnuplot).
absl::Status WritePlot(const DemoOptions& o, const std::vector<PhaseResult>& phases);

struct SweepCell {
  double affine_share = 0;
  double switch_ms = 0;
  std::vector<PhaseResult> phases;  // static, nonblocking, mixnet
};
void PrintSweepCell(const DemoOptions& o, const SweepCell& cell);
void PrintSweepTable(const DemoOptions& o, const std::vector<SweepCell>& cells);

// The summary's verdict: true when a fabric that ran stayed below kCpuBound.
bool CpuBound(const std::vector<PhaseResult>& phases);

}  // namespace mixnet::demo
