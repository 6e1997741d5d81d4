// Circuits and fluid-model predictions of one bench case (see route_plan.h).
#include "bench/route_bench/route_plan.h"

#include <algorithm>
#include <chrono>

#include "absl/strings/str_cat.h"
#include "apps/demo/oracle_phase.h"
#include "runtime/common/settings.h"
#include "runtime/common/status.h"
#include "runtime/planner/cluster_planner.h"
#include "runtime/planner/fluid_model.h"
#include "runtime/planner/lp_routing.h"
#include "runtime/planner/oracle.h"
#include "runtime/planner/routing.h"
#include "runtime/router/route_table.h"
#include "runtime/router/route_table_v2.h"
#include "sim/emulated_cluster.h"

namespace mixnet::bench {

absl::StatusOr<CasePlan> PlanCase(const cluster::ClusterSpec& spec, const TrafficMatrix& demand,
                                  bool relay, const std::string& route_solver) {
  if (spec.hosts.empty() || spec.regions.size() != 1) {
    return absl::InvalidArgumentError(
        absl::StrCat("route bench: spec '", spec.name, "' must have hosts and one region"));
  }
  int alpha = 1;
  for (const cluster::HostSpec& h : spec.hosts) {
    alpha = std::max(alpha, static_cast<int>(std::count_if(
                                h.nics.begin(), h.nics.end(), [](const cluster::NicSpec& n) {
                                  return n.role == cluster::NicRole::kOcs;
                                })));
  }
  ASSIGN_OR_RETURN(const planner::ClusterPlanner cp, planner::ClusterPlanner::Create(spec, alpha));
  const planner::Region& region = cp.regions()[0];
  if (region.hosts() != static_cast<int>(spec.hosts.size())) {
    return absl::InvalidArgumentError(
        absl::StrCat("route bench: the region of spec '", spec.name, "' must hold every host"));
  }
  planner::PlannerOptions po;
  po.algorithm = planner::Algorithm::kImproved;
  po.relay = relay;
  // The workers' relay chunk (they read the same environment): its store and
  // forward is in the model.
  const double chunk = static_cast<double>(GetSettings().relay_chunk_bytes);
  po.relay_chunk_bytes = chunk;
  ASSIGN_OR_RETURN(const planner::RegionPlan plan, planner::PlanRegion(region, demand, {}, po));
  CasePlan out;
  for (const planner::PlannedCircuit& c : plan.circuits) out.circuits.push_back(region.ToSpec(c));

  const planner::FluidModel model(demand, region.input().eps_Bps);
  out.v1_model_s =
      planner::CircuitOnlyRouting(model, region.ToAdjacency(plan.circuits)).completion_s;
  out.lower_bound_s = model.LowerBound(region.ocs_Bps());
  const router::Topology topology{.epoch = 1, .circuits = out.circuits};
  // Every host's v2 table, as the workers build them: host 0's prediction is
  // the model's v2 time (every host computes the same region routing), the
  // simulator runs on them, and their relay paths give the bytes relayed.
  ASSIGN_OR_RETURN(const planner::RouteSolver solver, planner::ParseRouteSolver(route_solver));
  const sim::EmulatedRouting v2_routing{.version = 2,
                                        .relay = relay,
                                        .demand = &demand,
                                        .relay_chunk_bytes = chunk,
                                        .split = planner::RoutingFunctionFor(solver)};
  {
    // One host's table alone, timed: what a worker spends on a plan.
    const auto t0 = std::chrono::steady_clock::now();
    ASSIGN_OR_RETURN(const router::RouteTable one,
                     router::BuildRouteTableV2(spec, topology, spec.hosts[0].name, demand,
                                               router::RouterV2Options{.relay = relay,
                                                                       .relay_chunk_bytes = chunk,
                                                                       .split = v2_routing.split}));
    out.v2_split_ms =
        std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
    (void)one;
  }
  ASSIGN_OR_RETURN(const std::vector<router::RouteTable> tables,
                   sim::EmulatedRouteTables(spec, topology, v2_routing));
  out.v2_model_s = tables[0].predicted_completion_s();

  sim::EmulatedFabric fabric;
  fabric.wire_per_payload = sim::kTcpFrameOverhead;  // the workers' transport is TCP
  fabric.ack_per_payload = sim::kTcpAckPerPayload;
  fabric.relay_chunk_bytes = chunk;
  ASSIGN_OR_RETURN(const sim::EmulatedPrediction v1,
                   sim::PredictAlltoall(spec, topology, demand, fabric, {.version = 1}));
  ASSIGN_OR_RETURN(const sim::EmulatedPrediction v2,
                   sim::PredictAlltoall(spec, tables, demand, fabric));
  out.v1_sim_s = v1.time_s;
  out.v2_sim_s = v2.time_s;
  // The oracle on the same matrix: payload bytes, as the model's times.
  planner::OracleFabric oracle_fabric = demo::OracleFabricOf(spec);
  oracle_fabric.wire_overhead = 1;
  std::vector<planner::UndirectedCircuit> installed;
  for (const planner::PlannedCircuit& c : plan.circuits)
    installed.push_back({c.a.host, c.b.host, 0});
  ASSIGN_OR_RETURN(out.oracle_installed_s,
                   planner::InstalledFloor(demand, oracle_fabric, installed));
  planner::OracleOptions dataplane;
  dataplane.data_plane_paths = true;
  dataplane.two_hop = relay;
  ASSIGN_OR_RETURN(out.oracle_dataplane_s,
                   planner::InstalledFloor(demand, oracle_fabric, installed, dataplane));
  ASSIGN_OR_RETURN(const planner::BestFloor best,
                   planner::SearchBestFloor(demand, oracle_fabric, &installed));
  out.oracle_best_s = best.floor_s;
  out.oracle_bound_s = best.lower_bound_s;
  // The bytes v2's relays carry a second time.
  for (size_t s = 0; s < tables.size(); ++s) {
    for (size_t d = 0; d < tables.size(); ++d) {
      if (s == d) continue;
      for (const router::Path& p : tables[s].PathsTo(spec.hosts[d].name)) {
        if (p.kind == router::PathKind::kRelay) {
          out.v2_relayed_bytes += demand.at(static_cast<int>(s), static_cast<int>(d)) * p.weight;
        }
      }
    }
  }
  return out;
}

}  // namespace mixnet::bench
