// mixnet_moe_kernels_bench: memory bandwidth of the GPU MoE dispatch permute
// and combine (runtime/cuda/moe_kernels.h) on a DeepSeek-V3-like step:
// 4096 tokens x hidden 7168, bf16, top-8 of 256 experts over 8 ranks, in both
// dispatch modes. Times each kernel with cudaEvents over many launches and
// reports GB/s as bytes read + written per launch / time:
//   permute: 2 * rows * row_bytes (each row read from x and written to send)
//   combine: (rows + tokens) * row_bytes (each row read once, each token written)
// against the device's peak (2 * memory clock * bus width) and a measured
// device-to-device cudaMemcpy. Also times the layout and the whole pipeline
// replayed as a CUDA graph. Prints one JSON object on stdout; exit 2 without
// a device. Single host thread.
#include <cuda_runtime.h>

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <random>
#include <stdexcept>
#include <string>
#include <vector>

#include "CLI/CLI.hpp"
#include "nlohmann/json.hpp"
#include "runtime/cuda/moe_kernels.h"

namespace {

using mixnet::moe::DispatchMode;
using mixnet::moe::DType;
using nlohmann::json;

struct Options {
  int64_t tokens = 4096;
  int64_t hidden = 7168;
  int k = 8;
  int experts = 256;
  int ranks = 8;
  std::string dtype = "bf16";
  int iters = 50;
  int warmup = 5;
  unsigned seed = 1;
};

#define CUDA_CHECK(call)                                                                 \
  do {                                                                                   \
    cudaError_t e_ = (call);                                                             \
    if (e_ != cudaSuccess)                                                               \
      throw std::runtime_error(std::string(#call " failed: ") + cudaGetErrorString(e_)); \
  } while (0)

void Check(const absl::Status& s) {
  if (!s.ok()) throw std::runtime_error(std::string(s.message()));
}

struct DeviceBuffer {
  void* p = nullptr;
  explicit DeviceBuffer(size_t bytes) { CUDA_CHECK(cudaMalloc(&p, std::max<size_t>(bytes, 1))); }
  ~DeviceBuffer() { cudaFree(p); }
  DeviceBuffer(const DeviceBuffer&) = delete;
  DeviceBuffer& operator=(const DeviceBuffer&) = delete;
  template <typename T>
  T* as() const {
    return static_cast<T*>(p);
  }
};

// Average milliseconds of fn() over iters launches after warmup launches.
template <typename Fn>
double TimeMs(cudaStream_t stream, int warmup, int iters, Fn fn) {
  for (int i = 0; i < warmup; ++i) fn();
  cudaEvent_t start, stop;
  CUDA_CHECK(cudaEventCreate(&start));
  CUDA_CHECK(cudaEventCreate(&stop));
  CUDA_CHECK(cudaEventRecord(start, stream));
  for (int i = 0; i < iters; ++i) fn();
  CUDA_CHECK(cudaEventRecord(stop, stream));
  CUDA_CHECK(cudaEventSynchronize(stop));
  float ms = 0;
  CUDA_CHECK(cudaEventElapsedTime(&ms, start, stop));
  cudaEventDestroy(start);
  cudaEventDestroy(stop);
  return ms / iters;
}

json Rate(double bytes, double ms, double peak_gbs, double memcpy_gbs) {
  const double gbs = bytes / (ms * 1e-3) / 1e9;
  return {{"time_us", ms * 1e3},
          {"bytes", bytes},
          {"gbytes_per_s", gbs},
          {"fraction_of_peak", peak_gbs > 0 ? gbs / peak_gbs : 0.0},
          {"fraction_of_memcpy", memcpy_gbs > 0 ? gbs / memcpy_gbs : 0.0}};
}

json RunMode(const Options& o, DType dtype, DispatchMode mode, const std::vector<int32_t>& ids,
             const std::vector<int32_t>& expert_rank, const std::vector<float>& weights,
             cudaStream_t stream, double peak_gbs, double memcpy_gbs) {
  const int64_t max_rows = mixnet::moe::MaxRows(o.tokens, o.k, o.ranks, mode);
  const size_t row_bytes = static_cast<size_t>(o.hidden) * mixnet::moe::ElementBytes(dtype);
  DeviceBuffer d_ids(ids.size() * 4), d_map(expert_rank.size() * 4), d_w(weights.size() * 4);
  DeviceBuffer x(o.tokens * row_bytes), send(max_rows * row_bytes), out(o.tokens * row_bytes);
  DeviceBuffer rank_counts(o.ranks * 4), rank_offsets((o.ranks + 1) * 4);
  DeviceBuffer expert_counts(o.experts * 4), expert_offsets(o.experts * 4);
  DeviceBuffer slot_row(ids.size() * 4), row_token(max_rows * 4), error(8);
  const size_t ws_bytes = mixnet::cuda::LayoutWorkspaceBytes(o.tokens, o.experts, o.ranks, mode);
  DeviceBuffer ws(ws_bytes);
  CUDA_CHECK(cudaMemcpy(d_ids.p, ids.data(), ids.size() * 4, cudaMemcpyHostToDevice));
  CUDA_CHECK(
      cudaMemcpy(d_map.p, expert_rank.data(), expert_rank.size() * 4, cudaMemcpyHostToDevice));
  CUDA_CHECK(cudaMemcpy(d_w.p, weights.data(), weights.size() * 4, cudaMemcpyHostToDevice));
  CUDA_CHECK(cudaMemset(x.p, 0x3c, o.tokens * row_bytes));  // finite values in every dtype

  const mixnet::moe::LayoutInput in{.topk_ids = d_ids.p,
                                    .ids_int64 = false,
                                    .tokens = o.tokens,
                                    .k = o.k,
                                    .num_experts = o.experts,
                                    .num_ranks = o.ranks,
                                    .expert_rank = d_map.as<int32_t>(),
                                    .mode = mode};
  const mixnet::cuda::LayoutOutputs lo{.rank_counts = rank_counts.as<int32_t>(),
                                       .rank_offsets = rank_offsets.as<int32_t>(),
                                       .expert_counts = expert_counts.as<int32_t>(),
                                       .expert_offsets = expert_offsets.as<int32_t>(),
                                       .slot_row = slot_row.as<int32_t>(),
                                       .row_token = row_token.as<int32_t>(),
                                       .error = error.as<int64_t>()};
  const mixnet::cuda::PermuteLaunch pl{.x = x.p,
                                       .dtype = dtype,
                                       .tokens = o.tokens,
                                       .hidden = o.hidden,
                                       .row_token = row_token.as<int32_t>(),
                                       .total_rows = rank_offsets.as<int32_t>() + o.ranks,
                                       .max_rows = max_rows,
                                       .send = send.p};
  const mixnet::cuda::CombineLaunch cl{.buf = send.p,
                                       .dtype = dtype,
                                       .tokens = o.tokens,
                                       .hidden = o.hidden,
                                       .k = o.k,
                                       .slot_row = slot_row.as<int32_t>(),
                                       .weights = d_w.as<float>(),
                                       .out = out.p};
  auto layout = [&] { Check(mixnet::cuda::LaunchLayout(in, lo, ws.p, ws_bytes, stream)); };
  auto permute = [&] { Check(mixnet::cuda::LaunchPermute(pl, stream)); };
  auto combine = [&] { Check(mixnet::cuda::LaunchCombine(cl, stream)); };

  layout();
  CUDA_CHECK(cudaStreamSynchronize(stream));
  int64_t err = 0;
  int32_t total = 0;
  CUDA_CHECK(cudaMemcpy(&err, error.p, 8, cudaMemcpyDeviceToHost));
  Check(mixnet::cuda::CheckLayoutError(err, o.k));
  CUDA_CHECK(cudaMemcpy(&total, rank_offsets.as<int32_t>() + o.ranks, 4, cudaMemcpyDeviceToHost));

  const double layout_ms = TimeMs(stream, o.warmup, o.iters, layout);
  const double permute_ms = TimeMs(stream, o.warmup, o.iters, permute);
  const double combine_ms = TimeMs(stream, o.warmup, o.iters, combine);

  // The whole step as one CUDA graph (proves no host sync or allocation inside).
  cudaGraph_t graph;
  cudaGraphExec_t exec;
  CUDA_CHECK(cudaStreamBeginCapture(stream, cudaStreamCaptureModeGlobal));
  layout();
  permute();
  combine();
  CUDA_CHECK(cudaStreamEndCapture(stream, &graph));
  CUDA_CHECK(cudaGraphInstantiate(&exec, graph, 0));
  const double graph_ms =
      TimeMs(stream, o.warmup, o.iters, [&] { CUDA_CHECK(cudaGraphLaunch(exec, stream)); });
  cudaGraphExecDestroy(exec);
  cudaGraphDestroy(graph);

  return {{"mode", mode == DispatchMode::kPerRank ? "per_rank" : "per_slot"},
          {"rows", total},
          {"row_bytes", row_bytes},
          {"layout_us", layout_ms * 1e3},
          {"permute", Rate(2.0 * total * row_bytes, permute_ms, peak_gbs, memcpy_gbs)},
          {"combine", Rate(static_cast<double>(total + o.tokens) * row_bytes, combine_ms, peak_gbs,
                           memcpy_gbs)},
          {"graph_step_us", graph_ms * 1e3}};
}

int Run(const Options& o) {
  int count = 0;
  if (cudaGetDeviceCount(&count) != cudaSuccess || count == 0) {
    std::printf("%s\n", json{{"bench", "moe_kernels"}, {"error", "no CUDA device"}}.dump().c_str());
    return 2;
  }
  DType dtype = DType::kBFloat16;
  if (o.dtype == "fp16") dtype = DType::kFloat16;
  if (o.dtype == "fp32") dtype = DType::kFloat32;
  int device = 0, clock_khz = 0, bus_bits = 0;
  CUDA_CHECK(cudaGetDevice(&device));
  cudaDeviceProp prop{};
  CUDA_CHECK(cudaGetDeviceProperties(&prop, device));
  CUDA_CHECK(cudaDeviceGetAttribute(&clock_khz, cudaDevAttrMemoryClockRate, device));
  CUDA_CHECK(cudaDeviceGetAttribute(&bus_bits, cudaDevAttrGlobalMemoryBusWidth, device));
  const double peak_gbs = 2.0 * clock_khz * 1e3 * (bus_bits / 8.0) / 1e9;

  cudaStream_t stream;
  CUDA_CHECK(cudaStreamCreate(&stream));
  double memcpy_gbs = 0;
  {
    const size_t bytes = size_t{1} << 30;
    DeviceBuffer a(bytes), b(bytes);
    CUDA_CHECK(cudaMemset(a.p, 1, bytes));
    const double ms = TimeMs(stream, 2, 10, [&] {
      CUDA_CHECK(cudaMemcpyAsync(b.p, a.p, bytes, cudaMemcpyDeviceToDevice, stream));
    });
    memcpy_gbs = 2.0 * bytes / (ms * 1e-3) / 1e9;
  }

  // Gate: distinct uniform experts per token; experts in equal contiguous blocks per rank.
  std::mt19937 rng(o.seed);
  std::uniform_int_distribution<int> pick(0, o.experts - 1);
  std::uniform_real_distribution<float> prob(0.0f, 1.0f);
  std::vector<int32_t> ids;
  std::vector<float> weights;
  for (int64_t t = 0; t < o.tokens; ++t) {
    std::vector<int32_t> row;
    while (static_cast<int>(row.size()) < o.k) {
      const int e = pick(rng);
      if (std::find(row.begin(), row.end(), e) == row.end()) row.push_back(e);
    }
    ids.insert(ids.end(), row.begin(), row.end());
    for (int s = 0; s < o.k; ++s) weights.push_back(prob(rng) / o.k);
  }
  std::vector<int32_t> expert_rank(o.experts);
  for (int e = 0; e < o.experts; ++e)
    expert_rank[e] = static_cast<int32_t>(int64_t{e} * o.ranks / o.experts);

  json modes = json::array();
  for (DispatchMode mode : {DispatchMode::kPerRank, DispatchMode::kPerSlot}) {
    modes.push_back(
        RunMode(o, dtype, mode, ids, expert_rank, weights, stream, peak_gbs, memcpy_gbs));
  }
  cudaStreamDestroy(stream);
  const json& primary = modes[0];  // kPerRank
  const double permute_frac = primary["permute"]["fraction_of_peak"];
  const double combine_frac = primary["combine"]["fraction_of_peak"];
  json result = {{"bench", "moe_kernels"},
                 {"device", prop.name},
                 {"sms", prop.multiProcessorCount},
                 {"memory_clock_khz", clock_khz},
                 {"memory_bus_bits", bus_bits},
                 {"peak_gbytes_per_s", peak_gbs},
                 {"memcpy_d2d_gbytes_per_s", memcpy_gbs},
                 {"tokens", o.tokens},
                 {"hidden", o.hidden},
                 {"k", o.k},
                 {"experts", o.experts},
                 {"ranks", o.ranks},
                 {"dtype", o.dtype},
                 {"iters", o.iters},
                 {"results", modes},
                 {"permute_fraction", permute_frac},
                 {"combine_fraction", combine_frac},
                 {"target_fraction", 0.7},
                 {"meets_target", permute_frac >= 0.7 && combine_frac >= 0.7}};
  std::printf("%s\n", result.dump().c_str());
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"GPU MoE permute/combine bandwidth; prints JSON"};
  Options o;
  app.add_option("--tokens", o.tokens, "tokens per micro-batch")->check(CLI::Range(1, 1 << 20));
  app.add_option("--hidden", o.hidden, "elements per token")->check(CLI::Range(1, 8192));
  app.add_option("--k", o.k, "experts per token")->check(CLI::Range(1, 8));
  app.add_option("--experts", o.experts, "experts")->check(CLI::Range(1, 65536));
  app.add_option("--ranks", o.ranks, "EP ranks")->check(CLI::Range(1, 65536));
  app.add_option("--dtype", o.dtype, "bf16, fp16 or fp32")
      ->check(CLI::IsMember({"bf16", "fp16", "fp32"}));
  app.add_option("--iters", o.iters, "timed launches")->check(CLI::Range(1, 100000));
  app.add_option("--warmup", o.warmup, "untimed launches")->check(CLI::Range(0, 1000));
  app.add_option("--seed", o.seed, "gate seed");
  CLI11_PARSE(app, argc, argv);
  if (o.k > o.experts) {
    std::fprintf(stderr, "--k %d exceeds --experts %d\n", o.k, o.experts);
    return 1;
  }
  try {
    return Run(o);
  } catch (const std::exception& e) {
    std::printf("%s\n", json{{"bench", "moe_kernels"}, {"error", e.what()}}.dump().c_str());
    return 1;
  }
}
