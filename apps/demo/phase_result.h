// What one fabric phase of the demo measured, read back from its workers'
// result files (run_config.h has the line format): per iteration the wall
// time, the all-to-all time (per all-to-all the slowest rank, summed), the
// time lost waiting for reconfiguration rounds (per wait point the longest
// wait of any rank, summed) and the floor of its all-to-alls (accounting.h);
// per fabric the busiest link's utilisation, bytes verified and lost, TCP
// retransmissions and the CPUs' idle share during the all-to-alls. Also the
// first failure of a failed phase (the earliest error any worker recorded).
// Main thread of the orchestrator.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "apps/demo/accounting.h"
#include "apps/demo/run_config.h"
#include "runtime/cluster/cluster_spec.h"
#include "runtime/router/route_table_v2.h"

namespace mixnet::demo {

struct IterationStats {
  double wall_ms = 0;
  double alltoall_ms = 0;
  double loss_ms = 0;     // waiting for rounds before all-to-alls
  double floor_ms = 0;    // sum of the all-to-alls' floors
  double compute_ms = 0;  // the slowest rank's compute sleeps
  // The simulator's prediction (simulation.h), when PhaseResult::simulated.
  double simulated_ms = 0;
  double simulated_alltoall_ms = 0;
  double simulated_reconfig_ms = 0;  // mixnet: switching not hidden by compute
  // Each all-to-all of the iteration in step order (the slowest rank's time),
  // and its simulated time.
  std::vector<double> each_alltoall_ms;
  std::vector<double> each_simulated_alltoall_ms;
  // The oracle's floors of the iteration's all-to-alls, summed (oracle_phase.h;
  // 0 when not computed, the best one also on fabrics without OCS ports).
  double oracle_nonblocking_ms = 0;
  double oracle_installed_ms = 0;
  double oracle_best_ms = 0;
};

// How rank 0 routed one all-to-all when it started (its "circuits" and
// "plan" fields): the installed circuits, and router v2's plan for them.
struct A2aRouting {
  uint64_t epoch = 0;
  std::vector<cluster::CircuitSpec> circuits;
  bool has_plan = false;
  router::RoutingPlan plan;
};

// The oracle's floors of a phase's all-to-alls (oracle_phase.h), each the
// mean per iteration of the sum over the iteration's all-to-alls, in ms.
struct OracleFigures {
  bool computed = false;
  std::string why;              // why not, when not computed
  double nonblocking_ms = 0;    // (a) every NIC on one non-blocking switch
  double installed_ms = 0;      // (b) the best routing on the phase's circuits
  bool has_best = false;        // (c) and its bound: fabrics with OCS ports
  double best_ms = 0;           // (c) the best circuit set for each all-to-all
  double lower_bound_ms = 0;    // the relaxation: no circuit set beats it
  double slowest_solve_ms = 0;  // the longest oracle call for one all-to-all
};

// mixnet: the controller's round times (PhaseResult::round_*), written by
// the orchestrator into the phase's results dir.
inline constexpr const char* kControllerTimesFile = "controller.json";

struct PhaseResult {
  std::string fabric;
  bool ran = false;
  absl::Status status;
  std::vector<IterationStats> iterations;
  FabricBound bound;
  std::map<std::string, int> busiest;  // phases in which each link-direction was the busiest
  uint64_t bytes_expected = 0;
  uint64_t bytes_verified = 0;
  uint64_t bytes_bad = 0;
  uint64_t retransmits = 0;  // all hosts' TCP RetransSegs during the run
  // All hosts' TCP connections opened (ActiveOpens + PassiveOpens) and
  // established ones reset (EstabResets) during the timed iterations.
  uint64_t tcp_opens = 0, tcp_resets = 0;
  double cpu_idle = -1;  // idle share of all CPUs during the all-to-alls (-1: unknown)
  // Per (iteration, seq) all-to-all, how rank 0 routed it (mixnet).
  std::map<std::pair<int64_t, int>, A2aRouting> routing;
  OracleFigures oracle;       // the oracle's floors of the same all-to-alls (oracle_phase.h)
  bool simulated = false;     // the iterations' simulated_* are the simulator's (simulation.h)
  std::string simulated_why;  // why not, when not
  // mixnet: controller rounds (GetStatus) and what the workers saw.
  int64_t reconfigurations = -1;
  int64_t rounds_aborted = 0, rounds_skipped = 0;
  uint64_t agent_commits_max = 0;
  // The slowest worker's own part of PREPARE and COMMIT (WorkerAgentStats:
  // the event's arrival to its ack), p50 and p99 in ms; 0 when unknown.
  double worker_prepare_p50_ms = 0, worker_prepare_p99_ms = 0;
  double worker_commit_p50_ms = 0, worker_commit_p99_ms = 0;
  uint64_t highest_epoch = 0;
  // The warm-up sweep before the timed iterations (GetStatus warm_rounds,
  // warm_ms: its rounds, the restore included, and its wall time), and
  // whether every worker's ran to its end (-1: no worker asked).
  int64_t warm_rounds = 0;
  double warm_ms = 0;
  int warm_complete = -1;
  // The sweep's median round less its switching time (GetStatus
  // warm_round_overhead_ms_p50): the simulator's calibration of a round.
  double warm_round_overhead_ms = 0;
  // What the simulation charged each mixnet round over the switching time,
  // and from where: "warm-up sweep" (the calibration above, measured before
  // the timed iterations) or "replay" (this run's own round_overhead_ms,
  // when no sweep ran). Empty when it charged none.
  double simulated_round_overhead_ms = 0;
  std::string simulated_rounds;
  // The controller's committed rounds (GetStatus round_*_p50; in the run
  // dir's results/controller.json for `mixnet-demo simulate`): median round
  // from the completed matrix to every COMMITTED, and that less the spec's
  // switching time. 0 with round_samples 0 when unknown.
  double round_ms = 0, round_overhead_ms = 0;
  int64_t round_samples = 0;
  // The same rounds phase by phase (GetStatus round_phases, in its order):
  // name, p50 and p99 in ms. Empty when unknown.
  struct RoundPhaseTimes {
    std::string name;
    double p50_ms = 0, p99_ms = 0;
  };
  std::vector<RoundPhaseTimes> round_phases;
  int64_t plan_waits = 0;      // wait points (per iteration and layer and pass)
  int64_t plans_switched = 0;  // ... whose decision was to reconfigure
  int64_t plan_timeouts = 0;   // ... where some rank gave up waiting
  // Fault injection (--kill-controller-after-s).
  bool controller_killed = false;
  uint64_t epoch_before_kill = 0, epoch_after_restart = 0;
  bool workers_ran_through_outage = false;
  int64_t rounds_before_kill = 0;
  double outage_from_ms = 0, outage_to_ms = 0;
  int64_t layers_during_outage = 0;  // all-to-alls that ended while it was down

  // Mean over iterations [from, end) of a field of IterationStats.
  double Mean(double IterationStats::*field, size_t from = 0) const;
  // The first iteration apart (no forecast exists yet: real for a job's first
  // step) from the steady ones (all the others, drift iterations included).
  // First: 0 without iterations; Steady: the mean of iterations 1.., 0 when
  // there are fewer than two (has_steady() says which).
  double First(double IterationStats::*field) const {
    return iterations.empty() ? 0 : iterations[0].*field;
  }
  double Steady(double IterationStats::*field) const { return Mean(field, 1); }
  bool has_steady() const { return iterations.size() >= 2; }
  std::string BusiestLink() const;  // the most frequent busiest link-direction
  // Warm paths: the all-to-alls that run right after a round (the first on
  // a new epoch, from `routing`) against the others, each as its measured
  // time over its simulated one (the same bytes and routing in the model),
  // pooled (sum of measured over sum of simulated). The run's first
  // all-to-all is neither. Counts 0 where no such all-to-all (fabrics
  // without rounds, a run without a simulation).
  struct AfterRound {
    double after_round = 0, later = 0;  // measured / simulated
    int after_round_n = 0, later_n = 0;
  };
  AfterRound AfterRoundAgainstLater() const;
};

// The phase of `fabric` that completed (status ok), or nullptr.
const PhaseResult* FindPhase(const std::vector<PhaseResult>& phases, const std::string& fabric);

// Reads every rank's result file of the phase `c` (hosts of `spec`, leaf
// uplinks at `uplink_gbps`) into `r`. DataLoss when an all-to-all or an
// iteration is missing from a rank's file of a phase that completed.
absl::Status ReadResults(const RunConfig& c, const cluster::ClusterSpec& spec, double uplink_gbps,
                         PhaseResult& r);

// The earliest error record of the phase's workers, with the others named
// after it; empty when none recorded one.
std::string FirstFailure(const RunConfig& c, int hosts);

// Appends an error record to a worker's result file (the worker's exit path).
void RecordWorkerError(const std::string& path, int rank, const absl::Status& status);

}  // namespace mixnet::demo
