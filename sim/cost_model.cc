// Network cost model (see cost_model.h).
#include "sim/cost_model.h"

#include <cmath>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "runtime/common/status.h"

namespace mixnet::sim {
namespace {

void AddTree(CostBreakdown& c, double nics, const TreeBom& bom, const LinkPrices& p,
             double fibre_m) {
  c.nics += nics * p.nic;
  c.transceivers += nics * bom.transceivers * p.transceiver;
  c.eps_ports += nics * bom.eps_ports * p.eps_port;
  c.fibre += nics * bom.links * fibre_m * p.fibre_per_m;
}

// A tree whose tiers above the leaves carry 1/r of the NICs' capacity: the
// NIC's own hop (one leaf port, two transceivers, one fibre) stays, the rest
// of the bill of materials per NIC shrinks r-fold.
TreeBom AboveLeavesOver(const TreeBom& t, double r) {
  return TreeBom{.eps_ports = 1 + (t.eps_ports - 1) / r,
                 .transceivers = 2 + (t.transceivers - 2) / r,
                 .links = 1 + (t.links - 1) / r};
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
      // The rail spine (leaf uplinks and spine ports) follows
      // --rail-spine-oversub, as the rail fabric's capacity does.
      AddTree(c, nics, AboveLeavesOver(prices.rail, f.rail_spine_oversub), p, prices.fibre_m);
      break;
    case FabricKind::kOversub:
      AddTree(c, nics, AboveLeavesOver(prices.fattree, f.oversub), p, prices.fibre_m);
      break;
    case FabricKind::kTopoOpt:
    case FabricKind::kMixNetStatic:
    case FabricKind::kMixNet: {
      // TopoOpt: every NIC on the patch panel, no EPS.
      const double circuit_nics =
          f.kind == FabricKind::kTopoOpt ? nics : nics * f.alpha / f.nics_per_server;
      AddTree(c, nics - circuit_nics, prices.fattree, p, prices.fibre_m);
      c.nics += circuit_nics * p.nic;
      c.transceivers += circuit_nics * p.transceiver;
      c.fibre += circuit_nics * prices.fibre_m * p.fibre_per_m;
      if (f.kind == FabricKind::kTopoOpt) {
        c.patch_panel += circuit_nics * p.patch_panel_port;
      } else {
        c.ocs_ports += circuit_nics * p.ocs_port;
      }
      break;
    }
  }
  return c;
}

absl::StatusOr<CostEqualOversub> CostEqualOversubscription(const Prices& prices, double gbps,
                                                           int alpha, int nics_per_server) {
  if (nics_per_server < 1 || alpha < 0 || alpha > nics_per_server) {
    return absl::InvalidArgumentError(absl::StrCat("cost-equal oversubscription: alpha ", alpha,
                                                   " of ", nics_per_server, " NICs"));
  }
  const int nics = nics_per_server;  // one server: every cost here is per NIC
  FabricOptions f;
  f.link_gbps = gbps;
  f.nics_per_server = nics_per_server;
  f.alpha = alpha;
  f.kind = FabricKind::kMixNet;
  ASSIGN_OR_RETURN(CostBreakdown mix, NetworkCost(f, nics, prices));
  f.kind = FabricKind::kOversub;
  f.oversub = 1;
  ASSIGN_OR_RETURN(CostBreakdown one, NetworkCost(f, nics, prices));
  f.oversub = 2;
  ASSIGN_OR_RETURN(CostBreakdown two, NetworkCost(f, nics, prices));
  CostEqualOversub out;
  out.mixnet_per_nic = mix.total() / nics;
  out.nonblocking_per_nic = one.total() / nics;
  out.scaled_per_nic = 2 * (one.total() - two.total()) / nics;
  out.fixed_per_nic = out.nonblocking_per_nic - out.scaled_per_nic;
  if (out.mixnet_per_nic >= out.nonblocking_per_nic) return out;  // ratio 1
  if (out.mixnet_per_nic <= out.fixed_per_nic) {
    return absl::FailedPreconditionError(absl::StrFormat(
        "MixNet costs $%.0f per NIC, less than any oversubscribed tree ($%.0f per NIC fixed)",
        out.mixnet_per_nic, out.fixed_per_nic));
  }
  out.ratio = out.scaled_per_nic / (out.mixnet_per_nic - out.fixed_per_nic);
  return out;
}

double PerfPerDollarVsFatTree(double iteration_s, double cost, double ft_iteration_s,
                              double ft_cost) {
  if (!(iteration_s > 0) || !(cost > 0)) return 0;
  return (ft_iteration_s * ft_cost) / (iteration_s * cost);
}

}  // namespace mixnet::sim
