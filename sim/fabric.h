// The fabrics the simulator compares, each turning one communication phase
// (every region's all-to-all at once, or a set of server-to-server transfers)
// into flows over its links and solving them with the max-min flow solver:
//  - fattree:  non-blocking; a server's 8 NICs are its only limits;
//  - oversub:  fat-tree oversubscribed at the leaf: pods of `pod_servers`
//              servers whose uplinks carry pod NICs x rate / ratio;
//  - rail:     rail-optimised (rank-aligned traffic stays on its rail; the
//              flow model equals the non-blocking fat-tree, the cost is two tiers);
//  - topoopt:  static circuits on alpha NICs planned once for the job's mean
//              traffic (the runtime planner), EPS on the other 8 - alpha;
//  - mixnet:   regional OCS on alpha NICs re-planned per layer and direction by
//              the runtime's ClusterPlanner + Decide on the predicted matrix,
//              bytes split by the router v2 water-filling (OptimiseRouting)
//              over circuits, EPS and two-hop relays; switching delay added
//              where not hidden under compute.
// Not thread-safe: the simulator's main thread owns a Fabric (MixNet keeps the
// live circuits between phases).
#pragma once

#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"
#include "runtime/locality/traffic_matrix.h"
#include "runtime/planner/cluster_planner.h"
#include "runtime/planner/routing.h"
#include "sim/workload.h"

namespace mixnet::sim {

enum class FabricKind { kFatTree, kOversub, kRail, kTopoOpt, kMixNet };
std::string_view FabricName(FabricKind k);
// "fattree", "oversub", "rail", "topoopt", "mixnet"; InvalidArgument otherwise.
absl::StatusOr<FabricKind> ParseFabric(std::string_view name);

struct FabricOptions {
  FabricKind kind = FabricKind::kFatTree;
  double link_gbps = 400;
  int nics_per_server = 8;
  int alpha = 6;            // topoopt, mixnet: NICs on circuits
  double oversub = 3;       // oversub: leaf uplink ratio
  int pod_servers = 4;      // oversub: servers per leaf (pod)
  double switch_s = 0.025;  // mixnet: OCS switching delay
  bool relay = true;        // topoopt, mixnet: router v2 two-hop relays
  planner::PlannerOptions planner = {};
};

struct ServerFlow {
  int src = 0;
  int dst = 0;
  double bytes = 0;
};

struct A2AOptions {
  bool plan = true;      // mixnet: re-plan (false: reuse the live circuits, e.g. combine)
  double overlap_s = 0;  // compute the switching can hide behind
  double uses = 2;       // all-to-alls served by a new topology (Decide)
};

struct PhaseTime {
  double seconds = 0;   // network time, switching included
  double switch_s = 0;  // unhidden switching included in `seconds`
  int reconfigured_regions = 0;
};

class Fabric {
 public:
  virtual ~Fabric() = default;
  virtual FabricKind kind() const = 0;
  // Every region's all-to-all at once: `actual[r]` the bytes region r moves,
  // `predicted[r]` what the control plane expected (plans and path weights).
  virtual absl::StatusOr<PhaseTime> AllToAll(const std::vector<TrafficMatrix>& actual,
                                             const std::vector<TrafficMatrix>& predicted,
                                             const A2AOptions& options) = 0;
  // Server-to-server transfers at once (DP all-reduce rings, pipeline sends).
  virtual double Transfer(const std::vector<ServerFlow>& flows) = 0;
  // topoopt: plans the static circuits from the job's mean matrices (no-op elsewhere).
  virtual absl::Status Prepare(const std::vector<TrafficMatrix>& mean) { return absl::OkStatus(); }
};

// How the circuit fabrics split a region's bytes: router v2's water-filling
// (planner::OptimiseRouting of the fluid model of `predicted` on `circuits`),
// the split BuildRouteTableV2 turns into path weights. Pairs' actual bytes are
// divided in the same proportions.
planner::RegionRouting SplitForRegion(const planner::Region& region,
                                      const std::vector<planner::PlannedCircuit>& circuits,
                                      const TrafficMatrix& predicted, bool relay);

absl::StatusOr<std::unique_ptr<Fabric>> MakeFabric(const FabricOptions& options,
                                                   const Layout& layout);

}  // namespace mixnet::sim
