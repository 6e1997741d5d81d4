// The fabric simulator's prediction of one demo phase (issue 22 item 5,
// emulation mode): per iteration, the step model's compute (step.h) plus
// each all-to-all of the step as sim/emulated_cluster.h carries it on the
// phase's spec (its NICs' rates, the oversubscribed leaves' uplinks, the
// circuits) with the routing the workers ran, every byte as TCP frames on
// the wire with their ACKs on the reverse links. Static runs the spec's
// circuits (split by the mean matrix it was planned from under router v2);
// mixnet replays, per all-to-all, the circuits and the plan rank 0 recorded
// (PhaseResult::routing), and charges each new epoch's round less the
// compute window before the all-to-all: the switching time plus a round's
// protocol time, the controller's warm-up sweep's median (PhaseResult::
// warm_round_overhead_ms: rounds measured before the timed iterations, a
// calibration) or, for a run without a sweep, the median of the run's own
// rounds (round_overhead_ms, a replay; 0 for a run that recorded neither);
// PhaseResult::simulated_rounds says which. Loopback runs
// have no link rates. Main thread of the
// orchestrator, or of `mixnet-demo simulate` (replay.h).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "apps/demo/fabric_spec.h"
#include "apps/demo/phase_result.h"
#include "apps/demo/run_config.h"
#include "apps/demo/step.h"
#include "apps/demo/workload.h"
#include "runtime/cluster/cluster_spec.h"

namespace mixnet::demo {

struct PhaseSimulation {
  FabricKind kind = FabricKind::kEps;
  ComputeOptions compute;
  int64_t iterations = 0;
  std::string router = "v2";
  bool relay = false;
  std::string route_solver = "water-filling";  // router v2's split (planner/lp_routing.h)
  bool replan_combine = false;                 // mixnet: the step's (step.h)
  std::vector<double> static_demand;           // static, router v2 (host order, row-major)
  int leaf_hosts = 0;                          // oversub
  double uplink_gbps = 0;                      // oversub: each leaf's uplink
  double burst_ms = 1;                         // every link's bucket, ms of its rate
  double switch_ms = 25;                       // mixnet: the OCS's switching time
  bool loopback = false;
};

// The simulation of the phase `c` describes (its fabric `kind`): what the
// orchestrator and `mixnet-demo simulate` (replay.h) both run.
PhaseSimulation SimulationOf(FabricKind kind, const RunConfig& c);

// Fills r.iterations[i].simulated_ms and .simulated_alltoall_ms for the
// iterations r holds and sets r.simulated, or leaves them and says why in
// r.simulated_why (loopback, mixnet without recorded routing, or the
// simulator's error).
void SimulatePhase(const PhaseSimulation& p, const cluster::ClusterSpec& spec, const Workload& w,
                   PhaseResult& r);

}  // namespace mixnet::demo
