// Host side of the GPU gate histogram (see gate_histogram.h): argument checks,
// CUDA error translation and the host-memory convenience path. Runs on the
// caller's thread.
#include "runtime/cuda/gate_histogram.h"

#include <cuda_runtime.h>

#include <memory>
#include <string>

#include "absl/strings/str_cat.h"
#include "runtime/common/status.h"
#include "runtime/cuda/cuda_util.h"
#include "runtime/cuda/gate_histogram_kernel.h"

namespace mixnet::cuda {
namespace {

constexpr char kWhat[] = "gate histogram";

absl::StatusOr<DeviceBuffer> Alloc(size_t bytes) { return DeviceAlloc(bytes, kWhat); }

absl::Status CheckShape(const GateHistogramInput& in) {
  if (in.num_experts <= 0 || in.num_ranks <= 0) {
    return absl::InvalidArgumentError(absl::StrCat("gate histogram: ", in.num_experts, " experts, ",
                                                   in.num_ranks, " ranks; both must be > 0"));
  }
  if (in.k <= 0 || in.k > in.num_experts) {
    return absl::InvalidArgumentError(
        absl::StrCat("gate histogram: k = ", in.k, " outside [1, ", in.num_experts, "]"));
  }
  if (in.tokens < 0 || (in.tokens > 0 && in.ids == nullptr)) {
    return absl::InvalidArgumentError(
        absl::StrCat("gate histogram: ", in.tokens, " tokens with ",
                     in.ids == nullptr ? "a null ids buffer" : "an ids buffer"));
  }
  if (in.token_rank == nullptr && (in.source_rank < 0 || in.source_rank >= in.num_ranks)) {
    return absl::InvalidArgumentError(absl::StrCat("gate histogram: source rank ", in.source_rank,
                                                   " outside [0, ", in.num_ranks, ")"));
  }
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<int> DeviceCount() {
  int n = 0;
  CUDA_RETURN_IF_ERROR(cudaGetDeviceCount(&n));
  return n;
}

absl::Status LaunchGateHistogram(const GateHistogramInput& in, uint64_t* device_counts,
                                 uint64_t* device_bad, void* stream) {
  RETURN_IF_ERROR(CheckShape(in));
  internal::KernelArgs a;
  a.ids = in.ids;
  a.is_int64 = in.is_int64;
  a.tokens = in.tokens;
  a.k = in.k;
  a.num_experts = in.num_experts;
  a.token_rank = in.token_rank;
  a.source_rank = in.source_rank;
  a.num_ranks = in.num_ranks;
  a.skip_negative_ids = in.skip_negative_ids;
  const int err = internal::LaunchGateHistogramKernel(
      a, reinterpret_cast<unsigned long long*>(device_counts),
      reinterpret_cast<unsigned long long*>(device_bad), stream);
  return CudaStatus(kWhat, static_cast<cudaError_t>(err), "gate histogram kernel launch");
}

absl::Status CheckBadWord(uint64_t bad, int k, int num_experts, int num_ranks) {
  if (bad == internal::kBadNone) return absl::OkStatus();
  const int64_t index = static_cast<int64_t>(bad >> 2);
  const int kind = static_cast<int>(bad & 3);
  const std::string where = absl::StrCat("gate histogram: token ", index / k, " slot ", index % k,
                                         " (index ", index, "): ");
  switch (kind) {
    case internal::kBadExpert:
      return absl::InvalidArgumentError(
          absl::StrCat(where, "expert id out of range [0, ", num_experts, ")"));
    case internal::kBadRepeat:
      return absl::InvalidArgumentError(absl::StrCat(where, "expert id repeats an earlier slot"));
    case internal::kBadRank:
      return absl::InvalidArgumentError(
          absl::StrCat(where, "token's source rank outside [0, ", num_ranks, ")"));
    default:
      return absl::InternalError(absl::StrCat(where, "unknown error kind ", kind));
  }
}

absl::StatusOr<std::vector<int64_t>> GateHistogramFromHost(const GateHistogramInput& host_input) {
  RETURN_IF_ERROR(CheckShape(host_input));
  const size_t id_bytes = static_cast<size_t>(host_input.tokens) * host_input.k *
                          (host_input.is_int64 ? sizeof(int64_t) : sizeof(int32_t));
  const size_t cells = static_cast<size_t>(host_input.num_ranks) * host_input.num_experts;
  ASSIGN_OR_RETURN(DeviceBuffer ids, Alloc(id_bytes));
  ASSIGN_OR_RETURN(DeviceBuffer counts, Alloc(cells * sizeof(uint64_t)));
  ASSIGN_OR_RETURN(DeviceBuffer bad, Alloc(sizeof(uint64_t)));
  DeviceBuffer ranks;
  GateHistogramInput in = host_input;
  in.ids = ids.get();
  if (host_input.token_rank != nullptr) {
    ASSIGN_OR_RETURN(ranks, Alloc(static_cast<size_t>(host_input.tokens) * sizeof(int32_t)));
    CUDA_RETURN_IF_ERROR(cudaMemcpy(ranks.get(), host_input.token_rank,
                                    static_cast<size_t>(host_input.tokens) * sizeof(int32_t),
                                    cudaMemcpyHostToDevice));
    in.token_rank = static_cast<const int32_t*>(ranks.get());
  }
  if (id_bytes > 0) {
    CUDA_RETURN_IF_ERROR(cudaMemcpy(ids.get(), host_input.ids, id_bytes, cudaMemcpyHostToDevice));
  }
  CUDA_RETURN_IF_ERROR(cudaMemset(counts.get(), 0, cells * sizeof(uint64_t)));
  CUDA_RETURN_IF_ERROR(cudaMemset(bad.get(), 0xff, sizeof(uint64_t)));
  RETURN_IF_ERROR(LaunchGateHistogram(in, static_cast<uint64_t*>(counts.get()),
                                      static_cast<uint64_t*>(bad.get()), nullptr));
  CUDA_RETURN_IF_ERROR(cudaDeviceSynchronize());
  uint64_t bad_word = 0;
  CUDA_RETURN_IF_ERROR(cudaMemcpy(&bad_word, bad.get(), sizeof(bad_word), cudaMemcpyDeviceToHost));
  RETURN_IF_ERROR(CheckBadWord(bad_word, in.k, in.num_experts, in.num_ranks));
  std::vector<uint64_t> raw(cells);
  CUDA_RETURN_IF_ERROR(
      cudaMemcpy(raw.data(), counts.get(), cells * sizeof(uint64_t), cudaMemcpyDeviceToHost));
  return std::vector<int64_t>(raw.begin(), raw.end());
}

}  // namespace mixnet::cuda
