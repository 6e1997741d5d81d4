// What the orchestrator tells each worker process of one fabric phase: the
// workload, the training step, the run length, where the spec, store,
// controller and result files are. Written once as JSON into the run dir by
// the orchestrator (main thread), read by each worker at start. Plain value
// type.
//
// Each worker writes one JSON object per line to ResultFile(rank):
//   {"type":"a2a", "iteration", "seq" (index in the iteration), "name",
//    "layer", "pass", "ms", "bytes_verified", "bytes_bad", "epoch",
//    "nics": {ifname: [rx, tx]}, "uplinks": {ifname: [rx, tx]} (rank 0 of
//    an oversubscribed fabric), "cpu": [idle, total] jiffies (rank 0),
//    "t_end_ms"}
//   {"type":"await", "iteration", "layer", "pass", "waited_ms", "decided",
//    "reconfigure", "committed", "timed_out", "epoch", "predicted_ms",
//    "reason"}
//   {"type":"iteration", "iteration", "wall_ms", "compute_ms"}
//   {"type":"final", "ok", "epoch", "retransmits", "tcp_opens", "tcp_resets", "agent": {...}}
// Byte counters are sampled after the barrier that starts the all-to-all
// and after the barrier that follows it (every byte has arrived by then).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "apps/demo/step.h"
#include "apps/demo/workload.h"

namespace mixnet::demo {

struct RunConfig {
  WorkloadOptions workload;
  ComputeOptions compute;
  std::string fabric;  // "eps", "mixnet", "static", "nonblocking", "oversub"
  int64_t iterations = 12;
  std::string spec_path;
  std::string store;       // rendezvous store URL ("file:DIR")
  std::string controller;  // mixnet only: WorkerAgent target ("unix:/path")
  std::string results_dir;
  int64_t timeout_ms = 60000;   // per collective / registration wait
  int64_t plan_wait_ms = 5000;  // longest wait for a planned round (mixnet)
  // Rank 0 samples these links of the EPS namespace (oversub: leaf uplinks).
  std::string uplink_netns;
  std::vector<std::string> uplinks;
  bool progress = true;       // rank 0 prints a line per iteration on stderr
  double burst_ms = 1;        // the links' tbf bucket (for the floors)
  bool counters = true;       // sample NIC counters (false in loopback mode: no NICs)
  std::string router = "v2";  // the workers' routing (CommunicatorOptions::router)
  // static, router v2: the demand its topology was planned from (hosts x
  // hosts in host order, row-major), given to the communicator once.
  std::vector<double> static_demand;
  bool relay = false;  // static's plan may relay (RoutingPlan::relay)
  // Router v2's split (planner/lp_routing.h): "water-filling" or "lp".
  std::string route_solver = "water-filling";
  // mixnet: re-plan each forward combine from its dispatch's observed matrix
  // (IterationSteps' replan_combine).
  bool replan_combine = false;
  // mixnet: plan requests carry their windows (step.h); false sends none.
  bool plan_windows = true;
  // mixnet: before the timed iterations, every worker asks the controller
  // for the warm-up sweep (WorkerAgent::WarmPaths) so the steps open no
  // connection.
  bool warm_paths = true;
  // Not read by the workers: what the simulator needs to replay the phase
  // (`mixnet-demo simulate`, replay.h) beyond the fields above.
  double switch_ms = 25;   // mixnet: the OCS's switching time
  int leaf_hosts = 0;      // oversub: hosts per leaf
  double uplink_gbps = 0;  // oversub: each leaf's uplink
  bool loopback = false;   // no emulated links (nothing to simulate)

  std::string ToJson() const;
  static absl::StatusOr<RunConfig> FromJson(const std::string& text);
  static absl::StatusOr<RunConfig> Load(const std::string& path);
  // "<results_dir>/rank<r>.jsonl"
  std::string ResultFile(int rank) const;
};

}  // namespace mixnet::demo
