// GPU MoE dispatch kernels against the CPU references (runtime/moe): layout
// in both modes on random routings (int32/int64 ids, drops, contiguous and
// scattered expert maps, 1..64 ranks, up to 4096 tokens), permute and combine
// bit for bit in bf16/fp16/fp32 on the vector and element paths, device-side
// error reporting, skewed routings (most experts and ranks empty), and the
// whole pipeline captured in a CUDA graph and replayed. Label `gpu`: skips
// with the reason when no CUDA device is present. Single-threaded.
#include <cuda_runtime.h>

#include <cstdint>
#include <cstring>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "runtime/cuda/gate_histogram.h"
#include "runtime/cuda/moe_kernels.h"
#include "runtime/moe/moe_layout.h"
#include "runtime/moe/moe_permute.h"
#include "tests/moe/moe_test_util.h"

namespace mixnet::moe {
namespace {

using ::testing::HasSubstr;
using testing::Narrow;
using testing::RandomElements;
using testing::RandomRouting;
using testing::SkewedRouting;
using testing::Routing;

class MoeKernelsGpuTest : public ::testing::Test {
 protected:
  void SetUp() override {
    absl::StatusOr<int> n = cuda::DeviceCount();
    if (!n.ok()) GTEST_SKIP() << "no CUDA device: " << n.status();
    if (*n == 0) GTEST_SKIP() << "no CUDA device: cudaGetDeviceCount returned 0";
  }
};

LayoutInput InputOf(const Routing& r, const std::vector<int32_t>& ids32, bool int64,
                    DispatchMode mode) {
  return {.topk_ids = int64 ? static_cast<const void*>(r.ids.data()) : ids32.data(),
          .ids_int64 = int64,
          .tokens = r.tokens,
          .k = r.k,
          .num_experts = r.num_experts,
          .num_ranks = r.num_ranks,
          .expert_rank = r.expert_rank.data(),
          .mode = mode};
}

void ExpectSameLayout(const Layout& gpu, const Layout& cpu) {
  EXPECT_EQ(gpu.total_rows, cpu.total_rows);
  EXPECT_EQ(gpu.rank_counts, cpu.rank_counts);
  EXPECT_EQ(gpu.rank_offsets, cpu.rank_offsets);
  EXPECT_EQ(gpu.expert_counts, cpu.expert_counts);
  EXPECT_EQ(gpu.expert_offsets, cpu.expert_offsets);
  EXPECT_EQ(gpu.slot_row, cpu.slot_row);
  EXPECT_EQ(gpu.row_token, cpu.row_token);
}

TEST_F(MoeKernelsGpuTest, LayoutMatchesCpu) {
  struct Case {
    int64_t tokens;
    int k, experts, ranks;
    double drop;
    bool scattered;
  };
  const Case cases[] = {{4096, 8, 256, 8, 0.0, false}, {4096, 8, 256, 64, 0.05, true},
                        {1000, 3, 64, 16, 0.1, true},  {33, 2, 8, 1, 0.2, false},
                        {31, 1, 300, 7, 0.0, true},    {1, 8, 8, 8, 0.0, false},
                        {0, 4, 8, 2, 0.0, false},      {2000, 6, 1500, 32, 0.0, true}};
  unsigned seed = 100;
  for (const Case& c : cases) {
    const Routing r = RandomRouting(c.tokens, c.k, c.experts, c.ranks, c.drop, c.scattered, seed++);
    const std::vector<int32_t> ids32 = Narrow(r.ids);
    for (DispatchMode mode : {DispatchMode::kPerRank, DispatchMode::kPerSlot}) {
      for (bool int64 : {false, true}) {
        SCOPED_TRACE(::testing::Message() << "tokens " << c.tokens << " k " << c.k << " experts "
                                          << c.experts << " ranks " << c.ranks << " mode "
                                          << static_cast<int>(mode) << " int64 " << int64);
        const LayoutInput in = InputOf(r, ids32, int64, mode);
        absl::StatusOr<Layout> cpu = ComputeLayout(in);
        ASSERT_TRUE(cpu.ok()) << cpu.status();
        absl::StatusOr<Layout> gpu = cuda::LayoutFromHost(in);
        ASSERT_TRUE(gpu.ok()) << gpu.status();
        ExpectSameLayout(*gpu, *cpu);
      }
    }
  }
}

TEST_F(MoeKernelsGpuTest, LayoutReportsBadIdsAndRanks) {
  Routing r = RandomRouting(64, 4, 16, 4, 0.0, false, 7);
  r.ids[5 * 4 + 2] = 16;
  r.ids[9 * 4 + 1] = 99;
  std::vector<int32_t> ids32 = Narrow(r.ids);
  absl::Status s = cuda::LayoutFromHost(InputOf(r, ids32, false, DispatchMode::kPerRank)).status();
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(s.message(), HasSubstr("token 5 slot 2: expert id out of range"));
  r = RandomRouting(64, 4, 16, 4, 0.0, false, 8);
  r.expert_rank[3] = 4;
  ids32 = Narrow(r.ids);
  s = cuda::LayoutFromHost(InputOf(r, ids32, true, DispatchMode::kPerSlot)).status();
  EXPECT_THAT(s.message(), HasSubstr("expert 3 is on a rank out of range"));
}

TEST_F(MoeKernelsGpuTest, PermuteMatchesCpu) {
  const Routing r = RandomRouting(512, 8, 64, 8, 0.05, true, 11);
  const std::vector<int32_t> ids32 = Narrow(r.ids);
  unsigned seed = 200;
  for (DispatchMode mode : {DispatchMode::kPerRank, DispatchMode::kPerSlot}) {
    absl::StatusOr<Layout> l = ComputeLayout(InputOf(r, ids32, false, mode));
    ASSERT_TRUE(l.ok());
    for (DType dtype : {DType::kBFloat16, DType::kFloat16, DType::kFloat32}) {
      for (int64_t hidden : {int64_t{7168}, int64_t{8192}, int64_t{8}, int64_t{7}, int64_t{1}}) {
        SCOPED_TRACE(::testing::Message() << DTypeName(dtype) << " hidden " << hidden);
        const std::vector<uint8_t> x = RandomElements(dtype, r.tokens * hidden, seed++);
        std::vector<uint8_t> want(l->total_rows * hidden * ElementBytes(dtype));
        ASSERT_TRUE(Permute({.x = x.data(),
                             .dtype = dtype,
                             .tokens = r.tokens,
                             .hidden = hidden,
                             .row_token = l->row_token,
                             .send = want.data()})
                        .ok());
        absl::StatusOr<std::vector<uint8_t>> got =
            cuda::PermuteFromHost(x.data(), dtype, r.tokens, hidden, l->row_token);
        ASSERT_TRUE(got.ok()) << got.status();
        ASSERT_EQ(*got, want);
      }
    }
  }
}

TEST_F(MoeKernelsGpuTest, CombineMatchesCpuBitForBit) {
  const Routing r = RandomRouting(777, 8, 64, 8, 0.05, false, 12);
  const std::vector<int32_t> ids32 = Narrow(r.ids);
  const std::vector<uint8_t> wbytes = RandomElements(DType::kFloat32, r.tokens * r.k, 13);
  std::vector<float> weights(r.tokens * r.k);
  std::memcpy(weights.data(), wbytes.data(), wbytes.size());
  unsigned seed = 300;
  for (DispatchMode mode : {DispatchMode::kPerRank, DispatchMode::kPerSlot}) {
    absl::StatusOr<Layout> l = ComputeLayout(InputOf(r, ids32, true, mode));
    ASSERT_TRUE(l.ok());
    for (DType dtype : {DType::kBFloat16, DType::kFloat16, DType::kFloat32}) {
      for (int64_t hidden : {int64_t{7168}, int64_t{64}, int64_t{5}}) {
        for (bool weighted : {true, false}) {
          SCOPED_TRACE(::testing::Message()
                       << DTypeName(dtype) << " hidden " << hidden << " weighted " << weighted
                       << " mode " << static_cast<int>(mode));
          const std::vector<uint8_t> buf = RandomElements(dtype, l->total_rows * hidden, seed++);
          std::vector<uint8_t> want(r.tokens * hidden * ElementBytes(dtype));
          ASSERT_TRUE(Combine({.buf = buf.data(),
                               .buf_rows = l->total_rows,
                               .dtype = dtype,
                               .tokens = r.tokens,
                               .hidden = hidden,
                               .k = r.k,
                               .slot_row = l->slot_row.data(),
                               .weights = weighted ? weights.data() : nullptr,
                               .out = want.data()})
                          .ok());
          absl::StatusOr<std::vector<uint8_t>> got =
              cuda::CombineFromHost(buf.data(), l->total_rows, dtype, r.tokens, hidden, r.k,
                                    l->slot_row, weighted ? weights.data() : nullptr);
          ASSERT_TRUE(got.ok()) << got.status();
          ASSERT_EQ(*got, want);
        }
      }
    }
  }
}

// Skewed routings (95% and 100% of tokens on the same k experts: most
// experts and ranks empty, one expert's rows in the thousands) with odd
// hidden sizes: layout, permute and combine against the CPU references.
TEST_F(MoeKernelsGpuTest, SkewedRoutingsMatchCpu) {
  unsigned seed = 400;
  for (double hot : {0.95, 1.0}) {
    for (bool scattered : {false, true}) {
      const Routing r = SkewedRouting(3001, 8, 256, 8, hot, scattered, seed++);
      const std::vector<int32_t> ids32 = Narrow(r.ids);
      for (DispatchMode mode : {DispatchMode::kPerRank, DispatchMode::kPerSlot}) {
        SCOPED_TRACE(::testing::Message() << "hot " << hot << " scattered " << scattered << " mode "
                                          << static_cast<int>(mode));
        const LayoutInput in = InputOf(r, ids32, false, mode);
        absl::StatusOr<Layout> cpu = ComputeLayout(in);
        ASSERT_TRUE(cpu.ok()) << cpu.status();
        absl::StatusOr<Layout> gpu = cuda::LayoutFromHost(in);
        ASSERT_TRUE(gpu.ok()) << gpu.status();
        ExpectSameLayout(*gpu, *cpu);
        if (hot == 1.0) {
          // Closed form: every token's k slots on experts 0..k-1, once each.
          for (int e = 0; e < r.num_experts; ++e) {
            EXPECT_EQ(cpu->expert_counts[e], e < r.k ? r.tokens : 0) << "expert " << e;
          }
        }
        for (int64_t hidden : {int64_t{7168}, int64_t{9}}) {
          const DType dtype = DType::kBFloat16;
          const std::vector<uint8_t> x = RandomElements(dtype, r.tokens * hidden, seed++);
          std::vector<uint8_t> want(cpu->total_rows * hidden * ElementBytes(dtype));
          ASSERT_TRUE(Permute({.x = x.data(),
                               .dtype = dtype,
                               .tokens = r.tokens,
                               .hidden = hidden,
                               .row_token = cpu->row_token,
                               .send = want.data()})
                          .ok());
          absl::StatusOr<std::vector<uint8_t>> got =
              cuda::PermuteFromHost(x.data(), dtype, r.tokens, hidden, cpu->row_token);
          ASSERT_TRUE(got.ok()) << got.status();
          ASSERT_EQ(*got, want);
          std::vector<uint8_t> out(r.tokens * hidden * ElementBytes(dtype));
          ASSERT_TRUE(Combine({.buf = want.data(),
                               .buf_rows = cpu->total_rows,
                               .dtype = dtype,
                               .tokens = r.tokens,
                               .hidden = hidden,
                               .k = r.k,
                               .slot_row = cpu->slot_row.data(),
                               .weights = nullptr,
                               .out = out.data()})
                          .ok());
          absl::StatusOr<std::vector<uint8_t>> back = cuda::CombineFromHost(
              want.data(), cpu->total_rows, dtype, r.tokens, hidden, r.k, cpu->slot_row, nullptr);
          ASSERT_TRUE(back.ok()) << back.status();
          ASSERT_EQ(*back, out);
        }
      }
    }
  }
}

#define CUDA_ASSERT(call) ASSERT_EQ((call), cudaSuccess) << #call

// Layout, permute, an "expert" (x2 by a D2D scale-free copy: identity) and
// combine captured once in a CUDA graph, replayed for two different routings
// written into the same input buffers.
TEST_F(MoeKernelsGpuTest, PipelineIsGraphCapturable) {
  const int64_t tokens = 1024, hidden = 1024;
  const int k = 4, experts = 32, ranks = 4;
  const DType dtype = DType::kBFloat16;
  const DispatchMode mode = DispatchMode::kPerRank;
  const int64_t max_rows = MaxRows(tokens, k, ranks, mode);
  const size_t row_bytes = hidden * ElementBytes(dtype);
  const size_t ws_bytes = cuda::LayoutWorkspaceBytes(tokens, experts, ranks, mode);
  void *ids, *expert_rank, *x, *send, *out, *weights, *ws, *counts;
  CUDA_ASSERT(cudaMalloc(&ids, tokens * k * 4));
  CUDA_ASSERT(cudaMalloc(&expert_rank, experts * 4));
  CUDA_ASSERT(cudaMalloc(&x, tokens * row_bytes));
  CUDA_ASSERT(cudaMalloc(&send, max_rows * row_bytes));
  CUDA_ASSERT(cudaMalloc(&out, tokens * row_bytes));
  CUDA_ASSERT(cudaMalloc(&weights, tokens * k * 4));
  CUDA_ASSERT(cudaMalloc(&ws, ws_bytes));
  // rank_counts, rank_offsets, expert_counts, expert_offsets, slot_row, row_token, error
  const size_t ints = ranks + (ranks + 1) + 2 * experts + tokens * k + max_rows + 2;
  CUDA_ASSERT(cudaMalloc(&counts, ints * 4));
  int32_t* p = static_cast<int32_t*>(counts);
  cuda::LayoutOutputs lo;
  lo.error = reinterpret_cast<int64_t*>(p);  // 8-byte aligned first
  p += 2;
  lo.rank_counts = p;
  p += ranks;
  lo.rank_offsets = p;
  p += ranks + 1;
  lo.expert_counts = p;
  p += experts;
  lo.expert_offsets = p;
  p += experts;
  lo.slot_row = p;
  p += tokens * k;
  lo.row_token = p;

  cudaStream_t stream;
  CUDA_ASSERT(cudaStreamCreate(&stream));
  const LayoutInput in{.topk_ids = ids,
                       .ids_int64 = false,
                       .tokens = tokens,
                       .k = k,
                       .num_experts = experts,
                       .num_ranks = ranks,
                       .expert_rank = static_cast<const int32_t*>(expert_rank),
                       .mode = mode};
  CUDA_ASSERT(cudaStreamBeginCapture(stream, cudaStreamCaptureModeGlobal));
  absl::Status s1 = cuda::LaunchLayout(in, lo, ws, ws_bytes, stream);
  absl::Status s2 = cuda::LaunchPermute({.x = x,
                                         .dtype = dtype,
                                         .tokens = tokens,
                                         .hidden = hidden,
                                         .row_token = lo.row_token,
                                         .total_rows = lo.rank_offsets + ranks,
                                         .max_rows = max_rows,
                                         .send = send},
                                        stream);
  absl::Status s3 = cuda::LaunchCombine({.buf = send,
                                         .dtype = dtype,
                                         .tokens = tokens,
                                         .hidden = hidden,
                                         .k = k,
                                         .slot_row = lo.slot_row,
                                         .weights = static_cast<const float*>(weights),
                                         .out = out},
                                        stream);
  cudaGraph_t graph;
  CUDA_ASSERT(cudaStreamEndCapture(stream, &graph));
  ASSERT_TRUE(s1.ok()) << s1;
  ASSERT_TRUE(s2.ok()) << s2;
  ASSERT_TRUE(s3.ok()) << s3;
  cudaGraphExec_t exec;
  CUDA_ASSERT(cudaGraphInstantiate(&exec, graph, 0));

  for (unsigned seed : {21u, 22u}) {
    SCOPED_TRACE(seed);
    const Routing r = RandomRouting(tokens, k, experts, ranks, 0.1, seed == 22, seed);
    const std::vector<int32_t> ids32 = Narrow(r.ids);
    const std::vector<uint8_t> xs = RandomElements(dtype, tokens * hidden, seed);
    const std::vector<uint8_t> wb = RandomElements(DType::kFloat32, tokens * k, seed + 1);
    CUDA_ASSERT(cudaMemcpy(ids, ids32.data(), ids32.size() * 4, cudaMemcpyHostToDevice));
    CUDA_ASSERT(cudaMemcpy(expert_rank, r.expert_rank.data(), experts * 4, cudaMemcpyHostToDevice));
    CUDA_ASSERT(cudaMemcpy(x, xs.data(), xs.size(), cudaMemcpyHostToDevice));
    CUDA_ASSERT(cudaMemcpy(weights, wb.data(), wb.size(), cudaMemcpyHostToDevice));
    CUDA_ASSERT(cudaGraphLaunch(exec, stream));
    CUDA_ASSERT(cudaStreamSynchronize(stream));
    int64_t err = 0;
    CUDA_ASSERT(cudaMemcpy(&err, lo.error, 8, cudaMemcpyDeviceToHost));
    ASSERT_TRUE(cuda::CheckLayoutError(err, k).ok());

    LayoutInput host_in = in;
    host_in.topk_ids = ids32.data();
    host_in.expert_rank = r.expert_rank.data();
    absl::StatusOr<Layout> l = ComputeLayout(host_in);
    ASSERT_TRUE(l.ok());
    std::vector<uint8_t> sent(l->total_rows * row_bytes);
    ASSERT_TRUE(Permute({.x = xs.data(),
                         .dtype = dtype,
                         .tokens = tokens,
                         .hidden = hidden,
                         .row_token = l->row_token,
                         .send = sent.data()})
                    .ok());
    std::vector<uint8_t> want(tokens * row_bytes);
    ASSERT_TRUE(Combine({.buf = sent.data(),
                         .buf_rows = l->total_rows,
                         .dtype = dtype,
                         .tokens = tokens,
                         .hidden = hidden,
                         .k = k,
                         .slot_row = l->slot_row.data(),
                         .weights = reinterpret_cast<const float*>(wb.data()),
                         .out = want.data()})
                    .ok());
    std::vector<uint8_t> got_send(sent.size()), got(want.size());
    CUDA_ASSERT(cudaMemcpy(got_send.data(), send, sent.size(), cudaMemcpyDeviceToHost));
    CUDA_ASSERT(cudaMemcpy(got.data(), out, got.size(), cudaMemcpyDeviceToHost));
    EXPECT_EQ(got_send, sent);
    EXPECT_EQ(got, want);
  }
  cudaGraphExecDestroy(exec);
  cudaGraphDestroy(graph);
  cudaStreamDestroy(stream);
  for (void* b : {ids, expert_rank, x, send, out, weights, ws, counts}) cudaFree(b);
}

}  // namespace
}  // namespace mixnet::moe
