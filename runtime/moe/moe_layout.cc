// CPU reference of the MoE dispatch layout (see moe_layout.h): validates the
// routing, counts rows per bucket (rank, or (rank, expert) in kPerSlot mode),
// and assigns rows in bucket order, then token order, then slot order.
// Pure function; runs on the caller's thread.
#include "runtime/moe/moe_layout.h"

#include <string>

#include "absl/strings/str_cat.h"
#include "runtime/common/status.h"

namespace mixnet::moe {

const char* DTypeName(DType t) {
  switch (t) {
    case DType::kFloat32:
      return "fp32";
    case DType::kFloat16:
      return "fp16";
    case DType::kBFloat16:
      return "bf16";
  }
  return "unknown";
}

absl::Status ValidateLayoutInput(const LayoutInput& in) {
  if (in.k < 1 || in.k > kMaxTopK) {
    return absl::InvalidArgumentError(
        absl::StrCat("moe layout: k = ", in.k, " outside [1, ", kMaxTopK, "]"));
  }
  if (in.tokens < 0 || in.tokens * in.k >= (int64_t{1} << 31)) {
    return absl::InvalidArgumentError(
        absl::StrCat("moe layout: ", in.tokens, " tokens x k ", in.k, " must be in [0, 2^31)"));
  }
  if (in.num_experts < 1 || in.num_experts > kMaxExperts) {
    return absl::InvalidArgumentError(
        absl::StrCat("moe layout: ", in.num_experts, " experts outside [1, ", kMaxExperts, "]"));
  }
  if (in.num_ranks < 1 || in.num_ranks > kMaxRanks) {
    return absl::InvalidArgumentError(
        absl::StrCat("moe layout: ", in.num_ranks, " ranks outside [1, ", kMaxRanks, "]"));
  }
  if (in.expert_rank == nullptr) {
    return absl::InvalidArgumentError("moe layout: null expert_rank map");
  }
  if (in.tokens > 0 && in.topk_ids == nullptr) {
    return absl::InvalidArgumentError(
        absl::StrCat("moe layout: ", in.tokens, " tokens with a null topk_ids buffer"));
  }
  return absl::OkStatus();
}

absl::Status ValidateHidden(int64_t hidden) {
  if (hidden < 1 || hidden > kMaxHidden) {
    return absl::InvalidArgumentError(
        absl::StrCat("moe: hidden = ", hidden, " outside [1, ", kMaxHidden, "]"));
  }
  return absl::OkStatus();
}

absl::StatusOr<Layout> ComputeLayout(const LayoutInput& in) {
  RETURN_IF_ERROR(ValidateLayoutInput(in));
  const int E = in.num_experts;
  const int R = in.num_ranks;
  const bool per_slot = in.mode == DispatchMode::kPerSlot;
  for (int e = 0; e < E; ++e) {
    if (in.expert_rank[e] < 0 || in.expert_rank[e] >= R) {
      return absl::InvalidArgumentError(absl::StrCat("moe layout: expert ", e, " on rank ",
                                                     in.expert_rank[e], " outside [0, ", R, ")"));
    }
  }
  // Bucket of each expert: its rank (kPerRank) or its position in (rank, expert) order.
  std::vector<int32_t> key(E);
  std::vector<int32_t> experts_per_rank(R + 1, 0);
  for (int e = 0; e < E; ++e) ++experts_per_rank[in.expert_rank[e] + 1];
  for (int r = 0; r < R; ++r) experts_per_rank[r + 1] += experts_per_rank[r];  // now prefix
  {
    std::vector<int32_t> next(experts_per_rank.begin(), experts_per_rank.end() - 1);
    for (int e = 0; e < E; ++e) key[e] = per_slot ? next[in.expert_rank[e]]++ : in.expert_rank[e];
  }
  const int B = per_slot ? E : R;
  const int64_t n = in.tokens * in.k;
  auto id_at = [&](int64_t i) -> int64_t {
    return in.ids_int64 ? static_cast<const int64_t*>(in.topk_ids)[i]
                        : static_cast<const int32_t*>(in.topk_ids)[i];
  };

  Layout out;
  out.mode = in.mode;
  out.expert_counts.assign(E, 0);
  out.slot_row.assign(n, -1);
  // Entry bucket per slot: -1 dropped, -2 shares an earlier slot's row (kPerRank).
  std::vector<int32_t> entry(n, -1);
  std::vector<int64_t> bucket_count(B, 0);
  for (int64_t t = 0; t < in.tokens; ++t) {
    for (int s = 0; s < in.k; ++s) {
      const int64_t i = t * in.k + s;
      const int64_t e = id_at(i);
      if (e < 0) continue;
      if (e >= E) {
        return absl::InvalidArgumentError(absl::StrCat("moe layout: token ", t, " slot ", s,
                                                       ": expert id ", e, " outside [0, ", E, ")"));
      }
      ++out.expert_counts[e];
      const int32_t b = key[e];
      bool shared = false;
      if (!per_slot) {
        for (int p = 0; p < s; ++p) shared = shared || entry[t * in.k + p] == b;
      }
      entry[i] = shared ? -2 : b;
      if (!shared) ++bucket_count[b];
    }
  }
  std::vector<int64_t> cursor(B + 1, 0);
  for (int b = 0; b < B; ++b) cursor[b + 1] = cursor[b] + bucket_count[b];
  out.total_rows = cursor[B];
  out.rank_offsets.assign(R + 1, 0);
  for (int r = 0; r <= R; ++r) {
    out.rank_offsets[r] = static_cast<int32_t>(per_slot ? cursor[experts_per_rank[r]] : cursor[r]);
  }
  out.rank_counts.resize(R);
  for (int r = 0; r < R; ++r) out.rank_counts[r] = out.rank_offsets[r + 1] - out.rank_offsets[r];
  out.expert_offsets.assign(E, -1);
  if (per_slot) {
    for (int e = 0; e < E; ++e) out.expert_offsets[e] = static_cast<int32_t>(cursor[key[e]]);
  }
  out.row_token.assign(out.total_rows, -1);
  for (int64_t t = 0; t < in.tokens; ++t) {
    for (int s = 0; s < in.k; ++s) {
      const int64_t i = t * in.k + s;
      if (entry[i] >= 0) {
        const int64_t row = cursor[entry[i]]++;
        out.slot_row[i] = static_cast<int32_t>(row);
        out.row_token[row] = static_cast<int32_t>(t);
      } else if (entry[i] == -2) {
        for (int p = 0; p < s; ++p) {
          const int64_t j = t * in.k + p;
          if (entry[j] >= 0 && entry[j] == key[id_at(i)]) out.slot_row[i] = out.slot_row[j];
        }
      }
    }
  }
  return out;
}

}  // namespace mixnet::moe
