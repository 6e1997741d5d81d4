// WorkerAgent: the worker side of the MixNet control loop, one per training
// process. It registers with the controller (mixnet.control.v1.Controller),
// streams traffic rows from the locality collector, watches topology events
// and drives a router::TopologyFollower (the Communicator, the NCCL plugin)
// through PREPARE / COMMIT / ABORT, acknowledging each phase.
//
// When the controller is gone the agent keeps the installed topology (and a
// PREPARE restriction, if one is in force: that view is valid whatever the
// switch holds) and reconnects with backoff; a returning or restarted
// controller's SNAPSHOT is installed when its epoch is newer. Events whose
// epoch is below the installed one (a stale controller) are ignored.
//
// Threads: Start spawns two threads, "mx-agent-events" (registration, the
// watch stream, calls into the follower, acks) and "mx-agent-reports" (the
// report stream). Every public method may be called from any thread; Report
// never blocks on the network.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "runtime/cluster/cluster_spec.h"
#include "runtime/common/grpc_tls.h"
#include "runtime/control/plan_key.h"
#include "runtime/control/plan_tracker.h"
#include "runtime/locality/token_counts.h"
#include "runtime/router/route_table.h"
#include "runtime/router/topology_follower.h"

namespace mixnet::control {

struct WorkerAgentOptions {
  std::string controller;  // "host:port" or "unix:/path" (MIXNET_CONTROLLER)
  // (m)TLS to the controller; callers take it from MIXNET_CONTROLLER_TLS_*
  // (ControllerTlsFromSettings, controller_channel.h). Not Active: plaintext.
  TlsClientOptions tls;
  std::string worker_id;               // default "<host>/<pid>"
  std::string host;                    // this process's host in the cluster spec
  std::vector<int> ranks;              // global ranks this process drives
  std::vector<cluster::NicSpec> nics;  // reported at registration
  std::string job;
  absl::Duration rpc_timeout = absl::Seconds(5);
  absl::Duration reconnect_min = absl::Milliseconds(50);
  absl::Duration reconnect_max = absl::Seconds(1);
  // Deadline for installing a SNAPSHOT (and a COMMIT that names none).
  absl::Duration commit_timeout = absl::Seconds(10);
  // A COMMIT whose install takes longer than this is logged (info).
  absl::Duration slow_commit = absl::Milliseconds(50);
  size_t max_queued_reports = 1024;  // beyond this the oldest are dropped (counted)
};

// One row of a region's host-pair byte matrix: what `host` will send to each
// peer host in the all-to-all `key` of `iteration`.
// `pass`: forward rows feed the controller's predictor, backward rows (the
// same traffic again) do not. `plan`: ask the controller to decide on a
// topology for that target once the region's rows of this key are in; the
// answer is awaited with AwaitPlan. `observed_ms`: this process's measured
// wall time of its call of that all-to-all when it has already run (0: not
// measured); the controller's observed completion is the slowest worker's.
struct TrafficRow {
  int64_t iteration = 0;
  GateKey key;
  int pass = kForwardPass;
  std::vector<std::string> peer_hosts;
  std::vector<double> bytes;
  std::optional<PlanTarget> plan;
  double observed_ms = 0;
};

struct WorkerAgentStats {
  bool registered = false;  // a watch stream is up now
  uint64_t installed_epoch = 0;
  uint64_t prepares = 0;          // PREPARE events handled
  uint64_t prepare_timeouts = 0;  // PREPAREs whose drain missed the deadline
  uint64_t commits = 0;           // COMMITs (and newer SNAPSHOTs) installed
  uint64_t commit_errors = 0;     // installed, but a new circuit failed to connect
  uint64_t aborts = 0;
  uint64_t routings = 0;        // router v2 weights handed to the follower (COMMIT, DECISION)
  uint64_t routing_errors = 0;  // ... that it refused
  uint64_t stale_events = 0;    // ignored: epoch below the installed one
  uint64_t reports_sent = 0;
  uint64_t reports_dropped = 0;
  uint64_t reconnects = 0;  // registrations after the first
  // This worker's own part of each round, the latest 256 outside WarmPaths:
  // from the PREPARE / COMMIT event's arrival to its ack going out (the
  // follower's drain, or its install, resume probes and routing) (ms).
  double prepare_p50_ms = 0, prepare_p99_ms = 0;
  double commit_p50_ms = 0, commit_p99_ms = 0;
};

// The outcome of WarmPaths.
struct WarmOutcome {
  bool enabled = false;    // the controller runs warm-up sweeps
  bool complete = false;   // this region's sweep ran to its end
  bool timed_out = false;  // no WARMED within the timeout
  uint32_t rounds = 0;     // sweep rounds committed (the restore included)
  uint32_t planned = 0;    // ... the controller announced for the region
  std::string reason;      // why not complete
  absl::Duration waited;
};

class WorkerAgent {
 public:
  // Starts the threads and returns at once; registration goes on in the
  // background (see WaitRegistered). InvalidArgument for bad options (no
  // controller address, no host).
  static absl::StatusOr<std::unique_ptr<WorkerAgent>> Start(WorkerAgentOptions options);
  ~WorkerAgent();  // cancels the streams and joins the threads
  WorkerAgent(const WorkerAgent&) = delete;
  WorkerAgent& operator=(const WorkerAgent&) = delete;

  // Waits until registered; returns the controller's committed topology.
  // DeadlineExceeded naming the controller after `timeout`.
  absl::StatusOr<router::Topology> WaitRegistered(absl::Duration timeout);

  // From now on topology events drive `follower` (not owned; must outlive the
  // agent or be detached with Follow(nullptr)). A committed topology newer than
  // follower->installed_epoch() is committed to it at once.
  void Follow(router::TopologyFollower* follower);

  // Queues a traffic row for the controller; never blocks.
  void Report(TrafficRow row);

  // Waits until the controller has answered the plan request for `target`
  // (sent with a Report) and, when it switches, until that round has ended
  // here (COMMIT installed, or ABORT); at most `timeout`. The outcome says
  // which, and how long the call waited.
  PlanOutcome AwaitPlan(const PlanTarget& target, absl::Duration timeout);

  // Asks the controller for the region's warm-up sweep and waits (at most
  // `timeout`) for its end: every OCS NIC pair the region's circuits can
  // join is lit once and the follower connects (then keeps, suspended) its
  // paths over it, so that the job's steps open none (after each sweep
  // round's Commit the agent waits for the follower's Settle, so one that
  // connects in the background is done before the next round). Call once,
  // after Follow and before the first step, on every worker of the region:
  // the sweep starts when all of them asked. Waits for the watch stream first.
  WarmOutcome WarmPaths(absl::Duration timeout);

  WorkerAgentStats stats() const;

 private:
  class Impl;
  explicit WorkerAgent(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

}  // namespace mixnet::control
