// GPU gate histogram against the CPU locality collector on random gate
// outputs (int32 and int64 ids, several k, expert counts that fit and do not
// fit the shared-memory histogram, one source rank or a rank per token), and
// its checks of bad ids. Label `gpu`: skips with the reason when no CUDA
// device is present. Single-threaded.
#include "runtime/cuda/gate_histogram.h"

#include <cstdint>
#include <random>
#include <span>
#include <string>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "runtime/locality/locality_collector.h"

namespace mixnet {
namespace {

using ::testing::HasSubstr;

class GateHistogramGpuTest : public ::testing::Test {
 protected:
  void SetUp() override {
    absl::StatusOr<int> n = cuda::DeviceCount();
    if (!n.ok()) GTEST_SKIP() << "no CUDA device: " << n.status();
    if (*n == 0) GTEST_SKIP() << "no CUDA device: cudaGetDeviceCount returned 0";
  }
};

// Random top-k rows with distinct ids.
template <typename T>
std::vector<T> RandomIds(std::mt19937& rng, int64_t tokens, int k, int experts) {
  std::vector<T> ids;
  ids.reserve(tokens * k);
  std::uniform_int_distribution<int> pick(0, experts - 1);
  for (int64_t t = 0; t < tokens; ++t) {
    std::vector<int> row;
    while (static_cast<int>(row.size()) < k) {
      const int e = pick(rng);
      bool seen = false;
      for (int x : row) seen = seen || x == e;
      if (!seen) row.push_back(e);
    }
    for (int e : row) ids.push_back(static_cast<T>(e));
  }
  return ids;
}

ExpertPlacement Placement(int ranks, int experts) {
  PlacementTables t;
  const int hosts = ranks >= 2 ? 2 : 1;
  for (int h = 0; h < hosts; ++h) {
    t.hosts.push_back("h" + std::to_string(h));
    t.host_region.push_back("r0");
  }
  for (int r = 0; r < ranks; ++r) t.rank_host.push_back(r * hosts / ranks);
  for (int e = 0; e < experts; ++e) t.expert_rank.push_back(e * ranks / experts);
  auto p = ExpertPlacement::Create(t);
  EXPECT_TRUE(p.ok()) << p.status();
  return *p;
}

template <typename T>
void CompareOnRandomInput(int ranks, int experts, int k, int64_t tokens, bool per_token_rank,
                          unsigned seed) {
  SCOPED_TRACE(::testing::Message()
               << "ranks " << ranks << " experts " << experts << " k " << k << " tokens " << tokens
               << " int" << sizeof(T) * 8 << (per_token_rank ? " per-token ranks" : ""));
  std::mt19937 rng(seed);
  const std::vector<T> ids = RandomIds<T>(rng, tokens, k, experts);
  std::vector<int32_t> token_rank(tokens);
  std::uniform_int_distribution<int> rank_pick(0, ranks - 1);
  for (auto& r : token_rank) r = per_token_rank ? rank_pick(rng) : ranks - 1;

  // CPU: each rank records its own tokens.
  auto cpu =
      LocalityCollector::Create(Placement(ranks, experts), {.hidden = 8, .element_bytes = 2});
  ASSERT_TRUE(cpu.ok());
  const GateKey key{.layer = 1, .micro_batch = 0, .direction = Direction::kDispatch};
  for (int r = 0; r < ranks; ++r) {
    std::vector<T> mine;
    for (int64_t t = 0; t < tokens; ++t) {
      if (token_rank[t] == r)
        mine.insert(mine.end(), ids.begin() + t * k, ids.begin() + (t + 1) * k);
    }
    ASSERT_TRUE((*cpu)->Record(key, r, std::span<const T>(mine), k).ok());
  }

  cuda::GateHistogramInput in;
  in.ids = ids.data();
  in.is_int64 = sizeof(T) == 8;
  in.tokens = tokens;
  in.k = k;
  in.num_experts = experts;
  in.num_ranks = ranks;
  if (per_token_rank) {
    in.token_rank = token_rank.data();
  } else {
    in.source_rank = ranks - 1;
  }
  absl::StatusOr<std::vector<int64_t>> gpu = cuda::GateHistogramFromHost(in);
  ASSERT_TRUE(gpu.ok()) << gpu.status();

  TokenCounts from_gpu = TokenCounts::Zero(key, ranks, experts);
  from_gpu.counts = *gpu;
  absl::StatusOr<TokenCounts> expected = (*cpu)->Counts(key);
  ASSERT_TRUE(expected.ok());
  EXPECT_EQ(from_gpu, *expected);
  EXPECT_EQ(from_gpu.Total(), tokens * k);

  // Same matrices once merged into a collector.
  auto merged =
      LocalityCollector::Create(Placement(ranks, experts), {.hidden = 8, .element_bytes = 2});
  ASSERT_TRUE((*merged)->Merge(from_gpu).ok());
  EXPECT_EQ(*(*merged)->RegionMatrix(key, 0), *(*cpu)->RegionMatrix(key, 0));
}

TEST_F(GateHistogramGpuTest, MatchesCpuCollectorOnRandomInputs) {
  unsigned seed = 1;
  for (bool per_token : {false, true}) {
    CompareOnRandomInput<int32_t>(4, 8, 2, 1000, per_token, seed++);
    CompareOnRandomInput<int64_t>(4, 8, 2, 1000, per_token, seed++);
    CompareOnRandomInput<int32_t>(8, 64, 4, 100000, per_token, seed++);
    CompareOnRandomInput<int64_t>(8, 64, 1, 100000, per_token, seed++);
    // 16 x 1024 bins do not fit in shared memory with per-token ranks: global atomics.
    CompareOnRandomInput<int64_t>(16, 1024, 8, 20000, per_token, seed++);
    CompareOnRandomInput<int32_t>(2, 8, 2, 1, per_token, seed++);
  }
}

TEST_F(GateHistogramGpuTest, EmptyInputGivesZeros) {
  cuda::GateHistogramInput in;
  in.tokens = 0;
  in.k = 2;
  in.num_experts = 8;
  in.num_ranks = 2;
  absl::StatusOr<std::vector<int64_t>> gpu = cuda::GateHistogramFromHost(in);
  ASSERT_TRUE(gpu.ok()) << gpu.status();
  EXPECT_EQ(*gpu, std::vector<int64_t>(16, 0));
}

TEST_F(GateHistogramGpuTest, BadIdsNameTheFirstIndexLikeTheCpu) {
  std::mt19937 rng(5);
  std::vector<int32_t> ids = RandomIds<int32_t>(rng, 5000, 2, 8);
  ids[7001] = 8;   // token 3500 slot 1
  ids[9000] = -3;  // later: the first bad index wins
  cuda::GateHistogramInput in;
  in.ids = ids.data();
  in.tokens = 5000;
  in.k = 2;
  in.num_experts = 8;
  in.num_ranks = 1;
  absl::Status s = cuda::GateHistogramFromHost(in).status();
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(s.message()), HasSubstr("token 3500 slot 1 (index 7001)"));
  absl::Status cpu = CountGateIds(GateIds::Of(std::span<const int32_t>(ids), 2), 8).status();
  EXPECT_THAT(std::string(cpu.message()), HasSubstr("token 3500 slot 1 (index 7001)"));

  ids[7001] = ids[7000];  // repeat within the token
  s = cuda::GateHistogramFromHost(in).status();
  EXPECT_THAT(std::string(s.message()), HasSubstr("(index 7001): expert id repeats"));

  ids[7001] = (ids[7000] + 1) % 8;
  in.skip_negative_ids = true;  // -3 is now a dropped token
  absl::StatusOr<std::vector<int64_t>> ok = cuda::GateHistogramFromHost(in);
  ASSERT_TRUE(ok.ok()) << ok.status();
  int64_t total = 0;
  for (int64_t v : *ok) total += v;
  EXPECT_EQ(total, 5000 * 2 - 1);

  std::vector<int32_t> ranks(5000, 0);
  ranks[42] = 1;  // only rank 0 exists
  in.token_rank = ranks.data();
  s = cuda::GateHistogramFromHost(in).status();
  EXPECT_THAT(std::string(s.message()),
              HasSubstr("token 42 slot 0 (index 84): token's source rank"));

  in.token_rank = nullptr;
  in.k = 9;
  EXPECT_EQ(cuda::GateHistogramFromHost(in).status().code(), absl::StatusCode::kInvalidArgument);
  in.k = 2;
  in.source_rank = 1;
  EXPECT_EQ(cuda::GateHistogramFromHost(in).status().code(), absl::StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace mixnet
