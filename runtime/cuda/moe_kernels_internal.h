// Launch interface of the MoE dispatch kernels (moe_layout_kernel.cu,
// moe_permute_kernel.cu), shared with their C++ wrapper (moe_kernels.cc).
// Plain C++ types only (no absl, no CUDA headers) so nvcc sees no host
// libraries; the stream is a cudaStream_t passed as void*. Each Launch* only
// enqueues kernels and returns the cudaError_t of the launches as int.
#pragma once

#include <cstdint>

namespace mixnet::cuda::internal {

// Error word packing: (index << 2) | kind, atomically minimised.
constexpr int kBadExpertId = 1;    // index = flat slot index t * k + s
constexpr int kBadExpertRank = 2;  // index = expert id

constexpr int kChunkTokens = 32;  // tokens per warp in the layout's ordering step
constexpr int kMaxTopK = 8;

struct LayoutKernelArgs {
  const void* ids = nullptr;
  bool ids_int64 = false;
  int64_t tokens = 0;
  int k = 0;
  int num_experts = 0;
  int num_ranks = 0;
  const int32_t* expert_rank = nullptr;
  bool per_slot = false;
  // Outputs.
  int32_t* rank_counts = nullptr;
  int32_t* rank_offsets = nullptr;
  int32_t* expert_counts = nullptr;
  int32_t* expert_offsets = nullptr;
  int32_t* slot_row = nullptr;
  int32_t* row_token = nullptr;
  unsigned long long* error = nullptr;
  // Workspace.
  int32_t* key = nullptr;           // num_experts
  int32_t* chunk_table = nullptr;   // num_chunks * buckets
  int32_t* bucket_total = nullptr;  // buckets
  int32_t* bucket_base = nullptr;   // buckets + 1
};
int LaunchLayoutKernels(const LayoutKernelArgs& args, void* stream);

struct PermuteKernelArgs {
  const void* x = nullptr;
  int element_bytes = 2;
  int64_t hidden = 0;
  const int32_t* row_token = nullptr;
  const int32_t* total_rows = nullptr;
  int64_t max_rows = 0;
  void* send = nullptr;
};
int LaunchPermuteKernel(const PermuteKernelArgs& args, void* stream);

struct CombineKernelArgs {
  const void* buf = nullptr;
  int dtype = 0;  // moe::DType: 0 fp32, 1 fp16, 2 bf16
  int64_t tokens = 0;
  int64_t hidden = 0;
  int k = 0;
  const int32_t* slot_row = nullptr;
  const float* weights = nullptr;
  void* out = nullptr;
};
int LaunchCombineKernel(const CombineKernelArgs& args, void* stream);

}  // namespace mixnet::cuda::internal
