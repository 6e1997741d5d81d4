// Circuits and fluid-model predictions of one bench case (see route_plan.h).
#include "bench/route_bench/route_plan.h"

#include <algorithm>

#include "absl/strings/str_cat.h"
#include "runtime/common/status.h"
#include "runtime/planner/cluster_planner.h"
#include "runtime/planner/fluid_model.h"
#include "runtime/planner/routing.h"
#include "runtime/router/route_table_v2.h"

namespace mixnet::bench {

absl::StatusOr<CasePlan> PlanCase(const cluster::ClusterSpec& spec, const TrafficMatrix& demand,
                                  bool relay) {
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
  ASSIGN_OR_RETURN(const planner::RegionPlan plan, planner::PlanRegion(region, demand, {}, po));
  CasePlan out;
  for (const planner::PlannedCircuit& c : plan.circuits) out.circuits.push_back(region.ToSpec(c));

  const planner::FluidModel model(demand, region.input().eps_Bps);
  out.v1_model_s =
      planner::CircuitOnlyRouting(model, region.ToAdjacency(plan.circuits)).completion_s;
  out.lower_bound_s = model.LowerBound(region.ocs_Bps());
  const router::Topology topology{.epoch = 1, .circuits = out.circuits};
  ASSIGN_OR_RETURN(const router::RouteTable table,
                   router::BuildRouteTableV2(spec, topology, spec.hosts[0].name, demand,
                                             router::RouterV2Options{.relay = relay}));
  out.v2_model_s = table.predicted_completion_s();
  return out;
}

}  // namespace mixnet::bench
