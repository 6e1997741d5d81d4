// MoE token dispatch types shared by the CPU references (runtime/moe) and the
// CUDA kernels (runtime/cuda/moe_kernels.h): element types, the dispatch mode,
// the layout problem and its limits, and bit-exact float <-> bf16/fp16
// conversions (round to nearest even, as the GPU's __float2bfloat16_rn and
// __float2half_rn). Header-only apart from ValidateLayoutInput; usable from
// any thread.
#pragma once

#include <algorithm>
#include <bit>
#include <cstdint>

#include "absl/status/status.h"

namespace mixnet::moe {

enum class DType { kFloat32 = 0, kFloat16 = 1, kBFloat16 = 2 };

constexpr int ElementBytes(DType t) { return t == DType::kFloat32 ? 4 : 2; }
const char* DTypeName(DType t);

// How a token routed to several experts is sent (see README.md, "Order"):
//  kPerRank: once per distinct destination rank (DeepEP); rows of a rank are in
//            token order. Slots whose experts share a rank share the row.
//  kPerSlot: once per (token, expert) slot (Megatron's alltoall dispatcher);
//            rows of a rank are grouped by expert, then token order.
enum class DispatchMode { kPerRank = 0, kPerSlot = 1 };

constexpr int kMaxTopK = 8;
constexpr int64_t kMaxHidden = 8192;
constexpr int kMaxExperts = 1 << 16;
constexpr int kMaxRanks = 1 << 16;

// The routing of one micro-batch. Pointers are host memory for the CPU
// references and device memory for the GPU launches.
struct LayoutInput {
  const void* topk_ids = nullptr;  // tokens * k expert ids, row-major
  bool ids_int64 = false;          // int64 (torch.topk) or int32
  int64_t tokens = 0;
  int k = 0;  // 1..kMaxTopK
  int num_experts = 0;
  int num_ranks = 0;
  const int32_t* expert_rank = nullptr;  // num_experts entries: the rank hosting each expert
  DispatchMode mode = DispatchMode::kPerRank;
};

// Upper bound of the send-buffer rows: tokens * k (kPerSlot) or
// tokens * min(k, num_ranks) (kPerRank). Size send/recv buffers and row_token with it.
inline int64_t MaxRows(int64_t tokens, int k, int num_ranks, DispatchMode mode) {
  return tokens * (mode == DispatchMode::kPerSlot ? k : std::min(k, num_ranks));
}

// InvalidArgument naming the field when the shape is outside the limits:
// k in [1, 8], tokens >= 0 with tokens * k < 2^31, experts in [1, 65536],
// ranks in [1, 65536], non-null buffers. Does not read the buffers.
absl::Status ValidateLayoutInput(const LayoutInput& in);
// InvalidArgument unless hidden is in [1, kMaxHidden].
absl::Status ValidateHidden(int64_t hidden);

// --- float <-> 16-bit conversions, round to nearest even -----------------

inline float BFloat16ToFloat(uint16_t h) { return std::bit_cast<float>(uint32_t{h} << 16); }

inline uint16_t FloatToBFloat16(float f) {
  uint32_t x = std::bit_cast<uint32_t>(f);
  if ((x & 0x7fffffffu) > 0x7f800000u) return static_cast<uint16_t>((x >> 16) | 0x40);  // quiet NaN
  x += 0x7fffu + ((x >> 16) & 1u);
  return static_cast<uint16_t>(x >> 16);
}

inline float HalfToFloat(uint16_t h) {
  const uint32_t sign = uint32_t{h & 0x8000u} << 16;
  const uint32_t exp = (h >> 10) & 0x1fu;
  uint32_t mant = h & 0x3ffu;
  if (exp == 0x1f) return std::bit_cast<float>(sign | 0x7f800000u | (mant << 13));
  if (exp != 0) return std::bit_cast<float>(sign | ((exp + 112) << 23) | (mant << 13));
  if (mant == 0) return std::bit_cast<float>(sign);
  // Subnormal: mant * 2^-24.
  int e = 113;
  while ((mant & 0x400u) == 0) {
    mant <<= 1;
    --e;
  }
  return std::bit_cast<float>(sign | (static_cast<uint32_t>(e) << 23) | ((mant & 0x3ffu) << 13));
}

inline uint16_t FloatToHalf(float f) {
  const uint32_t x = std::bit_cast<uint32_t>(f);
  const uint32_t sign = (x >> 16) & 0x8000u;
  const uint32_t a = x & 0x7fffffffu;
  if (a > 0x7f800000u) return static_cast<uint16_t>(sign | 0x7e00u);   // NaN
  if (a >= 0x477ff000u) return static_cast<uint16_t>(sign | 0x7c00u);  // rounds to infinity
  if (a < 0x38800000u) {                                               // below 2^-14: subnormal
    if (a <= 0x33000000u) return static_cast<uint16_t>(sign);          // <= 2^-25 rounds to 0
    const uint32_t e = a >> 23;
    const uint32_t m = (a & 0x7fffffu) | 0x800000u;
    const uint32_t shift = 126 - e;  // 14..24
    uint32_t r = m >> shift;
    const uint32_t rem = m & ((1u << shift) - 1);
    const uint32_t half = 1u << (shift - 1);
    if (rem > half || (rem == half && (r & 1u))) ++r;
    return static_cast<uint16_t>(sign | r);
  }
  uint32_t r = (a - 0x38000000u) >> 13;
  const uint32_t rem = a & 0x1fffu;
  if (rem > 0x1000u || (rem == 0x1000u && (r & 1u))) ++r;
  return static_cast<uint16_t>(sign | r);
}

}  // namespace mixnet::moe
