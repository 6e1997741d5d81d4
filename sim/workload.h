// The MoE training workload of the fabric simulator: cluster layout (servers,
// regions = EP groups, pipeline stages), expert popularity per layer and
// iteration (Zipf with drifting hot experts, fixed shares, or token-count
// traces written by the runtime's locality collector), the per-region host
// byte matrices of the dispatch all-to-all, and the compute roofline. Not
// thread-safe: the simulator's main thread owns a Workload.
#pragma once

#include <map>
#include <random>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"
#include "runtime/locality/traffic_matrix.h"
#include "sim/config.h"

namespace mixnet::sim {

inline constexpr int kGpusPerServer = 8;

// GPU g = ((d * PP + p) * EP + e) * TP + t; server = g / 8; region r = d * PP + p
// holds servers [r * region_servers, (r + 1) * region_servers).
struct Layout {
  int gpus = 0;
  int servers = 0;
  int dp = 1, tp = 1, pp = 1, ep = 1;
  int region_servers = 1;
  int regions = 0;
  int layers_per_stage = 1;
  int stage_of_region(int r) const { return r % pp; }
  int replica_of_region(int r) const { return r / pp; }
  int region_of(int replica, int stage) const { return replica * pp + stage; }
};
// DP = gpus / (EP TP PP); InvalidArgument when it does not divide.
absl::StatusOr<Layout> MakeLayout(const ModelConfig& m, int gpus);

// Roofline compute times of one micro-batch on one GPU, seconds.
struct ComputeTimes {
  double attn_fwd = 0;               // attention (+ TP all-reduces on NVLink, + shared experts)
  double dense_ffn_fwd = 0;          // FFN of a dense layer
  double expert_per_assignment = 0;  // expert FFN forward per (token, expert) assignment on a GPU
  double expert_weights = 0;         // the time to read a rank's expert weights once
};
ComputeTimes Roofline(const ModelConfig& m);
// Forward time of a rank's experts for `assignments` (token, expert) pairs.
double ExpertForward(const ComputeTimes& c, double assignments);

// One region's dispatch all-to-all for one layer.
struct RegionTraffic {
  TrafficMatrix hosts;         // bytes per server pair (dispatch; combine is the transpose)
  TrafficMatrix ranks;         // bytes per EP rank pair (what `hosts` sums, rank-aligned over TP)
  double max_assignments = 0;  // most (token, expert) assignments any EP rank of the region gets
  bool moe = true;             // false for a dense layer (no all-to-all)
};

class Workload {
 public:
  static absl::StatusOr<Workload> Create(const ModelConfig& m, const Layout& layout);

  // Moves to iteration `it` (>= the current one; popularity drifts step by step).
  absl::Status SetIteration(int it);
  int iteration() const { return iteration_; }
  // Every region's traffic for stage-local layer `local_layer` (each region at
  // its own stage's global layer) in the current iteration.
  std::vector<RegionTraffic> StageLayer(int local_layer) const;
  // Expert popularity (shares summing to 1) of a global layer now.
  std::vector<double> Popularity(int layer) const;

  // Bytes of one dispatch from one EP rank (tokens x top-k x hidden x dtype).
  double RankDispatchBytes() const;

 private:
  Workload(const ModelConfig& m, const Layout& l) : m_(m), l_(l) {}
  absl::Status LoadTrace();
  // Shares of source rank `rank` over experts, layer `layer`, region `region`.
  void SourceShares(int layer, int region, int rank, std::mt19937_64& rng,
                    std::vector<double>& out) const;

  ModelConfig m_;
  Layout l_;
  int iteration_ = 0;
  std::mt19937_64 drift_rng_;
  std::vector<std::vector<double>> log_weight_;  // [layer][expert]
  // Trace: per (iteration index, layer) the counts [rank * E + expert].
  std::map<std::pair<int, int>, std::vector<double>> trace_;
  int trace_ranks_ = 0, trace_layers_ = 0, trace_iterations_ = 0;
};

}  // namespace mixnet::sim
