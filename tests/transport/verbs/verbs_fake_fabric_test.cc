// The whole verbs transport (devices, bootstrap, queue pairs, poller, eager
// and rendezvous protocol, credits, failures) against fake_ibverbs.cc, an
// in-process simulation of libibverbs. Catches protocol bugs on machines
// without RDMA hardware; the real-hardware run is the transport test suite.
#include <arpa/inet.h>
#include <dirent.h>
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <malloc.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <sys/stat.h>

#include <atomic>
#include <cstring>
#include <fstream>
#include <random>
#include <set>
#include <thread>
#include <vector>

#include "absl/synchronization/mutex.h"
#include "runtime/transport/transport.h"
#include "runtime/transport/verbs/address.h"
#include "runtime/transport/verbs/verbs_device.h"
#include "runtime/transport/verbs/wire.h"
#include "tests/transport/verbs/fake_ibverbs.h"
#include "tests/transport/verbs/sysfs_tree.h"

#if defined(__SANITIZE_ADDRESS__)
// From the sanitizer runtime (GCC ships no header declaring it).
extern "C" size_t __sanitizer_get_current_allocated_bytes();
#endif

namespace mixnet::transport::verbs {
namespace {

using ::testing::HasSubstr;

constexpr size_t kEagerMax = 8192 - kWireHeaderBytes;
const absl::Duration kWait = absl::Seconds(20);

std::vector<uint8_t> Pattern(size_t n, uint32_t seed) {
  std::vector<uint8_t> v(n);
  uint32_t x = seed * 2654435761u + 1;
  for (size_t i = 0; i < n; ++i) {
    x = x * 1103515245u + 12345u;
    v[i] = static_cast<uint8_t>(x >> 16);
  }
  return v;
}

// memcmp that accepts empty (possibly null) buffers.
bool Same(const void* a, const void* b, size_t n) { return n == 0 || std::memcmp(a, b, n) == 0; }

struct Failures {
  absl::Mutex mu;
  std::vector<absl::Status> seen;
  FailureCallback Callback() {
    return [this](const absl::Status& s) {
      absl::MutexLock lock(&mu);
      seen.push_back(s);
    };
  }
  size_t count() {
    absl::MutexLock lock(&mu);
    return seen.size();
  }
};

// Heap bytes the process has allocated now (every thread, mmapped blocks too).
size_t HeapInUse() {
#if defined(__SANITIZE_ADDRESS__)
  return __sanitizer_get_current_allocated_bytes();
#else
  struct mallinfo2 m = mallinfo2();
  return m.uordblks + m.hblkhd;
#endif
}

std::unique_ptr<Device> MakeDevice(Failures* f = nullptr, int64_t unexpected_bytes = -1) {
  DeviceOptions o;
  o.bind_address = "127.0.0.1";
  if (unexpected_bytes >= 0) o.ib_unexpected_bytes = unexpected_bytes;
  if (f != nullptr) o.on_failure = f->Callback();
  absl::StatusOr<std::unique_ptr<Device>> d = CreateVerbsDevice(o);
  EXPECT_TRUE(d.ok()) << d.status();
  return d.ok() ? std::move(*d) : nullptr;
}

uint64_t NextId() {
  static std::atomic<uint64_t> id{1};
  return id++;
}

// Connects a (initiator) and b; returns {a's connection, b's connection}.
std::pair<std::unique_ptr<Connection>, std::unique_ptr<Connection>> Connect(Device* a, Device* b) {
  const uint64_t id = NextId();
  absl::StatusOr<std::unique_ptr<Connection>> cb;
  std::thread t([&] {
    ConnectOptions o;
    o.remote_address = a->address();
    o.connection_id = id;
    o.initiator = false;
    o.peer_name = "rank A";
    o.timeout = absl::Seconds(10);
    cb = b->Connect(o);
  });
  ConnectOptions o;
  o.remote_address = b->address();
  o.connection_id = id;
  o.initiator = true;
  o.peer_name = "rank B";
  o.timeout = absl::Seconds(10);
  absl::StatusOr<std::unique_ptr<Connection>> ca = a->Connect(o);
  t.join();
  EXPECT_TRUE(ca.ok()) << ca.status();
  EXPECT_TRUE(cb.ok()) << cb.status();
  if (!ca.ok() || !cb.ok()) return {};
  return {std::move(*ca), std::move(*cb)};
}

class FakeFabricTest : public ::testing::Test {
 protected:
  void SetUp() override {
    fake_ibverbs_configure(2, 0);
    rnr_before_ = fake_ibverbs_rnr_events();
    errors_before_ = fake_ibverbs_error_completions();
    da_ = MakeDevice(&fa_);
    db_ = MakeDevice(&fb_);
    ASSERT_NE(da_, nullptr);
    ASSERT_NE(db_, nullptr);
    std::tie(a_, b_) = Connect(da_.get(), db_.get());
    ASSERT_NE(a_, nullptr);
  }
  void TearDown() override {
    a_.reset();
    b_.reset();
    da_.reset();
    db_.reset();
    EXPECT_EQ(fake_ibverbs_live_qps(), 0);
    EXPECT_EQ(fake_ibverbs_live_mrs(), 0);
  }
  void ExpectNoRnr() { EXPECT_EQ(fake_ibverbs_rnr_events(), rnr_before_); }
  void ExpectNoErrors() { EXPECT_EQ(fake_ibverbs_error_completions(), errors_before_); }

  void SendRecv(Connection* from, Connection* to, size_t len, size_t cap, uint64_t tag,
                bool recv_first) {
    std::vector<uint8_t> src = Pattern(len, static_cast<uint32_t>(len + tag));
    std::vector<uint8_t> dst(cap + 1, 0xee);
    std::unique_ptr<Request> r, s;
    if (recv_first) r = *to->Irecv(dst.data(), cap, tag);
    absl::StatusOr<std::unique_ptr<Request>> sent = from->Isend(src.data(), len, tag);
    ASSERT_TRUE(sent.ok()) << sent.status();
    s = std::move(*sent);
    if (!recv_first) r = *to->Irecv(dst.data(), cap, tag);
    ASSERT_TRUE(r->Wait(kWait).ok()) << r->status() << " len " << len;
    ASSERT_TRUE(s->Wait(kWait).ok()) << s->status() << " len " << len;
    EXPECT_EQ(r->bytes(), len);
    EXPECT_EQ(s->bytes(), len);
    ASSERT_TRUE(Same(dst.data(), src.data(), len)) << "len " << len;
    for (size_t i = len; i <= cap; ++i) ASSERT_EQ(dst[i], 0xee) << "wrote past the message";
  }

  Failures fa_, fb_;
  std::unique_ptr<Device> da_, db_;
  std::unique_ptr<Connection> a_, b_;
  uint64_t rnr_before_ = 0, errors_before_ = 0;
};

TEST_F(FakeFabricTest, DeviceLooksRight) {
  EXPECT_EQ(da_->kind(), "verbs");
  EXPECT_THAT(da_->name(), HasSubstr("verbs:fake0:1(127.0.0.1)"));
  absl::StatusOr<VerbsAddress> addr = VerbsAddress::Decode(da_->address());
  ASSERT_TRUE(addr.ok());
  EXPECT_EQ(addr->ip, "127.0.0.1");
  EXPECT_THAT(a_->peer_name(), HasSubstr("rank B"));
  EXPECT_TRUE(a_->health().ok());
}

TEST_F(FakeFabricTest, SizesBothWaysEveryByte) {
  for (size_t len : {size_t{0}, size_t{1}, size_t{7}, size_t{100}, kEagerMax - 1, kEagerMax,
                     kEagerMax + 1, size_t{65537}, size_t{1} << 20, (size_t{3} << 20) + 5}) {
    for (bool recv_first : {true, false}) {
      SendRecv(a_.get(), b_.get(), len, len, 5, recv_first);
      SendRecv(b_.get(), a_.get(), len, len, 6, recv_first);
    }
  }
  SendRecv(a_.get(), b_.get(), 64 << 20, 64 << 20, 1, true);
  ExpectNoRnr();
  ExpectNoErrors();
}

TEST_F(FakeFabricTest, ReceiveLargerThanMessage) {
  for (size_t len : {size_t{0}, size_t{10}, kEagerMax, kEagerMax + 1, size_t{100000}}) {
    SendRecv(a_.get(), b_.get(), len, len + 5000, 3, true);
    SendRecv(a_.get(), b_.get(), len, len * 2 + 20000, 3, false);
  }
}

TEST_F(FakeFabricTest, TooSmallReceive) {
  for (size_t len : {size_t{100}, kEagerMax + 10, size_t{1} << 20}) {
    for (bool recv_first : {true, false}) {
      SCOPED_TRACE(testing::Message() << len << (recv_first ? " posted first" : " held"));
      std::vector<uint8_t> src(len, 1), dst(len - 1, 0xab);
      std::unique_ptr<Request> r, s;
      if (recv_first) r = *b_->Irecv(dst.data(), dst.size(), 9);
      s = *a_->Isend(src.data(), len, 9);
      if (!recv_first) {
        // Eager messages are held without blocking the sender; a rendezvous
        // one waits at the sender for its receive.
        if (len <= kEagerMax) {
          ASSERT_TRUE(s->Wait(kWait).ok());
        }
        r = *b_->Irecv(dst.data(), dst.size(), 9);
      }
      EXPECT_EQ(r->Wait(kWait).code(), absl::StatusCode::kInvalidArgument);
      EXPECT_THAT(std::string(r->status().message()), HasSubstr("exceeds the receive buffer"));
      if (len > kEagerMax) {
        // A rendezvous fails the send too (its payload never left).
        EXPECT_EQ(s->Wait(kWait).code(), absl::StatusCode::kInvalidArgument);
        EXPECT_THAT(std::string(s->status().message()), HasSubstr("exceeds the receive buffer"));
      } else {
        EXPECT_TRUE(s->Wait(kWait).ok());
      }
      for (uint8_t b : dst) ASSERT_EQ(b, 0xab);
    }
  }
  // The connection stays usable.
  SendRecv(a_.get(), b_.get(), 1000, 1000, 9, true);
  SendRecv(a_.get(), b_.get(), 100000, 100000, 9, false);
  EXPECT_TRUE(a_->health().ok());
  ExpectNoErrors();
}

// Small sends finish before any receive is posted; a large one is announced
// and waits at the sender (receiver-driven rendezvous) until its receive is.
TEST_F(FakeFabricTest, LargeSendsWaitForTheirReceive) {
  std::vector<uint8_t> big = Pattern(2 << 20, 3), small = Pattern(10, 4);
  auto s1 = *a_->Isend(big.data(), big.size(), 5);
  auto s2 = *a_->Isend(small.data(), small.size(), 6);
  ASSERT_TRUE(s2->Wait(kWait).ok()) << s2->status();
  EXPECT_EQ(s1->Wait(absl::Milliseconds(200)).code(), absl::StatusCode::kDeadlineExceeded);
  std::vector<uint8_t> rsmall(64), rbig(big.size());
  auto r2 = *b_->Irecv(rsmall.data(), rsmall.size(), 6);
  auto r1 = *b_->Irecv(rbig.data(), rbig.size(), 5);
  ASSERT_TRUE(r1->Wait(kWait).ok());
  ASSERT_TRUE(r2->Wait(kWait).ok());
  ASSERT_TRUE(s1->Wait(kWait).ok()) << s1->status();
  EXPECT_EQ(rbig, big);
  EXPECT_EQ(r2->bytes(), small.size());
  EXPECT_TRUE(std::equal(small.begin(), small.end(), rsmall.begin()));
}

// Memory registered once (the NCCL plugin's regMr) serves every message
// inside it: 20 rendezvous messages of 1 MiB, one after another, cost one
// registration per message and side without it (40: the fake has no
// on-demand paging, so an idle pinned registration is dropped at once), and
// none once both 20 MiB buffers are registered (2 registrations, one each).
TEST_F(FakeFabricTest, RegisteredMemoryIsRegisteredOnce) {
  constexpr int kMsgs = 20;
  constexpr size_t kBytes = 1 << 20;
  std::vector<uint8_t> src = Pattern(kMsgs * kBytes, 9), dst(kMsgs * kBytes);
  auto run = [&] {
    std::fill(dst.begin(), dst.end(), 0);
    for (int i = 0; i < kMsgs; ++i) {
      auto r = *b_->Irecv(dst.data() + i * kBytes, kBytes, 4);
      auto s = *a_->Isend(src.data() + i * kBytes, kBytes, 4);
      ASSERT_TRUE(r->Wait(kWait).ok()) << r->status();
      ASSERT_TRUE(s->Wait(kWait).ok()) << s->status();
    }
    ASSERT_EQ(dst, src);
  };
  uint64_t before = fake_ibverbs_reg_mr_calls();
  run();
  EXPECT_EQ(fake_ibverbs_reg_mr_calls() - before, uint64_t{2 * kMsgs});
  before = fake_ibverbs_reg_mr_calls();
  absl::StatusOr<std::shared_ptr<const void>> pin_src = a_->RegisterMemory(src.data(), src.size());
  absl::StatusOr<std::shared_ptr<const void>> pin_dst = b_->RegisterMemory(dst.data(), dst.size());
  ASSERT_TRUE(pin_src.ok()) << pin_src.status();
  ASSERT_TRUE(pin_dst.ok()) << pin_dst.status();
  EXPECT_EQ(fake_ibverbs_reg_mr_calls() - before, 2u);
  const int64_t live = fake_ibverbs_live_mrs();
  before = fake_ibverbs_reg_mr_calls();
  run();
  EXPECT_EQ(fake_ibverbs_reg_mr_calls() - before, 0u) << "a message registered registered memory";
  EXPECT_EQ(fake_ibverbs_live_mrs(), live);
  pin_src->reset();
  pin_dst->reset();
  EXPECT_EQ(fake_ibverbs_live_mrs(), live - 2);
  EXPECT_THAT(std::string(a_->RegisterMemory(nullptr, 10).status().message()),
              HasSubstr("null buffer"));
}

// What a receiver holds for receives it has not posted stays within the
// bound (MIXNET_IB_UNEXPECTED_BYTES) plus its fixed receive slots, however
// much is sent first: 16 rendezvous messages of 1 MiB and 600 eager ones of
// 4000 bytes, all sent long before any receive, against a 256 KiB bound.
// Hand-worked: 65 eager messages fit in the copies (65 x 4000 <= 262144 <
// 66 x 4000), at most `window` = 64 more wait in receive slots (the sender
// has no credits beyond them), so at most 129 eager sends complete; the
// rendezvous sends complete only once their receives are posted.
TEST(FakeFabricBoundTest, UnexpectedMessagesStayWithinTheBound) {
  fake_ibverbs_configure(2, 0);
  constexpr int64_t kBound = 256 << 10;
  constexpr int kBig = 16, kSmall = 600;
  constexpr size_t kBigBytes = 1 << 20, kSmallBytes = 4000;
  std::unique_ptr<Device> da = MakeDevice(nullptr, kBound), db = MakeDevice(nullptr, kBound);
  ASSERT_NE(da, nullptr);
  ASSERT_NE(db, nullptr);
  auto [a, b] = Connect(da.get(), db.get());
  ASSERT_NE(a, nullptr);
  const uint64_t rnr_before = fake_ibverbs_rnr_events();
  std::vector<std::vector<uint8_t>> big(kBig), small(kSmall), big_dst(kBig), small_dst(kSmall);
  for (int i = 0; i < kBig; ++i) {
    big[i] = Pattern(kBigBytes, 100 + i);
    big_dst[i].assign(kBigBytes, 0);
  }
  for (int i = 0; i < kSmall; ++i) {
    small[i] = Pattern(kSmallBytes, 1000 + i);
    small_dst[i].assign(kSmallBytes, 0);
  }
  std::vector<std::unique_ptr<Request>> big_sends, small_sends, recvs;
  big_sends.reserve(kBig);
  small_sends.reserve(kSmall);
  recvs.reserve(kBig + kSmall);
  const size_t heap_before = HeapInUse();
  for (int i = 0; i < kSmall; ++i) {
    small_sends.push_back(*a->Isend(small[i].data(), kSmallBytes, 1));
    if (i % (kSmall / kBig) == 0 && i / (kSmall / kBig) < kBig) {
      const int k = i / (kSmall / kBig);
      big_sends.push_back(*a->Isend(big[k].data(), kBigBytes, 2));
    }
  }
  ASSERT_EQ(big_sends.size(), size_t{kBig});
  absl::SleepFor(absl::Milliseconds(300));  // everything that can arrive has
  const size_t heap_held = HeapInUse();
  // The receiver's copies, plus the transport's bookkeeping of 616 sends and
  // announcements (a few hundred bytes each).
  EXPECT_LT(heap_held, heap_before + kBound + (1 << 20))
      << "held " << heap_held - heap_before << " bytes for absent receives";
  int small_done = 0;
  for (auto& s : small_sends) small_done += s->Done() ? 1 : 0;
  EXPECT_GE(small_done, 65);
  EXPECT_LE(small_done, 65 + 64);
  for (auto& s : big_sends) EXPECT_FALSE(s->Done());
  // Receives posted now, the large ones first: every byte arrives, in order.
  for (int i = 0; i < kBig; ++i) recvs.push_back(*b->Irecv(big_dst[i].data(), kBigBytes, 2));
  for (int i = 0; i < kSmall; ++i) {
    recvs.push_back(*b->Irecv(small_dst[i].data(), kSmallBytes, 1));
  }
  for (auto& r : recvs) ASSERT_TRUE(r->Wait(kWait).ok()) << r->status();
  for (auto& s : big_sends) ASSERT_TRUE(s->Wait(kWait).ok()) << s->status();
  for (auto& s : small_sends) ASSERT_TRUE(s->Wait(kWait).ok()) << s->status();
  for (int i = 0; i < kBig; ++i) ASSERT_EQ(big_dst[i], big[i]) << "large message " << i;
  for (int i = 0; i < kSmall; ++i) ASSERT_EQ(small_dst[i], small[i]) << "small message " << i;
  EXPECT_EQ(fake_ibverbs_rnr_events(), rnr_before);
  recvs.clear();
  big_sends.clear();
  small_sends.clear();
  a.reset();
  b.reset();
  da.reset();
  db.reset();
  EXPECT_EQ(fake_ibverbs_live_mrs(), 0);
}

// A receive posted at any point after its rendezvous was announced.
TEST_F(FakeFabricTest, ReceivePostedAnyTimeAfterTheAnnouncement) {
  for (int i = 0; i < 20; ++i) {
    std::vector<uint8_t> src = Pattern(8 << 20, i), dst(8 << 20);
    auto s = *a_->Isend(src.data(), src.size(), 12);
    absl::SleepFor(absl::Microseconds(50 * i));
    auto r = *b_->Irecv(dst.data(), dst.size(), 12);
    ASSERT_TRUE(r->Wait(kWait).ok());
    ASSERT_TRUE(s->Wait(kWait).ok());
    ASSERT_EQ(dst, src);
  }
}

TEST_F(FakeFabricTest, FifoPerTagMixedSizesExpectedAndUnexpected) {
  constexpr int kPerTag = 40;
  std::vector<size_t> sizes;
  std::mt19937 rng(7);
  for (int i = 0; i < 2 * kPerTag; ++i) {
    size_t choice = rng() % 4;
    sizes.push_back(choice == 0   ? 0
                    : choice == 1 ? rng() % 200
                    : choice == 2 ? kEagerMax + rng() % 3
                                  : 30000 + rng() % 5000);
  }
  std::vector<std::vector<uint8_t>> src(sizes.size()), dst(sizes.size());
  std::vector<std::unique_ptr<Request>> sends, recvs(sizes.size());
  // First half of each tag's receives posted before the sends, rest after.
  for (int i = 0; i < 2 * kPerTag; ++i) {
    dst[i].assign(40000, 0);
    if ((i / 2) < kPerTag / 2) recvs[i] = *b_->Irecv(dst[i].data(), dst[i].size(), i % 2);
  }
  for (int i = 0; i < 2 * kPerTag; ++i) {
    src[i] = Pattern(sizes[i], i);
    sends.push_back(*a_->Isend(src[i].data(), sizes[i], i % 2));
  }
  for (int i = 0; i < 2 * kPerTag; ++i) {
    if ((i / 2) >= kPerTag / 2) recvs[i] = *b_->Irecv(dst[i].data(), dst[i].size(), i % 2);
  }
  for (int i = 0; i < 2 * kPerTag; ++i) {
    ASSERT_TRUE(recvs[i]->Wait(kWait).ok()) << i << " " << recvs[i]->status();
    ASSERT_TRUE(sends[i]->Wait(kWait).ok()) << i << " " << sends[i]->status();
    ASSERT_EQ(recvs[i]->bytes(), sizes[i]) << i;
    ASSERT_TRUE(Same(dst[i].data(), src[i].data(), sizes[i])) << i;
  }
  ExpectNoRnr();
}

TEST_F(FakeFabricTest, DifferentTagsAreIndependent) {
  std::vector<uint8_t> x = Pattern(50000, 1), y = Pattern(10, 2);
  std::vector<uint8_t> rx(50000), ry(10);
  auto sx = *a_->Isend(x.data(), x.size(), 100);
  auto sy = *a_->Isend(y.data(), y.size(), 200);
  auto ry_req = *b_->Irecv(ry.data(), ry.size(), 200);
  ASSERT_TRUE(ry_req->Wait(kWait).ok());
  EXPECT_EQ(ry, y);
  auto rx_req = *b_->Irecv(rx.data(), rx.size(), 100);
  ASSERT_TRUE(rx_req->Wait(kWait).ok());
  ASSERT_TRUE(sx->Wait(kWait).ok());
  ASSERT_TRUE(sy->Wait(kWait).ok());
  EXPECT_EQ(rx, x);
}

TEST_F(FakeFabricTest, ManyUnexpectedMessagesRespectCredits) {
  constexpr int kCount = 3000;
  std::vector<std::vector<uint8_t>> src(kCount);
  std::vector<std::unique_ptr<Request>> sends;
  for (int i = 0; i < kCount; ++i) {
    src[i] = Pattern(i % 300, i);
    sends.push_back(*a_->Isend(src[i].data(), src[i].size(), 1));
  }
  absl::SleepFor(absl::Milliseconds(200));  // let them all arrive unexpected
  std::vector<uint8_t> dst(300);
  for (int i = 0; i < kCount; ++i) {
    auto r = *b_->Irecv(dst.data(), dst.size(), 1);
    ASSERT_TRUE(r->Wait(kWait).ok()) << i;
    ASSERT_EQ(r->bytes(), src[i].size());
    ASSERT_TRUE(Same(dst.data(), src[i].data(), src[i].size())) << i;
  }
  for (auto& s : sends) ASSERT_TRUE(s->Wait(kWait).ok());
  ExpectNoRnr();
  ExpectNoErrors();
}

TEST_F(FakeFabricTest, BidirectionalFloodDoesNotDeadlock) {
  constexpr int kCount = 2000;
  auto run = [&](Connection* c, uint32_t seed, std::atomic<int>* bad) {
    std::vector<std::vector<uint8_t>> src(kCount), dst(kCount);
    std::vector<std::unique_ptr<Request>> reqs;
    for (int i = 0; i < kCount; ++i) {
      size_t n = (i % 10 == 0) ? 20000 : i % 64;
      src[i] = Pattern(n, seed + i);
      dst[i].assign(20000, 0);
      reqs.push_back(*c->Isend(src[i].data(), n, 4));
      if (i % 3 == 0) reqs.push_back(*c->Irecv(dst[i].data(), dst[i].size(), 4));
    }
    for (int i = 0; i < kCount; ++i) {
      if (i % 3 != 0) reqs.push_back(*c->Irecv(dst[i].data(), dst[i].size(), 4));
    }
    for (auto& r : reqs) {
      if (!r->Wait(kWait).ok()) ++*bad;
    }
  };
  std::atomic<int> bad{0};
  std::thread t1(run, a_.get(), 1000, &bad);
  std::thread t2(run, b_.get(), 1000, &bad);
  t1.join();
  t2.join();
  EXPECT_EQ(bad.load(), 0);
  ExpectNoRnr();
  ExpectNoErrors();
}

TEST_F(FakeFabricTest, WaitTimesOutAndLeavesRequestPending) {
  std::vector<uint8_t> dst(100);
  auto r = *b_->Irecv(dst.data(), dst.size(), 77);
  EXPECT_EQ(r->Wait(absl::Milliseconds(50)).code(), absl::StatusCode::kDeadlineExceeded);
  EXPECT_FALSE(r->Done());
  std::vector<uint8_t> src = Pattern(60, 3);
  auto s = *a_->Isend(src.data(), src.size(), 77);
  ASSERT_TRUE(r->Wait(kWait).ok());
  ASSERT_TRUE(s->Wait(kWait).ok());
  EXPECT_EQ(r->bytes(), 60u);
}

TEST_F(FakeFabricTest, NullBuffers) {
  EXPECT_EQ(a_->Isend(nullptr, 10, 1).status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(a_->Irecv(nullptr, 10, 1).status().code(), absl::StatusCode::kInvalidArgument);
  auto s = *a_->Isend(nullptr, 0, 1);
  auto r = *b_->Irecv(nullptr, 0, 1);
  EXPECT_TRUE(s->Wait(kWait).ok());
  EXPECT_TRUE(r->Wait(kWait).ok());
}

TEST_F(FakeFabricTest, OrderlyCloseFailsPendingWithUnavailable) {
  std::vector<uint8_t> eager = Pattern(10, 1);
  auto s = *a_->Isend(eager.data(), eager.size(), 2);  // arrives unexpected at b
  absl::SleepFor(absl::Milliseconds(100));
  std::vector<uint8_t> dst(100);
  auto pending = *a_->Irecv(dst.data(), dst.size(), 1);
  b_.reset();  // closes
  EXPECT_EQ(pending->Wait(kWait).code(), absl::StatusCode::kUnavailable);
  EXPECT_THAT(std::string(pending->status().message()), HasSubstr("rank B"));
  EXPECT_THAT(std::string(pending->status().message()), HasSubstr("closed"));
  absl::StatusOr<std::unique_ptr<Request>> later = a_->Isend(eager.data(), eager.size(), 1);
  EXPECT_FALSE(later.ok() && (*later)->Wait(kWait).ok());
  EXPECT_EQ(fa_.count(), 0u);  // an orderly close is not a failure
}

// Finds this process's socket connected to 127.0.0.1:`port`.
int SocketTo(uint16_t port) {
  DIR* d = opendir("/proc/self/fd");
  int found = -1;
  while (dirent* e = readdir(d)) {
    int fd = atoi(e->d_name);
    struct stat st;
    if (fstat(fd, &st) != 0 || !S_ISSOCK(st.st_mode)) continue;
    sockaddr_in sa{};
    socklen_t len = sizeof(sa);
    if (getpeername(fd, reinterpret_cast<sockaddr*>(&sa), &len) == 0 && sa.sin_family == AF_INET &&
        ntohs(sa.sin_port) == port) {
      found = fd;
    }
  }
  closedir(d);
  return found;
}

TEST_F(FakeFabricTest, PeerDeathFailsEverythingAndReports) {
  std::vector<uint8_t> big(1 << 20), dst(100);
  auto pending_recv = *b_->Irecv(dst.data(), dst.size(), 1);
  auto send = *b_->Isend(big.data(), big.size(), 1);  // a pulls it; may or may not finish
  absl::StatusOr<VerbsAddress> addr = VerbsAddress::Decode(db_->address());
  ASSERT_TRUE(addr.ok());
  int fd = SocketTo(addr->tcp_port);  // a's bootstrap socket to b
  ASSERT_GE(fd, 0);
  ASSERT_EQ(shutdown(fd, SHUT_RDWR), 0);  // as if a's process died
  absl::Time start = absl::Now();
  EXPECT_EQ(pending_recv->Wait(kWait).code(), absl::StatusCode::kUnavailable);
  absl::Status st = send->Wait(kWait);
  EXPECT_TRUE(st.ok() || st.code() == absl::StatusCode::kUnavailable) << st;
  EXPECT_LT(absl::Now() - start, absl::Seconds(2));
  EXPECT_THAT(std::string(pending_recv->status().message()), HasSubstr("rank A"));
  EXPECT_EQ(b_->health().code(), absl::StatusCode::kUnavailable);
  EXPECT_EQ(b_->Irecv(dst.data(), dst.size(), 1).status().code(), absl::StatusCode::kUnavailable);
  for (int i = 0; i < 200 && fb_.count() == 0; ++i) absl::SleepFor(absl::Milliseconds(10));
  EXPECT_EQ(fb_.count(), 1u);
}

// Threads of this process whose name starts with `prefix`.
int ThreadsNamed(const std::string& prefix) {
  int n = 0;
  DIR* d = opendir("/proc/self/task");
  if (d == nullptr) return -1;
  while (dirent* e = readdir(d)) {
    if (e->d_name[0] == '.') continue;
    std::ifstream in(std::string("/proc/self/task/") + e->d_name + "/comm");
    std::string name;
    std::getline(in, name);
    n += name.rfind(prefix, 0) == 0;
  }
  closedir(d);
  return n;
}

// A device destroyed by its own failure callback, which runs on its poller
// thread, while a stream is in flight, 20 times over: the poller thread
// holds its poller until its loop ends (before the fix it detached and went
// on polling a freed poller and CQ: the sanitizer build caught it), and no
// poller thread is left behind afterwards.
TEST(FakeFabricTeardownTest, DeviceDestroyedFromItsPollerUnderTraffic) {
  fake_ibverbs_configure(1, 0);
  constexpr size_t kBytes = 256 << 10;
  for (int round = 0; round < 20; ++round) {
    struct Held {
      absl::Mutex mu;
      std::unique_ptr<Device> dev;
      std::unique_ptr<Connection> conn;
      bool done = false;
    } held;
    DeviceOptions o;
    o.bind_address = "127.0.0.1";
    o.on_failure = [&held](const absl::Status&) {
      std::unique_ptr<Device> dev;
      std::unique_ptr<Connection> conn;
      {
        absl::MutexLock lock(&held.mu);
        if (held.done) return;
        held.done = true;
        dev = std::move(held.dev);
        conn = std::move(held.conn);
      }
      conn.reset();  // both on this (b's poller) thread
      dev.reset();
    };
    std::unique_ptr<Device> a = MakeDevice();
    absl::StatusOr<std::unique_ptr<Device>> b = CreateVerbsDevice(o);
    ASSERT_TRUE(a != nullptr && b.ok()) << b.status();
    absl::StatusOr<VerbsAddress> addr = VerbsAddress::Decode((*b)->address());
    ASSERT_TRUE(addr.ok());
    auto [ca, cb] = Connect(a.get(), b->get());
    ASSERT_NE(ca, nullptr);
    std::vector<uint8_t> src = Pattern(kBytes, round);
    std::vector<std::vector<uint8_t>> dst(8, std::vector<uint8_t>(kBytes));
    std::vector<std::unique_ptr<Request>> reqs;
    for (auto& d : dst) {
      reqs.push_back(*cb->Irecv(d.data(), d.size(), 1));
      reqs.push_back(*ca->Isend(src.data(), src.size(), 1));
    }
    {
      absl::MutexLock lock(&held.mu);
      held.dev = std::move(*b);
      held.conn = std::move(cb);
    }
    const int fd = SocketTo(addr->tcp_port);  // a's bootstrap socket to b
    ASSERT_GE(fd, 0);
    ASSERT_EQ(shutdown(fd, SHUT_RDWR), 0);      // as if a's process died mid-stream
    for (auto& r : reqs) (void)r->Wait(kWait);  // done or failed, none left hanging
    absl::MutexLock lock(&held.mu);
    ASSERT_TRUE(held.mu.AwaitWithTimeout(absl::Condition(&held.done), kWait))
        << "round " << round << ": b's failure callback never ran";
  }
  // Each poller's loop ends within one sleep (100 ms) of its stop.
  int left = -1;
  for (int i = 0; i < 100 && left != 0; ++i) {
    left = ThreadsNamed("mx-verbs-fake");
    if (left != 0) absl::SleepFor(absl::Milliseconds(20));
  }
  EXPECT_EQ(left, 0) << "poller threads left behind";
}

TEST_F(FakeFabricTest, ConnectionOutlivesDevice) {
  da_.reset();
  std::vector<uint8_t> x(10);
  absl::StatusOr<std::unique_ptr<Request>> r = a_->Isend(x.data(), x.size(), 1);
  EXPECT_FALSE(r.ok() && (*r)->Wait(kWait).ok());
}

TEST(FakeFabricSetupTest, WrongConnectionIdTimesOut) {
  fake_ibverbs_configure(1, 0);
  auto a = MakeDevice();
  auto b = MakeDevice();
  ConnectOptions o;
  o.remote_address = a->address();
  o.connection_id = 424242;
  o.initiator = false;
  o.timeout = absl::Milliseconds(300);
  absl::StatusOr<std::unique_ptr<Connection>> c = b->Connect(o);
  EXPECT_EQ(c.status().code(), absl::StatusCode::kDeadlineExceeded);
  EXPECT_THAT(std::string(c.status().message()), HasSubstr("424242"));
  o.remote_address = "127.0.0.1:4711";
  o.initiator = true;
  EXPECT_EQ(b->Connect(o).status().code(), absl::StatusCode::kInvalidArgument);
}

TEST(FakeFabricSetupTest, RoceAndUnknownDevice) {
  fake_ibverbs_configure(2, 1);
  auto a = MakeDevice();
  auto b = MakeDevice();
  // Picked the RoCE v2 IPv4 GID (index 1), not link-local index 0.
  EXPECT_THAT(a->address(), HasSubstr("0000:0000:0000:0000:0000:ffff:7f00:0001"));
  auto [ca, cb] = Connect(a.get(), b.get());
  ASSERT_NE(ca, nullptr);
  std::vector<uint8_t> src = Pattern(100000, 5), dst(100000);
  auto r = *cb->Irecv(dst.data(), dst.size(), 1);
  auto s = *ca->Isend(src.data(), src.size(), 1);
  ASSERT_TRUE(r->Wait(kWait).ok());
  ASSERT_TRUE(s->Wait(kWait).ok());
  EXPECT_EQ(dst, src);
  DeviceOptions o;
  o.ib_device = "mlx5_7";
  absl::StatusOr<std::unique_ptr<Device>> d = CreateVerbsDevice(o);
  EXPECT_EQ(d.status().code(), absl::StatusCode::kUnavailable);
  EXPECT_THAT(std::string(d.status().message()), HasSubstr("available: fake0, fake1"));
  fake_ibverbs_configure(2, 0);
}

// Each NIC opens the adapter behind its interface (a sysfs tree of the
// test's): interface fakeif1 -> adapter fake1, whose RoCE v2 GID holds the
// NIC's address 127.0.0.2 (index 1); GID index 0 can be asked for; an
// interface without an adapter is an error naming it and the way out.
TEST(FakeFabricSetupTest, NicOpensItsOwnAdapterAndGid) {
  fake_ibverbs_configure(2, 1);
  verbs_test::SysfsTree t;
  ASSERT_FALSE(t.root().empty());
  t.Adapter("fakeif1", "fake1");
  t.GidNdev("fake1", 1, 1, "fakeif1");
  DeviceOptions o;
  o.ifname = "fakeif1";
  o.bind_address = "127.0.0.2";
  o.sysfs_root = t.root();
  absl::StatusOr<std::unique_ptr<Device>> d = CreateVerbsDevice(o);
  ASSERT_TRUE(d.ok()) << d.status();
  EXPECT_THAT((*d)->address(), HasSubstr("|fake1|1|"));
  EXPECT_THAT((*d)->address(), HasSubstr("0000:0000:0000:0000:0000:ffff:7f00:0002"));
  o.ib_gid_index = 0;  // the link-local entry, by request
  d = CreateVerbsDevice(o);
  ASSERT_TRUE(d.ok()) << d.status();
  EXPECT_THAT((*d)->address(), HasSubstr("fe80:0000:0000:0000:0000:0000:0000:0002"));
  o.ib_gid_index = -1;
  o.ifname = "nordma0";
  d = CreateVerbsDevice(o);
  EXPECT_EQ(d.status().code(), absl::StatusCode::kUnavailable);
  EXPECT_THAT(std::string(d.status().message()),
              HasSubstr("interface nordma0 has no RDMA adapter"));
  EXPECT_THAT(std::string(d.status().message()), HasSubstr("MIXNET_IB_DEVICE"));
  // MIXNET_IB_DEVICE still overrides the mapping.
  o.ib_device = "fake0";
  d = CreateVerbsDevice(o);
  ASSERT_TRUE(d.ok()) << d.status();
  EXPECT_THAT((*d)->address(), HasSubstr("|fake0|1|"));
  fake_ibverbs_configure(2, 0);
}

// MIXNET_IB_SL / MIXNET_IB_TC (DeviceOptions) reach the queue pairs'
// address vectors; a connection's own traffic class (NCCL's, through
// ConnectOptions) wins over the device's; values out of range are refused.
TEST(FakeFabricSetupTest, ServiceLevelAndTrafficClass) {
  fake_ibverbs_configure(2, 1);  // RoCE: every address vector has a GRH
  DeviceOptions o;
  o.bind_address = "127.0.0.1";
  o.ib_sl = 3;
  o.ib_tc = 106;
  auto a = CreateVerbsDevice(o);
  auto b = CreateVerbsDevice(o);
  ASSERT_TRUE(a.ok() && b.ok()) << a.status() << " " << b.status();
  const int before = fake_ibverbs_rtr_count();
  // a dials with NCCL's class 184; b answers with the device's (106).
  const uint64_t id = NextId();
  absl::StatusOr<std::unique_ptr<Connection>> cb;
  std::thread t([&] {
    ConnectOptions co;
    co.remote_address = (*a)->address();
    co.connection_id = id;
    co.timeout = absl::Seconds(10);
    cb = (*b)->Connect(co);
  });
  ConnectOptions co;
  co.remote_address = (*b)->address();
  co.connection_id = id;
  co.initiator = true;
  co.timeout = absl::Seconds(10);
  co.traffic_class = 184;
  absl::StatusOr<std::unique_ptr<Connection>> ca = (*a)->Connect(co);
  t.join();
  ASSERT_TRUE(ca.ok() && cb.ok()) << ca.status() << " " << cb.status();
  ASSERT_EQ(fake_ibverbs_rtr_count(), before + 2);
  std::multiset<int> classes;
  for (int i = before; i < before + 2; ++i) {
    int sl = -1, global = -1, tc = -1;
    fake_ibverbs_rtr(i, &sl, &global, &tc);
    EXPECT_EQ(sl, 3);
    EXPECT_EQ(global, 1);
    classes.insert(tc);
  }
  EXPECT_EQ(classes, (std::multiset<int>{106, 184}));
  // No stall detection on these devices: NCCL's 18 and 7 retries.
  const int rts = fake_ibverbs_rts_count();
  ASSERT_GE(rts, 2);
  int timeout = -1, retries = -1;
  fake_ibverbs_rts(rts - 1, &timeout, &retries);
  EXPECT_EQ(timeout, 18);
  EXPECT_EQ(retries, 7);
  o.ib_tc = 256;
  EXPECT_EQ(CreateVerbsDevice(o).status().code(), absl::StatusCode::kInvalidArgument);
  o.ib_tc = 0;
  o.ib_sl = 16;
  absl::StatusOr<std::unique_ptr<Device>> bad = CreateVerbsDevice(o);
  EXPECT_EQ(bad.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(bad.status().message()), HasSubstr("MIXNET_IB_SL"));
  o.ib_sl = 0;
  o.ib_port = -1;
  EXPECT_EQ(CreateVerbsDevice(o).status().code(), absl::StatusCode::kInvalidArgument);
  fake_ibverbs_configure(2, 0);
}

// Stall detection (MIXNET_PATH_STALL_MS, set on OCS NICs) shortens the RC
// ACK timeout so a dark circuit's retries end within it: 200 ms -> 2^12 x
// 4.096 us (16.8 ms) a try, 8 tries 134 ms (hand-worked in verbs_unit_test).
TEST(FakeFabricSetupTest, StallTimeShortensTheAckTimeout) {
  fake_ibverbs_configure(1, 0);
  DeviceOptions o;
  o.bind_address = "127.0.0.1";
  o.stall_timeout = absl::Milliseconds(200);
  auto a = CreateVerbsDevice(o);
  auto b = CreateVerbsDevice(o);
  ASSERT_TRUE(a.ok() && b.ok()) << a.status() << " " << b.status();
  const int before = fake_ibverbs_rts_count();
  auto [ca, cb] = Connect(a->get(), b->get());
  ASSERT_NE(ca, nullptr);
  ASSERT_EQ(fake_ibverbs_rts_count(), before + 2);
  for (int i = before; i < before + 2; ++i) {
    int timeout = -1, retries = -1;
    fake_ibverbs_rts(i, &timeout, &retries);
    EXPECT_EQ(timeout, 12);
    EXPECT_EQ(retries, 7);
  }
}

// A circuit goes dark under an idle connection. With stall detection (200 ms:
// ACK timeout exponent 12, 8 tries of 16.8 ms = 134 ms) each end's keepalive
// (every 50 ms) runs out of RC retries, so both ends report the loss within
// 50 + 50 + 134 ms plus polling, although nothing was posted. Without stall
// detection an idle connection sends nothing, so nothing fails.
TEST(FakeFabricStallTest, AnIdleConnectionOnADarkCircuitFails) {
  fake_ibverbs_configure(2, 0);
  for (bool detect : {true, false}) {
    SCOPED_TRACE(detect ? "stall detection 200 ms" : "no stall detection");
    Failures fa, fb;
    auto make = [&](Failures* f) -> std::unique_ptr<Device> {
      DeviceOptions o;
      o.bind_address = "127.0.0.1";
      o.on_failure = f->Callback();
      if (detect) o.stall_timeout = absl::Milliseconds(200);
      absl::StatusOr<std::unique_ptr<Device>> d = CreateVerbsDevice(o);
      EXPECT_TRUE(d.ok()) << d.status();
      return d.ok() ? std::move(*d) : nullptr;
    };
    std::unique_ptr<Device> da = make(&fa), db = make(&fb);
    ASSERT_NE(da, nullptr);
    ASSERT_NE(db, nullptr);
    auto [a, b] = Connect(da.get(), db.get());
    ASSERT_NE(a, nullptr);
    {
      std::vector<uint8_t> src = Pattern(3000, 5), dst(3000);
      auto r = *b->Irecv(dst.data(), dst.size(), 1);
      auto s = *a->Isend(src.data(), src.size(), 1);
      ASSERT_TRUE(r->Wait(kWait).ok());
      ASSERT_TRUE(s->Wait(kWait).ok());
      ASSERT_EQ(dst, src);
    }
    absl::SleepFor(absl::Milliseconds(120));  // idle: a keepalive or two went through
    EXPECT_EQ(fa.count() + fb.count(), 0u);
    fake_ibverbs_set_dark(1);
    const absl::Time dark = absl::Now();
    const absl::Time give_up = dark + absl::Seconds(detect ? 5 : 1);
    while ((fa.count() == 0 || fb.count() == 0) && absl::Now() < give_up) {
      absl::SleepFor(absl::Milliseconds(5));
    }
    const absl::Duration took = absl::Now() - dark;
    if (detect) {
      ASSERT_EQ(fa.count(), 1u);
      ASSERT_EQ(fb.count(), 1u);
      EXPECT_LT(took, absl::Seconds(1)) << "the stall time is 200 ms";
      for (Failures* f : {&fa, &fb}) {
        absl::MutexLock lock(&f->mu);
        EXPECT_EQ(f->seen[0].code(), absl::StatusCode::kUnavailable) << f->seen[0];
        EXPECT_THAT(std::string(f->seen[0].message()), HasSubstr("retry counter exceeded"));
      }
      EXPECT_FALSE(a->health().ok());
      EXPECT_FALSE(b->health().ok());
    } else {
      EXPECT_EQ(fa.count() + fb.count(), 0u) << "an idle connection sent something";
      EXPECT_TRUE(a->health().ok());
    }
    fake_ibverbs_set_dark(0);
    a.reset();
    b.reset();
    da.reset();
    db.reset();
  }
}

// All-to-all among 4 devices, each rank a thread, every pair connected.
TEST(FakeFabricAllToAllTest, FourRanks) {
  fake_ibverbs_configure(2, 0);
  constexpr int kRanks = 4;
  std::vector<std::unique_ptr<Device>> dev;
  for (int i = 0; i < kRanks; ++i) dev.push_back(MakeDevice());
  std::vector<std::vector<std::unique_ptr<Connection>>> conn(kRanks);
  for (auto& c : conn) c.resize(kRanks);
  for (int i = 0; i < kRanks; ++i) {
    for (int j = i + 1; j < kRanks; ++j) {
      std::tie(conn[i][j], conn[j][i]) = Connect(dev[i].get(), dev[j].get());
      ASSERT_NE(conn[i][j], nullptr);
    }
  }
  std::atomic<int> bad{0};
  auto rank = [&](int me) {
    for (size_t bytes : {size_t{0}, size_t{1}, size_t{5000}, size_t{100003}, size_t{2} << 20}) {
      std::vector<std::vector<uint8_t>> src(kRanks), dst(kRanks);
      std::vector<std::unique_ptr<Request>> reqs;
      for (int p = 0; p < kRanks; ++p) {
        if (p == me) continue;
        dst[p].assign(bytes + 1, 0);
        reqs.push_back(*conn[me][p]->Irecv(dst[p].data(), bytes, 11));
      }
      for (int p = 0; p < kRanks; ++p) {
        if (p == me) continue;
        src[p] = Pattern(bytes, me * 100 + p);
        reqs.push_back(*conn[me][p]->Isend(src[p].data(), bytes, 11));
      }
      for (auto& r : reqs) {
        if (!r->Wait(kWait).ok()) ++bad;
      }
      for (int p = 0; p < kRanks; ++p) {
        if (p == me) continue;
        std::vector<uint8_t> want = Pattern(bytes, p * 100 + me);
        if (!Same(dst[p].data(), want.data(), bytes)) ++bad;
      }
    }
  };
  std::vector<std::thread> threads;
  for (int i = 0; i < kRanks; ++i) threads.emplace_back(rank, i);
  for (auto& t : threads) t.join();
  EXPECT_EQ(bad.load(), 0);
  conn.clear();
  dev.clear();
  EXPECT_EQ(fake_ibverbs_live_qps(), 0);
  EXPECT_EQ(fake_ibverbs_live_mrs(), 0);
}

}  // namespace
}  // namespace mixnet::transport::verbs
