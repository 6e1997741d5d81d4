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
//              bytes split as the workers' router does (Router: v1 circuits
//              only, v2 water-filling over circuits and EPS, v2 with two-hop
//              relays); switching delay added where not hidden under compute.
// Not thread-safe: the simulator's main thread owns a Fabric (MixNet keeps the
// live circuits between phases).
#pragma once

#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"
#include "runtime/cluster/cluster_spec.h"
#include "runtime/locality/traffic_matrix.h"
#include "runtime/planner/cluster_planner.h"
#include "runtime/planner/routing.h"
#include "sim/workload.h"

namespace mixnet::sim {

enum class FabricKind { kFatTree, kOversub, kRail, kTopoOpt, kMixNet };
std::string_view FabricName(FabricKind k);
// "fattree", "oversub", "rail", "topoopt", "mixnet"; InvalidArgument otherwise.
absl::StatusOr<FabricKind> ParseFabric(std::string_view name);

// How the circuit fabrics (topoopt, mixnet) split a pair's bytes, and what the
// planner scores topologies with (planner::PlannerOptions):
//  - kV1: router v1 (runtime/router/route_table.h): a pair's bytes over its
//    circuits if it has any, else over EPS (planner::CircuitOnlyRouting;
//    scored with PlannerOptions::circuit_only);
//  - kV2: router v2 (route_table_v2.h, what the data plane runs by default):
//    the fluid model's split over circuits and EPS (planner::OptimiseRouting
//    with relay = false); with `relay`, also two-hop relays through a host with
//    circuits to both ends (OptimiseRouting relay = true, PlannerOptions::relay;
//    the data plane does not run relays yet: it sends relay shares over EPS).
enum class Router { kV1, kV2 };
// "v1" or "v2"; InvalidArgument otherwise.
absl::StatusOr<Router> ParseRouter(std::string_view name);
// "v1", "v2" or "v2+relay", as the reports print it.
std::string RoutingName(Router router, bool relay);

struct FabricOptions {
  FabricKind kind = FabricKind::kFatTree;
  double link_gbps = 400;
  int nics_per_server = 8;
  int alpha = 6;                // topoopt, mixnet: NICs on circuits
  double oversub = 3;           // oversub: leaf uplink ratio
  int pod_servers = 4;          // oversub: servers per leaf (pod)
  double switch_s = 0.025;      // mixnet: OCS switching delay
  Router router = Router::kV2;  // topoopt, mixnet: the workers' router
  bool relay = false;           // router v2 only: two-hop relays
  // Planner algorithm and budgets; its scoring (circuit_only, relay) is set
  // from `router` and `relay` by MakeFabric.
  planner::PlannerOptions planner = {};
  // topoopt, mixnet: the topology the job starts from, in spec form (region r's
  // switch is "ocs<r>", host h's OCS NIC k is port h * alpha + k + 1). Empty:
  // mixnet starts from the paper's random alpha-regular graph, topoopt from no
  // circuits until Prepare.
  std::vector<cluster::CircuitSpec> initial_circuits = {};
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
  // The live circuits per region (empty for the electrical fabrics).
  virtual std::vector<std::vector<planner::PlannedCircuit>> LiveCircuits() const { return {}; }
  // The routing a circuit fabric runs ("v1", "v2", "v2+relay"); "eps" elsewhere.
  virtual std::string Routing() const { return "eps"; }
};

// How the circuit fabrics split a region's bytes, from the fluid model of
// `predicted` on `circuits`: router v1's CircuitOnlyRouting (what
// BuildRouteTable's paths carry), or router v2's OptimiseRouting (the split
// BuildRouteTableV2 turns into path weights), with or without relays. Pairs'
// actual bytes are divided in the same proportions.
planner::RegionRouting SplitForRegion(const planner::Region& region,
                                      const std::vector<planner::PlannedCircuit>& circuits,
                                      const TrafficMatrix& predicted, Router router, bool relay);

// InvalidArgument for a bad link speed, alpha, oversubscription ratio, relays
// with router v1, or a start topology that does not fit the regions.
absl::StatusOr<std::unique_ptr<Fabric>> MakeFabric(const FabricOptions& options,
                                                   const Layout& layout);

}  // namespace mixnet::sim
