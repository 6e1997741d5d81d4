// What mixnet_route_bench runs each case on and what the fluid model
// predicts for it: the circuits the project's planner picks for the case's
// matrix (planner::PlanRegion, improved algorithm, scored with router v2's
// routing as mixnet-controller --router v2 does, from no circuits), used for
// both routers; and the fluid model's completion time of each router's
// routing on those circuits: v1 planner::CircuitOnlyRouting (a pair with
// circuits sends everything over them, the others over EPS), v2 the route
// table's predicted_completion_s (router::BuildRouteTableV2: the
// water-filling split over circuits and EPS, with relays when asked). Pure
// functions; any thread.
#pragma once

#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "runtime/cluster/cluster_spec.h"
#include "runtime/locality/traffic_matrix.h"

namespace mixnet::bench {

struct CasePlan {
  std::vector<cluster::CircuitSpec> circuits;
  double v1_model_s = 0;     // fluid completion under router v1
  double v2_model_s = 0;     // fluid completion under router v2
  double lower_bound_s = 0;  // FluidModel::LowerBound: no topology or routing beats it
  // sim::PredictAlltoall of each router's tables on the circuits: the flows
  // max-min fair (as TCP shares a link), TCP's frames and ACKs, relays'
  // store and forward; the emulated cluster as the demo's simulator sees it.
  double v1_sim_s = 0;
  double v2_sim_s = 0;
  // Payload bytes v2's relays forward (the second hop of every relayed
  // byte), from every host's table: they cross the NICs twice.
  double v2_relayed_bytes = 0;
  // The oracle (runtime/planner/oracle.h), payload bytes like the model:
  // (b) the best routing over direct and two-hop paths on these circuits,
  // (c) the best circuit set's, and the relaxation's bound under (c).
  double oracle_installed_s = 0;
  // (b) over only the paths the data plane runs (a one-sided relay only
  // through a host that shares no circuit with its EPS hop's other end):
  // what router v2 could reach without store and forward.
  double oracle_dataplane_s = 0;
  double oracle_best_s = 0;
  double oracle_bound_s = 0;
  // The time one host's v2 route table took to build (its split of the
  // region's demand, by the route solver): each worker pays it per plan.
  double v2_split_ms = 0;
};

// `spec` holds one region of all its hosts (in spec order, the order of
// `demand`) and no circuits; alpha is the most OCS NICs of a host. `relay`:
// router v2 may relay through a third host (planned and predicted with it);
// `route_solver`: v2's split, "water-filling" or "lp" (planner/lp_routing.h;
// the planner scores circuits with the water-filling either way).
// InvalidArgument for a spec the planner or router refuses or a demand of
// the wrong shape.
absl::StatusOr<CasePlan> PlanCase(const cluster::ClusterSpec& spec, const TrafficMatrix& demand,
                                  bool relay, const std::string& route_solver = "water-filling");

}  // namespace mixnet::bench
