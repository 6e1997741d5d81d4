// Host-side CUDA helpers (see cuda_util.h). Runs on the caller's thread.
#include "runtime/cuda/cuda_util.h"

#include <string>

#include "absl/strings/str_cat.h"

namespace mixnet::cuda {

absl::Status CudaStatus(absl::string_view what, cudaError_t err, absl::string_view call) {
  if (err == cudaSuccess) return absl::OkStatus();
  std::string msg = absl::StrCat(what, ": ", call, " failed: ", cudaGetErrorString(err),
                                 " (cudaError ", static_cast<int>(err), ")");
  if (err == cudaErrorNoDevice || err == cudaErrorInsufficientDriver ||
      err == cudaErrorInitializationError) {
    return absl::UnavailableError(msg);
  }
  return absl::InternalError(msg);
}

absl::StatusOr<DeviceBuffer> DeviceAlloc(size_t bytes, absl::string_view what) {
  void* p = nullptr;
  RETURN_IF_ERROR(CudaStatus(what, cudaMalloc(&p, bytes == 0 ? 1 : bytes), "cudaMalloc"));
  return DeviceBuffer(p);
}

}  // namespace mixnet::cuda
