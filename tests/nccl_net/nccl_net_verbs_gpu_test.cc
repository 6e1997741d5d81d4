// The NCCL plugin over the verbs transport with GPU memory (issue 23 item
// 7), in one process against the fake libibverbs (linked in place of the
// real one) and a fake CUDA driver (fake_cuda_driver.cc, through
// MIXNET_CUDA_DRIVER): the ncclNetPlugin_v11 table itself, as NCCL calls it.
// getProperties offers NCCL_PTR_CUDA | NCCL_PTR_DMABUF; GPU buffers the CPU
// cannot touch (PROT_NONE, fake_gpu_buffer.h) registered by regMrDmaBuf and
// by regMr(NCCL_PTR_CUDA) (peer memory) move between a send and a receive
// comm byte-exact at every size, with host buffers beside them; iflush
// reads each GPU receive once through the adapter; deregMr releases every
// registration. Label cpu: no RDMA device or GPU needed.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "absl/time/clock.h"
#include "mixnet_build_paths.h"  // MIXNET_FAKE_CUDA_DRIVER
#include "plugins/nccl_net/nccl_net_abi.h"
#include "tests/transport/verbs/fake_gpu_buffer.h"
#include "tests/transport/verbs/fake_ibverbs.h"

extern "C" mixnet::nccl_abi::NetV11 ncclNetPlugin_v11;

namespace mixnet::nccl {
namespace {

using ::mixnet::testing::FakeGpuBuffer;
namespace abi = nccl_abi;

// Before anything reads the settings (they are read once per process).
const bool kEnv = [] {
  setenv("MIXNET_TRANSPORT", "verbs", 1);
  setenv("MIXNET_SOCKET_IFNAME", "lo", 1);
  setenv("MIXNET_CUDA_DRIVER", MIXNET_FAKE_CUDA_DRIVER, 1);
  setenv("MIXNET_NCCL_GPU_DIRECT", "on", 1);
  setenv("FAKE_CUDA_CONTEXT", "1", 1);  // the probe exports an allocation
  return true;
}();

void Logger(abi::LogLevel, unsigned long, const char*, int, const char*, ...) {}

std::vector<uint8_t> Pattern(size_t n, uint32_t seed) {
  std::vector<uint8_t> v(n);
  uint32_t x = seed * 2654435761u + 7;
  for (auto& b : v) {
    x = x * 1103515245u + 12345u;
    b = static_cast<uint8_t>(x >> 16);
  }
  return v;
}

class PluginGpuTest : public ::testing::Test {
 protected:
  void SetUp() override {
    ASSERT_TRUE(kEnv);
    fake_ibverbs_configure(1, 0);
    net_ = &ncclNetPlugin_v11;
    ASSERT_EQ(net_->init(&ctx_, 1, nullptr, Logger, nullptr), abi::kSuccess);
    int ndev = 0;
    ASSERT_EQ(net_->devices(&ndev), abi::kSuccess);
    ASSERT_GE(ndev, 1);
    char handle[abi::kHandleMaxSize] = {};
    ASSERT_EQ(net_->listen(ctx_, 0, handle, &listen_), abi::kSuccess);
    const absl::Time deadline = absl::Now() + absl::Seconds(20);
    while (send_ == nullptr || recv_ == nullptr) {
      if (send_ == nullptr) {
        ASSERT_EQ(net_->connect(ctx_, 0, handle, &send_, nullptr), abi::kSuccess);
      }
      if (recv_ == nullptr) {
        ASSERT_EQ(net_->accept(listen_, &recv_, nullptr), abi::kSuccess);
      }
      ASSERT_LT(absl::Now(), deadline) << "connect/accept timed out";
      absl::SleepFor(absl::Milliseconds(1));
    }
  }
  void TearDown() override {
    if (send_ != nullptr) {
      EXPECT_EQ(net_->close_send(send_), abi::kSuccess);
    }
    if (recv_ != nullptr) {
      EXPECT_EQ(net_->close_recv(recv_), abi::kSuccess);
    }
    if (listen_ != nullptr) {
      EXPECT_EQ(net_->close_listen(listen_), abi::kSuccess);
    }
    EXPECT_EQ(net_->finalize(ctx_), abi::kSuccess);
  }
  // One message of `len` bytes from `src` to `dst` on `tag`, both posted,
  // tested to completion; then iflush of the receive.
  void Move(void* src, void* smh, void* dst, void* rmh, size_t len, int tag) {
    void* sreq = nullptr;
    void* rreq = nullptr;
    const absl::Time deadline = absl::Now() + absl::Seconds(20);
    size_t size = len + 1;  // the receive may be larger
    while (rreq == nullptr) {
      ASSERT_EQ(net_->irecv(recv_, 1, &dst, &size, &tag, &rmh, nullptr, &rreq), abi::kSuccess);
      ASSERT_LT(absl::Now(), deadline);
    }
    while (sreq == nullptr) {
      ASSERT_EQ(net_->isend(send_, src, len, tag, smh, nullptr, &sreq), abi::kSuccess);
      ASSERT_LT(absl::Now(), deadline);
    }
    int sdone = 0, rdone = 0, ssize = -1, rsize = -1;
    while (!sdone || !rdone) {
      if (!sdone) {
        ASSERT_EQ(net_->test(sreq, &sdone, &ssize), abi::kSuccess);
      }
      if (!rdone) {
        ASSERT_EQ(net_->test(rreq, &rdone, &rsize), abi::kSuccess);
      }
      ASSERT_LT(absl::Now(), deadline) << "len " << len;
    }
    EXPECT_EQ(rsize, static_cast<int>(len));
    void* freq = reinterpret_cast<void*>(1);
    ASSERT_EQ(net_->iflush(recv_, 1, &dst, &rsize, &rmh, &freq), abi::kSuccess);
    EXPECT_EQ(freq, nullptr);  // the flush is done when iflush returns
  }

  abi::NetV11* net_ = nullptr;
  void* ctx_ = nullptr;
  void* listen_ = nullptr;
  void* send_ = nullptr;
  void* recv_ = nullptr;
};

TEST_F(PluginGpuTest, GpuPointersOffered) {
  abi::PropertiesV11 props{};
  ASSERT_EQ(net_->get_properties(0, &props), abi::kSuccess);
  EXPECT_EQ(props.ptr_support, abi::kPtrHost | abi::kPtrCuda | abi::kPtrDmaBuf);
}

TEST_F(PluginGpuTest, DmaBufGpuToGpuEverySize) {
  constexpr size_t kCap = 3 << 20;
  FakeGpuBuffer src(kCap), dst(kCap + 4096);
  ASSERT_TRUE(src.ok() && dst.ok());
  void* smh = nullptr;
  void* rmh = nullptr;
  ASSERT_EQ(net_->reg_mr_dmabuf(send_, src.gpu(), src.size(), abi::kPtrCuda, 0, src.fd(), &smh),
            abi::kSuccess);
  ASSERT_EQ(net_->reg_mr_dmabuf(recv_, dst.gpu(), dst.size(), abi::kPtrCuda, 0, dst.fd(), &rmh),
            abi::kSuccess);
  // The first iflush sets up the adapter's loopback connection (its slot
  // buffers are registered once); after it no message registers anything.
  uint64_t regs = 0;
  int64_t mrs = 0;
  const uint64_t reads = fake_ibverbs_rdma_reads();
  int tag = 1, flushes = 0;
  for (size_t len : {size_t{1}, size_t{100}, size_t{8144}, size_t{8145}, size_t{65536},
                     size_t{1 << 20}, size_t{(2 << 20) + 5}}) {
    const std::vector<uint8_t> want = Pattern(len, static_cast<uint32_t>(len));
    std::memcpy(src.host() + 3, want.data(), len);
    std::memset(dst.host(), 0xee, len + 16);
    Move(src.gpu_at(3), smh, dst.gpu_at(8), rmh, len, tag++);
    ++flushes;
    ASSERT_EQ(std::memcmp(dst.host() + 8, want.data(), len), 0) << "len " << len;
    EXPECT_EQ(dst.host()[8 + len], 0xee) << "wrote past the message";
    if (flushes == 1) {
      regs = fake_ibverbs_reg_mr_calls();
      mrs = fake_ibverbs_live_mrs();
    }
  }
  EXPECT_EQ(fake_ibverbs_reg_mr_calls(), regs) << "a message registered registered GPU memory";
  EXPECT_GE(fake_ibverbs_rdma_reads() - reads, static_cast<uint64_t>(flushes));
  ASSERT_EQ(net_->dereg_mr(send_, smh), abi::kSuccess);
  ASSERT_EQ(net_->dereg_mr(recv_, rmh), abi::kSuccess);
  EXPECT_EQ(fake_ibverbs_live_mrs(), mrs - 2);  // both dma-buf registrations gone
}

// regMr(NCCL_PTR_CUDA) without a dma-buf: peer memory. Host memory beside it
// on the same comms keeps working (every payload now rendezvous).
TEST_F(PluginGpuTest, PeerMemoryAndHostBuffers) {
  FakeGpuBuffer gpu(1 << 20);
  ASSERT_TRUE(gpu.ok());
  fake_ibverbs_add_peer_memory(gpu.gpu(), gpu.size(), gpu.host());
  std::vector<uint8_t> host(1 << 20);
  void* gmh = nullptr;
  void* hmh = nullptr;
  ASSERT_EQ(net_->reg_mr(recv_, gpu.gpu(), gpu.size(), abi::kPtrCuda, &gmh), abi::kSuccess);
  ASSERT_EQ(net_->reg_mr(send_, host.data(), host.size(), abi::kPtrHost, &hmh), abi::kSuccess);
  int tag = 50;
  for (size_t len : {size_t{1}, size_t{5000}, size_t{300000}}) {
    const std::vector<uint8_t> want = Pattern(len, static_cast<uint32_t>(len + 9));
    std::memcpy(host.data(), want.data(), len);
    Move(host.data(), hmh, gpu.gpu(), gmh, len, tag++);
    ASSERT_EQ(std::memcmp(gpu.host(), want.data(), len), 0) << "len " << len;
  }
  // Host to host, unregistered, small and large.
  std::vector<uint8_t> out(400000);
  for (size_t len : {size_t{10}, size_t{300000}}) {
    const std::vector<uint8_t> want = Pattern(len, 77);
    std::vector<uint8_t> in = want;
    Move(in.data(), nullptr, out.data(), nullptr, len, tag++);
    ASSERT_EQ(std::memcmp(out.data(), want.data(), len), 0) << "len " << len;
  }
  ASSERT_EQ(net_->dereg_mr(recv_, gmh), abi::kSuccess);
  ASSERT_EQ(net_->dereg_mr(send_, hmh), abi::kSuccess);
  fake_ibverbs_clear_peer_memory();
}

TEST_F(PluginGpuTest, RegistrationErrors) {
  FakeGpuBuffer gpu(1 << 16);
  ASSERT_TRUE(gpu.ok());
  void* mh = nullptr;
  EXPECT_NE(net_->reg_mr_dmabuf(recv_, gpu.gpu(), gpu.size(), abi::kPtrCuda, 0, -1, &mh),
            abi::kSuccess);
  EXPECT_NE(net_->reg_mr_dmabuf(recv_, gpu.gpu(), gpu.size(), abi::kPtrHost, 0, gpu.fd(), &mh),
            abi::kSuccess);
  EXPECT_EQ(mh, nullptr);
  fake_ibverbs_set_dmabuf(0);
  EXPECT_NE(net_->reg_mr_dmabuf(recv_, gpu.gpu(), gpu.size(), abi::kPtrCuda, 0, gpu.fd(), &mh),
            abi::kSuccess);
  fake_ibverbs_set_dmabuf(1);
  EXPECT_EQ(mh, nullptr);
}

}  // namespace
}  // namespace mixnet::nccl
