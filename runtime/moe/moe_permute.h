// CPU references of the MoE dispatch permute and combine (the GPU versions are
// in runtime/cuda/moe_kernels.h and must match them bit for bit):
//   Permute: send[row] = x[row_token[row]] for every row of a Layout.
//   Combine: out[t] = sum over t's slots of weight * buf[slot_row], summed in
//            fp32 in slot order (fmaf), rounded once to the element type.
// Row-major [rows, hidden] buffers of DType elements. Pure functions; any thread.
#pragma once

#include <cstdint>
#include <span>

#include "absl/status/status.h"
#include "runtime/moe/moe_types.h"

namespace mixnet::moe {

struct PermuteArgs {
  const void* x = nullptr;  // [tokens, hidden]
  DType dtype = DType::kBFloat16;
  int64_t tokens = 0;
  int64_t hidden = 0;
  std::span<const int32_t> row_token;  // Layout::row_token (its size is the row count)
  void* send = nullptr;                // [row_token.size(), hidden]
};

// InvalidArgument for a bad hidden or a row_token entry outside [0, tokens).
absl::Status Permute(const PermuteArgs& args);

struct CombineArgs {
  const void* buf = nullptr;  // [buf_rows, hidden]: the rows returned by the experts
  int64_t buf_rows = 0;
  DType dtype = DType::kBFloat16;
  int64_t tokens = 0;
  int64_t hidden = 0;
  int k = 0;
  const int32_t* slot_row = nullptr;  // tokens * k (Layout::slot_row), -1 = dropped
  // tokens * k gate weights (fp32), or null. Slots sharing a row (kPerRank)
  // read it once: with weights, their weights are added first (in slot
  // order); without, the row counts once (the expert side already applied
  // the gate weights, DeepEP style). Tokens with no slot get zeros.
  const float* weights = nullptr;
  void* out = nullptr;  // [tokens, hidden]
};

// InvalidArgument for a bad shape or a slot_row entry outside [-1, buf_rows).
absl::Status Combine(const CombineArgs& args);

}  // namespace mixnet::moe
