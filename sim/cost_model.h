// Network cost of a cluster per fabric from the price file (config.h): NICs,
// transceivers, EPS switch ports, OCS ports, patch-panel ports and fibre, and
// performance per dollar normalised to the non-blocking fat-tree. GPUs and
// servers are not counted (the same in every design). Pure computation.
#pragma once

#include "absl/status/statusor.h"
#include "sim/config.h"
#include "sim/fabric.h"

namespace mixnet::sim {

struct CostBreakdown {
  double nics = 0;
  double transceivers = 0;
  double eps_ports = 0;
  double ocs_ports = 0;
  double patch_panel = 0;
  double fibre = 0;
  double total() const { return nics + transceivers + eps_ports + ocs_ports + patch_panel + fibre; }
};

// One NIC per GPU. Electrical NICs take the tree's bill of materials per NIC:
// fattree `prices.fattree`; oversub with ratio r keeps the leaf's down port,
// the NIC and its leaf transceiver and divides the rest by r; rail
// `prices.rail`. mixnet / mixnet-static: alpha of 8 NICs per server on
// circuits (NIC, its transceiver, one fibre and an OCS port), the other NICs on
// a non-blocking fat-tree; mixnet-static is MixNet's hardware run without
// switching. topoopt: every NIC on the patch panel (NIC, transceiver, fibre,
// patch-panel port), no EPS.
// NotFound when the price file lacks the link speed.
absl::StatusOr<CostBreakdown> NetworkCost(const FabricOptions& fabric, int gpus,
                                          const Prices& prices);

// The oversubscription ratio r at which an oversubscribed fat-tree costs what
// MixNet costs with `alpha` of `nics_per_server` NICs on circuits, at link
// speed `gbps` (both from NetworkCost, so both from the price file). The
// oversubscribed tree's cost per NIC is A + B / r (the NIC, its leaf port and
// transceiver are fixed, the rest scales with 1 / r), so r = B / (C_mixnet - A).
// 1 when MixNet costs at least the non-blocking tree. NotFound for an unknown
// speed; FailedPrecondition when MixNet costs less than any oversubscribed
// tree (C_mixnet <= A), naming both.
struct CostEqualOversub {
  double ratio = 1;
  double mixnet_per_nic = 0;       // C_mixnet / NICs
  double fixed_per_nic = 0;        // A
  double scaled_per_nic = 0;       // B
  double nonblocking_per_nic = 0;  // A + B
};
absl::StatusOr<CostEqualOversub> CostEqualOversubscription(const Prices& prices, double gbps,
                                                           int alpha, int nics_per_server);

// (1 / iteration) / cost, relative to the fat-tree's.
double PerfPerDollarVsFatTree(double iteration_s, double cost, double fattree_iteration_s,
                              double fattree_cost);

}  // namespace mixnet::sim
