// GPU MoE token dispatch: the dispatch layout (per-rank and per-expert counts
// and offsets, the row of every slot), the dispatch permute (tokens into one
// contiguous send buffer, rank-major) and the combine (gate-weighted sum back
// into token order, fp32 accumulation). They produce exactly what the CPU
// references in runtime/moe produce (order, modes and layouts: runtime/moe/README.md).
//
// CUDA-graph safe: the Launch* functions only enqueue kernels on `stream`
// (a cudaStream_t passed as void*); they never allocate, copy to or from the
// host, or synchronise. The caller provides device buffers and a workspace of
// LayoutWorkspaceBytes(). Errors found on the device (expert id out of
// range, bad expert_rank entry) land in a device word to read whenever the
// caller syncs anyway (CheckLayoutError). Plain C++ header; built only with
// CUDA (target mixnet_cuda_moe); callable from any host thread.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "runtime/moe/moe_layout.h"
#include "runtime/moe/moe_types.h"

namespace mixnet::cuda {

// Device outputs of the layout; sizes as in moe::Layout. All int32.
struct LayoutOutputs {
  int32_t* rank_counts = nullptr;     // num_ranks
  int32_t* rank_offsets = nullptr;    // num_ranks + 1; [num_ranks] is the total row count
  int32_t* expert_counts = nullptr;   // num_experts
  int32_t* expert_offsets = nullptr;  // num_experts (-1 in kPerRank mode)
  int32_t* slot_row = nullptr;        // tokens * k
  int32_t* row_token = nullptr;       // MaxRows(...); rows >= the total are left untouched
  int64_t* error = nullptr;  // 1 word: kNoLayoutError or the first error (CheckLayoutError)
};

constexpr int64_t kNoLayoutError = INT64_MAX;

// Bytes of device workspace LaunchLayout needs (256-byte aligned pointer):
// int32 expert keys (num_experts), a per-32-token-chunk count table
// (ceil(tokens / 32) x buckets, buckets = num_ranks in kPerRank mode and
// num_experts in kPerSlot mode) and the bucket totals and offsets, each
// rounded up to 256 bytes. For 4096 tokens, 256 experts, kPerSlot: ~130 KiB.
size_t LayoutWorkspaceBytes(int64_t tokens, int num_experts, int num_ranks, moe::DispatchMode mode);

// Enqueues the layout kernels. `input` holds device pointers (topk_ids,
// expert_rank). InvalidArgument for a bad shape or workspace (null, too
// small, not 256-byte aligned); Internal naming the CUDA error on a failed
// launch. Overwrites every output; reads nothing it did not write.
absl::Status LaunchLayout(const moe::LayoutInput& input, const LayoutOutputs& outputs,
                          void* workspace, size_t workspace_bytes, void* stream);

// OK for kNoLayoutError; else InvalidArgument naming the first bad slot or
// expert, like the CPU reference. Slots with bad ids were dropped.
absl::Status CheckLayoutError(int64_t error, int k);

// send[row] = x[row_token[row]] for row < *device_total_rows (the layout's
// rank_offsets + num_ranks), launched for max_rows rows so the count stays on
// the device. 16-byte vector copies when hidden * element size is a multiple
// of 16 and both buffers are 16-byte aligned; element copies otherwise.
struct PermuteLaunch {
  const void* x = nullptr;  // [tokens, hidden]
  moe::DType dtype = moe::DType::kBFloat16;
  int64_t tokens = 0;
  int64_t hidden = 0;
  const int32_t* row_token = nullptr;
  const int32_t* total_rows = nullptr;  // device, one int32
  int64_t max_rows = 0;
  void* send = nullptr;  // [max_rows, hidden]
};
absl::Status LaunchPermute(const PermuteLaunch& args, void* stream);

// out[t] = sum of weight * buf[slot_row] (fp32, fmaf in slot order, shared
// rows folded first), as moe::Combine. One warp per token, 16-byte loads of
// up to k rows in flight; element path as above.
struct CombineLaunch {
  const void* buf = nullptr;  // [rows, hidden]
  moe::DType dtype = moe::DType::kBFloat16;
  int64_t tokens = 0;
  int64_t hidden = 0;
  int k = 0;
  const int32_t* slot_row = nullptr;  // device, tokens * k
  const float* weights = nullptr;     // device, tokens * k, or null (unweighted)
  void* out = nullptr;                // [tokens, hidden]
};
absl::Status LaunchCombine(const CombineLaunch& args, void* stream);

// Host-memory conveniences for tests and tools: copy in, run on the current
// device, wait, copy out. Unavailable when there is no device; Internal
// naming the CUDA call otherwise.
absl::StatusOr<moe::Layout> LayoutFromHost(const moe::LayoutInput& host_input);
// Returns row_token.size() * hidden elements (bytes).
absl::StatusOr<std::vector<uint8_t>> PermuteFromHost(const void* x, moe::DType dtype,
                                                     int64_t tokens, int64_t hidden,
                                                     const std::vector<int32_t>& row_token);
// `buf` holds buf_rows rows; returns tokens * hidden elements (bytes).
absl::StatusOr<std::vector<uint8_t>> CombineFromHost(const void* buf, int64_t buf_rows,
                                                     moe::DType dtype, int64_t tokens,
                                                     int64_t hidden, int k,
                                                     const std::vector<int32_t>& slot_row,
                                                     const float* weights);

}  // namespace mixnet::cuda
