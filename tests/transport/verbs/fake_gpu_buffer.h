// "GPU memory" for tests against the fake libibverbs: an address the CPU
// cannot touch (a PROT_NONE mapping, as a CUDA device pointer is to the
// CPU), backed by a memfd that plays the dma-buf (the fake NIC maps the fd),
// and a read-write view of the same pages standing in for cudaMemcpy. Any
// CPU copy into or out of gpu() faults, so a test that passes shows that
// only the NIC moved those bytes. Header-only; test threads.
#pragma once

#include <sys/mman.h>
#include <unistd.h>

#include <cstddef>
#include <cstdint>
#include <cstring>

namespace mixnet::testing {

class FakeGpuBuffer {
 public:
  explicit FakeGpuBuffer(size_t bytes) {
    const size_t page = static_cast<size_t>(sysconf(_SC_PAGESIZE));
    len_ = (bytes + page - 1) / page * page;
    fd_ = memfd_create("mixnet-fake-gpu", MFD_CLOEXEC);
    if (fd_ < 0 || ftruncate(fd_, static_cast<off_t>(len_)) != 0) return;
    void* g = mmap(nullptr, len_, PROT_NONE, MAP_SHARED, fd_, 0);
    void* h = mmap(nullptr, len_, PROT_READ | PROT_WRITE, MAP_SHARED, fd_, 0);
    if (g == MAP_FAILED || h == MAP_FAILED) return;
    gpu_ = g;
    host_ = static_cast<uint8_t*>(h);
  }
  ~FakeGpuBuffer() {
    if (gpu_ != nullptr) munmap(gpu_, len_);
    if (host_ != nullptr) munmap(host_, len_);
    if (fd_ >= 0) close(fd_);
  }
  FakeGpuBuffer(const FakeGpuBuffer&) = delete;
  FakeGpuBuffer& operator=(const FakeGpuBuffer&) = delete;

  bool ok() const { return gpu_ != nullptr && host_ != nullptr; }
  // The device pointer: what the transport is given.
  void* gpu() const { return gpu_; }
  uint8_t* gpu_at(size_t off) const { return static_cast<uint8_t*>(gpu_) + off; }
  // The test's view of the same bytes.
  uint8_t* host() const { return host_; }
  // The dma-buf fd (offset 0 is gpu()).
  int fd() const { return fd_; }
  size_t size() const { return len_; }

 private:
  size_t len_ = 0;
  int fd_ = -1;
  void* gpu_ = nullptr;
  uint8_t* host_ = nullptr;
};

}  // namespace mixnet::testing
