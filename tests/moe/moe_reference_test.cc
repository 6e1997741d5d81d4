// CPU references of the MoE dispatch layout, permute and combine: hand-made
// 4-token cases in both modes, ordering and count properties on random
// routings (expert counts equal the locality collector's gate histogram),
// permute-then-combine round trips in bf16/fp16/fp32, bad inputs, and the
// bf16/fp16 conversions. Label `cpu`; single-threaded.
#include <cmath>
#include <cstdint>
#include <span>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "runtime/locality/locality_collector.h"
#include "runtime/moe/moe_layout.h"
#include "runtime/moe/moe_permute.h"
#include "tests/moe/moe_test_util.h"

namespace mixnet::moe {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;
using testing::RandomElements;
using testing::RandomRouting;
using testing::Routing;
using testing::SkewedRouting;

// 4 tokens, top-2 of 4 experts; experts 0,1 on rank 0 and 2,3 on rank 1.
// Token 1 sends both slots to rank 0; token 2 drops its second slot.
const std::vector<int32_t> kIds = {0, 2, 1, 0, 3, -1, 2, 3};
const std::vector<int32_t> kExpertRank = {0, 0, 1, 1};

LayoutInput Input(const std::vector<int32_t>& ids, const std::vector<int32_t>& expert_rank, int k,
                  int ranks, DispatchMode mode) {
  return {.topk_ids = ids.data(),
          .ids_int64 = false,
          .tokens = static_cast<int64_t>(ids.size()) / k,
          .k = k,
          .num_experts = static_cast<int>(expert_rank.size()),
          .num_ranks = ranks,
          .expert_rank = expert_rank.data(),
          .mode = mode};
}

TEST(MoeLayoutTest, HandMadePerRank) {
  absl::StatusOr<Layout> l = ComputeLayout(Input(kIds, kExpertRank, 2, 2, DispatchMode::kPerRank));
  ASSERT_TRUE(l.ok()) << l.status();
  // Rank 0 gets tokens 0, 1 (token 1 once for both of its slots); rank 1 gets 0, 2, 3.
  EXPECT_EQ(l->total_rows, 5);
  EXPECT_THAT(l->rank_counts, ElementsAre(2, 3));
  EXPECT_THAT(l->rank_offsets, ElementsAre(0, 2, 5));
  EXPECT_THAT(l->expert_counts, ElementsAre(2, 1, 2, 2));
  EXPECT_THAT(l->expert_offsets, ElementsAre(-1, -1, -1, -1));
  EXPECT_THAT(l->slot_row, ElementsAre(0, 2, 1, 1, 3, -1, 4, 4));
  EXPECT_THAT(l->row_token, ElementsAre(0, 1, 0, 2, 3));
}

TEST(MoeLayoutTest, HandMadePerSlot) {
  absl::StatusOr<Layout> l = ComputeLayout(Input(kIds, kExpertRank, 2, 2, DispatchMode::kPerSlot));
  ASSERT_TRUE(l.ok()) << l.status();
  // Rows: expert 0 {t0, t1}, expert 1 {t1}, expert 2 {t0, t3}, expert 3 {t2, t3}.
  EXPECT_EQ(l->total_rows, 7);
  EXPECT_THAT(l->rank_counts, ElementsAre(3, 4));
  EXPECT_THAT(l->rank_offsets, ElementsAre(0, 3, 7));
  EXPECT_THAT(l->expert_counts, ElementsAre(2, 1, 2, 2));
  EXPECT_THAT(l->expert_offsets, ElementsAre(0, 2, 3, 5));
  EXPECT_THAT(l->slot_row, ElementsAre(0, 3, 2, 1, 5, -1, 4, 6));
  EXPECT_THAT(l->row_token, ElementsAre(0, 1, 1, 0, 3, 2, 3));
}

TEST(MoeLayoutTest, ScatteredExpertsAreOrderedByRankThenExpert) {
  // Experts 1 and 3 on rank 0, 0 and 2 on rank 1: rank 0's rows are expert 1's, then 3's.
  const std::vector<int32_t> expert_rank = {1, 0, 1, 0};
  absl::StatusOr<Layout> l = ComputeLayout(Input(kIds, expert_rank, 2, 2, DispatchMode::kPerSlot));
  ASSERT_TRUE(l.ok()) << l.status();
  EXPECT_THAT(l->expert_offsets, ElementsAre(3, 0, 5, 1));
  EXPECT_THAT(l->rank_offsets, ElementsAre(0, 3, 7));
  EXPECT_THAT(l->row_token, ElementsAre(1, 2, 3, 0, 1, 0, 3));
  EXPECT_THAT(l->slot_row, ElementsAre(3, 5, 0, 4, 1, -1, 6, 2));
}

TEST(MoeLayoutTest, Int64IdsMatchInt32) {
  const std::vector<int64_t> ids64(kIds.begin(), kIds.end());
  LayoutInput in = Input(kIds, kExpertRank, 2, 2, DispatchMode::kPerRank);
  absl::StatusOr<Layout> a = ComputeLayout(in);
  in.topk_ids = ids64.data();
  in.ids_int64 = true;
  absl::StatusOr<Layout> b = ComputeLayout(in);
  ASSERT_TRUE(a.ok() && b.ok());
  EXPECT_EQ(a->slot_row, b->slot_row);
  EXPECT_EQ(a->row_token, b->row_token);
}

TEST(MoeLayoutTest, RejectsBadInput) {
  const std::vector<int32_t> bad_id = {0, 2, 4, 0};
  absl::Status s = ComputeLayout(Input(bad_id, kExpertRank, 2, 2, DispatchMode::kPerRank)).status();
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(s.message(), HasSubstr("token 1 slot 0: expert id 4 outside [0, 4)"));
  const std::vector<int32_t> bad_rank = {0, 0, 2, 1};
  s = ComputeLayout(Input(kIds, bad_rank, 2, 2, DispatchMode::kPerSlot)).status();
  EXPECT_THAT(s.message(), HasSubstr("expert 2 on rank 2 outside [0, 2)"));
  const std::vector<int32_t> nine(9, 0);
  s = ComputeLayout(Input(nine, kExpertRank, 9, 2, DispatchMode::kPerRank)).status();
  EXPECT_THAT(s.message(), HasSubstr("k = 9 outside [1, 8]"));
  EXPECT_EQ(ValidateHidden(0).code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(ValidateHidden(8193).code(), absl::StatusCode::kInvalidArgument);
  EXPECT_TRUE(ValidateHidden(8192).ok());
}

// Order and count properties on random routings.
void CheckProperties(const Routing& r, DispatchMode mode) {
  SCOPED_TRACE(::testing::Message()
               << "tokens " << r.tokens << " k " << r.k << " experts " << r.num_experts << " ranks "
               << r.num_ranks << " mode " << static_cast<int>(mode));
  LayoutInput in{.topk_ids = r.ids.data(),
                 .ids_int64 = true,
                 .tokens = r.tokens,
                 .k = r.k,
                 .num_experts = r.num_experts,
                 .num_ranks = r.num_ranks,
                 .expert_rank = r.expert_rank.data(),
                 .mode = mode};
  absl::StatusOr<Layout> l = ComputeLayout(in);
  ASSERT_TRUE(l.ok()) << l.status();
  // Expert counts are the gate histogram.
  absl::StatusOr<std::vector<int64_t>> hist = CountGateIds(
      GateIds::Of(std::span<const int64_t>(r.ids), r.tokens, r.k), r.num_experts, true);
  ASSERT_TRUE(hist.ok()) << hist.status();
  ASSERT_EQ(l->expert_counts.size(), hist->size());
  for (int e = 0; e < r.num_experts; ++e) EXPECT_EQ(l->expert_counts[e], (*hist)[e]) << e;
  ASSERT_LE(l->total_rows, MaxRows(r.tokens, r.k, r.num_ranks, mode));
  EXPECT_EQ(l->rank_offsets.back(), l->total_rows);
  // Expected rows per rank: distinct ranks per token, or valid slots.
  std::vector<int32_t> want(r.num_ranks, 0);
  for (int64_t t = 0; t < r.tokens; ++t) {
    std::vector<bool> seen(r.num_ranks, false);
    for (int s = 0; s < r.k; ++s) {
      const int64_t e = r.ids[t * r.k + s];
      if (e < 0) continue;
      const int rank = r.expert_rank[e];
      if (mode == DispatchMode::kPerSlot || !seen[rank]) ++want[rank];
      seen[rank] = true;
    }
  }
  EXPECT_EQ(l->rank_counts, want);
  // Every row is used by a slot of its token and lies in its destination's
  // block; rows of a rank (kPerRank) or of an expert (kPerSlot) are in token order.
  std::vector<int> uses(l->total_rows, 0);
  for (int64_t t = 0; t < r.tokens; ++t) {
    for (int s = 0; s < r.k; ++s) {
      const int64_t e = r.ids[t * r.k + s];
      const int32_t row = l->slot_row[t * r.k + s];
      if (e < 0) {
        EXPECT_EQ(row, -1);
        continue;
      }
      ASSERT_GE(row, 0);
      ASSERT_LT(row, l->total_rows);
      ++uses[row];
      EXPECT_EQ(l->row_token[row], t);
      const int rank = r.expert_rank[e];
      EXPECT_GE(row, l->rank_offsets[rank]);
      EXPECT_LT(row, l->rank_offsets[rank + 1]);
      if (mode == DispatchMode::kPerSlot) {
        EXPECT_GE(row, l->expert_offsets[e]);
        EXPECT_LT(row, l->expert_offsets[e] + l->expert_counts[e]);
      }
    }
  }
  for (int64_t row = 0; row < l->total_rows; ++row) EXPECT_GE(uses[row], 1) << "row " << row;
  if (mode == DispatchMode::kPerRank) {
    for (int rank = 0; rank < r.num_ranks; ++rank) {
      for (int32_t row = l->rank_offsets[rank] + 1; row < l->rank_offsets[rank + 1]; ++row) {
        EXPECT_LT(l->row_token[row - 1], l->row_token[row]) << "rank " << rank << " row " << row;
      }
    }
  } else {
    for (int e = 0; e < r.num_experts; ++e) {
      for (int32_t row = l->expert_offsets[e] + 1; row < l->expert_offsets[e] + l->expert_counts[e];
           ++row) {
        EXPECT_LT(l->row_token[row - 1], l->row_token[row]) << "expert " << e << " row " << row;
      }
    }
  }
}

TEST(MoeLayoutTest, PropertiesOnRandomRoutings) {
  unsigned seed = 1;
  for (DispatchMode mode : {DispatchMode::kPerRank, DispatchMode::kPerSlot}) {
    CheckProperties(RandomRouting(1000, 8, 256, 8, 0.0, false, seed++), mode);
    CheckProperties(RandomRouting(777, 3, 64, 16, 0.1, true, seed++), mode);
    CheckProperties(RandomRouting(500, 2, 8, 1, 0.2, false, seed++), mode);
    CheckProperties(RandomRouting(0, 4, 8, 2, 0.0, false, seed++), mode);
    CheckProperties(RandomRouting(300, 1, 300, 7, 0.0, true, seed++), mode);
  }
}

// Every token on the same k experts (0..k-1, one contiguous block on rank
// 0 of 8): hand-worked, rank 0 gets one row per token in per-rank mode and
// k per token in per-slot mode, every other rank and expert none; the
// properties hold on a 95%-skewed routing too.
TEST(MoeLayoutTest, SkewedRoutings) {
  const int64_t tokens = 1001;
  const int k = 8, experts = 256, ranks = 8;
  const Routing r = SkewedRouting(tokens, k, experts, ranks, 1.0, false, 3);
  for (DispatchMode mode : {DispatchMode::kPerRank, DispatchMode::kPerSlot}) {
    absl::StatusOr<Layout> l = ComputeLayout({.topk_ids = r.ids.data(),
                                              .ids_int64 = true,
                                              .tokens = tokens,
                                              .k = k,
                                              .num_experts = experts,
                                              .num_ranks = ranks,
                                              .expert_rank = r.expert_rank.data(),
                                              .mode = mode});
    ASSERT_TRUE(l.ok()) << l.status();
    const int64_t rows = mode == DispatchMode::kPerRank ? tokens : tokens * k;
    EXPECT_EQ(l->total_rows, rows);
    EXPECT_THAT(l->rank_counts, ElementsAre(rows, 0, 0, 0, 0, 0, 0, 0));
    for (int e = 0; e < experts; ++e) {
      EXPECT_EQ(l->expert_counts[e], e < k ? tokens : 0) << "expert " << e;
    }
    CheckProperties(r, mode);
    CheckProperties(SkewedRouting(tokens, k, experts, ranks, 0.95, true, 4), mode);
  }
}

TEST(MoePermuteTest, HandMadePermuteAndCombine) {
  // hidden 2, fp32: token t = {t + 1, 10 * (t + 1)}.
  const std::vector<float> x = {1, 10, 2, 20, 3, 30, 4, 40};
  absl::StatusOr<Layout> l = ComputeLayout(Input(kIds, kExpertRank, 2, 2, DispatchMode::kPerRank));
  ASSERT_TRUE(l.ok());
  std::vector<float> send(l->total_rows * 2, -1);
  ASSERT_TRUE(Permute({.x = x.data(),
                       .dtype = DType::kFloat32,
                       .tokens = 4,
                       .hidden = 2,
                       .row_token = l->row_token,
                       .send = send.data()})
                  .ok());
  EXPECT_THAT(send, ElementsAre(1, 10, 2, 20, 1, 10, 3, 30, 4, 40));
  // Experts return 2x their row; combine with weights.
  for (float& v : send) v *= 2;
  const std::vector<float> w = {0.75f, 0.25f, 0.5f, 0.5f, 1.0f, 0.0f, 0.5f, 0.25f};
  std::vector<float> out(8, -1);
  CombineArgs c{.buf = send.data(),
                .buf_rows = l->total_rows,
                .dtype = DType::kFloat32,
                .tokens = 4,
                .hidden = 2,
                .k = 2,
                .slot_row = l->slot_row.data(),
                .weights = w.data(),
                .out = out.data()};
  ASSERT_TRUE(Combine(c).ok());
  // t0: 0.75*2x + 0.25*2x = 2x; t1: (0.5+0.5)*2x; t2: 1*2x; t3: (0.5+0.25)*2x once.
  EXPECT_THAT(out, ElementsAre(2, 20, 4, 40, 6, 60, 6, 60));
  // Unweighted: each distinct row once (t0 has two ranks).
  c.weights = nullptr;
  ASSERT_TRUE(Combine(c).ok());
  EXPECT_THAT(out, ElementsAre(4, 40, 4, 40, 6, 60, 8, 80));
  // A token whose slots are all dropped gets zeros.
  const std::vector<int32_t> none = {-1, -1};
  c.tokens = 1;
  c.slot_row = none.data();
  ASSERT_TRUE(Combine(c).ok());
  EXPECT_EQ(out[0], 0.0f);
  EXPECT_EQ(out[1], 0.0f);
  // Rows out of range are rejected.
  const std::vector<int32_t> far = {0, 5};
  c.slot_row = far.data();
  EXPECT_THAT(Combine(c).message(), HasSubstr("names row 5 outside [-1, 5)"));
  const std::vector<int32_t> bad_token = {7};
  EXPECT_THAT(Permute({.x = x.data(),
                       .dtype = DType::kFloat32,
                       .tokens = 4,
                       .hidden = 2,
                       .row_token = bad_token,
                       .send = send.data()})
                  .message(),
              HasSubstr("row 0 names token 7"));
}

// Permute, then combine with weight 1/(valid slots) per slot, gives back x:
// exactly for 16-bit types when the count is a power of two, within a
// rounding otherwise.
void RoundTrip(DType dtype, DispatchMode mode, int k, double drop, int64_t hidden, unsigned seed) {
  SCOPED_TRACE(::testing::Message() << DTypeName(dtype) << " k " << k << " drop " << drop
                                    << " hidden " << hidden << " mode " << static_cast<int>(mode));
  const Routing r = RandomRouting(200, k, 32, 4, drop, true, seed);
  LayoutInput in{.topk_ids = r.ids.data(),
                 .ids_int64 = true,
                 .tokens = r.tokens,
                 .k = r.k,
                 .num_experts = r.num_experts,
                 .num_ranks = r.num_ranks,
                 .expert_rank = r.expert_rank.data(),
                 .mode = mode};
  absl::StatusOr<Layout> l = ComputeLayout(in);
  ASSERT_TRUE(l.ok()) << l.status();
  const std::vector<uint8_t> x = RandomElements(dtype, r.tokens * hidden, seed);
  std::vector<uint8_t> send(l->total_rows * hidden * ElementBytes(dtype));
  ASSERT_TRUE(Permute({.x = x.data(),
                       .dtype = dtype,
                       .tokens = r.tokens,
                       .hidden = hidden,
                       .row_token = l->row_token,
                       .send = send.data()})
                  .ok());
  std::vector<float> w(r.tokens * k, 0.0f);
  std::vector<int> valid(r.tokens, 0);
  for (int64_t t = 0; t < r.tokens; ++t) {
    for (int s = 0; s < k; ++s) valid[t] += r.ids[t * k + s] >= 0;
    for (int s = 0; s < k; ++s) w[t * k + s] = valid[t] > 0 ? 1.0f / valid[t] : 0.0f;
  }
  std::vector<uint8_t> out(x.size());
  ASSERT_TRUE(Combine({.buf = send.data(),
                       .buf_rows = l->total_rows,
                       .dtype = dtype,
                       .tokens = r.tokens,
                       .hidden = hidden,
                       .k = k,
                       .slot_row = l->slot_row.data(),
                       .weights = w.data(),
                       .out = out.data()})
                  .ok());
  const double tol = dtype == DType::kFloat32 ? 1e-6 : dtype == DType::kFloat16 ? 2e-3 : 1.6e-2;
  for (int64_t t = 0; t < r.tokens; ++t) {
    // bf16/fp16 values times j/2^n stay exact in fp32; fp32 values may not.
    const bool exact = (valid[t] & (valid[t] - 1)) == 0 && dtype != DType::kFloat32;
    for (int64_t h = 0; h < hidden; ++h) {
      const int64_t i = t * hidden + h;
      const float want = valid[t] == 0 ? 0.0f : testing::ElementAt(x, dtype, i);
      const float got = testing::ElementAt(out, dtype, i);
      if (exact) {
        ASSERT_EQ(got, want) << "token " << t << " element " << h;
      } else {
        ASSERT_NEAR(got, want, tol * (1 + std::abs(want))) << "token " << t << " element " << h;
      }
    }
  }
}

TEST(MoePermuteTest, PermuteThenCombineGivesBackTheInput) {
  unsigned seed = 10;
  for (DType dtype : {DType::kBFloat16, DType::kFloat16, DType::kFloat32}) {
    for (DispatchMode mode : {DispatchMode::kPerRank, DispatchMode::kPerSlot}) {
      RoundTrip(dtype, mode, 8, 0.0, 64, seed++);
      RoundTrip(dtype, mode, 2, 0.0, 7, seed++);
      RoundTrip(dtype, mode, 3, 0.2, 24, seed++);
    }
  }
}

TEST(MoeTypesTest, SixteenBitConversionsRoundTripAndRoundToNearestEven) {
  for (uint32_t h = 0; h < 0x10000; ++h) {
    const uint16_t b = static_cast<uint16_t>(h);
    const bool half_nan = (b & 0x7c00) == 0x7c00 && (b & 0x3ff) != 0;
    if (!half_nan) {
      ASSERT_EQ(FloatToHalf(HalfToFloat(b)), b) << std::hex << h;
    }
    const bool bf_nan = (b & 0x7f80) == 0x7f80 && (b & 0x7f) != 0;
    if (!bf_nan) {
      ASSERT_EQ(FloatToBFloat16(BFloat16ToFloat(b)), b) << std::hex << h;
    }
  }
  EXPECT_EQ(FloatToBFloat16(1.0f), 0x3f80);
  EXPECT_EQ(FloatToBFloat16(1.0f + 1.0f / 256), 0x3f80);  // tie -> even
  EXPECT_EQ(FloatToBFloat16(1.0f + 3.0f / 256), 0x3f82);  // tie -> even (up)
  EXPECT_EQ(FloatToHalf(65504.0f), 0x7bff);
  EXPECT_EQ(FloatToHalf(65520.0f), 0x7c00);
  EXPECT_EQ(FloatToHalf(0x1p-24f), 0x0001);
  EXPECT_EQ(FloatToHalf(0x1p-25f), 0x0000);
  EXPECT_EQ(FloatToHalf(0x1.8p-25f), 0x0001);
  EXPECT_EQ(FloatToHalf(0x1.8p-24f), 0x0002);  // 1.5 units: tie -> even
  EXPECT_EQ(FloatToHalf(-2.0f), 0xc000);
  EXPECT_EQ(HalfToFloat(0x0001), 0x1p-24f);
  EXPECT_EQ(HalfToFloat(0x3c00), 1.0f);
}

}  // namespace
}  // namespace mixnet::moe
