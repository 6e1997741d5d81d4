// Fair baselines for the demo's summary (see baselines.h).
#include "apps/demo/baselines.h"

#include <cmath>
#include <filesystem>

#include "absl/strings/str_cat.h"
#include "runtime/common/status.h"
#include "sim/fabric.h"
#include "sim/simulator.h"

namespace mixnet::demo {

absl::StatusOr<std::vector<OversubRow>> CostEqualRows(const sim::Prices& prices,
                                                      const FabricShape& shape, int leaf_hosts) {
  std::vector<OversubRow> rows;
  const int nics = 1 + shape.ocs_nics;
  for (const auto& [gbps, unused] : prices.by_gbps) {
    OversubRow row;
    row.price_gbps = gbps;
    ASSIGN_OR_RETURN(row.cost, sim::CostEqualOversubscription(prices, gbps, shape.ocs_nics, nics));
    row.uplink_gbps = leaf_hosts * nics * shape.gbps / row.cost.ratio;
    rows.push_back(row);
  }
  return rows;
}

std::string OversubRowName(double price_gbps) {
  return absl::StrCat("oversub-", std::lround(price_gbps), "G");
}

absl::StatusOr<double> PaperScaleAlltoallS(const std::string& models_dir, const std::string& model,
                                           double gbps) {
  ASSIGN_OR_RETURN(const sim::ModelConfig m, sim::FindModel(model, models_dir));
  sim::SimOptions so;
  so.fabric.kind = sim::FabricKind::kFatTree;
  so.fabric.link_gbps = gbps;
  so.gpus = m.gpus;
  ASSIGN_OR_RETURN(const sim::SimResult r, sim::Simulate(m, so));
  const int moe_layers_per_stage = (m.layers - m.dense_layers) / m.pp;
  const int phases = (m.micro_batches + m.pp - 1) * moe_layers_per_stage * 4;
  if (phases <= 0) {
    return absl::InvalidArgumentError(absl::StrCat("model ", model, ": no all-to-all phases (",
                                                   m.layers, " layers, ", m.dense_layers,
                                                   " dense, PP ", m.pp, ")"));
  }
  return r.a2a_s / phases;
}

absl::StatusOr<OversubInfo> CostEqualUplinks(const DemoOptions& o) {
  ASSIGN_OR_RETURN(sim::Prices prices, sim::LoadPrices(o.prices_path));
  const int nics = 1 + o.shape.ocs_nics;
  ASSIGN_OR_RETURN(sim::CostEqualOversub c,
                   sim::CostEqualOversubscription(prices, o.price_gbps, o.shape.ocs_nics, nics));
  OversubInfo info;
  info.cost = c;
  info.price_gbps = o.price_gbps;
  info.leaf_hosts = o.leaf_hosts;
  info.uplink_gbps = o.leaf_hosts * nics * o.shape.gbps / c.ratio;
  if (o.oversub_every_price) {
    ASSIGN_OR_RETURN(std::vector<OversubRow> rows, CostEqualRows(prices, o.shape, o.leaf_hosts));
    for (const OversubRow& row : rows) {
      if (row.price_gbps != o.price_gbps) info.other_rows.push_back(row);
    }
  }
  return info;
}

void AddPaperScale(const DemoOptions& o, OversubInfo& info) {
  // sim/models beside the price file.
  const std::string models_dir =
      std::filesystem::path(o.prices_path).parent_path().append("models").string();
  absl::StatusOr<double> a2a = PaperScaleAlltoallS(models_dir, o.sim_model, o.price_gbps);
  if (a2a.ok()) {
    info.paper_alltoall_ms = 1000 * *a2a;
  } else {
    info.paper_why = a2a.status().ToString();
  }
}

}  // namespace mixnet::demo
