// GPU memory over the verbs transport against the fake libibverbs (issue 23
// item 7): buffers the CPU cannot touch (fake_gpu_buffer.h) registered by
// dma-buf or peer memory move by RDMA alone, every size and both orders of
// send and receive; a send from GPU memory always rendezvous; a connection
// whose receives may be GPU memory makes its peer rendezvous every payload;
// an eager message that still meets a GPU receive fails it cleanly; and the
// adapter's dma-buf / peer-memory probe.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "runtime/transport/transport.h"
#include "runtime/transport/verbs/address.h"
#include "runtime/transport/verbs/verbs_device.h"
#include "tests/transport/verbs/fake_fabric_util.h"
#include "tests/transport/verbs/fake_gpu_buffer.h"
#include "tests/transport/verbs/fake_ibverbs.h"
#include "tests/transport/verbs/sysfs_tree.h"

namespace mixnet::transport::verbs {
namespace {

using ::mixnet::testing::FakeGpuBuffer;
using ::testing::HasSubstr;

// Sizes around the eager limit and the write chunking, plus zero.
const size_t kSizes[] = {0, 1, 100, kEagerMax, kEagerMax + 1, 65536, (1 << 20) + 3};

class GpuMemoryTest : public ::testing::Test {
 protected:
  void SetUp() override {
    fake_ibverbs_configure(2, 0);
    fake_ibverbs_set_dmabuf(1);
    errors_before_ = fake_ibverbs_error_completions();
    da_ = MakeDevice();
    db_ = MakeDevice();
    ASSERT_NE(da_, nullptr);
    ASSERT_NE(db_, nullptr);
  }
  void TearDown() override {
    a_.reset();
    b_.reset();
    da_.reset();
    db_.reset();
    fake_ibverbs_clear_peer_memory();
    EXPECT_EQ(fake_ibverbs_live_qps(), 0);
    EXPECT_EQ(fake_ibverbs_live_mrs(), 0);
  }
  void ConnectPair(bool a_device_receives, bool b_device_receives) {
    std::tie(a_, b_) = Connect(da_.get(), db_.get(), a_device_receives, b_device_receives);
    ASSERT_NE(a_, nullptr);
  }
  // Sends `len` bytes from `src` (a's side) into `dst` (b's side) on `tag`;
  // `src_view` / `dst_view` are where the test reads and writes them.
  void Move(const void* src, uint8_t* src_view, void* dst, uint8_t* dst_view, size_t len,
            size_t cap, uint64_t tag, bool recv_first) {
    const std::vector<uint8_t> want = Pattern(len, static_cast<uint32_t>(len * 7 + tag));
    if (len > 0) std::memcpy(src_view, want.data(), len);
    std::memset(dst_view, 0xee, cap + 1);
    std::unique_ptr<Request> r, s;
    if (recv_first) r = *b_->Irecv(dst, cap, tag);
    absl::StatusOr<std::unique_ptr<Request>> sent = a_->Isend(src, len, tag);
    ASSERT_TRUE(sent.ok()) << sent.status();
    s = std::move(*sent);
    if (!recv_first) r = *b_->Irecv(dst, cap, tag);
    ASSERT_TRUE(r->Wait(kWait).ok()) << r->status() << " len " << len;
    ASSERT_TRUE(s->Wait(kWait).ok()) << s->status() << " len " << len;
    EXPECT_EQ(r->bytes(), len);
    ASSERT_TRUE(Same(dst_view, want.data(), len)) << "len " << len;
    EXPECT_EQ(dst_view[len], 0xee) << "wrote past the message, len " << len;
  }

  std::unique_ptr<Device> da_, db_;
  std::unique_ptr<Connection> a_, b_;
  uint64_t errors_before_ = 0;
};

// GPU to GPU by dma-buf, both ends' receives declared GPU memory: every size
// arrives exactly, in either order, with no registration per message (both
// buffers registered once) and no CPU access (the buffers are PROT_NONE).
TEST_F(GpuMemoryTest, DmaBufGpuToGpuEverySizeBothOrders) {
  ConnectPair(true, true);
  constexpr size_t kCap = (2 << 20);
  FakeGpuBuffer src(kCap), dst(kCap + 4096);
  ASSERT_TRUE(src.ok() && dst.ok());
  auto pin_src = a_->RegisterDeviceMemory(src.gpu(), src.size(), src.fd(), 0);
  auto pin_dst = b_->RegisterDeviceMemory(dst.gpu(), dst.size(), dst.fd(), 0);
  ASSERT_TRUE(pin_src.ok()) << pin_src.status();
  ASSERT_TRUE(pin_dst.ok()) << pin_dst.status();
  const uint64_t regs = fake_ibverbs_reg_mr_calls();
  uint64_t tag = 1;
  for (bool recv_first : {true, false}) {
    for (size_t len : kSizes) {
      // At an odd offset inside the registered range, too.
      Move(src.gpu_at(3), src.host() + 3, dst.gpu_at(5), dst.host() + 5, len, kCap, tag++,
           recv_first);
    }
  }
  EXPECT_EQ(fake_ibverbs_reg_mr_calls(), regs) << "a message registered registered GPU memory";
  EXPECT_EQ(fake_ibverbs_error_completions(), errors_before_);
  // NCCL's iflush: one RDMA read of the received GPU buffer through b's own
  // adapter (a loopback connection, made once), each time.
  const uint64_t reads = fake_ibverbs_rdma_reads();
  for (int i = 0; i < 3; ++i) {
    absl::StatusOr<std::unique_ptr<Request>> f = b_->FlushDeviceWrites(dst.gpu_at(5), 1000);
    ASSERT_TRUE(f.ok()) << f.status();
    ASSERT_NE(*f, nullptr);
    ASSERT_TRUE((*f)->Wait(kWait).ok()) << (*f)->status();
  }
  EXPECT_EQ(fake_ibverbs_rdma_reads() - reads, 3u);
  absl::StatusOr<std::unique_ptr<Request>> none = b_->FlushDeviceWrites(dst.gpu(), 0);
  ASSERT_TRUE(none.ok());
  EXPECT_EQ(*none, nullptr);  // nothing to flush
  std::vector<uint8_t> host(64);
  absl::Status bad = b_->FlushDeviceWrites(host.data(), host.size()).status();
  EXPECT_EQ(bad.code(), absl::StatusCode::kInvalidArgument) << bad;
  EXPECT_THAT(std::string(bad.message()), HasSubstr("not registered GPU memory"));
  pin_src->reset();
  pin_dst->reset();
}

// Host memory into GPU memory (the receiver asked for rendezvous, so even a
// 1-byte message is written by the NIC), and GPU memory into host memory
// (a GPU send rendezvous although the peer's receives are host memory).
TEST_F(GpuMemoryTest, HostToGpuAndGpuToHost) {
  ConnectPair(false, true);
  FakeGpuBuffer gpu_dst(1 << 20);
  ASSERT_TRUE(gpu_dst.ok());
  auto pin = b_->RegisterDeviceMemory(gpu_dst.gpu(), gpu_dst.size(), gpu_dst.fd(), 0);
  ASSERT_TRUE(pin.ok()) << pin.status();
  std::vector<uint8_t> host(1 << 20);
  uint64_t tag = 100;
  for (size_t len : {size_t{1}, size_t{100}, kEagerMax, size_t{300000}}) {
    Move(host.data(), host.data(), gpu_dst.gpu(), gpu_dst.host(), len, 500000, tag++, false);
  }
  pin->reset();
  // The other way: a sends from GPU memory, b receives into host memory on
  // a connection that never declared GPU receives.
  a_.reset();
  b_.reset();
  ConnectPair(false, false);
  FakeGpuBuffer gpu_src(1 << 20);
  ASSERT_TRUE(gpu_src.ok());
  auto pin_src = a_->RegisterDeviceMemory(gpu_src.gpu(), gpu_src.size(), gpu_src.fd(), 0);
  ASSERT_TRUE(pin_src.ok()) << pin_src.status();
  std::vector<uint8_t> dst(600000);
  for (bool recv_first : {true, false}) {
    for (size_t len : {size_t{1}, size_t{100}, kEagerMax, size_t{300000}}) {
      Move(gpu_src.gpu(), gpu_src.host(), dst.data(), dst.data(), len, 500000, tag++, recv_first);
    }
  }
  pin_src->reset();
  EXPECT_EQ(fake_ibverbs_error_completions(), errors_before_);
}

// Peer memory (nvidia-peermem): registered with ibv_reg_mr on the device
// pointer, which the module resolves; the same transfers as by dma-buf.
TEST_F(GpuMemoryTest, PeerMemory) {
  ConnectPair(true, true);
  FakeGpuBuffer src(2 << 20), dst(2 << 20);
  ASSERT_TRUE(src.ok() && dst.ok());
  fake_ibverbs_add_peer_memory(src.gpu(), src.size(), src.host());
  fake_ibverbs_add_peer_memory(dst.gpu(), dst.size(), dst.host());
  auto pin_src = a_->RegisterDeviceMemory(src.gpu(), src.size(), -1, 0);
  auto pin_dst = b_->RegisterDeviceMemory(dst.gpu(), dst.size(), -1, 0);
  ASSERT_TRUE(pin_src.ok()) << pin_src.status();
  ASSERT_TRUE(pin_dst.ok()) << pin_dst.status();
  uint64_t tag = 200;
  for (size_t len : kSizes) {
    Move(src.gpu(), src.host(), dst.gpu(), dst.host(), len, (2 << 20) - 1, tag++, true);
  }
  pin_src->reset();
  pin_dst->reset();
}

// A receive in GPU memory on a connection that did not declare GPU receives
// meets an eager message: the receive fails with the reason (the CPU would
// have had to copy into GPU memory), the send completes (the message was
// delivered), and the connection goes on.
TEST_F(GpuMemoryTest, EagerMessageIntoGpuReceiveFailsIt) {
  ConnectPair(false, false);
  FakeGpuBuffer dst(1 << 16);
  ASSERT_TRUE(dst.ok());
  auto pin = b_->RegisterDeviceMemory(dst.gpu(), dst.size(), dst.fd(), 0);
  ASSERT_TRUE(pin.ok()) << pin.status();
  std::vector<uint8_t> src = Pattern(100, 3);
  auto r = *b_->Irecv(dst.gpu(), dst.size(), 7);
  auto s = *a_->Isend(src.data(), src.size(), 7);
  ASSERT_TRUE(s->Wait(kWait).ok()) << s->status();
  absl::Status st = r->Wait(kWait);
  EXPECT_EQ(st.code(), absl::StatusCode::kFailedPrecondition) << st;
  EXPECT_THAT(std::string(st.message()), HasSubstr("GPU memory"));
  EXPECT_THAT(std::string(st.message()), HasSubstr("rank A"));  // b's peer
  // Held before its receive, the same.
  auto s2 = *a_->Isend(src.data(), src.size(), 8);
  ASSERT_TRUE(s2->Wait(kWait).ok());
  absl::SleepFor(absl::Milliseconds(50));
  auto r2 = *b_->Irecv(dst.gpu(), dst.size(), 8);
  EXPECT_EQ(r2->Wait(kWait).code(), absl::StatusCode::kFailedPrecondition);
  // The stream goes on.
  std::vector<uint8_t> out(100);
  auto r3 = *b_->Irecv(out.data(), out.size(), 9);
  auto s3 = *a_->Isend(src.data(), src.size(), 9);
  ASSERT_TRUE(r3->Wait(kWait).ok()) << r3->status();
  ASSERT_TRUE(s3->Wait(kWait).ok());
  EXPECT_EQ(out, src);
  pin->reset();
}

TEST_F(GpuMemoryTest, RegistrationErrorsNameTheBuffer) {
  ConnectPair(false, false);
  FakeGpuBuffer buf(1 << 16);
  ASSERT_TRUE(buf.ok());
  absl::Status st = a_->RegisterDeviceMemory(nullptr, 10, buf.fd(), 0).status();
  EXPECT_EQ(st.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_TRUE(a_->RegisterDeviceMemory(buf.gpu(), 0, buf.fd(), 0).ok());  // nothing to register
  fake_ibverbs_set_dmabuf(0);
  st = a_->RegisterDeviceMemory(buf.gpu(), buf.size(), buf.fd(), 0).status();
  fake_ibverbs_set_dmabuf(1);
  EXPECT_FALSE(st.ok());
  EXPECT_THAT(std::string(st.message()), HasSubstr("ibv_reg_dmabuf_mr"));
  EXPECT_THAT(std::string(st.message()), HasSubstr("GPU memory"));
  EXPECT_THAT(std::string(st.message()), HasSubstr("rank B"));
}

// The adapter's probe: dma-buf from the registration call's answer to a bad
// fd, peer memory from sysfs.
TEST(GpuMemoryProbe, DmaBufAndPeerMemory) {
  fake_ibverbs_configure(1, 0);
  fake_ibverbs_set_dmabuf(1);
  verbs_test::SysfsTree none;
  DeviceOptions o;
  o.bind_address = "127.0.0.1";
  o.sysfs_root = none.root();
  {
    auto d = CreateVerbsDevice(o);
    ASSERT_TRUE(d.ok()) << d.status();
    DeviceMemorySupport s = (*d)->device_memory();
    EXPECT_TRUE(s.dmabuf) << s.why;
    EXPECT_FALSE(s.peer_memory) << s.why;
    EXPECT_THAT(s.why, HasSubstr("fake0"));
    EXPECT_THAT(s.why, HasSubstr("no peer-memory module"));
  }
  fake_ibverbs_set_dmabuf(0);
  verbs_test::SysfsTree peer;
  peer.Module("nvidia_peermem", "580.65");
  o.sysfs_root = peer.root();
  {
    auto d = CreateVerbsDevice(o);
    ASSERT_TRUE(d.ok()) << d.status();
    DeviceMemorySupport s = (*d)->device_memory();
    EXPECT_FALSE(s.dmabuf) << s.why;
    EXPECT_TRUE(s.peer_memory) << s.why;
    EXPECT_THAT(s.why, HasSubstr("no dma-buf registration"));
    EXPECT_THAT(s.why, HasSubstr("nvidia_peermem"));
  }
  fake_ibverbs_set_dmabuf(1);
}

// The handshake carries the flag; a peer from before it sends zero there.
TEST(GpuMemoryHandshake, DeviceReceivesFlag) {
  Handshake h;
  h.connection_id = 5;
  h.qp.recv_window = 64;
  h.qp.slot_bytes = 8192;
  h.qp.name = "fake0:1";
  h.qp.device_receives = true;
  std::string bytes = h.Encode();
  absl::StatusOr<Handshake> back = Handshake::Decode(bytes);
  ASSERT_TRUE(back.ok());
  EXPECT_TRUE(back->qp.device_receives);
  EXPECT_EQ(static_cast<uint8_t>(bytes[104]), 1);  // byte 104, bit 0 (address.cc layout)
  h.qp.device_receives = false;
  back = Handshake::Decode(h.Encode());
  ASSERT_TRUE(back.ok());
  EXPECT_FALSE(back->qp.device_receives);
}

}  // namespace
}  // namespace mixnet::transport::verbs
