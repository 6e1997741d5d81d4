// Whole-cluster planning: every region planned and decided independently
// (circuits never leave a region). A ClusterPlanner is built once from the
// static cabling (cluster spec or hand-made regions), is immutable, and Plan
// may be called from any thread (the controller calls it per MoE layer and
// direction).
#pragma once

#include <string>
#include <unordered_map>
#include <vector>

#include "absl/status/statusor.h"
#include "runtime/cluster/cluster_spec.h"
#include "runtime/locality/traffic_matrix.h"
#include "runtime/planner/planner.h"

namespace mixnet::planner {

struct RegionDecision {
  RegionPlan plan;
  Decision decision;
};

struct ClusterDecision {
  std::vector<RegionDecision> regions;  // same order as ClusterPlanner::regions()
  // The topology to apply: each region's plan where it reconfigures, its
  // current circuits where it does not.
  std::vector<cluster::CircuitSpec> circuits;
};

class ClusterPlanner {
 public:
  // Regions from `host_groups` (host names) when given, else from
  // spec.regions. A host's OCS NICs are its ports, its EPS NICs' rates summed
  // its EPS capacity. InvalidArgument as Region::Create, or for an unknown or
  // repeated host.
  static absl::StatusOr<ClusterPlanner> Create(
      const cluster::ClusterSpec& spec, int alpha,
      const std::vector<std::vector<std::string>>& host_groups = {});
  static absl::StatusOr<ClusterPlanner> FromRegions(std::vector<RegionInput> regions, int alpha);

  const std::vector<Region>& regions() const { return regions_; }

  // Splits live circuits by region. InvalidArgument naming the circuit when a
  // port is not an OCS port of any region, a circuit crosses two regions, a
  // port is used twice or both ends are on one host.
  absl::StatusOr<std::vector<std::vector<PlannedCircuit>>> SplitCircuits(
      const std::vector<cluster::CircuitSpec>& circuits) const;

  // demands[r] is the byte matrix of regions()[r] (its host order).
  absl::StatusOr<ClusterDecision> Plan(const std::vector<TrafficMatrix>& demands,
                                       const std::vector<std::vector<PlannedCircuit>>& current,
                                       const PlannerOptions& planner,
                                       const DecideOptions& decide) const;
  absl::StatusOr<ClusterDecision> Plan(const std::vector<TrafficMatrix>& demands,
                                       const std::vector<cluster::CircuitSpec>& current,
                                       const PlannerOptions& planner,
                                       const DecideOptions& decide) const;

 private:
  struct Owner {
    int region = -1;
    PortRef ref;
  };
  std::vector<Region> regions_;
  std::unordered_map<std::string, int> switch_ids_;
  std::vector<std::vector<Owner>> owners_;  // [switch id][port]
  // Flat index of port (region r, host h, port p): port_base_[r][h] + p.
  std::vector<std::vector<size_t>> port_base_;
  size_t ports_ = 0;
};

}  // namespace mixnet::planner
