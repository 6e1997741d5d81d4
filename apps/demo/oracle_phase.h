// The all-to-all oracle (runtime/planner/oracle.h) on a demo phase: for the
// matrix each all-to-all of the phase carried (the workload regenerates it),
// (a) the non-blocking floor, (b) the best routing's floor on the circuits the
// phase ran (static: the spec's; mixnet: the ones rank 0 recorded per
// all-to-all; eps and nonblocking: none), and, on fabrics with OCS ports,
// (c) the best floor over every circuit set and its lower bound. Floors are
// payload bytes scaled by TCP's framing and ACKs (the simulator's
// kTcpFrameOverhead + kTcpAckPerPayload, both directions charged alike), so
// they compare with the NIC-counter floors the demo measures.
// Then the split of mixnet's iteration time over nonblocking's by cause.
// Main thread of the orchestrator, or of `mixnet-demo simulate`.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <utility>

#include "apps/demo/fabric_spec.h"
#include "apps/demo/phase_result.h"
#include "apps/demo/workload.h"
#include "runtime/cluster/cluster_spec.h"
#include "runtime/planner/oracle.h"

namespace mixnet::demo {

// The oracle's view of a phase's spec: per host its EPS NICs summed and its
// OCS NICs as ports (at the slowest OCS NIC's rate), TCP's wire overhead.
planner::OracleFabric OracleFabricOf(const cluster::ClusterSpec& spec);

// The best-floor searches of one run, shared by its phases: they depend on
// the matrix and the OCS ports only, and every phase carries the same
// matrices. Keyed by (iteration, layer): an all-to-all and its transpose have
// the same floors (reversing every path maps a routing of one onto the
// other, and every link is as fast both ways).
struct OracleCache {
  std::map<std::pair<int64_t, int>, planner::BestFloor> best;
};

// Fills r.oracle for the iterations r holds, or leaves it and says why
// (loopback, oversub's leaves, which the oracle does not model, a missing
// routing record, or the oracle's error naming the all-to-all).
void OraclePhase(FabricKind kind, bool loopback, const cluster::ClusterSpec& spec,
                 const Workload& w, OracleCache& cache, PhaseResult& r);

// Where mixnet's iteration time over nonblocking's goes, in ms per iteration
// (means over the phases' iterations). With A the non-blocking floor, C the
// best circuits' floor, B the installed circuits' floor, F the achieved floor
// (NIC counters), T the all-to-all time, L the waits for rounds, W the
// iteration time:
//   physics        C - A: what the best circuit set cannot avoid;
//   planning       B - C: the installed circuits against the best set;
//   routing        (F - B) - (F_nb - A): the busiest link against the best
//                  routing on the installed circuits, less nonblocking's own;
//   data plane     (T - F) - (T_nb - F_nb): time over the achieved floor,
//                  less nonblocking's own;
//   reconfiguration L - L_nb;
//   other          what is left of W - W_nb (compute sleeps overrunning).
// They sum to W - W_nb. nullopt unless both phases ran and mixnet's oracle,
// with its best floor, was computed.
struct GapSplit {
  double nonblocking_ms = 0, mixnet_ms = 0;
  double physics_ms = 0, planning_ms = 0, routing_ms = 0, data_plane_ms = 0;
  double reconfiguration_ms = 0, other_ms = 0;
};
std::optional<GapSplit> SplitGap(const PhaseResult& mixnet, const PhaseResult& nonblocking);

// The routing targets over the steady iterations (all but the first, which
// has no forecast): mixnet's achieved floor over the oracle's best floor and
// over nonblocking's achieved floor, mixnet's iteration over nonblocking's;
// and the first iteration's ratio beside them. nullopt unless both phases ran
// two iterations or more and mixnet's best floor was computed.
struct SteadyTargets {
  double floor_over_best = 0;               // target <= 1.10
  double floor_over_nonblocking_floor = 0;  // target <= 1.15
  double iteration_over_nonblocking = 0;    // target <= 1.15
  double first_iteration_over_nonblocking = 0;
};
std::optional<SteadyTargets> SteadyRatios(const PhaseResult& mixnet,
                                          const PhaseResult& nonblocking);

}  // namespace mixnet::demo
