// Random MoE routings and activations shared by the MoE reference and GPU
// kernel tests. Header-only; single-threaded use.
#pragma once

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <random>
#include <vector>

#include "runtime/moe/moe_types.h"

namespace mixnet::moe::testing {

struct Routing {
  int64_t tokens = 0;
  int k = 0;
  int num_experts = 0;
  int num_ranks = 0;
  std::vector<int64_t> ids;  // tokens * k, distinct per token, -1 = dropped
  std::vector<int32_t> expert_rank;
};

// Contiguous blocks (DeepSeek-style) or a scattered expert -> rank map.
inline std::vector<int32_t> ExpertRanks(int experts, int ranks, bool scattered, std::mt19937& rng) {
  std::vector<int32_t> m(experts);
  for (int e = 0; e < experts; ++e) m[e] = static_cast<int32_t>(int64_t{e} * ranks / experts);
  if (scattered) std::shuffle(m.begin(), m.end(), rng);
  return m;
}

inline Routing RandomRouting(int64_t tokens, int k, int experts, int ranks, double drop,
                             bool scattered, unsigned seed) {
  std::mt19937 rng(seed);
  Routing r{tokens, k, experts, ranks, {}, ExpertRanks(experts, ranks, scattered, rng)};
  r.ids.reserve(tokens * k);
  std::uniform_int_distribution<int> pick(0, experts - 1);
  std::bernoulli_distribution dropped(drop);
  for (int64_t t = 0; t < tokens; ++t) {
    std::vector<int64_t> row;
    while (static_cast<int>(row.size()) < k) {
      const int e = pick(rng);
      bool seen = false;
      for (int64_t x : row) seen = seen || x == e;
      if (!seen) row.push_back(e);
    }
    for (int64_t e : row) r.ids.push_back(dropped(rng) ? -1 : e);
  }
  return r;
}

// A skewed routing: each token, with probability `hot`, sends its k slots to
// the k hot experts 0..k-1 (in a random order), else to k distinct uniform
// experts. hot = 1 leaves every other expert empty and, with contiguous
// expert blocks, every rank but the hot experts' with no rows.
inline Routing SkewedRouting(int64_t tokens, int k, int experts, int ranks, double hot,
                             bool scattered, unsigned seed) {
  Routing r = RandomRouting(tokens, k, experts, ranks, 0.0, scattered, seed);
  std::mt19937 rng(seed + 1);
  std::bernoulli_distribution is_hot(hot);
  std::vector<int64_t> hot_set(k);
  for (int i = 0; i < k; ++i) hot_set[i] = i;
  for (int64_t t = 0; t < tokens; ++t) {
    if (!is_hot(rng)) continue;
    std::shuffle(hot_set.begin(), hot_set.end(), rng);
    std::copy(hot_set.begin(), hot_set.end(), r.ids.begin() + t * k);
  }
  return r;
}

inline std::vector<int32_t> Narrow(const std::vector<int64_t>& ids) {
  return std::vector<int32_t>(ids.begin(), ids.end());
}

// n elements of dtype with values in [-4, 4), as raw bytes.
inline std::vector<uint8_t> RandomElements(DType dtype, int64_t n, unsigned seed) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> v(-4.0f, 4.0f);
  std::vector<uint8_t> out(n * ElementBytes(dtype));
  for (int64_t i = 0; i < n; ++i) {
    const float f = v(rng);
    if (dtype == DType::kFloat32) {
      std::memcpy(out.data() + i * 4, &f, 4);
    } else {
      const uint16_t h = dtype == DType::kFloat16 ? FloatToHalf(f) : FloatToBFloat16(f);
      std::memcpy(out.data() + i * 2, &h, 2);
    }
  }
  return out;
}

inline float ElementAt(const std::vector<uint8_t>& b, DType dtype, int64_t i) {
  if (dtype == DType::kFloat32) {
    float f;
    std::memcpy(&f, b.data() + i * 4, 4);
    return f;
  }
  uint16_t h;
  std::memcpy(&h, b.data() + i * 2, 2);
  return dtype == DType::kFloat16 ? HalfToFloat(h) : BFloat16ToFloat(h);
}

}  // namespace mixnet::moe::testing
