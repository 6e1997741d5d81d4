// Host-side CUDA helpers shared by the kernels' wrappers (gate histogram, MoE
// dispatch): CUDA errors as absl::Status and device buffers freed on scope
// exit. Plain C++ (includes cuda_runtime.h); used only inside runtime/cuda.
// Runs on the caller's thread.
#pragma once

#include <cuda_runtime.h>

#include <cstddef>
#include <memory>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "runtime/common/status.h"

namespace mixnet::cuda {

// "<what>: <call> failed: <text> (cudaError N)": Unavailable when there is no
// usable device or driver, Internal otherwise; OK for cudaSuccess.
absl::Status CudaStatus(absl::string_view what, cudaError_t err, absl::string_view call);

// Returns from the enclosing function when the CUDA call fails; the file must
// define `kWhat` (its component name for messages).
#define CUDA_RETURN_IF_ERROR(call) RETURN_IF_ERROR(::mixnet::cuda::CudaStatus(kWhat, (call), #call))

struct DeviceFree {
  void operator()(void* p) const { cudaFree(p); }
};
using DeviceBuffer = std::unique_ptr<void, DeviceFree>;

// cudaMalloc of `bytes` (at least 1).
absl::StatusOr<DeviceBuffer> DeviceAlloc(size_t bytes, absl::string_view what);

}  // namespace mixnet::cuda
