// The fabrics the simulator compares, each turning one communication phase
// (every region's all-to-all at once, or a set of server-to-server transfers)
// into flows over its links and solving them with the max-min flow solver:
//  - fattree:  non-blocking; a server's 8 NICs are its only limits;
//  - oversub:  fat-tree oversubscribed at the leaf: pods of `pod_servers`
//              servers whose uplinks carry pod NICs x rate / ratio;
//  - rail:     rail-optimised (rail_fabric.cc): NIC k of every server on rail
//              k's leaf, leaves of `rail_group_servers` servers under a spine;
//              each GPU's bytes pinned to its destination GPU's rail (PXN);
//  - topoopt:  TopoOpt (direct_connect.h): every NIC on one static
//              direct-connect topology planned once per job from the job's
//              traffic, no EPS, multi-hop forwarding through hosts;
//  - mixnet-static: MixNet's NICs (regional circuits on alpha, EPS on the
//              rest) with one plan per job from the mean matrix, never switched;
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

inline constexpr double kBytesPerGbit = 1e9 / 8;  // link rates are in Gbit/s

enum class FabricKind { kFatTree, kOversub, kRail, kTopoOpt, kMixNetStatic, kMixNet };
std::string_view FabricName(FabricKind k);
// "fattree", "oversub", "rail", "topoopt", "mixnet-static", "mixnet";
// InvalidArgument otherwise.
absl::StatusOr<FabricKind> ParseFabric(std::string_view name);

// How the regional circuit fabrics (mixnet-static, mixnet) split a pair's bytes, and what the
// planner scores topologies with (planner::PlannerOptions):
//  - kV1: router v1 (runtime/router/route_table.h): a pair's bytes over its
//    circuits if it has any, else over EPS (planner::CircuitOnlyRouting;
//    scored with PlannerOptions::circuit_only);
//  - kV2: router v2 (route_table_v2.h, what the data plane runs by default):
//    the fluid model's split over circuits and EPS (planner::OptimiseRouting
//    with relay = false); with `relay`, also two-hop relays through a third
//    host, over two circuits or one circuit and one EPS hop (OptimiseRouting
//    relay = true, PlannerOptions::relay), as the collectives run them
//    (runtime/collectives/alltoall_relay.cc).
enum class Router { kV1, kV2 };
// "v1" or "v2"; InvalidArgument otherwise.
absl::StatusOr<Router> ParseRouter(std::string_view name);
// "v1", "v2" or "v2+relay", as the reports print it.
std::string RoutingName(Router router, bool relay);

struct FabricOptions {
  FabricKind kind = FabricKind::kFatTree;
  double link_gbps = 400;
  int nics_per_server = 8;
  int alpha = 6;                  // mixnet-static, mixnet: NICs on circuits
  double oversub = 3;             // oversub: leaf uplink ratio
  int pod_servers = 4;            // oversub: servers per leaf (pod)
  int rail_group_servers = 32;    // rail: servers under one rail leaf (per rail)
  double rail_spine_oversub = 1;  // rail: leaf down / up capacity towards the spine
  int topoopt_paths = 4;          // topoopt: shortest paths a pair's bytes are split over
  double switch_s = 0.025;        // mixnet: OCS switching delay
  Router router = Router::kV2;    // mixnet-static, mixnet: the workers' router
  bool relay = false;             // router v2 only: two-hop relays
  // Planner algorithm and budgets; its scoring (circuit_only, relay) is set
  // from `router` and `relay` by MakeFabric.
  planner::PlannerOptions planner = {};
  // mixnet-static, mixnet: the topology the job starts from, in spec form
  // (region r's switch is "ocs<r>", host h's OCS NIC k is port h * alpha + k +
  // 1). Empty: mixnet starts from the paper's random alpha-regular graph,
  // mixnet-static from no circuits until Prepare.
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
  // rail: per region the EP x EP rank bytes behind `actual` (rank i's GPU t
  // sends 1/TP of them to rank j's GPU t), which say which rail each byte
  // takes. Null: every server pair's bytes spread evenly over the 8 rails
  // (what rank-aligned traffic with TP a multiple of 8 gives).
  const std::vector<TrafficMatrix>* ranks = nullptr;
};

// What a fabric planned once per job (topoopt, mixnet-static) is planned from:
// one iteration's traffic.
struct JobTraffic {
  // Per region, the mean over layers of one all-to-all phase's server-pair
  // bytes, symmetrised ((D + D^T) / 2: dispatch and combine alike).
  std::vector<TrafficMatrix> a2a_mean;
  double a2a_phases = 0;  // all-to-all phases per iteration, each moving a2a_mean
  // DP all-reduce and pipeline bytes per iteration between servers.
  std::vector<ServerFlow> other;
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
  // topoopt, mixnet-static: plans the static topology from the job's traffic
  // (no-op elsewhere). Call before AllToAll and Transfer.
  virtual absl::Status Prepare(const JobTraffic& job) { return absl::OkStatus(); }
  // The live circuits per region (empty for the electrical fabrics).
  virtual std::vector<std::vector<planner::PlannedCircuit>> LiveCircuits() const { return {}; }
  // The routing a fabric runs: "v1", "v2", "v2+relay" (mixnet, mixnet-static),
  // "multihop" (topoopt), "rail" (rail: PXN onto the destination's rail), "eps".
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
