// MoE dispatch permute and combine kernels.
//   Permute: one warp per send-buffer row, 16-byte vectors (four in flight per
//   lane) when rows allow it, element copies otherwise; the row count is read
//   on the device so the launch needs no host sync.
//   Combine: one warp per token; the warp folds slots sharing a row, then each
//   lane loads the same 16-byte vector of every remaining row (up to k loads
//   in flight), accumulates acc = fmaf(w, x, acc) in slot order in fp32 and
//   stores once in the element type -- the arithmetic of moe::Combine.
// Enqueued on the caller's stream from any host thread.
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include <cstdint>

#include "runtime/cuda/moe_kernels_internal.h"

namespace mixnet::cuda::internal {
namespace {

constexpr int kThreads = 256;
constexpr int kWarpsPerBlock = kThreads / 32;
constexpr int kUnroll = 4;

template <typename V>
__global__ void PermuteKernel(const V* __restrict__ x, V* __restrict__ send,
                              const int32_t* __restrict__ row_token,
                              const int32_t* __restrict__ total_rows, int64_t max_rows,
                              int64_t vecs_per_row) {
  const int lane = threadIdx.x % 32;
  const int64_t warps = static_cast<int64_t>(gridDim.x) * kWarpsPerBlock;
  int64_t rows = *total_rows;
  if (rows > max_rows) rows = max_rows;
  for (int64_t row = static_cast<int64_t>(blockIdx.x) * kWarpsPerBlock + threadIdx.x / 32;
       row < rows; row += warps) {
    const V* src = x + static_cast<int64_t>(row_token[row]) * vecs_per_row;
    V* dst = send + row * vecs_per_row;
    for (int64_t base = lane; base < vecs_per_row; base += 32 * kUnroll) {
      V r[kUnroll];
#pragma unroll
      for (int u = 0; u < kUnroll; ++u) {
        const int64_t v = base + u * 32;
        if (v < vecs_per_row) r[u] = src[v];
      }
#pragma unroll
      for (int u = 0; u < kUnroll; ++u) {
        const int64_t v = base + u * 32;
        if (v < vecs_per_row) dst[v] = r[u];
      }
    }
  }
}

template <typename T, int N>
struct alignas(sizeof(T) * N) Pack {
  T v[N];
};

template <typename T>
struct Convert;
template <>
struct Convert<float> {
  __device__ static float In(float v) { return v; }
  __device__ static float Out(float v) { return v; }
};
template <>
struct Convert<__half> {
  __device__ static float In(__half v) { return __half2float(v); }
  __device__ static __half Out(float v) { return __float2half_rn(v); }
};
template <>
struct Convert<__nv_bfloat16> {
  __device__ static float In(__nv_bfloat16 v) { return __bfloat162float(v); }
  __device__ static __nv_bfloat16 Out(float v) { return __float2bfloat16_rn(v); }
};

// N elements of T per lane and step: 16 / sizeof(T) on the vector path, 1 otherwise.
template <typename T, int N>
__global__ void CombineKernel(const Pack<T, N>* __restrict__ buf, int64_t tokens,
                              int64_t packs_per_row, int k, const int32_t* __restrict__ slot_row,
                              const float* __restrict__ weights, Pack<T, N>* __restrict__ out) {
  const int lane = threadIdx.x % 32;
  const int64_t t = static_cast<int64_t>(blockIdx.x) * kWarpsPerBlock + threadIdx.x / 32;
  if (t >= tokens) return;  // whole warp
  // Lanes 0..k-1 fetch the slots; every lane then holds all of them.
  int32_t my_row = -1;
  float my_w = 1.0f;
  if (lane < k) {
    my_row = slot_row[t * k + lane];
    if (weights != nullptr) my_w = weights[t * k + lane];
  }
  int32_t rows[kMaxTopK];
  float ws[kMaxTopK];
#pragma unroll
  for (int s = 0; s < kMaxTopK; ++s) {
    rows[s] = __shfl_sync(0xffffffffu, my_row, s);
    ws[s] = __shfl_sync(0xffffffffu, my_w, s);
  }
  // Fold slots sharing a row into the first of them (same order as the CPU).
#pragma unroll
  for (int s = 1; s < kMaxTopK; ++s) {
    bool folded = false;
#pragma unroll
    for (int p = 0; p < s; ++p) {
      if (!folded && rows[s] >= 0 && rows[p] == rows[s]) {
        if (weights != nullptr) ws[p] += ws[s];
        folded = true;
      }
    }
    if (folded) rows[s] = -1;
  }
  for (int64_t v = lane; v < packs_per_row; v += 32) {
    Pack<T, N> in[kMaxTopK];
#pragma unroll
    for (int s = 0; s < kMaxTopK; ++s) {
      if (rows[s] >= 0) in[s] = buf[static_cast<int64_t>(rows[s]) * packs_per_row + v];
    }
    float acc[N];
#pragma unroll
    for (int i = 0; i < N; ++i) acc[i] = 0.0f;
#pragma unroll
    for (int s = 0; s < kMaxTopK; ++s) {
      if (rows[s] < 0) continue;
#pragma unroll
      for (int i = 0; i < N; ++i) acc[i] = __fmaf_rn(ws[s], Convert<T>::In(in[s].v[i]), acc[i]);
    }
    Pack<T, N> o;
#pragma unroll
    for (int i = 0; i < N; ++i) o.v[i] = Convert<T>::Out(acc[i]);
    out[t * packs_per_row + v] = o;
  }
}

bool Aligned16(const void* p) { return (reinterpret_cast<uintptr_t>(p) & 15u) == 0; }

cudaError_t SmCount(int* sms) {
  int device = 0;
  cudaError_t err = cudaGetDevice(&device);
  if (err == cudaSuccess) err = cudaDeviceGetAttribute(sms, cudaDevAttrMultiProcessorCount, device);
  return err;
}

template <typename T>
cudaError_t LaunchCombineT(const CombineKernelArgs& a, cudaStream_t stream) {
  const unsigned blocks = static_cast<unsigned>((a.tokens + kWarpsPerBlock - 1) / kWarpsPerBlock);
  constexpr int kVec = 16 / sizeof(T);
  const int64_t row_bytes = a.hidden * static_cast<int64_t>(sizeof(T));
  if (row_bytes % 16 == 0 && Aligned16(a.buf) && Aligned16(a.out)) {
    using P = Pack<T, kVec>;
    CombineKernel<T, kVec><<<blocks, kThreads, 0, stream>>>(static_cast<const P*>(a.buf), a.tokens,
                                                            a.hidden / kVec, a.k, a.slot_row,
                                                            a.weights, static_cast<P*>(a.out));
  } else {
    using P = Pack<T, 1>;
    CombineKernel<T, 1><<<blocks, kThreads, 0, stream>>>(static_cast<const P*>(a.buf), a.tokens,
                                                         a.hidden, a.k, a.slot_row, a.weights,
                                                         static_cast<P*>(a.out));
  }
  return cudaGetLastError();
}

}  // namespace

int LaunchPermuteKernel(const PermuteKernelArgs& a, void* stream_ptr) {
  if (a.max_rows == 0) return cudaSuccess;
  auto stream = static_cast<cudaStream_t>(stream_ptr);
  int sms = 0;
  if (const cudaError_t err = SmCount(&sms); err != cudaSuccess) return err;
  int64_t blocks = (a.max_rows + kWarpsPerBlock - 1) / kWarpsPerBlock;
  if (blocks > int64_t{sms} * 16) blocks = int64_t{sms} * 16;
  const unsigned grid = static_cast<unsigned>(blocks);
  const int64_t row_bytes = a.hidden * a.element_bytes;
  if (row_bytes % 16 == 0 && Aligned16(a.x) && Aligned16(a.send)) {
    PermuteKernel<uint4><<<grid, kThreads, 0, stream>>>(static_cast<const uint4*>(a.x),
                                                        static_cast<uint4*>(a.send), a.row_token,
                                                        a.total_rows, a.max_rows, row_bytes / 16);
  } else if (a.element_bytes == 4) {
    PermuteKernel<uint32_t><<<grid, kThreads, 0, stream>>>(
        static_cast<const uint32_t*>(a.x), static_cast<uint32_t*>(a.send), a.row_token,
        a.total_rows, a.max_rows, a.hidden);
  } else {
    PermuteKernel<uint16_t><<<grid, kThreads, 0, stream>>>(
        static_cast<const uint16_t*>(a.x), static_cast<uint16_t*>(a.send), a.row_token,
        a.total_rows, a.max_rows, a.hidden);
  }
  return cudaGetLastError();
}

int LaunchCombineKernel(const CombineKernelArgs& a, void* stream_ptr) {
  if (a.tokens == 0) return cudaSuccess;
  auto stream = static_cast<cudaStream_t>(stream_ptr);
  switch (a.dtype) {
    case 0:
      return LaunchCombineT<float>(a, stream);
    case 1:
      return LaunchCombineT<__half>(a, stream);
    default:
      return LaunchCombineT<__nv_bfloat16>(a, stream);
  }
}

}  // namespace mixnet::cuda::internal
