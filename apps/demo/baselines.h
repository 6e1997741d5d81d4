// Fair baselines for the demo's summary: the oversubscribed EPS that costs
// what MixNet costs at every price row of the price file (each row gives its
// own ratio r, so its own leaf uplinks), and the regime the emulation stands
// for: the OCS switching time over the mean all-to-all time, in the demo and
// in the fabric simulator at paper scale. Main thread.
#pragma once

#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "apps/demo/fabric_spec.h"
#include "apps/demo/orchestrator.h"
#include "sim/config.h"
#include "sim/cost_model.h"

namespace mixnet::demo {

// One price row's equal-cost oversubscription for the demo's fabric shape.
struct OversubRow {
  double price_gbps = 0;
  sim::CostEqualOversub cost;
  double uplink_gbps = 0;  // each leaf's uplink: leaf_hosts x NICs x rate / ratio
};

// Every row of `prices`, in increasing link speed. InvalidArgument from the
// cost model (a row where no ratio >= 1 makes the costs equal).
absl::StatusOr<std::vector<OversubRow>> CostEqualRows(const sim::Prices& prices,
                                                      const FabricShape& shape, int leaf_hosts);

// The phase name of a row that is not the primary one ("oversub-100G").
std::string OversubRowName(double price_gbps);

// The simulator's mean all-to-all time of `model` (a name in `models_dir` or a
// path) on a non-blocking fat-tree of its nominal GPU count at `gbps`: the
// iteration's all-to-all time over its all-to-all phases (per pipeline slot,
// 4 per MoE layer of a stage; (micro_batches + PP - 1) slots). Seconds.
absl::StatusOr<double> PaperScaleAlltoallS(const std::string& models_dir, const std::string& model,
                                           double gbps);

// The oversubscribed fabric that costs what MixNet costs.
struct OversubInfo {
  sim::CostEqualOversub cost;
  double price_gbps = 400;
  int leaf_hosts = 4;
  double uplink_gbps = 0;  // each leaf's uplink: leaf_hosts x NICs x rate / ratio
  // --oversub-every-price: the other price rows, each run as its own phase.
  std::vector<OversubRow> other_rows;
  // The simulator's mean all-to-all at paper scale (baselines.h), for the
  // switching regime; 0 with paper_why when it could not be computed.
  double paper_alltoall_ms = 0;
  std::string paper_why;
};

// The primary row at o.price_gbps and the other rows with
// --oversub-every-price. Errors from the price file or the cost model.
absl::StatusOr<OversubInfo> CostEqualUplinks(const DemoOptions& o);

// Fills info.paper_alltoall_ms: the simulator's mean all-to-all of
// o.sim_model at o.price_gbps (sim/models beside the price file), or
// info.paper_why when it cannot be had. The demo's summary only (not the
// sweep's), so it runs there alone.
void AddPaperScale(const DemoOptions& o, OversubInfo& info);

}  // namespace mixnet::demo
