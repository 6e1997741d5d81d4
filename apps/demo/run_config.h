// What the orchestrator tells each worker process of one fabric phase: the
// workload, the run length, where the spec, store, controller and result
// files are. Written once as JSON into the run dir by the orchestrator
// (main thread), read by each worker at start. Plain value type.
#pragma once

#include <cstdint>
#include <string>

#include "absl/status/statusor.h"
#include "apps/demo/workload.h"

namespace mixnet::demo {

struct RunConfig {
  WorkloadOptions workload;
  std::string fabric;  // "eps", "mixnet", "nonblocking"
  int64_t iterations = 20;
  double compute_ms = 200;
  std::string spec_path;
  std::string store;       // rendezvous store URL ("file:DIR")
  std::string controller;  // mixnet only: WorkerAgent target ("unix:/path")
  std::string results_dir;
  int64_t timeout_ms = 60000;  // per collective / registration wait

  std::string ToJson() const;
  static absl::StatusOr<RunConfig> FromJson(const std::string& text);
  static absl::StatusOr<RunConfig> Load(const std::string& path);
  // "<results_dir>/rank<r>.jsonl"
  std::string ResultFile(int rank) const;
};

// One line of a worker's result file: the all-to-alls of one (iteration, layer).
struct LayerResult {
  int64_t iteration = 0;
  int layer = 0;
  int rank = 0;
  double dispatch_ms = 0;
  double combine_ms = 0;
  uint64_t bytes_verified = 0;  // received bytes checked and correct
  uint64_t bytes_bad = 0;       // received bytes wrong or missing
  uint64_t epoch = 0;           // topology epoch installed at the dispatch
};

}  // namespace mixnet::demo
