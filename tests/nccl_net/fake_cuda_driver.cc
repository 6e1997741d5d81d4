// A stand-in for libcuda.so.1 (MODULE library, loaded by the plugin's
// GPUDirect probe through MIXNET_CUDA_DRIVER in nccl_net_verbs_gpu_test):
// one device that supports dma-buf; a current context when
// FAKE_CUDA_CONTEXT=1; cuMemAlloc hands out PROT_NONE mappings of memfds,
// which cuMemGetHandleForAddressRange exports (a dup of the memfd), as the
// real driver exports device memory as a dma-buf. Only what the probe calls.
#include <sys/mman.h>
#include <unistd.h>

#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <map>
#include <mutex>

namespace {

struct Alloc {
  int fd;
  size_t len;
};
std::mutex g_mu;
std::map<uint64_t, Alloc> g_allocs;
int g_ctx = 0;

}  // namespace

extern "C" {

__attribute__((visibility("default"))) int cuInit(unsigned int) { return 0; }
__attribute__((visibility("default"))) int cuDeviceGetCount(int* n) {
  *n = 1;
  return 0;
}
__attribute__((visibility("default"))) int cuDeviceGetAttribute(int* v, int attr, int) {
  *v = attr == 124 ? 1 : 0;  // CU_DEVICE_ATTRIBUTE_DMA_BUF_SUPPORTED
  return 0;
}
__attribute__((visibility("default"))) int cuCtxGetCurrent(void** ctx) {
  const char* e = std::getenv("FAKE_CUDA_CONTEXT");
  *ctx = e != nullptr && std::strcmp(e, "1") == 0 ? &g_ctx : nullptr;
  return 0;
}
__attribute__((visibility("default"))) int cuCtxGetDevice(int* dev) {
  *dev = 0;
  return 0;
}
__attribute__((visibility("default"))) int cuMemAlloc_v2(uint64_t* dptr, size_t len) {
  const int fd = memfd_create("fake-cuda", MFD_CLOEXEC);
  if (fd < 0 || ftruncate(fd, static_cast<off_t>(len)) != 0) return 2;  // out of memory
  void* p = mmap(nullptr, len, PROT_NONE, MAP_SHARED, fd, 0);
  if (p == MAP_FAILED) return 2;
  std::lock_guard<std::mutex> lock(g_mu);
  *dptr = reinterpret_cast<uintptr_t>(p);
  g_allocs[*dptr] = Alloc{fd, len};
  return 0;
}
__attribute__((visibility("default"))) int cuMemFree_v2(uint64_t dptr) {
  std::lock_guard<std::mutex> lock(g_mu);
  auto it = g_allocs.find(dptr);
  if (it == g_allocs.end()) return 1;
  munmap(reinterpret_cast<void*>(dptr), it->second.len);
  close(it->second.fd);
  g_allocs.erase(it);
  return 0;
}
__attribute__((visibility("default"))) int cuMemGetHandleForAddressRange(void* handle,
                                                                         uint64_t dptr, size_t,
                                                                         int type,
                                                                         unsigned long long) {
  std::lock_guard<std::mutex> lock(g_mu);
  auto it = g_allocs.find(dptr);
  if (it == g_allocs.end() || type != 1) return 1;
  *static_cast<int*>(handle) = dup(it->second.fd);
  return 0;
}

}  // extern "C"
