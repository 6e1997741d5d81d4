// GPUDirect RDMA in the NCCL plugin (issue 23 item 7): whether a device
// offers NCCL GPU pointers (NCCL_PTR_CUDA, NCCL_PTR_DMABUF), decided from the
// CUDA driver (probed once at init through dlopen of MIXNET_CUDA_DRIVER: a
// device exists and, with a current context, a CUDA allocation exports as a
// dma-buf) and from the adapter (transport::Device::device_memory(): dma-buf
// registration, peer memory), under MIXNET_NCCL_GPU_DIRECT (auto, on, off).
// NCCL's init thread; the decision itself is a pure function.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>

#include "absl/status/statusor.h"
#include "runtime/transport/transport.h"

namespace mixnet::nccl {

// The CUDA driver calls the probe makes (CUresult is an int, 0 = success).
struct CudaDriverApi {
  int (*init)(unsigned int flags) = nullptr;      // cuInit
  int (*device_get_count)(int* count) = nullptr;  // cuDeviceGetCount
  int (*device_get_attribute)(int* value, int attribute,
                              int dev) = nullptr;            // cuDeviceGetAttribute
  int (*ctx_get_current)(void** ctx) = nullptr;              // cuCtxGetCurrent
  int (*ctx_get_device)(int* dev) = nullptr;                 // cuCtxGetDevice
  int (*mem_alloc)(uint64_t* dptr, size_t bytes) = nullptr;  // cuMemAlloc_v2
  int (*mem_free)(uint64_t dptr) = nullptr;                  // cuMemFree_v2
  // cuMemGetHandleForAddressRange
  int (*get_handle_for_address_range)(void* handle, uint64_t dptr, size_t size, int type,
                                      unsigned long long flags) = nullptr;
};

// CUDA's values the probe uses (cuda.h).
inline constexpr int kCuDevAttrDmaBufSupported = 124;  // CU_DEVICE_ATTRIBUTE_DMA_BUF_SUPPORTED
inline constexpr int kCuMemRangeHandleDmaBufFd = 1;    // CU_MEM_RANGE_HANDLE_TYPE_DMA_BUF_FD

// dlopen(path) and the entry points above; NotFound naming the library and
// dlerror() when it or a symbol is missing. The library stays loaded.
absl::StatusOr<CudaDriverApi> LoadCudaDriver(const std::string& path);

struct CudaProbe {
  bool usable = false;  // cuInit worked and there is a device
  bool dmabuf = false;  // GPU memory exports as a dma-buf
  std::string why;
};
// cuInit, cuDeviceGetCount; dma-buf: with a current context, a 2 MiB
// cuMemAlloc exported by cuMemGetHandleForAddressRange (fd closed, memory
// freed); with none, the device attribute of device 0.
CudaProbe ProbeCuda(const CudaDriverApi& api);

struct GpuDirect {
  int ptr_support = 0x1;    // NCCL_PTR_* bits
  bool gpu_memory = false;  // ptr_support has NCCL_PTR_CUDA
  std::string why;          // for the log
};
// `mode`: auto, on or off; `transport`: tcp or verbs. NCCL_PTR_CUDA and
// NCCL_PTR_DMABUF when the adapter and the driver both do dma-buf;
// NCCL_PTR_CUDA alone with peer memory and a usable driver; otherwise host
// memory, with the reason. Mode on with host memory only is an error
// (FailedPrecondition with the reason).
absl::StatusOr<GpuDirect> DecideGpuDirect(const std::string& mode, const std::string& transport,
                                          const CudaProbe& cuda,
                                          const transport::DeviceMemorySupport& nic);

}  // namespace mixnet::nccl
