// CPU references of the MoE permute and combine (see moe_permute.h). The
// combine follows the GPU kernel's arithmetic exactly: per token, fold slots
// sharing a row into the first of them, then acc = fmaf(w, x, acc) over the
// remaining slots in slot order, then one rounding. Runs on the caller's thread.
#include "runtime/moe/moe_permute.h"

#include <cmath>
#include <cstring>
#include <vector>

#include "absl/strings/str_cat.h"
#include "runtime/common/status.h"

namespace mixnet::moe {
namespace {

float Load(const void* base, DType t, int64_t i) {
  switch (t) {
    case DType::kFloat32:
      return static_cast<const float*>(base)[i];
    case DType::kFloat16:
      return HalfToFloat(static_cast<const uint16_t*>(base)[i]);
    case DType::kBFloat16:
      return BFloat16ToFloat(static_cast<const uint16_t*>(base)[i]);
  }
  return 0;
}

void Store(void* base, DType t, int64_t i, float v) {
  switch (t) {
    case DType::kFloat32:
      static_cast<float*>(base)[i] = v;
      return;
    case DType::kFloat16:
      static_cast<uint16_t*>(base)[i] = FloatToHalf(v);
      return;
    case DType::kBFloat16:
      static_cast<uint16_t*>(base)[i] = FloatToBFloat16(v);
      return;
  }
}

}  // namespace

absl::Status Permute(const PermuteArgs& a) {
  RETURN_IF_ERROR(ValidateHidden(a.hidden));
  if (a.tokens < 0 || (a.tokens > 0 && a.x == nullptr) ||
      (!a.row_token.empty() && a.send == nullptr)) {
    return absl::InvalidArgumentError(
        absl::StrCat("moe permute: ", a.tokens, " tokens, null x or send buffer"));
  }
  const size_t row_bytes = static_cast<size_t>(a.hidden) * ElementBytes(a.dtype);
  for (size_t row = 0; row < a.row_token.size(); ++row) {
    const int32_t t = a.row_token[row];
    if (t < 0 || t >= a.tokens) {
      return absl::InvalidArgumentError(absl::StrCat("moe permute: row ", row, " names token ", t,
                                                     " outside [0, ", a.tokens, ")"));
    }
    std::memcpy(static_cast<char*>(a.send) + row * row_bytes,
                static_cast<const char*>(a.x) + static_cast<size_t>(t) * row_bytes, row_bytes);
  }
  return absl::OkStatus();
}

absl::Status Combine(const CombineArgs& a) {
  RETURN_IF_ERROR(ValidateHidden(a.hidden));
  if (a.k < 1 || a.k > kMaxTopK) {
    return absl::InvalidArgumentError(
        absl::StrCat("moe combine: k = ", a.k, " outside [1, ", kMaxTopK, "]"));
  }
  if (a.tokens < 0 || a.buf_rows < 0 ||
      (a.tokens > 0 && (a.out == nullptr || a.slot_row == nullptr)) ||
      (a.buf_rows > 0 && a.buf == nullptr)) {
    return absl::InvalidArgumentError(absl::StrCat("moe combine: ", a.tokens, " tokens, ",
                                                   a.buf_rows, " rows, or a null buffer"));
  }
  for (int64_t i = 0; i < a.tokens * a.k; ++i) {
    if (a.slot_row[i] < -1 || a.slot_row[i] >= a.buf_rows) {
      return absl::InvalidArgumentError(absl::StrCat("moe combine: token ", i / a.k, " slot ",
                                                     i % a.k, " names row ", a.slot_row[i],
                                                     " outside [-1, ", a.buf_rows, ")"));
    }
  }
  std::vector<float> acc(a.hidden);
  for (int64_t t = 0; t < a.tokens; ++t) {
    int32_t rows[kMaxTopK];
    float ws[kMaxTopK];
    for (int s = 0; s < a.k; ++s) {
      rows[s] = a.slot_row[t * a.k + s];
      ws[s] = a.weights != nullptr ? a.weights[t * a.k + s] : 1.0f;
      if (rows[s] < 0) continue;
      for (int p = 0; p < s; ++p) {
        if (rows[p] == rows[s]) {
          if (a.weights != nullptr) ws[p] += ws[s];
          rows[s] = -1;
          break;
        }
      }
    }
    std::fill(acc.begin(), acc.end(), 0.0f);
    for (int s = 0; s < a.k; ++s) {
      if (rows[s] < 0) continue;
      const int64_t base = static_cast<int64_t>(rows[s]) * a.hidden;
      for (int64_t h = 0; h < a.hidden; ++h)
        acc[h] = std::fmaf(ws[s], Load(a.buf, a.dtype, base + h), acc[h]);
    }
    for (int64_t h = 0; h < a.hidden; ++h) Store(a.out, a.dtype, t * a.hidden + h, acc[h]);
  }
  return absl::OkStatus();
}

}  // namespace mixnet::moe
