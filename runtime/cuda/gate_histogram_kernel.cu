// Gate-histogram kernel: counts, on the GPU, how many tokens each source rank
// routes to each expert from the top-k expert ids of a gate (int32 or int64),
// checking ids on the way. One thread per token (grid-stride); each block
// counts into a privatised shared-memory histogram with 32-bit atomics and
// flushes its non-zero bins to the global 64-bit counts once. Histograms too
// large for shared memory fall back to global atomics. Enqueued on the
// caller's stream from any host thread.
#include <cuda_runtime.h>

#include <cstdint>

#include "runtime/cuda/gate_histogram_kernel.h"

namespace mixnet::cuda::internal {
namespace {

constexpr int kThreads = 256;
constexpr size_t kMaxSharedBytes = 48 * 1024;  // the default dynamic shared-memory limit

__device__ void ReportBad(unsigned long long* bad, int64_t index, int kind) {
  atomicMin(bad, (static_cast<unsigned long long>(index) << 2) | static_cast<unsigned>(kind));
}

template <typename T, bool kShared>
__global__ void GateHistogramKernel(const T* __restrict__ ids, int64_t tokens, int k,
                                    int num_experts, const int32_t* __restrict__ token_rank,
                                    int source_rank, int num_ranks, bool skip_negative,
                                    unsigned long long* counts, unsigned long long* bad) {
  extern __shared__ unsigned int hist[];
  // With one source rank the block histogram has one row.
  const int bins = token_rank != nullptr ? num_ranks * num_experts : num_experts;
  if (kShared) {
    for (int b = threadIdx.x; b < bins; b += blockDim.x) hist[b] = 0;
    __syncthreads();
  }
  const int64_t stride = static_cast<int64_t>(gridDim.x) * blockDim.x;
  for (int64_t t = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; t < tokens;
       t += stride) {
    const int rank = token_rank != nullptr ? token_rank[t] : source_rank;
    if (rank < 0 || rank >= num_ranks) {
      ReportBad(bad, t * k, kBadRank);
      continue;
    }
    const T* row = ids + t * k;
    for (int s = 0; s < k; ++s) {
      const long long e = static_cast<long long>(row[s]);
      if (e < 0 && skip_negative) continue;
      if (e < 0 || e >= num_experts) {
        ReportBad(bad, t * k + s, kBadExpert);
        continue;
      }
      bool repeat = false;
      for (int p = 0; p < s; ++p) repeat = repeat || static_cast<long long>(row[p]) == e;
      if (repeat) {
        ReportBad(bad, t * k + s, kBadRepeat);
        continue;
      }
      if (kShared) {
        const int bin =
            token_rank != nullptr ? rank * num_experts + static_cast<int>(e) : static_cast<int>(e);
        atomicAdd(&hist[bin], 1u);
      } else {
        atomicAdd(&counts[static_cast<int64_t>(rank) * num_experts + e], 1ull);
      }
    }
  }
  if (kShared) {
    __syncthreads();
    for (int b = threadIdx.x; b < bins; b += blockDim.x) {
      const unsigned int n = hist[b];
      if (n == 0) continue;
      const int64_t out =
          token_rank != nullptr ? b : static_cast<int64_t>(source_rank) * num_experts + b;
      atomicAdd(&counts[out], static_cast<unsigned long long>(n));
    }
  }
}

template <typename T>
cudaError_t Launch(const KernelArgs& a, unsigned long long* counts, unsigned long long* bad,
                   cudaStream_t stream) {
  int device = 0;
  int sms = 0;
  cudaError_t err = cudaGetDevice(&device);
  if (err == cudaSuccess)
    err = cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, device);
  if (err != cudaSuccess) return err;
  const int64_t wanted = (a.tokens + kThreads - 1) / kThreads;
  const int blocks = static_cast<int>(wanted < int64_t{sms} * 4 ? wanted : int64_t{sms} * 4);
  const size_t bins = a.token_rank != nullptr ? static_cast<size_t>(a.num_ranks) * a.num_experts
                                              : static_cast<size_t>(a.num_experts);
  const size_t shared = bins * sizeof(unsigned int);
  const T* ids = static_cast<const T*>(a.ids);
  if (shared <= kMaxSharedBytes) {
    GateHistogramKernel<T, true><<<blocks, kThreads, shared, stream>>>(
        ids, a.tokens, a.k, a.num_experts, a.token_rank, a.source_rank, a.num_ranks,
        a.skip_negative_ids, counts, bad);
  } else {
    GateHistogramKernel<T, false><<<blocks, kThreads, 0, stream>>>(
        ids, a.tokens, a.k, a.num_experts, a.token_rank, a.source_rank, a.num_ranks,
        a.skip_negative_ids, counts, bad);
  }
  return cudaGetLastError();
}

}  // namespace

int LaunchGateHistogramKernel(const KernelArgs& args, unsigned long long* counts,
                              unsigned long long* bad, void* stream) {
  if (args.tokens == 0) return cudaSuccess;
  auto s = static_cast<cudaStream_t>(stream);
  return static_cast<int>(args.is_int64 ? Launch<int64_t>(args, counts, bad, s)
                                        : Launch<int32_t>(args, counts, bad, s));
}

}  // namespace mixnet::cuda::internal
