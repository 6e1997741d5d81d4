// `mixnet_route_bench worker --config FILE --rank R`: one rank of one bench
// case, spawned by the orchestrator inside its host's network namespace.
// It joins two communicators over the case's circuits (the spec's initial
// topology), one running router v1 and one router v2 with the case's matrix
// as its plan (Communicator::SetRouting), then runs the case's checked
// alltoallv on each in turn (v1 then v2 on even iterations, v2 then v1 on
// odd ones, so neither always goes first), timed between barriers with the
// host's NIC counters and TCP retransmissions (rank 0: also the machine's
// CPU time) sampled around it, and writes
// one RankRecord line per all-to-all to its result file. Runs on the
// process's main thread (the communicators run their progress threads).
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"

namespace mixnet::bench {

// What the orchestrator tells each worker of one case (JSON in the case dir).
struct WorkerConfig {
  std::string case_name;
  std::string spec_path;                       // the case's spec: hosts, NICs and its circuits
  std::string store_dir;                       // file stores <store_dir>/v1 and <store_dir>/v2
  std::string results_dir;                     // rank<r>.jsonl
  std::vector<std::string> hosts;              // host of each rank
  std::vector<size_t> bytes;                   // hosts x hosts, row-major
  bool relay = false;                          // RoutingPlan.relay of router v2
  std::string route_solver = "water-filling";  // router v2's split (planner/lp_routing.h)
  int warmup = 1;
  int iters = 5;
  int64_t timeout_ms = 60000;  // every collective and the rendezvous
  uint64_t seed = 1;           // payload
  int link_ends_us = 0;        // LinkSampler period (0: no link end times)

  std::string ToJson() const;
  static absl::StatusOr<WorkerConfig> Load(const std::string& path);
  std::string ResultFile(int rank) const;
};

// Exit code: 0 done and every byte verified, 3 some byte wrong or missing,
// 1 a failure (named on stderr), 2 a bad config.
int RunRouteWorker(const std::string& config_path, int rank);

}  // namespace mixnet::bench
