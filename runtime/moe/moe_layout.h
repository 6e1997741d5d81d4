// CPU reference of the MoE dispatch layout: from the top-k expert ids of a
// micro-batch and the expert -> rank map, the per-rank and per-expert token
// counts, their prefix offsets, and where every (token, slot) goes in the
// send buffer. The GPU version (runtime/cuda/moe_kernels.h) produces the
// same arrays. Order and modes: README.md. Pure function; any thread.
#pragma once

#include <cstdint>
#include <vector>

#include "absl/status/statusor.h"
#include "runtime/moe/moe_types.h"

namespace mixnet::moe {

struct Layout {
  DispatchMode mode = DispatchMode::kPerRank;
  int64_t total_rows = 0;              // rows of the send buffer (== rank_offsets.back())
  std::vector<int32_t> rank_counts;    // num_ranks: rows sent to each rank (all-to-all splits)
  std::vector<int32_t> rank_offsets;   // num_ranks + 1: exclusive prefix of rank_counts
  std::vector<int32_t> expert_counts;  // num_experts: (token, slot) pairs per expert
  // num_experts: first row of each expert's block (kPerSlot); -1 in kPerRank mode.
  std::vector<int32_t> expert_offsets;
  std::vector<int32_t> slot_row;   // tokens * k: send-buffer row of each slot, -1 if dropped
  std::vector<int32_t> row_token;  // total_rows: the source token of each row
};

// Negative ids are dropped tokens (capacity overflow, DeepEP's -1): no row.
// InvalidArgument for a bad shape (ValidateLayoutInput), an id >= num_experts
// ("token 5 slot 1: expert id 300 outside [0, 256)") or an expert_rank entry
// outside [0, num_ranks).
absl::StatusOr<Layout> ComputeLayout(const LayoutInput& host_input);

}  // namespace mixnet::moe
