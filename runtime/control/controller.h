// Controller: the core of mixnet-controller (mixnet.control.v1, see
// proto/mixnet/control/v1/controller.proto for the protocol). Built from the
// cluster spec and one SwitchDriver per OCS switch, it serves every region of
// the spec: it registers workers, assembles each region's traffic matrices
// from their reports, predicts the next all-to-all, plans circuits
// (planner::ClusterPlanner), decides whether switching pays and runs the
// reconfiguration round (PREPARE -> Apply on the switches -> settle ->
// COMMIT) with a persisted, strictly increasing fencing epoch. See
// docs/design/controller.md for the planning policy and failure behaviour.
//
// The gRPC service (controller_service.h) is a thin adapter over the public
// methods here, which use the proto messages directly.
//
// Threads: the public methods are called from gRPC's threads, concurrently;
// state is guarded by mu_. One thread of its own, "mx-ctl-planner", expires
// report timeouts, feeds the predictors, plans and runs the rounds one at a
// time (predictors and the ClusterPlanner are used only there).
//
// metrics() records rounds, planning, decisions and workers for Prometheus
// (controller_metrics.h; ControllerServer serves it with --metrics-listen).
#pragma once

#include <cstdint>
#include <deque>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "mixnet/control/v1/controller.pb.h"
#include "runtime/cluster/cluster_spec.h"
#include "runtime/common/duration_window.h"
#include "runtime/control/controller_metrics.h"
#include "runtime/control/epoch_store.h"
#include "runtime/control/region_reports.h"
#include "runtime/control/switch_driver.h"
#include "runtime/control/switch_timing.h"
#include "runtime/locality/accuracy.h"
#include "runtime/locality/predictor.h"
#include "runtime/planner/cluster_planner.h"

namespace mixnet::control {

// The last epoch of the block a controller persists when it reaches `epoch`
// (ControllerOptions::epoch_block): epoch + block - 1, at most
// kMaxFencingEpoch.
uint64_t EpochBlockEnd(uint64_t epoch, uint64_t block);

struct ControllerOptions {
  cluster::ClusterSpec spec;
  // One driver per OCS switch of the spec, by switch name.
  std::map<std::string, std::shared_ptr<SwitchDriver>> switches;
  std::string state_dir;  // the persisted epoch (required)
  planner::Algorithm algorithm = planner::Algorithm::kImproved;
  std::string predictor = "share_trend";  // last | ewma | share_trend
  absl::Duration prepare_deadline = absl::Milliseconds(2000);
  absl::Duration commit_deadline = absl::Milliseconds(5000);
  // A matrix is planned with the rows that came this long after its first.
  absl::Duration report_timeout = absl::Milliseconds(500);
  absl::Duration switch_timeout = absl::Seconds(10);  // per switch read / Apply
  double overlap_s = 0;  // switching time hidden behind compute (DecideOptions)
  // The routing the workers run, which plans are scored with: "v1" (a pair's
  // bytes over its circuits if any, else EPS) or "v2" (each pair split over
  // its circuits and EPS by the fluid model; COMMIT and DECISION carry the
  // plan's demand so the workers build the same split).
  std::string router = "v2";
  // Router v2 only: plans may also relay a pair's bytes through a third host
  // with circuits to both (two hops, alltoall_relay.cc); the plan's Routing
  // says so, and the workers then forward inside their collectives.
  bool relay = false;
  // With `relay`: the workers' relay chunk (their MIXNET_RELAY_CHUNK_BYTES),
  // whose store and forward the plans' scores include (planner/routing.h).
  double relay_chunk_bytes = 256 << 10;
  // With `relay`: the planner's routed search, at most this many relay
  // splits per plan (PlannerOptions::routed_search_evaluations; 0: none).
  int routed_search_evaluations = planner::PlannerOptions{}.routed_search_evaluations;
  // Epochs persisted ahead: a round persists only when its epoch passes the
  // last one saved, and then saves epoch + epoch_block - 1, so most rounds
  // skip the fsyncs; a restarted controller starts above the saved epoch
  // (skipping at most epoch_block - 1 epochs). 1: every round persists.
  uint64_t epoch_block = 64;
  // Serve WarmPaths: once every worker of a region has asked, run the
  // region's warm-up sweep (warm_sweep.h) and restore the topology it had.
  // Off: WarmPaths answers enabled = false.
  bool warm_paths = true;
  std::string controller_id;  // default "ctl-<hostname>-<pid>-<start ms>"
};

class Controller {
 public:
  // Locks and reads the state dir, reads every switch (circuits and highest
  // epoch), persists epoch max(persisted, switches) + 1 and starts the
  // planner thread. InvalidArgument for a bad spec / options (a switch
  // without a driver, a driver for no switch, circuits the spec does not
  // allow); FailedPrecondition naming the source when the persisted or a
  // switch's epoch leaves no next epoch within kMaxFencingEpoch; the
  // switch's or the store's error otherwise.
  static absl::StatusOr<std::unique_ptr<Controller>> Start(ControllerOptions options);
  ~Controller();  // Shutdown()
  Controller(const Controller&) = delete;
  Controller& operator=(const Controller&) = delete;

  // Ends watch streams, aborts a round in progress (ABORT to its workers)
  // and joins the planner thread. Idempotent.
  void Shutdown();

  const std::string& id() const { return id_; }
  ControllerMetrics& metrics() const { return *metrics_; }

  // InvalidArgument for an unknown host, an empty worker id or NICs that
  // contradict the spec.
  // The host `worker_id` registered as; nullopt when it is not registered.
  std::optional<std::string> HostOf(const std::string& worker_id) const;
  absl::StatusOr<v1::RegisterResponse> Register(const v1::RegisterRequest& request);
  // One traffic row. NotFound for an unregistered worker; InvalidArgument
  // for a host other than the worker's, a host in no region, a bad key or a
  // row whose dimensions or values do not fit the region.
  absl::Status Report(const v1::TrafficReport& report);
  absl::Status Ack(const v1::AckTopologyRequest& request);
  v1::ControllerStatus GetStatus() const;
  // The worker asks for its region's warm-up sweep (see WarmPathsRequest in
  // the proto). NotFound for an unregistered worker, FailedPrecondition for
  // one without a watch stream (WARMED would have nowhere to go).
  absl::StatusOr<v1::WarmPathsResponse> WarmPaths(const v1::WarmPathsRequest& request);

  // A watch stream: Watch returns a handle whose first event is the
  // SNAPSHOT; NextEvent waits up to `wait` for the next one.
  class Watch;
  enum class WatchResult { kEvent, kNone, kEnd };
  absl::StatusOr<std::shared_ptr<Watch>> StartWatch(const std::string& worker_id);
  WatchResult NextEvent(Watch& watch, v1::TopologyEvent* event, absl::Duration wait);
  // The stream is gone: the worker is deregistered (a round waiting on it
  // aborts at once).
  void EndWatch(Watch& watch);

  // Why planning stopped (stale epoch), empty while healthy.
  std::string fenced() const;
  // Calls `hook` with the reason once this controller is fenced (at once when
  // it already is); the planner thread calls it, under the controller's
  // lock: it must not call back into the controller. The server sets its
  // health to NOT_SERVING there.
  void OnFenced(std::function<void(const std::string&)> hook);

 private:
  // A session's events for its watch stream, behind their own lock: a
  // round's fan-out wakes every stream's thread at once, where waiting on
  // mu_ handed the lock from one woken stream to the next (a context switch
  // each, milliseconds for a region on a busy host).
  struct Mailbox {
    absl::Mutex mu;
    std::deque<v1::TopologyEvent> events ABSL_GUARDED_BY(mu);
    uint64_t gen ABSL_GUARDED_BY(mu) = 0;     // Session::watch_gen's copy
    bool closed ABSL_GUARDED_BY(mu) = false;  // the controller is shutting down
  };
  struct Session {
    std::string worker_id;
    std::string host;
    int region = -1;
    uint64_t watch_gen = 0;   // 0: no watch stream; under mu_, copied to the mailbox
    bool warm_asked = false;  // WarmPaths called
    Mailbox mailbox;
  };
  // Sets `s`'s watch generation (0: none) and its mailbox's copy.
  static void SetWatchGenLocked(Session& s, uint64_t gen);
  static constexpr size_t kRoundSamples = 64;
  static constexpr uint32_t kMinProtocolSamples = 3;
  struct RegionState {
    RegionReports reports;
    uint64_t committed = 0, aborted = 0, skipped = 0;
    double last_predicted_ms = 0, last_current_ms = 0;  // the latest decision's model times
    // The latest completed matrix with measured times: its slowest worker's (ms).
    double last_observed_ms = 0;
    // Committed rounds, latest kRoundSamples: whole and less the switches'
    // nominal switching time (RegionStatus.round_ms_p50).
    DurationWindow round{kRoundSamples}, round_overhead{kRoundSamples};
    // Each committed round's own protocol time: from its start (persisting
    // the epoch) to the last COMMITTED, less the time the switches' Applies
    // and the settle took; rounds whose COMMITTED acks did not all come are
    // left out. Decide charges its median on top of switching
    // (DecideOptions::protocol_s) once there are kMinProtocolSamples.
    DurationWindow protocol{kRoundSamples};
    // The same rounds phase by phase (kRoundPhases order).
    std::vector<DurationWindow> phases =
        std::vector<DurationWindow>(kRoundPhaseCount, DurationWindow(kRoundSamples));
    // The warm-up sweep: cold until every worker asked, queued for the
    // planner thread, then done (WARMED sent; later askers get it at once).
    enum class Warm { kCold, kQueued, kDone } warm = Warm::kCold;
    uint64_t warm_rounds = 0;  // committed sweep rounds (the restore included)
    DurationWindow warm_round_overhead{kRoundSamples};  // each less its switching
    double warm_ms = 0;
    bool warm_complete = false;
    std::string warm_reason{};  // why it stopped early, empty when complete
  };
  struct Round {
    uint64_t epoch = 0;
    bool commit_phase = false;
    std::set<std::string> waiting;  // acks still missing for the phase
    std::vector<std::string> errors;
  };
  // A completed matrix handed to the planner thread.
  struct Completed {
    int region = -1;
    CompletedMatrix m;
    std::optional<GateKey> next;  // learned next dispatch key
    absl::Time at;                // when the matrix completed (a round's start)
  };

  Controller(ControllerOptions options, planner::ClusterPlanner planner, EpochStore store);

  // controller.cc
  std::set<std::string> ExpectedLocked(int region) const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void CompleteLocked(int region, CompletedMatrix m) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void SendLocked(const std::string& worker_id, v1::TopologyEvent event)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  v1::Topology TopologyProto(uint64_t epoch,
                             const std::vector<cluster::CircuitSpec>& circuits) const;

  // The answer to a region's plan request (a DECISION event).
  struct PlanAnswer {
    PlanTarget target;
    double predicted_ms = 0;  // fluid model: the target's all-to-all on its topology
    double current_ms = 0;    // ... on the installed topology
  };

  // controller_warm.cc
  // Queues the region's sweep once every worker of it asked and watches and
  // every host of it has a worker.
  void MaybeQueueWarmLocked(int region) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void SendWarmedLocked(int region, const std::string& worker_id)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void RunWarmSweep(int region);  // planner thread

  // controller_rounds.cc (planner thread)
  void PlannerLoop();
  void PlanAndRun(std::vector<Completed> batch);
  // Runs one round towards `target` for `regions`; true when committed.
  // `answers` (by region) are sent as DECISION(reconfigure, epoch) before
  // the PREPARE, or as DECISION(no) when the round cannot start.
  // `routing` (by region, router v2): the demand each region was planned
  // for, sent with COMMIT to that region's workers. `triggered`: when the
  // matrix the round was planned from completed (the round's timing starts
  // there; RegionStatus.round_ms_p50). `warm`: a warm-up sweep round, counted
  // in RegionState::warm_rounds and kept out of the round times.
  bool RunRound(const std::vector<cluster::CircuitSpec>& target, const std::set<int>& regions,
                const GateKey& key, absl::Time triggered,
                const std::map<int, PlanAnswer>& answers = {},
                const std::map<int, v1::Routing>& routing = {}, bool warm = false);
  // DECISION for `a` to the watching workers of `region` (with `routing`
  // when given: the weights for the installed topology).
  void SendDecisionLocked(int region, const PlanAnswer& a, bool reconfigure, uint64_t epoch,
                          const std::string& reason, const v1::Routing* routing = nullptr)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  std::string regions_label(int region) const;
  // controller_rollback.cc (planner thread): ends round `epoch` after its
  // Apply on switch `failed` returned `error`, `changed` (the switches it
  // changed before) and `failed` being put back to `had` (the committed
  // circuits by switch) first: ABORT when all are back, else a COMMIT of
  // the committed topology without the circuits of the switches left
  // uncertain (dirty until a round re-drives them).
  void EndFailedApply(uint64_t epoch, const std::string& failed, const absl::Status& error,
                      const std::vector<std::string>& changed,
                      const std::map<std::string, std::vector<PortPair>>& had,
                      const std::set<std::string>& participants, const std::set<int>& regions);
  void AbortRoundLocked(uint64_t epoch, const std::set<std::string>& to, const std::string& reason,
                        const std::set<int>& regions) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  const ControllerOptions opt_;
  const std::string id_;
  const planner::ClusterPlanner planner_;
  const EpochStore store_;
  const std::unique_ptr<ControllerMetrics> metrics_;
  // Switching time (switch_timing.h): what each switch's daemon measured
  // its Applies to take, and the slowest switch's cost in seconds for
  // Decide. Set at start-up, then on the planner thread after each round
  // (RefreshApplyTiming).
  std::map<std::string, SwitchApplyTiming> apply_timing_;
  // Each region's warm-up sweep (warm_sweep.h), from the spec at
  // construction; read-only after.
  using WarmRounds = std::vector<std::vector<cluster::CircuitSpec>>;
  std::vector<WarmRounds> warm_sweeps_;
  double switch_s_ = 0;
  void RefreshApplyTiming(const std::vector<std::string>& switches);  // planner thread
  double SlowestSwitchSeconds() const;

  // Planner thread only.
  std::vector<std::unique_ptr<Predictor>> predictors_;  // per region
  std::vector<std::unique_ptr<AccuracyTracker>> accuracy_;
  std::set<std::string> dirty_switches_;  // may hold something else than committed
  std::thread planner_thread_;

  mutable absl::Mutex mu_;
  bool shutdown_ ABSL_GUARDED_BY(mu_) = false;
  std::string fenced_ ABSL_GUARDED_BY(mu_);
  std::function<void(const std::string&)> fenced_hook_ ABSL_GUARDED_BY(mu_);
  uint64_t highest_epoch_ ABSL_GUARDED_BY(mu_) = 0;
  uint64_t saved_epoch_ = 0;  // persisted in store_ (planner thread, after Create)
  uint64_t committed_epoch_ ABSL_GUARDED_BY(mu_) = 0;
  std::vector<cluster::CircuitSpec> committed_ ABSL_GUARDED_BY(mu_);
  std::map<std::string, std::shared_ptr<Session>> sessions_ ABSL_GUARDED_BY(mu_);
  std::vector<RegionState> regions_ ABSL_GUARDED_BY(mu_);
  std::deque<Completed> completed_ ABSL_GUARDED_BY(mu_);
  std::optional<Round> round_ ABSL_GUARDED_BY(mu_);
  std::string last_abort_ ABSL_GUARDED_BY(mu_);      // the latest aborted round's reason
  std::deque<int> warm_queue_ ABSL_GUARDED_BY(mu_);  // regions whose sweep is due
  uint64_t next_watch_gen_ ABSL_GUARDED_BY(mu_) = 1;
};

}  // namespace mixnet::control
