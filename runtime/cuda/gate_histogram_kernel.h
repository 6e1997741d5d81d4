// Launch interface of the gate-histogram kernel (gate_histogram_kernel.cu),
// shared by the kernel file and its C++ wrapper (gate_histogram.cc). Plain C++
// types only; the stream is a cudaStream_t passed as void*. Callable from any
// host thread; work is ordered on the given stream.
#pragma once

#include <cstdint>

namespace mixnet::cuda::internal {

// Error codes packed with the flat index into the `bad` word:
// bad = (index << 2) | kind, atomically minimised, so the smallest bad index wins.
constexpr uint64_t kBadNone = ~uint64_t{0};
constexpr int kBadExpert = 1;  // expert id out of range
constexpr int kBadRepeat = 2;  // expert id repeats an earlier slot of the token
constexpr int kBadRank = 3;    // per-token source rank out of range

struct KernelArgs {
  const void* ids = nullptr;  // device, tokens * k ids
  bool is_int64 = false;
  int64_t tokens = 0;
  int k = 0;
  int num_experts = 0;
  const int32_t* token_rank = nullptr;  // device, per token; null: all are `source_rank`
  int source_rank = 0;
  int num_ranks = 0;
  bool skip_negative_ids = false;
};

// Adds the counts into counts[rank * num_experts + expert] (device, zeroed by
// the caller) and min-reduces the first error into *bad (device, set to
// kBadNone by the caller). Returns the cudaError_t of the launch as int.
int LaunchGateHistogramKernel(const KernelArgs& args, unsigned long long* counts,
                              unsigned long long* bad, void* stream);

}  // namespace mixnet::cuda::internal
