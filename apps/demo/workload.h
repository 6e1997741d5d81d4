// The demo's MoE workload: per (iteration, layer) how many tokens each rank
// (one per host) sends to each expert, and from that the bytes of the
// dispatch all-to-all (combine is its transpose). Deterministic from a seed,
// or read from a token-count trace. Pure value type; any thread.
//
// Model (generated):
//   - H hosts, one EP rank each; E = H * experts_per_host experts placed
//     round-robin (expert e lives on host e % H), or, with placement
//     "contiguous", in blocks (host e / experts_per_host: how
//     examples/moe_pytorch numbers its experts, so its traces replay as
//     recorded).
//   - Every `drift_every` iterations ("drift epoch" d) each layer l draws
//     anew: an affinity a_{l,d}, a random derangement of the hosts (no host
//     is its own affine host): for an even number of hosts a random perfect
//     matching (hot host pairs, a(a(s)) = s, as inside an EP group), else a
//     random cyclic permutation; and a hot-expert ranking
//     (random permutation of the experts; expert of rank r gets Zipf weight
//     1 / (r + 1)^zipf_s).
//   - Source host s sends its `tokens` tokens (top-1) to expert e with
//     probability  affine_share * [host(e) == a(s)] * z_e / Z_{a(s)}
//                + (1 - affine_share) * z_e / Z_all,
//     each probability jittered per iteration by a factor in [1-j, 1+j] and
//     renormalised; counts are the largest-remainder rounding of tokens * p.
//   - Bytes from s to host h = sum over experts e on h of counts(s, e) *
//     token_bytes (tokens for experts on s itself stay local: the diagonal).
// Trace: TrafficReport JSON lines (runtime/locality/token_counts.h), one
// report per line; dispatch entries of one iteration (micro-batches added)
// give that iteration's counts per layer; iterations are replayed in order
// and cycled when the run is longer than the trace.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "runtime/locality/expert_placement.h"
#include "runtime/locality/token_counts.h"
#include "runtime/locality/traffic_matrix.h"

namespace mixnet::demo {

struct WorkloadOptions {
  int hosts = 8;
  int layers = 4;
  int experts_per_host = 4;
  int64_t tokens = 128;        // tokens per rank per layer (top-1)
  int64_t token_bytes = 4096;  // bytes of one token's activations
  uint64_t seed = 1;
  double affine_share = 0.75;
  double zipf_s = 1.2;
  int drift_every = 5;  // iterations per drift epoch
  double jitter = 0.1;
  std::string trace;                      // token-count trace file; empty: generate
  std::string placement = "round_robin";  // or "contiguous"
};

class Workload {
 public:
  // InvalidArgument for bad options (hosts < 2, shares outside [0,1], ...) or
  // a trace whose shape does not match (ranks != hosts, experts not a
  // multiple of hosts, layers missing); NotFound for a missing trace file.
  // With a trace, layers and experts_per_host are taken from it.
  static absl::StatusOr<Workload> Create(WorkloadOptions options);

  const WorkloadOptions& options() const { return o_; }
  int hosts() const { return o_.hosts; }
  int layers() const { return o_.layers; }
  int num_experts() const { return o_.hosts * o_.experts_per_host; }
  const ExpertPlacement& placement() const { return placement_; }
  static std::string HostName(int host);  // "h<i>", as in the demo's specs

  // Dispatch token counts (rank x expert) of one all-to-all.
  TokenCounts Counts(int64_t iteration, int layer) const;
  // Dispatch bytes per host pair: at(s, d) = bytes host s sends host d.
  TrafficMatrix DispatchMatrix(int64_t iteration, int layer) const;
  // The same as integers, row-major H x H.
  std::vector<size_t> DispatchBytes(int64_t iteration, int layer) const;
  // The generated affinity (affine host of each host) in force; empty for a trace.
  std::vector<int> Affinity(int64_t iteration, int layer) const;

  // A few lines describing the model and its parameters.
  std::string Describe() const;

 private:
  Workload(WorkloadOptions o, ExpertPlacement p) : o_(std::move(o)), placement_(std::move(p)) {}
  absl::Status LoadTrace();

  WorkloadOptions o_;
  ExpertPlacement placement_;
  // Trace: trace_[i][layer] for the i-th iteration of the file.
  std::vector<std::vector<TokenCounts>> trace_;
};

// Largest-remainder rounding of total * p (p >= 0 sums to 1) to integers
// summing to total: each entry floored, the rest given one by one to the
// largest fractional parts (ties in index order).
std::vector<int64_t> Apportion(const std::vector<double>& p, int64_t total);

// Deterministic payload of one all-to-all block: the byte at `offset` of the
// block src -> dst of (iteration, layer, direction). Fill writes `bytes`
// bytes starting at block offset 0; Verify returns how many bytes differ.
struct BlockId {
  uint64_t seed = 0;
  int64_t iteration = 0;
  int layer = 0;
  int direction = 0;  // 0 dispatch, 1 combine
  int src = 0;
  int dst = 0;
};
void FillBlock(const BlockId& id, uint8_t* data, size_t bytes);
size_t VerifyBlock(const BlockId& id, const uint8_t* data, size_t bytes);

}  // namespace mixnet::demo
