// GPU gate histogram: tokens per (source rank, expert) from the top-k expert
// ids a MoE gate produced on the GPU, without copying the ids to the host.
// The result is the same table the CPU LocalityCollector builds (hand it over
// as TokenCounts). Plain C++ header: no CUDA types, the stream is a
// cudaStream_t passed as void*. Built only with CUDA (target
// mixnet_cuda_gate); callable from any host thread.
#pragma once

#include <cstdint>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"

namespace mixnet::cuda {

// Number of CUDA devices. Unavailable naming the CUDA error when the runtime
// cannot answer (no driver, no device).
absl::StatusOr<int> DeviceCount();

struct GateHistogramInput {
  const void* ids = nullptr;  // tokens * k expert ids, row-major
  bool is_int64 = false;      // int64 ids (torch.topk) or int32
  int64_t tokens = 0;
  int k = 0;
  int num_experts = 0;
  // Per-token source rank (int32, tokens entries), or null when every token
  // belongs to `source_rank`.
  const int32_t* token_rank = nullptr;
  int source_rank = 0;
  int num_ranks = 1;
  bool skip_negative_ids = false;  // negative ids are dropped tokens, not errors
};

// Checks the shape (InvalidArgument: k outside [1, num_experts], negative
// tokens, source_rank outside [0, num_ranks)) and enqueues the kernel on
// `stream` with device pointers: counts (num_ranks * num_experts uint64,
// zeroed by the caller, accumulated into) and bad (one uint64 set to
// ~0 by the caller). After the stream completes, pass *bad to CheckBadWord.
absl::Status LaunchGateHistogram(const GateHistogramInput& device_input, uint64_t* device_counts,
                                 uint64_t* device_bad, void* stream);

// OK when no id was bad; else InvalidArgument naming the first bad index
// ("token 5 slot 1 (index 11): expert id out of range [0, 8)"). Counts are
// unspecified when it fails.
absl::Status CheckBadWord(uint64_t bad, int k, int num_experts, int num_ranks);

// Host-memory convenience (tests, tools): copies the ids (and token ranks) to
// the current device, runs the kernel, waits and returns the rank-major
// counts (num_ranks * num_experts). Errors as above; CUDA failures are
// Unavailable (no device) or Internal, naming the CUDA call.
absl::StatusOr<std::vector<int64_t>> GateHistogramFromHost(const GateHistogramInput& host_input);

}  // namespace mixnet::cuda
