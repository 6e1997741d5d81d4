// GPUDirect probe and decision (see gpu_direct.h). NCCL's init thread.
#include "plugins/nccl_net/gpu_direct.h"

#include <dlfcn.h>
#include <unistd.h>

#include "absl/strings/str_cat.h"
#include "plugins/nccl_net/nccl_net_abi.h"

namespace mixnet::nccl {
namespace {

template <typename Fn>
absl::Status Resolve(void* lib, const char* name, const std::string& path, Fn* out) {
  dlerror();
  void* sym = dlsym(lib, name);
  if (sym == nullptr) {
    const char* e = dlerror();
    return absl::NotFoundError(
        absl::StrCat(path, " has no ", name, e != nullptr ? absl::StrCat(": ", e) : ""));
  }
  *out = reinterpret_cast<Fn>(sym);
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<CudaDriverApi> LoadCudaDriver(const std::string& path) {
  void* lib = dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL);
  if (lib == nullptr) {
    const char* e = dlerror();
    return absl::NotFoundError(absl::StrCat("cannot load the CUDA driver ", path, ": ",
                                            e != nullptr ? e : "dlopen failed"));
  }
  CudaDriverApi api;
  absl::Status st = Resolve(lib, "cuInit", path, &api.init);
  if (st.ok()) st = Resolve(lib, "cuDeviceGetCount", path, &api.device_get_count);
  if (st.ok()) st = Resolve(lib, "cuDeviceGetAttribute", path, &api.device_get_attribute);
  if (st.ok()) st = Resolve(lib, "cuCtxGetCurrent", path, &api.ctx_get_current);
  if (st.ok()) st = Resolve(lib, "cuCtxGetDevice", path, &api.ctx_get_device);
  if (st.ok()) st = Resolve(lib, "cuMemAlloc_v2", path, &api.mem_alloc);
  if (st.ok()) st = Resolve(lib, "cuMemFree_v2", path, &api.mem_free);
  if (st.ok()) {
    st = Resolve(lib, "cuMemGetHandleForAddressRange", path, &api.get_handle_for_address_range);
  }
  if (!st.ok()) {
    dlclose(lib);
    return st;
  }
  return api;
}

CudaProbe ProbeCuda(const CudaDriverApi& api) {
  CudaProbe p;
  int rc = api.init(0);
  if (rc != 0) {
    p.why = absl::StrCat("cuInit failed (CUresult ", rc,
                         rc == 34 ? ": the stub driver, not a real one" : "", ")");
    return p;
  }
  int count = 0;
  rc = api.device_get_count(&count);
  if (rc != 0 || count <= 0) {
    p.why = rc != 0 ? absl::StrCat("cuDeviceGetCount failed (CUresult ", rc, ")")
                    : std::string("the CUDA driver sees no GPU");
    return p;
  }
  p.usable = true;
  void* ctx = nullptr;
  if (api.ctx_get_current(&ctx) == 0 && ctx != nullptr) {
    constexpr size_t kBytes = size_t{2} << 20;
    uint64_t dptr = 0;
    rc = api.mem_alloc(&dptr, kBytes);
    if (rc != 0) {
      p.why = absl::StrCat("cuMemAlloc of ", kBytes,
                           " bytes for the dma-buf probe failed (CUresult ", rc, ")");
      return p;
    }
    int fd = -1;
    rc = api.get_handle_for_address_range(&fd, dptr, kBytes, kCuMemRangeHandleDmaBufFd, 0);
    if (rc == 0 && fd >= 0) {
      p.dmabuf = true;
      p.why = "a CUDA allocation exports as a dma-buf";
      close(fd);
    } else {
      p.why = absl::StrCat("cuMemGetHandleForAddressRange(DMA_BUF_FD) failed (CUresult ", rc,
                           "; needs CUDA >= 11.7, an open kernel module and Linux >= 5.12)");
    }
    api.mem_free(dptr);
    return p;
  }
  int dev = 0, supported = 0;
  rc = api.device_get_attribute(&supported, kCuDevAttrDmaBufSupported, dev);
  p.dmabuf = rc == 0 && supported != 0;
  p.why = absl::StrCat("no current CUDA context at init, so no export was tried; device 0 says ",
                       p.dmabuf ? "it supports" : "it does not support", " dma-buf",
                       rc != 0 ? absl::StrCat(" (cuDeviceGetAttribute: CUresult ", rc, ")") : "");
  return p;
}

absl::StatusOr<GpuDirect> DecideGpuDirect(const std::string& mode, const std::string& transport,
                                          const CudaProbe& cuda,
                                          const transport::DeviceMemorySupport& nic) {
  GpuDirect g;
  g.ptr_support = nccl_abi::kPtrHost;
  if (mode == "off") {
    g.why = "host memory: MIXNET_NCCL_GPU_DIRECT=off";
    return g;
  }
  if (transport != "verbs") {
    g.why = absl::StrCat("host memory: the ", transport,
                         " transport copies with the CPU (GPUDirect RDMA needs "
                         "MIXNET_TRANSPORT=verbs)");
  } else if (!cuda.usable) {
    g.why = absl::StrCat("host memory: no usable CUDA driver (", cuda.why, ")");
  } else if (nic.dmabuf && cuda.dmabuf) {
    g.ptr_support |= nccl_abi::kPtrCuda | nccl_abi::kPtrDmaBuf;
    g.gpu_memory = true;
    g.why = absl::StrCat("GPUDirect RDMA by dma-buf", nic.peer_memory ? " (and peer memory)" : "",
                         ": ", nic.why, "; CUDA: ", cuda.why);
  } else if (nic.peer_memory) {
    g.ptr_support |= nccl_abi::kPtrCuda;
    g.gpu_memory = true;
    g.why = absl::StrCat(
        "GPUDirect RDMA by peer memory (no dma-buf: ", nic.dmabuf ? cuda.why : nic.why, ")");
  } else {
    g.why = absl::StrCat("host memory: neither dma-buf nor peer memory: ", nic.why,
                         "; CUDA: ", cuda.why);
  }
  if (mode == "on" && !g.gpu_memory) {
    return absl::FailedPreconditionError(absl::StrCat("MIXNET_NCCL_GPU_DIRECT=on, but ", g.why));
  }
  return g;
}

}  // namespace mixnet::nccl
