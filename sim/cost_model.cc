// Network cost model (see cost_model.h).
#include "sim/cost_model.h"

#include <cmath>

namespace mixnet::sim {
namespace {

void AddTree(CostBreakdown& c, double nics, const TreeBom& bom, const LinkPrices& p,
             double fibre_m) {
  c.nics += nics * p.nic;
  c.transceivers += nics * bom.transceivers * p.transceiver;
  c.eps_ports += nics * bom.eps_ports * p.eps_port;
  c.fibre += nics * bom.links * fibre_m * p.fibre_per_m;
}

}  // namespace

absl::StatusOr<CostBreakdown> NetworkCost(const FabricOptions& f, int gpus, const Prices& prices) {
  const int gbps = static_cast<int>(std::lround(f.link_gbps));
  auto lp = prices.At(gbps);
  if (!lp.ok()) return lp.status();
  const LinkPrices& p = *lp;
  CostBreakdown c;
  const double nics = gpus;
  switch (f.kind) {
    case FabricKind::kFatTree:
      AddTree(c, nics, prices.fattree, p, prices.fibre_m);
      break;
    case FabricKind::kRail:
      AddTree(c, nics, prices.rail, p, prices.fibre_m);
      break;
    case FabricKind::kOversub: {
      const double r = f.oversub;
      const TreeBom& t = prices.fattree;
      const TreeBom bom{.eps_ports = 1 + (t.eps_ports - 1) / r,
                        .transceivers = 2 + (t.transceivers - 2) / r,
                        .links = 1 + (t.links - 1) / r};
      AddTree(c, nics, bom, p, prices.fibre_m);
      break;
    }
    case FabricKind::kTopoOpt:
    case FabricKind::kMixNet: {
      const double circuit_nics = nics * f.alpha / f.nics_per_server;
      AddTree(c, nics - circuit_nics, prices.fattree, p, prices.fibre_m);
      c.nics += circuit_nics * p.nic;
      c.transceivers += circuit_nics * p.transceiver;
      c.fibre += circuit_nics * prices.fibre_m * p.fibre_per_m;
      if (f.kind == FabricKind::kMixNet) {
        c.ocs_ports += circuit_nics * p.ocs_port;
      } else {
        c.patch_panel += circuit_nics * p.patch_panel_port;
      }
      break;
    }
  }
  return c;
}

double PerfPerDollarVsFatTree(double iteration_s, double cost, double ft_iteration_s,
                              double ft_cost) {
  if (!(iteration_s > 0) || !(cost > 0)) return 0;
  return (ft_iteration_s * ft_cost) / (iteration_s * cost);
}

}  // namespace mixnet::sim
