// The plugin's GPUDirect decision and CUDA probe (gpu_direct.h), by hand:
// every mode x transport x driver x adapter case, the probe over driver
// tables whose answers the test sets, and the loader's errors (a missing
// library; CUDA's stub driver, which loads but cannot initialise).
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <unistd.h>

#include <string>

#include "plugins/nccl_net/gpu_direct.h"
#include "plugins/nccl_net/nccl_net_abi.h"

namespace mixnet::nccl {
namespace {

using ::testing::HasSubstr;

constexpr int kHost = nccl_abi::kPtrHost, kCuda = nccl_abi::kPtrCuda,
              kDmaBuf = nccl_abi::kPtrDmaBuf;

CudaProbe Cuda(bool usable, bool dmabuf) {
  CudaProbe c;
  c.usable = usable;
  c.dmabuf = dmabuf;
  c.why = "cuda-why";
  return c;
}
transport::DeviceMemorySupport Nic(bool dmabuf, bool peer) {
  return transport::DeviceMemorySupport{dmabuf, peer, "nic-why"};
}

TEST(GpuDirectDecision, EveryCase) {
  struct Case {
    std::string mode, transport;
    bool cuda, cuda_dmabuf, nic_dmabuf, peer;
    int want;
    const char* why;
  };
  const Case cases[] = {
      {"auto", "verbs", true, true, true, false, kHost | kCuda | kDmaBuf, "by dma-buf"},
      {"auto", "verbs", true, true, true, true, kHost | kCuda | kDmaBuf, "(and peer memory)"},
      {"auto", "verbs", true, false, true, true, kHost | kCuda, "by peer memory"},
      {"auto", "verbs", true, true, false, true, kHost | kCuda, "by peer memory"},
      {"auto", "verbs", true, false, true, false, kHost, "neither dma-buf nor peer memory"},
      {"auto", "verbs", false, false, true, true, kHost, "no usable CUDA driver"},
      {"auto", "tcp", true, true, true, true, kHost, "tcp transport copies with the CPU"},
      {"off", "verbs", true, true, true, true, kHost, "MIXNET_NCCL_GPU_DIRECT=off"},
      {"on", "verbs", true, true, true, false, kHost | kCuda | kDmaBuf, "by dma-buf"},
  };
  for (const Case& c : cases) {
    absl::StatusOr<GpuDirect> g = DecideGpuDirect(c.mode, c.transport, Cuda(c.cuda, c.cuda_dmabuf),
                                                  Nic(c.nic_dmabuf, c.peer));
    ASSERT_TRUE(g.ok()) << g.status();
    EXPECT_EQ(g->ptr_support, c.want) << c.mode << " " << c.transport << " " << g->why;
    EXPECT_EQ(g->gpu_memory, (c.want & kCuda) != 0);
    EXPECT_THAT(g->why, HasSubstr(c.why));
  }
  // on, but nothing to offer: an error with the reason.
  absl::StatusOr<GpuDirect> g = DecideGpuDirect("on", "verbs", Cuda(false, false), Nic(true, true));
  EXPECT_EQ(g.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(std::string(g.status().message()), HasSubstr("MIXNET_NCCL_GPU_DIRECT=on"));
  EXPECT_THAT(std::string(g.status().message()), HasSubstr("cuda-why"));
}

// A driver table whose answers the test sets.
struct FakeDriver {
  static inline int init_rc = 0, count = 1, attr = 1, alloc_rc = 0, export_rc = 0;
  static inline bool context = false;
  static inline int allocs = 0, frees = 0, exports = 0;
  static int Init(unsigned) { return init_rc; }
  static int Count(int* n) {
    *n = count;
    return 0;
  }
  static int Attr(int* v, int a, int) {
    *v = a == kCuDevAttrDmaBufSupported ? attr : 0;
    return 0;
  }
  static int Ctx(void** c) {
    static int ctx;
    *c = context ? &ctx : nullptr;
    return 0;
  }
  static int CtxDev(int* d) {
    *d = 0;
    return 0;
  }
  static int Alloc(uint64_t* p, size_t) {
    ++allocs;
    *p = 0x7000000;
    return alloc_rc;
  }
  static int Free(uint64_t) {
    ++frees;
    return 0;
  }
  static int Export(void* h, uint64_t, size_t, int type, unsigned long long) {
    ++exports;
    if (export_rc != 0 || type != kCuMemRangeHandleDmaBufFd) return export_rc != 0 ? export_rc : 1;
    *static_cast<int*>(h) = dup(0);
    return 0;
  }
  static CudaDriverApi Api() {
    CudaDriverApi a;
    a.init = Init;
    a.device_get_count = Count;
    a.device_get_attribute = Attr;
    a.ctx_get_current = Ctx;
    a.ctx_get_device = CtxDev;
    a.mem_alloc = Alloc;
    a.mem_free = Free;
    a.get_handle_for_address_range = Export;
    return a;
  }
  static void Reset() {
    init_rc = 0, count = 1, attr = 1, alloc_rc = 0, export_rc = 0, context = false;
    allocs = frees = exports = 0;
  }
};

TEST(GpuDirectProbe, DriverAnswers) {
  FakeDriver::Reset();
  CudaProbe p = ProbeCuda(FakeDriver::Api());
  EXPECT_TRUE(p.usable);
  EXPECT_TRUE(p.dmabuf) << p.why;  // no context: the device attribute
  EXPECT_THAT(p.why, HasSubstr("no current CUDA context"));
  EXPECT_EQ(FakeDriver::allocs, 0);
  FakeDriver::attr = 0;
  p = ProbeCuda(FakeDriver::Api());
  EXPECT_FALSE(p.dmabuf);
  // With a context: a real export, its memory freed.
  FakeDriver::context = true;
  p = ProbeCuda(FakeDriver::Api());
  EXPECT_TRUE(p.dmabuf) << p.why;
  EXPECT_THAT(p.why, HasSubstr("exports as a dma-buf"));
  EXPECT_EQ(FakeDriver::allocs, 1);
  EXPECT_EQ(FakeDriver::exports, 1);
  EXPECT_EQ(FakeDriver::frees, 1);
  FakeDriver::export_rc = 801;  // CUDA_ERROR_NOT_SUPPORTED
  p = ProbeCuda(FakeDriver::Api());
  EXPECT_TRUE(p.usable);
  EXPECT_FALSE(p.dmabuf);
  EXPECT_THAT(p.why, HasSubstr("CUresult 801"));
  EXPECT_EQ(FakeDriver::frees, 2);
  FakeDriver::Reset();
  FakeDriver::count = 0;
  p = ProbeCuda(FakeDriver::Api());
  EXPECT_FALSE(p.usable);
  EXPECT_THAT(p.why, HasSubstr("no GPU"));
  FakeDriver::Reset();
  FakeDriver::init_rc = 100;  // CUDA_ERROR_NO_DEVICE
  p = ProbeCuda(FakeDriver::Api());
  EXPECT_FALSE(p.usable);
  EXPECT_THAT(p.why, HasSubstr("cuInit failed (CUresult 100)"));
  FakeDriver::Reset();
}

TEST(GpuDirectProbe, Loader) {
  absl::StatusOr<CudaDriverApi> missing = LoadCudaDriver("/nonexistent/libcuda.so.1");
  EXPECT_EQ(missing.status().code(), absl::StatusCode::kNotFound);
  EXPECT_THAT(std::string(missing.status().message()), HasSubstr("/nonexistent/libcuda.so.1"));
  // CUDA's link-time stub loads and has every symbol, but cannot initialise.
  const std::string stub = std::string(MIXNET_CUDA_STUB_DIR) + "/libcuda.so";
  if (access(stub.c_str(), R_OK) != 0) GTEST_SKIP() << "no CUDA stub driver at " << stub;
  absl::StatusOr<CudaDriverApi> api = LoadCudaDriver(stub);
  ASSERT_TRUE(api.ok()) << api.status();
  CudaProbe p = ProbeCuda(*api);
  EXPECT_FALSE(p.usable);
  EXPECT_THAT(p.why, HasSubstr("cuInit failed"));
}

}  // namespace
}  // namespace mixnet::nccl
