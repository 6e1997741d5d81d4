// A lower bound on the direct-routing completion time of a region that is
// tighter than FluidModel::LowerBound, for judging how far a plan is from the
// best any planner could do (mixnet_planner_bench --direct-bound). Per host h:
// the smallest time h could reach with its own ports spent the best possible
// way (at most its port count of circuits, at most a peer's port count to one
// peer), ignoring that its peers' ports are wanted by others too; the region's
// bound is the largest over hosts. No topology under direct routing beats it.
// Pure computation; main thread of the bench.
#pragma once

#include "runtime/planner/fluid_model.h"
#include "runtime/planner/planner.h"

namespace mixnet::bench {

struct DirectBound {
  double bound_s = 0;  // max over hosts of the best time of each host alone
  bool exact = true;   // every host's best was found by enumeration (else: per-side bound)
};

DirectBound DirectLowerBound(const planner::Region& region, const planner::FluidModel& model);

}  // namespace mixnet::bench
