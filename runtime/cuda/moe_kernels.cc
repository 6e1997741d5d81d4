// Host side of the GPU MoE dispatch kernels (see moe_kernels.h): argument
// checks, workspace carving, CUDA error translation and the host-memory
// conveniences used by tests and tools. Runs on the caller's thread.
#include "runtime/cuda/moe_kernels.h"

#include <cuda_runtime.h>

#include <memory>
#include <string>

#include "absl/strings/str_cat.h"
#include "runtime/common/status.h"
#include "runtime/cuda/cuda_util.h"
#include "runtime/cuda/moe_kernels_internal.h"

namespace mixnet::cuda {
namespace {

constexpr char kWhat[] = "moe kernels";

constexpr size_t kAlign = 256;
size_t RoundUp(size_t n) { return (n + kAlign - 1) / kAlign * kAlign; }

int Buckets(int num_experts, int num_ranks, moe::DispatchMode mode) {
  return mode == moe::DispatchMode::kPerSlot ? num_experts : num_ranks;
}

int64_t Chunks(int64_t tokens) {
  return (tokens + internal::kChunkTokens - 1) / internal::kChunkTokens;
}

absl::StatusOr<DeviceBuffer> Alloc(size_t bytes) { return DeviceAlloc(bytes, kWhat); }

absl::StatusOr<DeviceBuffer> Upload(const void* host, size_t bytes) {
  ASSIGN_OR_RETURN(DeviceBuffer d, Alloc(bytes));
  if (bytes > 0) CUDA_RETURN_IF_ERROR(cudaMemcpy(d.get(), host, bytes, cudaMemcpyHostToDevice));
  return d;
}

absl::Status Download(void* host, const DeviceBuffer& d, size_t bytes) {
  if (bytes > 0) CUDA_RETURN_IF_ERROR(cudaMemcpy(host, d.get(), bytes, cudaMemcpyDeviceToHost));
  return absl::OkStatus();
}

template <typename T>
T* As(const DeviceBuffer& d) {
  return static_cast<T*>(d.get());
}

}  // namespace

size_t LayoutWorkspaceBytes(int64_t tokens, int num_experts, int num_ranks,
                            moe::DispatchMode mode) {
  const size_t buckets = static_cast<size_t>(Buckets(num_experts, num_ranks, mode));
  return RoundUp(static_cast<size_t>(num_experts) * 4) +
         RoundUp(static_cast<size_t>(Chunks(tokens)) * buckets * 4) + RoundUp(buckets * 4) +
         RoundUp((buckets + 1) * 4);
}

absl::Status LaunchLayout(const moe::LayoutInput& in, const LayoutOutputs& out, void* workspace,
                          size_t workspace_bytes, void* stream) {
  RETURN_IF_ERROR(moe::ValidateLayoutInput(in));
  const size_t need = LayoutWorkspaceBytes(in.tokens, in.num_experts, in.num_ranks, in.mode);
  if (workspace == nullptr || workspace_bytes < need ||
      reinterpret_cast<uintptr_t>(workspace) % kAlign != 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("moe layout: workspace of ", workspace_bytes, " bytes at 0x",
                     absl::Hex(reinterpret_cast<uintptr_t>(workspace)), "; need ", need,
                     " bytes, 256-byte aligned"));
  }
  if (out.rank_counts == nullptr || out.rank_offsets == nullptr || out.expert_counts == nullptr ||
      out.expert_offsets == nullptr || out.error == nullptr ||
      (in.tokens > 0 && (out.slot_row == nullptr || out.row_token == nullptr))) {
    return absl::InvalidArgumentError("moe layout: a null output buffer");
  }
  const int buckets = Buckets(in.num_experts, in.num_ranks, in.mode);
  internal::LayoutKernelArgs a;
  a.ids = in.topk_ids;
  a.ids_int64 = in.ids_int64;
  a.tokens = in.tokens;
  a.k = in.k;
  a.num_experts = in.num_experts;
  a.num_ranks = in.num_ranks;
  a.expert_rank = in.expert_rank;
  a.per_slot = in.mode == moe::DispatchMode::kPerSlot;
  a.rank_counts = out.rank_counts;
  a.rank_offsets = out.rank_offsets;
  a.expert_counts = out.expert_counts;
  a.expert_offsets = out.expert_offsets;
  a.slot_row = out.slot_row;
  a.row_token = out.row_token;
  a.error = reinterpret_cast<unsigned long long*>(out.error);
  char* w = static_cast<char*>(workspace);
  a.key = reinterpret_cast<int32_t*>(w);
  w += RoundUp(static_cast<size_t>(in.num_experts) * 4);
  a.chunk_table = reinterpret_cast<int32_t*>(w);
  w += RoundUp(static_cast<size_t>(Chunks(in.tokens)) * buckets * 4);
  a.bucket_total = reinterpret_cast<int32_t*>(w);
  w += RoundUp(static_cast<size_t>(buckets) * 4);
  a.bucket_base = reinterpret_cast<int32_t*>(w);
  return CudaStatus(kWhat, static_cast<cudaError_t>(internal::LaunchLayoutKernels(a, stream)),
                    "moe layout kernel launch");
}

absl::Status CheckLayoutError(int64_t error, int k) {
  if (error == kNoLayoutError) return absl::OkStatus();
  const int64_t index = error >> 2;
  switch (static_cast<int>(error & 3)) {
    case internal::kBadExpertId:
      return absl::InvalidArgumentError(absl::StrCat("moe layout: token ", index / k, " slot ",
                                                     index % k, ": expert id out of range"));
    case internal::kBadExpertRank:
      return absl::InvalidArgumentError(
          absl::StrCat("moe layout: expert ", index, " is on a rank out of range"));
    default:
      return absl::InternalError(absl::StrCat("moe layout: unknown error word ", error));
  }
}

absl::Status LaunchPermute(const PermuteLaunch& p, void* stream) {
  RETURN_IF_ERROR(moe::ValidateHidden(p.hidden));
  if (p.tokens < 0 || p.max_rows < 0 || p.total_rows == nullptr || p.row_token == nullptr ||
      (p.max_rows > 0 && (p.x == nullptr || p.send == nullptr))) {
    return absl::InvalidArgumentError(absl::StrCat("moe permute: ", p.tokens, " tokens, ",
                                                   p.max_rows, " rows, or a null buffer"));
  }
  internal::PermuteKernelArgs a;
  a.x = p.x;
  a.element_bytes = moe::ElementBytes(p.dtype);
  a.hidden = p.hidden;
  a.row_token = p.row_token;
  a.total_rows = p.total_rows;
  a.max_rows = p.max_rows;
  a.send = p.send;
  return CudaStatus(kWhat, static_cast<cudaError_t>(internal::LaunchPermuteKernel(a, stream)),
                    "moe permute kernel launch");
}

absl::Status LaunchCombine(const CombineLaunch& c, void* stream) {
  RETURN_IF_ERROR(moe::ValidateHidden(c.hidden));
  if (c.k < 1 || c.k > moe::kMaxTopK) {
    return absl::InvalidArgumentError(
        absl::StrCat("moe combine: k = ", c.k, " outside [1, ", moe::kMaxTopK, "]"));
  }
  if (c.tokens < 0 || (c.tokens > 0 && (c.out == nullptr || c.slot_row == nullptr))) {
    return absl::InvalidArgumentError(
        absl::StrCat("moe combine: ", c.tokens, " tokens, or a null buffer"));
  }
  internal::CombineKernelArgs a;
  a.buf = c.buf;
  a.dtype = static_cast<int>(c.dtype);
  a.tokens = c.tokens;
  a.hidden = c.hidden;
  a.k = c.k;
  a.slot_row = c.slot_row;
  a.weights = c.weights;
  a.out = c.out;
  return CudaStatus(kWhat, static_cast<cudaError_t>(internal::LaunchCombineKernel(a, stream)),
                    "moe combine kernel launch");
}

absl::StatusOr<moe::Layout> LayoutFromHost(const moe::LayoutInput& host) {
  RETURN_IF_ERROR(moe::ValidateLayoutInput(host));
  const int E = host.num_experts;
  const int R = host.num_ranks;
  const int64_t slots = host.tokens * host.k;
  const int64_t max_rows = moe::MaxRows(host.tokens, host.k, R, host.mode);
  ASSIGN_OR_RETURN(DeviceBuffer ids, Upload(host.topk_ids, slots * (host.ids_int64 ? 8 : 4)));
  ASSIGN_OR_RETURN(DeviceBuffer expert_rank, Upload(host.expert_rank, E * 4));
  ASSIGN_OR_RETURN(DeviceBuffer rank_counts, Alloc(R * 4));
  ASSIGN_OR_RETURN(DeviceBuffer rank_offsets, Alloc((R + 1) * 4));
  ASSIGN_OR_RETURN(DeviceBuffer expert_counts, Alloc(E * 4));
  ASSIGN_OR_RETURN(DeviceBuffer expert_offsets, Alloc(E * 4));
  ASSIGN_OR_RETURN(DeviceBuffer slot_row, Alloc(slots * 4));
  ASSIGN_OR_RETURN(DeviceBuffer row_token, Alloc(max_rows * 4));
  ASSIGN_OR_RETURN(DeviceBuffer error, Alloc(8));
  const size_t ws_bytes = LayoutWorkspaceBytes(host.tokens, E, R, host.mode);
  ASSIGN_OR_RETURN(DeviceBuffer ws, Alloc(ws_bytes));  // cudaMalloc aligns to 256

  moe::LayoutInput in = host;
  in.topk_ids = ids.get();
  in.expert_rank = As<int32_t>(expert_rank);
  LayoutOutputs out{.rank_counts = As<int32_t>(rank_counts),
                    .rank_offsets = As<int32_t>(rank_offsets),
                    .expert_counts = As<int32_t>(expert_counts),
                    .expert_offsets = As<int32_t>(expert_offsets),
                    .slot_row = As<int32_t>(slot_row),
                    .row_token = As<int32_t>(row_token),
                    .error = As<int64_t>(error)};
  RETURN_IF_ERROR(LaunchLayout(in, out, ws.get(), ws_bytes, nullptr));
  CUDA_RETURN_IF_ERROR(cudaDeviceSynchronize());
  int64_t err = 0;
  RETURN_IF_ERROR(Download(&err, error, 8));
  RETURN_IF_ERROR(CheckLayoutError(err, host.k));

  moe::Layout l;
  l.mode = host.mode;
  l.rank_counts.resize(R);
  l.rank_offsets.resize(R + 1);
  l.expert_counts.resize(E);
  l.expert_offsets.resize(E);
  l.slot_row.resize(slots);
  RETURN_IF_ERROR(Download(l.rank_counts.data(), rank_counts, R * 4));
  RETURN_IF_ERROR(Download(l.rank_offsets.data(), rank_offsets, (R + 1) * 4));
  RETURN_IF_ERROR(Download(l.expert_counts.data(), expert_counts, E * 4));
  RETURN_IF_ERROR(Download(l.expert_offsets.data(), expert_offsets, E * 4));
  RETURN_IF_ERROR(Download(l.slot_row.data(), slot_row, slots * 4));
  l.total_rows = l.rank_offsets[R];
  if (l.total_rows < 0 || l.total_rows > max_rows) {
    return absl::InternalError(absl::StrCat("moe layout: device reported ", l.total_rows,
                                            " rows, more than the bound ", max_rows));
  }
  l.row_token.resize(l.total_rows);
  RETURN_IF_ERROR(Download(l.row_token.data(), row_token, l.total_rows * 4));
  return l;
}

absl::StatusOr<std::vector<uint8_t>> PermuteFromHost(const void* x, moe::DType dtype,
                                                     int64_t tokens, int64_t hidden,
                                                     const std::vector<int32_t>& row_token) {
  RETURN_IF_ERROR(moe::ValidateHidden(hidden));
  const size_t row_bytes = static_cast<size_t>(hidden) * moe::ElementBytes(dtype);
  const int64_t rows = static_cast<int64_t>(row_token.size());
  const int32_t total = static_cast<int32_t>(rows);
  ASSIGN_OR_RETURN(DeviceBuffer dx, Upload(x, tokens * row_bytes));
  ASSIGN_OR_RETURN(DeviceBuffer drt, Upload(row_token.data(), rows * 4));
  ASSIGN_OR_RETURN(DeviceBuffer dtotal, Upload(&total, 4));
  ASSIGN_OR_RETURN(DeviceBuffer dsend, Alloc(rows * row_bytes));
  PermuteLaunch p{.x = dx.get(),
                  .dtype = dtype,
                  .tokens = tokens,
                  .hidden = hidden,
                  .row_token = As<int32_t>(drt),
                  .total_rows = As<int32_t>(dtotal),
                  .max_rows = rows,
                  .send = dsend.get()};
  RETURN_IF_ERROR(LaunchPermute(p, nullptr));
  CUDA_RETURN_IF_ERROR(cudaDeviceSynchronize());
  std::vector<uint8_t> send(rows * row_bytes);
  RETURN_IF_ERROR(Download(send.data(), dsend, send.size()));
  return send;
}

absl::StatusOr<std::vector<uint8_t>> CombineFromHost(const void* buf, int64_t buf_rows,
                                                     moe::DType dtype, int64_t tokens,
                                                     int64_t hidden, int k,
                                                     const std::vector<int32_t>& slot_row,
                                                     const float* weights) {
  RETURN_IF_ERROR(moe::ValidateHidden(hidden));
  const size_t row_bytes = static_cast<size_t>(hidden) * moe::ElementBytes(dtype);
  if (static_cast<int64_t>(slot_row.size()) != tokens * k) {
    return absl::InvalidArgumentError(
        absl::StrCat("moe combine: ", slot_row.size(), " slot rows for ", tokens, " tokens x ", k));
  }
  for (int32_t r : slot_row) {
    if (r < -1 || r >= buf_rows) {
      return absl::InvalidArgumentError(
          absl::StrCat("moe combine: slot row ", r, " outside [-1, ", buf_rows, ")"));
    }
  }
  ASSIGN_OR_RETURN(DeviceBuffer dbuf, Upload(buf, buf_rows * row_bytes));
  ASSIGN_OR_RETURN(DeviceBuffer dslots, Upload(slot_row.data(), slot_row.size() * 4));
  DeviceBuffer dw;
  if (weights != nullptr) {
    ASSIGN_OR_RETURN(dw, Upload(weights, slot_row.size() * 4));
  }
  ASSIGN_OR_RETURN(DeviceBuffer dout, Alloc(tokens * row_bytes));
  CombineLaunch c{.buf = dbuf.get(),
                  .dtype = dtype,
                  .tokens = tokens,
                  .hidden = hidden,
                  .k = k,
                  .slot_row = As<int32_t>(dslots),
                  .weights = dw ? As<float>(dw) : nullptr,
                  .out = dout.get()};
  RETURN_IF_ERROR(LaunchCombine(c, nullptr));
  CUDA_RETURN_IF_ERROR(cudaDeviceSynchronize());
  std::vector<uint8_t> out(tokens * row_bytes);
  RETURN_IF_ERROR(Download(out.data(), dout, out.size()));
  return out;
}

}  // namespace mixnet::cuda
