// MoE dispatch layout kernels (see runtime/moe/README.md for the order):
//   1. init: zero the per-chunk count table and expert counts, reset the error word;
//   2. keys (one block): bucket of each expert, its rank (kPerRank) or its
//      position in (rank, expert) order (kPerSlot);
//   3. count: one thread per (token, slot), atomics into the count of its
//      32-token chunk and bucket (order-independent);
//   4. chunk scan: one thread per bucket turns its column into exclusive
//      offsets in chunk order;
//   5. bucket scan (one block): bucket bases, per-rank counts and offsets,
//      per-expert offsets;
//   6. assign: one warp per chunk; a slot's row is bucket base + chunk offset
//      + the number of earlier entries of the chunk in the same bucket, so the
//      rows of a bucket are in token order and the result is deterministic.
// Nothing allocates or synchronises with the host. Enqueued on the caller's
// stream from any host thread.
#include <cuda_runtime.h>

#include <cstdint>

#include "runtime/cuda/moe_kernels_internal.h"

namespace mixnet::cuda::internal {
namespace {

constexpr int kThreads = 256;
constexpr int kScanThreads = 1024;
constexpr int kWarpsPerBlock = kThreads / 32;

__device__ void ReportBad(unsigned long long* error, int64_t index, int kind) {
  atomicMin(error, (static_cast<unsigned long long>(index) << 2) | static_cast<unsigned>(kind));
}

__device__ __forceinline__ int64_t IdAt(const void* ids, bool is64, int64_t i) {
  return is64 ? static_cast<const int64_t*>(ids)[i]
              : static_cast<int64_t>(static_cast<const int32_t*>(ids)[i]);
}

__global__ void InitKernel(int32_t* table, int64_t table_size, int32_t* expert_counts,
                           int num_experts, unsigned long long* error) {
  const int64_t stride = static_cast<int64_t>(gridDim.x) * blockDim.x;
  const int64_t first = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  for (int64_t i = first; i < table_size; i += stride) table[i] = 0;
  for (int64_t i = first; i < num_experts; i += stride) expert_counts[i] = 0;
  if (first == 0) *error = 0x7fffffffffffffffull;
}

__global__ void KeysKernel(const int32_t* __restrict__ expert_rank, int num_experts, int num_ranks,
                           bool per_slot, int32_t* key, unsigned long long* error) {
  for (int e = threadIdx.x; e < num_experts; e += blockDim.x) {
    const int r = expert_rank[e];
    if (r < 0 || r >= num_ranks) {
      key[e] = -1;
      ReportBad(error, e, kBadExpertRank);
      continue;
    }
    if (!per_slot) {
      key[e] = r;
      continue;
    }
    int before = 0;
    for (int f = 0; f < num_experts; ++f) {
      const int rf = expert_rank[f];
      before += (rf >= 0 && rf < r) || (rf == r && f < e);
    }
    key[e] = before;
  }
}

// Entry bucket of slot s of token t: -1 when dropped or bad, -2 when an earlier
// slot of the token already sends to the same bucket (kPerRank only).
__device__ int EntryBucket(const LayoutKernelArgs& a, int64_t t, int s, const int32_t* key) {
  const int64_t e = IdAt(a.ids, a.ids_int64, t * a.k + s);
  if (e < 0 || e >= a.num_experts) return -1;
  const int b = key[e];
  if (b < 0 || a.per_slot) return b;
  for (int p = 0; p < s; ++p) {
    const int64_t ep = IdAt(a.ids, a.ids_int64, t * a.k + p);
    if (ep >= 0 && ep < a.num_experts && key[ep] == b) return -2;
  }
  return b;
}

__global__ void CountKernel(LayoutKernelArgs a, int buckets) {
  const int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i >= a.tokens * a.k) return;
  const int64_t t = i / a.k;
  const int s = static_cast<int>(i % a.k);
  const int64_t e = IdAt(a.ids, a.ids_int64, i);
  if (e < 0) return;
  if (e >= a.num_experts) {
    ReportBad(a.error, i, kBadExpertId);
    return;
  }
  atomicAdd(&a.expert_counts[e], 1);
  const int b = EntryBucket(a, t, s, a.key);
  if (b < 0) return;
  atomicAdd(&a.chunk_table[(t / kChunkTokens) * buckets + b], 1);
}

__global__ void ChunkScanKernel(int32_t* table, int64_t chunks, int buckets, int32_t* total) {
  const int b = blockIdx.x * blockDim.x + threadIdx.x;
  if (b >= buckets) return;
  int32_t run = 0;
  for (int64_t c = 0; c < chunks; ++c) {
    const int32_t v = table[c * buckets + b];
    table[c * buckets + b] = run;
    run += v;
  }
  total[b] = run;
}

// out[0..n] = exclusive prefix sums of in[0..n) (out[n] = the sum), by one
// block of kScanThreads threads: each thread scans a contiguous segment.
__device__ void BlockExclusiveScan(const int32_t* in, int32_t* out, int n, int32_t* partial) {
  const int seg = (n + kScanThreads - 1) / kScanThreads;
  const int begin = min(n, static_cast<int>(threadIdx.x) * seg);
  const int end = min(n, begin + seg);
  int32_t sum = 0;
  for (int i = begin; i < end; ++i) sum += in[i];
  partial[threadIdx.x] = sum;
  __syncthreads();
  for (int off = 1; off < kScanThreads; off <<= 1) {  // inclusive Hillis-Steele scan
    const int32_t add = threadIdx.x >= off ? partial[threadIdx.x - off] : 0;
    __syncthreads();
    partial[threadIdx.x] += add;
    __syncthreads();
  }
  int32_t run = partial[threadIdx.x] - sum;
  for (int i = begin; i < end; ++i) {
    out[i] = run;
    run += in[i];
  }
  if (threadIdx.x == kScanThreads - 1) out[n] = partial[kScanThreads - 1];
  __syncthreads();
}

__global__ void BucketScanKernel(LayoutKernelArgs a, int buckets) {
  __shared__ int32_t partial[kScanThreads];
  BlockExclusiveScan(a.bucket_total, a.bucket_base, buckets, partial);
  if (!a.per_slot) {
    for (int r = threadIdx.x; r < a.num_ranks; r += blockDim.x) {
      a.rank_counts[r] = a.bucket_total[r];
      a.rank_offsets[r] = a.bucket_base[r];
    }
    if (threadIdx.x == 0) a.rank_offsets[a.num_ranks] = a.bucket_base[buckets];
    for (int e = threadIdx.x; e < a.num_experts; e += blockDim.x) a.expert_offsets[e] = -1;
    return;
  }
  for (int r = threadIdx.x; r < a.num_ranks; r += blockDim.x) a.rank_counts[r] = 0;
  __syncthreads();
  for (int e = threadIdx.x; e < a.num_experts; e += blockDim.x) {
    const int b = a.key[e];
    a.expert_offsets[e] = b >= 0 ? a.bucket_base[b] : -1;
    if (b >= 0) atomicAdd(&a.rank_counts[a.expert_rank[e]], a.bucket_total[b]);
  }
  __syncthreads();
  BlockExclusiveScan(a.rank_counts, a.rank_offsets, a.num_ranks, partial);
}

__global__ void AssignKernel(LayoutKernelArgs a, int buckets, int64_t chunks) {
  __shared__ int32_t entries[kWarpsPerBlock][kMaxTopK][32];
  const int warp = threadIdx.x / 32;
  const int lane = threadIdx.x % 32;
  const int64_t c = static_cast<int64_t>(blockIdx.x) * kWarpsPerBlock + warp;
  if (c >= chunks) return;  // whole warp
  const int64_t t = c * kChunkTokens + lane;
  const bool valid = t < a.tokens;
  int mine[kMaxTopK];
#pragma unroll
  for (int s = 0; s < kMaxTopK; ++s) {
    mine[s] = valid && s < a.k ? EntryBucket(a, t, s, a.key) : -1;
    entries[warp][s][lane] = mine[s] >= 0 ? mine[s] : -1;
  }
  __syncwarp();
  // Entries of earlier tokens of the chunk (and earlier slots of this token)
  // in the same bucket come first.
  int before[kMaxTopK];
#pragma unroll
  for (int s = 0; s < kMaxTopK; ++s) {
    before[s] = 0;
#pragma unroll
    for (int p = 0; p < s; ++p) before[s] += mine[p] >= 0 && mine[p] == mine[s];
  }
  for (int j = 0; j < kChunkTokens; ++j) {
    const bool earlier = j < lane;
    for (int p = 0; p < a.k; ++p) {
      const int v = entries[warp][p][j];
#pragma unroll
      for (int s = 0; s < kMaxTopK; ++s) before[s] += earlier && v >= 0 && v == mine[s];
    }
  }
  if (!valid) return;
  int rows[kMaxTopK];
#pragma unroll
  for (int s = 0; s < kMaxTopK; ++s) {
    rows[s] = -1;
    if (s >= a.k) continue;
    const int b = mine[s];
    if (b >= 0) {
      rows[s] = a.bucket_base[b] + a.chunk_table[c * buckets + b] + before[s];
      a.row_token[rows[s]] = static_cast<int32_t>(t);
    } else if (b == -2) {
      // Shares the row of the first earlier slot with the same rank.
      const int64_t e = IdAt(a.ids, a.ids_int64, t * a.k + s);
      const int bucket = a.key[e];
#pragma unroll
      for (int p = kMaxTopK - 1; p >= 0; --p) {
        if (p < s && mine[p] == bucket) rows[s] = rows[p];
      }
    }
    a.slot_row[t * a.k + s] = rows[s];
  }
}

}  // namespace

int LaunchLayoutKernels(const LayoutKernelArgs& a, void* stream_ptr) {
  auto stream = static_cast<cudaStream_t>(stream_ptr);
  const int buckets = a.per_slot ? a.num_experts : a.num_ranks;
  const int64_t chunks = (a.tokens + kChunkTokens - 1) / kChunkTokens;
  const int64_t table = chunks * buckets;
  int device = 0;
  int sms = 0;
  cudaError_t err = cudaGetDevice(&device);
  if (err == cudaSuccess)
    err = cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, device);
  if (err != cudaSuccess) return err;
  const int64_t init_work = table > a.num_experts ? table : a.num_experts;
  int64_t init_blocks = (init_work + kThreads - 1) / kThreads;
  if (init_blocks > int64_t{sms} * 8) init_blocks = int64_t{sms} * 8;
  if (init_blocks < 1) init_blocks = 1;
  InitKernel<<<static_cast<unsigned>(init_blocks), kThreads, 0, stream>>>(
      a.chunk_table, table, a.expert_counts, a.num_experts, a.error);
  KeysKernel<<<1, kScanThreads, 0, stream>>>(a.expert_rank, a.num_experts, a.num_ranks, a.per_slot,
                                             a.key, a.error);
  const int64_t slots = a.tokens * a.k;
  if (slots > 0) {
    CountKernel<<<static_cast<unsigned>((slots + kThreads - 1) / kThreads), kThreads, 0, stream>>>(
        a, buckets);
  }
  ChunkScanKernel<<<(buckets + kThreads - 1) / kThreads, kThreads, 0, stream>>>(
      a.chunk_table, chunks, buckets, a.bucket_total);
  BucketScanKernel<<<1, kScanThreads, 0, stream>>>(a, buckets);
  if (chunks > 0) {
    AssignKernel<<<static_cast<unsigned>((chunks + kWarpsPerBlock - 1) / kWarpsPerBlock), kThreads,
                   0, stream>>>(a, buckets, chunks);
  }
  return cudaGetLastError();
}

}  // namespace mixnet::cuda::internal
