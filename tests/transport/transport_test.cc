// Transport conformance tests, parameterised over transport x sockets per
// connection. The same tests run against verbs where an RDMA device exists and
// skip with the reason where it does not.
#include "runtime/transport/transport.h"

#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <numeric>
#include <thread>
#include <vector>

#include "gtest/gtest.h"
#include "runtime/common/cpu_affinity.h"
#include "runtime/transport/completion_group.h"
#include "runtime/transport/tcp/socket_util.h"
#include "runtime/transport/tcp/tcp_connection.h"

namespace mixnet::transport {
namespace {

struct Param {
  std::string transport;
  int sockets;
  bool local_pull = true;  // local transport: pull from the sender, or stream
};

std::string ParamName(const testing::TestParamInfo<Param>& info) {
  return info.param.transport + "_" + std::to_string(info.param.sockets) + "sock" +
         (info.param.local_pull ? "" : "_stream");
}

std::vector<uint8_t> Pattern(size_t n, uint32_t seed) {
  std::vector<uint8_t> v(n);
  uint32_t x = seed * 2654435761u + 1;
  for (size_t i = 0; i < n; ++i) {
    x ^= x << 13;
    x ^= x >> 17;
    x ^= x << 5;
    v[i] = static_cast<uint8_t>(x);
  }
  return v;
}

class TransportTest : public testing::TestWithParam<Param> {
 protected:
  DeviceOptions Options() {
    DeviceOptions o;
    o.ifname = "lo";
    o.sockets_per_connection = GetParam().sockets;
    o.chunk_bytes = 256 << 10;
    o.local_pull = GetParam().local_pull;
    return o;
  }
  std::unique_ptr<Device> MakeDevice() {
    absl::StatusOr<std::unique_ptr<Device>> d = CreateDevice(GetParam().transport, Options());
    if (!d.ok()) {
      skip_reason_ = std::string(d.status().message());
      return nullptr;
    }
    return *std::move(d);
  }
  void SetUp() override {
    a_ = MakeDevice();
    if (a_ == nullptr) GTEST_SKIP() << GetParam().transport << " unavailable: " << skip_reason_;
    b_ = MakeDevice();
    ASSERT_NE(b_, nullptr) << skip_reason_;
    ConnectPair(a_.get(), b_.get(), 1, &ca_, &cb_);
  }
  void TearDown() override {
    ca_.reset();
    cb_.reset();
  }
  static void ConnectPair(Device* a, Device* b, uint64_t id, std::unique_ptr<Connection>* ca,
                          std::unique_ptr<Connection>* cb) {
    absl::StatusOr<std::unique_ptr<Connection>> rb;
    std::thread t([&] {
      ConnectOptions o{a->address(), id, false, "endpoint a", absl::Seconds(10)};
      rb = b->Connect(o);
    });
    ConnectOptions o{b->address(), id, true, "endpoint b", absl::Seconds(10)};
    absl::StatusOr<std::unique_ptr<Connection>> ra = a->Connect(o);
    t.join();
    ASSERT_TRUE(ra.ok()) << ra.status();
    ASSERT_TRUE(rb.ok()) << rb.status();
    *ca = *std::move(ra);
    *cb = *std::move(rb);
  }
  void Transfer(size_t bytes, uint64_t tag) {
    std::vector<uint8_t> src = Pattern(bytes, static_cast<uint32_t>(bytes + tag));
    std::vector<uint8_t> dst(bytes + 7, 0xEE);
    auto r = cb_->Irecv(dst.data(), bytes, tag);
    ASSERT_TRUE(r.ok()) << r.status();
    auto s = ca_->Isend(src.data(), bytes, tag);
    ASSERT_TRUE(s.ok()) << s.status();
    ASSERT_TRUE((*s)->Wait(absl::Seconds(60)).ok());
    ASSERT_TRUE((*r)->Wait(absl::Seconds(60)).ok()) << (*r)->status();
    EXPECT_EQ((*r)->bytes(), bytes);
    EXPECT_EQ((*s)->bytes(), bytes);
    EXPECT_TRUE(std::equal(src.begin(), src.end(), dst.begin())) << "payload corrupted";
    for (size_t i = bytes; i < dst.size(); ++i) ASSERT_EQ(dst[i], 0xEE) << "wrote past the end";
  }

  std::string skip_reason_;
  std::unique_ptr<Device> a_, b_;
  std::unique_ptr<Connection> ca_, cb_;
};

TEST_P(TransportTest, SizesArriveIntact) {
  for (size_t bytes : {size_t{0}, size_t{1}, size_t{4097}, size_t{(256 << 10) + 1}, size_t{3 << 20},
                       size_t{64 << 20}}) {
    SCOPED_TRACE(bytes);
    Transfer(bytes, bytes);
  }
}

TEST_P(TransportTest, BothDirectionsAtOnce) {
  constexpr size_t kBytes = 5 << 20;
  std::vector<uint8_t> x = Pattern(kBytes, 1), y = Pattern(kBytes, 2);
  std::vector<uint8_t> rx(kBytes), ry(kBytes);
  auto r1 = cb_->Irecv(rx.data(), kBytes, 9);
  auto r2 = ca_->Irecv(ry.data(), kBytes, 9);
  auto s1 = ca_->Isend(x.data(), kBytes, 9);
  auto s2 = cb_->Isend(y.data(), kBytes, 9);
  for (auto* r : {&r1, &r2, &s1, &s2}) {
    ASSERT_TRUE(r->ok());
    ASSERT_TRUE((**r)->Wait(absl::Seconds(30)).ok());
  }
  EXPECT_EQ(rx, x);
  EXPECT_EQ(ry, y);
}

TEST_P(TransportTest, FifoPerTagAndTagsIndependent) {
  constexpr int kMsgs = 40;
  std::vector<std::vector<uint8_t>> src, dst;
  for (int i = 0; i < kMsgs; ++i) {
    src.push_back(Pattern(1000 + i * 997, i));
    dst.emplace_back(src.back().size());
  }
  // Sends alternate between tags 1 and 2; receives for tag 2 are posted first.
  std::vector<std::unique_ptr<Request>> reqs;
  for (int pass : {2, 1}) {
    for (int i = 0; i < kMsgs; ++i) {
      if (i % 2 + 1 != pass) continue;
      auto r = cb_->Irecv(dst[i].data(), dst[i].size(), pass);
      ASSERT_TRUE(r.ok());
      reqs.push_back(*std::move(r));
    }
  }
  for (int i = 0; i < kMsgs; ++i) {
    auto s = ca_->Isend(src[i].data(), src[i].size(), i % 2 + 1);
    ASSERT_TRUE(s.ok());
    reqs.push_back(*std::move(s));
  }
  for (auto& r : reqs) ASSERT_TRUE(r->Wait(absl::Seconds(30)).ok()) << r->status();
  for (int i = 0; i < kMsgs; ++i) EXPECT_EQ(src[i], dst[i]) << "message " << i;
}

// Small messages sent while large ones stream (TCP: their frames pass the
// queued chunks) still match receives of their tag in send order, and a
// receive posted after everything was queued (its CTS passes the chunks
// queued the other way) completes too.
TEST_P(TransportTest, SmallMessagesBetweenLargeOnesMatchInOrder) {
  std::vector<size_t> sizes;
  // The first message is large enough to still be streaming (its chunks
  // queued on every socket) when the others are sent.
  sizes.push_back(64 << 20);
  for (int i = 1; i < 24; ++i) sizes.push_back(i % 4 == 0 ? (3 << 20) + i : 100 + 37 * i);
  std::vector<std::vector<uint8_t>> src, dst;
  for (size_t i = 0; i < sizes.size(); ++i) {
    src.push_back(Pattern(sizes[i], 40 + i));
    dst.emplace_back(sizes[i]);
  }
  std::vector<std::unique_ptr<Request>> reqs;
  for (size_t i = 0; i < sizes.size(); ++i) {
    auto r = cb_->Irecv(dst[i].data(), dst[i].size(), 5);
    ASSERT_TRUE(r.ok());
    reqs.push_back(*std::move(r));
  }
  // A large message the other way, its receive posted last.
  std::vector<uint8_t> back = Pattern(5 << 20, 99), back_dst(5 << 20);
  auto sb = cb_->Isend(back.data(), back.size(), 6);
  ASSERT_TRUE(sb.ok());
  for (size_t i = 0; i < sizes.size(); ++i) {
    auto s = ca_->Isend(src[i].data(), src[i].size(), 5);
    ASSERT_TRUE(s.ok());
    reqs.push_back(*std::move(s));
    if (i == 0) absl::SleepFor(absl::Milliseconds(5));  // its CTS comes back, chunks queue
  }
  auto rb = ca_->Irecv(back_dst.data(), back_dst.size(), 6);
  ASSERT_TRUE(rb.ok());
  for (auto& r : reqs) ASSERT_TRUE(r->Wait(absl::Seconds(30)).ok()) << r->status();
  ASSERT_TRUE((*sb)->Wait(absl::Seconds(30)).ok());
  ASSERT_TRUE((*rb)->Wait(absl::Seconds(30)).ok());
  for (size_t i = 0; i < sizes.size(); ++i) EXPECT_EQ(src[i], dst[i]) << "message " << i;
  EXPECT_EQ(back, back_dst);
}

TEST_P(TransportTest, UnexpectedMessagesAreHeld) {
  // Small messages complete at the sender at once and wait at the receiver;
  // large ones may wait for the receive (rendezvous). Either way nothing is
  // lost and each lands in the receive posted later.
  std::vector<uint8_t> big = Pattern(2 << 20, 3), small = Pattern(10, 4);
  auto s1 = ca_->Isend(big.data(), big.size(), 5);
  auto s2 = ca_->Isend(small.data(), small.size(), 6);
  ASSERT_TRUE(s1.ok() && s2.ok());
  ASSERT_TRUE((*s2)->Wait(absl::Seconds(30)).ok());
  absl::SleepFor(absl::Milliseconds(50));
  std::vector<uint8_t> rsmall(64), rbig(big.size());
  auto r2 = cb_->Irecv(rsmall.data(), rsmall.size(), 6);
  auto r1 = cb_->Irecv(rbig.data(), rbig.size(), 5);
  ASSERT_TRUE((*r1)->Wait(absl::Seconds(30)).ok());
  ASSERT_TRUE((*r2)->Wait(absl::Seconds(30)).ok());
  ASSERT_TRUE((*s1)->Wait(absl::Seconds(30)).ok());
  EXPECT_EQ(rbig, big);
  EXPECT_EQ((*r2)->bytes(), small.size());
  EXPECT_TRUE(std::equal(small.begin(), small.end(), rsmall.begin()));
}

TEST_P(TransportTest, LargeSendIntoSmallReceiveFailsBothEnds) {
  std::vector<uint8_t> src = Pattern(1 << 20, 8), dst(1000, 0xAB);
  auto r = cb_->Irecv(dst.data(), dst.size(), 4);
  auto s = ca_->Isend(src.data(), src.size(), 4);
  EXPECT_EQ((*r)->Wait(absl::Seconds(10)).code(), absl::StatusCode::kInvalidArgument);
  absl::Status st = (*s)->Wait(absl::Seconds(10));
  if (GetParam().transport == "tcp") {
    EXPECT_EQ(st.code(), absl::StatusCode::kInvalidArgument) << st;
  }
  for (uint8_t b : dst) ASSERT_EQ(b, 0xAB);
  Transfer(3 << 20, 4);  // the stream continues
}

TEST_P(TransportTest, ReceiveLargerThanSendReportsSize) {
  std::vector<uint8_t> src = Pattern(123, 5), dst(4096);
  auto r = cb_->Irecv(dst.data(), dst.size(), 1);
  auto s = ca_->Isend(src.data(), src.size(), 1);
  ASSERT_TRUE((*r)->Wait(absl::Seconds(10)).ok());
  EXPECT_EQ((*r)->bytes(), 123u);
}

TEST_P(TransportTest, SendLargerThanReceiveIsInvalidArgumentAndStreamContinues) {
  std::vector<uint8_t> src = Pattern(5000, 6), dst(100, 0xAB);
  auto r = cb_->Irecv(dst.data(), dst.size(), 1);
  auto s = ca_->Isend(src.data(), src.size(), 1);
  absl::Status st = (*r)->Wait(absl::Seconds(10));
  EXPECT_EQ(st.code(), absl::StatusCode::kInvalidArgument) << st;
  EXPECT_NE(st.message().find("exceeds"), std::string::npos);
  for (uint8_t b : dst) ASSERT_EQ(b, 0xAB) << "wrote into a too-small buffer";
  Transfer(777, 1);  // the connection still works afterwards
}

TEST_P(TransportTest, NullBufferWithBytesIsInvalidArgument) {
  EXPECT_EQ(ca_->Isend(nullptr, 10, 1).status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(cb_->Irecv(nullptr, 10, 1).status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_TRUE(ca_->Isend(nullptr, 0, 1).ok());
  EXPECT_TRUE(cb_->Irecv(nullptr, 0, 1).ok());
}

TEST_P(TransportTest, WaitTimesOutWithDeadlineExceeded) {
  std::vector<uint8_t> dst(10);
  auto r = cb_->Irecv(dst.data(), dst.size(), 42);
  absl::Time t0 = absl::Now();
  EXPECT_EQ((*r)->Wait(absl::Milliseconds(100)).code(), absl::StatusCode::kDeadlineExceeded);
  EXPECT_LT(absl::Now() - t0, absl::Seconds(2));
  EXPECT_FALSE((*r)->Done());
}

TEST_P(TransportTest, OrderlyCloseFailsPendingReceiveWithUnavailable) {
  std::vector<uint8_t> dst(10);
  auto r = cb_->Irecv(dst.data(), dst.size(), 1);
  ca_.reset();
  absl::Status st = (*r)->Wait(absl::Seconds(10));
  EXPECT_EQ(st.code(), absl::StatusCode::kUnavailable) << st;
  EXPECT_NE(st.message().find("endpoint"), std::string::npos) << st;
}

// A connection destroyed while suspended (its path may be dark) resets
// rather than closing in order: nothing is left to retry into the dark. The
// peer sees a loss that is neither an orderly close nor an abort.
TEST_P(TransportTest, SuspendedConnectionClosesWithAReset) {
  if (GetParam().transport != "tcp") GTEST_SKIP() << "only TCP probes an idle path";
  ASSERT_TRUE(ca_->SetSuspended(true).ok());
  std::vector<uint8_t> dst(10);
  auto r = cb_->Irecv(dst.data(), dst.size(), 1);
  ASSERT_TRUE(r.ok()) << r.status();
  ca_.reset();
  absl::Status st = (*r)->Wait(absl::Seconds(10));
  EXPECT_EQ(st.code(), absl::StatusCode::kUnavailable) << st;
  EXPECT_FALSE(PeerClosedInOrder(st)) << st;
  EXPECT_FALSE(PeerWasAlive(st)) << st;
}

// Suspending and resuming leave a connection working (keepalive off and on).
TEST_P(TransportTest, ResumedConnectionCarriesMessages) {
  ASSERT_TRUE(ca_->SetSuspended(true).ok());
  ASSERT_TRUE(cb_->SetSuspended(true).ok());
  EXPECT_EQ(ca_->UnacknowledgedBytes(), 0u);
  ASSERT_TRUE(ca_->SetSuspended(false).ok());
  ASSERT_TRUE(cb_->SetSuspended(false).ok());
  std::vector<uint8_t> src = Pattern(1 << 20, 5), dst(1 << 20);
  auto r = cb_->Irecv(dst.data(), dst.size(), 3);
  auto s = ca_->Isend(src.data(), src.size(), 3);
  ASSERT_TRUE(r.ok() && s.ok());
  ASSERT_TRUE((*r)->Wait(absl::Seconds(10)).ok());
  ASSERT_TRUE((*s)->Wait(absl::Seconds(10)).ok());
  EXPECT_EQ(dst, src);
}

// A connection torn down while it still has sends in flight (its
// communicator aborted) tells the peer so: the peer's requests fail with
// Unavailable marked peer-alive, not as if this process had died.
TEST_P(TransportTest, AbortingPeerIsReportedAliveNotDead) {
  if (GetParam().transport == "verbs") GTEST_SKIP() << "verbs connections have no ABORT frame";
  std::vector<uint8_t> big = Pattern(4 << 20, 3), small(16);
  auto unmatched = ca_->Isend(big.data(), big.size(), 9);  // no receive: stays in flight
  ASSERT_TRUE(unmatched.ok()) << unmatched.status();
  auto pending = cb_->Irecv(small.data(), small.size(), 10);
  ASSERT_TRUE(pending.ok()) << pending.status();
  absl::SleepFor(absl::Milliseconds(50));  // the announcement reaches b
  ca_.reset();
  absl::Status st = (*pending)->Wait(absl::Seconds(10));
  EXPECT_EQ(st.code(), absl::StatusCode::kUnavailable) << st;
  EXPECT_TRUE(PeerWasAlive(st)) << st;
  EXPECT_NE(st.message().find("aborted"), std::string::npos) << st;
  EXPECT_NE(st.message().find("endpoint a"), std::string::npos) << st;
}

// Sending to a peer that has just aborted fails as that abort (peer alive),
// not as a broken pipe: what the peer said last is read before a failed
// write is reported.
TEST_P(TransportTest, SendAfterPeerAbortReportsTheAbort) {
  if (GetParam().transport == "verbs") GTEST_SKIP() << "verbs connections have no ABORT frame";
  std::vector<uint8_t> big = Pattern(4 << 20, 3), msg = Pattern(1000, 4);
  auto unmatched = ca_->Isend(big.data(), big.size(), 9);  // makes a's close an abort
  ASSERT_TRUE(unmatched.ok()) << unmatched.status();
  absl::SleepFor(absl::Milliseconds(50));
  ca_.reset();
  for (int i = 0; i < 20; ++i) {
    auto s = cb_->Isend(msg.data(), msg.size(), 11);
    absl::Status st = s.ok() ? (*s)->Wait(absl::Seconds(10)) : s.status();
    if (!st.ok()) {
      EXPECT_EQ(st.code(), absl::StatusCode::kUnavailable) << st;
      EXPECT_TRUE(PeerWasAlive(st)) << st;
      break;
    }
    absl::SleepFor(absl::Milliseconds(10));  // TCP: the write went out; the reset follows
  }
  absl::Status health = cb_->health();
  EXPECT_EQ(health.code(), absl::StatusCode::kUnavailable) << health;
  EXPECT_TRUE(PeerWasAlive(health)) << health;
  EXPECT_NE(health.message().find("aborted"), std::string::npos) << health;
}

TEST_P(TransportTest, ManyOutstandingRequests) {
  constexpr int kN = 64;
  std::vector<std::vector<uint8_t>> src, dst;
  std::vector<std::unique_ptr<Request>> reqs;
  for (int i = 0; i < kN; ++i) {
    src.push_back(Pattern(i * 4099 + 1, i + 100));
    dst.emplace_back(src.back().size());
  }
  for (int i = 0; i < kN; ++i) reqs.push_back(*cb_->Irecv(dst[i].data(), dst[i].size(), 3));
  for (int i = 0; i < kN; ++i) reqs.push_back(*ca_->Isend(src[i].data(), src[i].size(), 3));
  for (auto& r : reqs) ASSERT_TRUE(r->Wait(absl::Seconds(30)).ok());
  EXPECT_EQ(src, dst);
}

// Bursts of small messages: many frames arrive in one read, and frame
// headers and payloads straddle the boundaries of the receiver's reads. Half
// the receives are posted before the sends and half after (held as
// unexpected), with sizes around 32-byte headers and 4 KiB reads.
TEST_P(TransportTest, BurstsOfSmallMessagesArriveIntact) {
  const std::vector<size_t> sizes = {0,    1,    31,   32,   33,   4031, 4032,  4063,
                                     4064, 4095, 4096, 4097, 8191, 8193, 16384, 20000};
  constexpr int kN = 600;
  std::vector<std::vector<uint8_t>> src, dst;
  for (int i = 0; i < kN; ++i) {
    src.push_back(Pattern(sizes[(i * 7) % sizes.size()], i + 11));
    dst.emplace_back(src.back().size() + 3, 0xEE);
  }
  const uint64_t kTags = 5;
  std::vector<std::unique_ptr<Request>> reqs;
  for (int i = 0; i < kN / 2; ++i) {
    auto r = cb_->Irecv(dst[i].data(), src[i].size(), i % kTags);
    ASSERT_TRUE(r.ok()) << r.status();
    reqs.push_back(*std::move(r));
  }
  for (int i = 0; i < kN; ++i) {
    auto r = ca_->Isend(src[i].data(), src[i].size(), i % kTags);
    ASSERT_TRUE(r.ok()) << r.status();
    reqs.push_back(*std::move(r));
  }
  absl::SleepFor(absl::Milliseconds(20));  // let eager messages land unexpected
  for (int i = kN / 2; i < kN; ++i) {
    auto r = cb_->Irecv(dst[i].data(), src[i].size(), i % kTags);
    ASSERT_TRUE(r.ok()) << r.status();
    reqs.push_back(*std::move(r));
  }
  for (auto& r : reqs) ASSERT_TRUE(r->Wait(absl::Seconds(30)).ok()) << r->status();
  for (int i = 0; i < kN; ++i) {
    SCOPED_TRACE(i);
    ASSERT_TRUE(std::equal(src[i].begin(), src[i].end(), dst[i].begin())) << "payload corrupted";
    for (size_t j = src[i].size(); j < dst[i].size(); ++j) ASSERT_EQ(dst[i][j], 0xEE);
  }
}

// A CompletionGroup counts each request once, whether it completes after
// registering (on the progress thread) or had completed before; its waiter
// wakes when all are done, and at once when one fails hard.
TEST_P(TransportTest, CompletionGroupCountsEveryRequestOnce) {
  constexpr int kN = 16;
  std::vector<std::vector<uint8_t>> src, dst;
  for (int i = 0; i < kN; ++i) {
    src.push_back(Pattern(i * 70001 + 3, i + 7));  // eager and rendezvous sizes
    dst.emplace_back(src.back().size());
  }
  std::vector<std::unique_ptr<Request>> reqs;
  // The first message is complete before anything registers.
  reqs.push_back(*cb_->Irecv(dst[0].data(), dst[0].size(), 5));
  reqs.push_back(*ca_->Isend(src[0].data(), src[0].size(), 5));
  ASSERT_TRUE(reqs[0]->Wait(absl::Seconds(30)).ok());
  ASSERT_TRUE(reqs[1]->Wait(absl::Seconds(30)).ok());
  auto group = std::make_shared<CompletionGroup>();
  ASSERT_TRUE(reqs[0]->NotifyOnDone(group));
  ASSERT_TRUE(reqs[1]->NotifyOnDone(group));
  EXPECT_EQ(group->done(), 2u);
  for (int i = 1; i < kN; ++i) {
    reqs.push_back(*cb_->Irecv(dst[i].data(), dst[i].size(), 5));
    ASSERT_TRUE(reqs.back()->NotifyOnDone(group));
  }
  EXPECT_FALSE(group->Wait(reqs.size() + kN - 1, absl::Milliseconds(50)));
  for (int i = 1; i < kN; ++i) {
    reqs.push_back(*ca_->Isend(src[i].data(), src[i].size(), 5));
    ASSERT_TRUE(reqs.back()->NotifyOnDone(group));
  }
  ASSERT_TRUE(group->Wait(reqs.size(), absl::Seconds(30)));
  for (auto& r : reqs) EXPECT_TRUE(r->Done());
  EXPECT_EQ(group->done(), reqs.size());
  EXPECT_EQ(src, dst);

  // A receive that fails hard (the peer closed) wakes the waiter before the
  // others are done.
  std::unique_ptr<Connection> other_a, other_b;
  ConnectPair(a_.get(), b_.get(), 2, &other_a, &other_b);
  std::vector<uint8_t> a(10), b(10);
  auto hard = std::make_shared<CompletionGroup>();
  auto pending = *other_b->Irecv(a.data(), a.size(), 6);  // nothing will come
  auto failing = *ca_->Irecv(b.data(), b.size(), 6);
  ASSERT_TRUE(pending->NotifyOnDone(hard));
  ASSERT_TRUE(failing->NotifyOnDone(hard));
  cb_.reset();  // fails `failing` at the peer
  EXPECT_TRUE(hard->Wait(2, absl::Seconds(10)));
  EXPECT_TRUE(failing->Done());
  EXPECT_EQ(failing->status().code(), absl::StatusCode::kUnavailable) << failing->status();
  EXPECT_FALSE(pending->Done());
  EXPECT_EQ(hard->done(), 1u);
}

// A peer process that dies without closing: the survivor's pending receive
// fails with Unavailable naming the peer, well before its timeout.
TEST_P(TransportTest, PeerProcessDeathIsUnavailable) {
  std::unique_ptr<Device> server = MakeDevice();
  ASSERT_NE(server, nullptr);
  std::string addr = server->address();
  fflush(nullptr);
  pid_t pid = fork();
  ASSERT_GE(pid, 0);
  if (pid == 0) {
    // Child: connect, send one message, then die abruptly.
    auto dev = CreateDevice(GetParam().transport, Options());
    if (!dev.ok()) _exit(2);
    auto c = (*dev)->Connect({addr, 77, true, "parent", absl::Seconds(10)});
    if (!c.ok()) _exit(3);
    uint32_t v = 0xC0FFEE;
    auto s = (*c)->Isend(&v, sizeof(v), 1);
    if (!s.ok() || !(*s)->Wait(absl::Seconds(10)).ok()) _exit(4);
    absl::SleepFor(absl::Milliseconds(200));
    kill(getpid(), SIGKILL);
  }
  auto c = server->Connect({"", 77, false, "rank 9 (child)", absl::Seconds(10)});
  ASSERT_TRUE(c.ok()) << c.status();
  uint32_t v = 0;
  auto r1 = (*c)->Irecv(&v, sizeof(v), 1);
  ASSERT_TRUE((*r1)->Wait(absl::Seconds(10)).ok());
  EXPECT_EQ(v, 0xC0FFEEu);
  std::vector<uint8_t> dst(100);
  auto r2 = (*c)->Irecv(dst.data(), dst.size(), 2);
  absl::Time t0 = absl::Now();
  absl::Status st = (*r2)->Wait(absl::Seconds(10));
  EXPECT_EQ(st.code(), absl::StatusCode::kUnavailable) << st;
  EXPECT_NE(st.message().find("rank 9"), std::string::npos) << st;
  EXPECT_LT(absl::Now() - t0, absl::Seconds(5));
  int wstatus = 0;
  waitpid(pid, &wstatus, 0);
  EXPECT_TRUE(WIFSIGNALED(wstatus));
  EXPECT_FALSE((*c)->health().ok());
  auto r3 = (*c)->Irecv(dst.data(), dst.size(), 2);
  EXPECT_EQ(r3.status().code(), absl::StatusCode::kUnavailable);
}

TEST_P(TransportTest, ConnectTimesOutWhenPeerNeverDials) {
  absl::Time t0 = absl::Now();
  auto c = a_->Connect({"", 999, false, "ghost", absl::Milliseconds(200)});
  EXPECT_EQ(c.status().code(), absl::StatusCode::kDeadlineExceeded);
  EXPECT_LT(absl::Now() - t0, absl::Seconds(3));
}

INSTANTIATE_TEST_SUITE_P(Transports, TransportTest,
                         testing::Values(Param{"tcp", 1}, Param{"tcp", 2}, Param{"tcp", 4},
                                         Param{"local", 1}, Param{"local", 1, false},
                                         Param{"verbs", 1}),
                         ParamName);

TEST(TransportFactory, UnknownKindIsInvalidArgument) {
  EXPECT_EQ(CreateDevice("carrier-pigeon", {}).status().code(), absl::StatusCode::kInvalidArgument);
}

TEST(TransportFactory, UnknownInterfaceNamesIt) {
  DeviceOptions o;
  o.ifname = "nosuchif0";
  auto d = CreateDevice("tcp", o);
  ASSERT_FALSE(d.ok());
  EXPECT_NE(d.status().message().find("nosuchif0"), std::string::npos);
}

// The intra-host transport copies large messages once, straight out of the
// sender's memory (counted per connection), and streams them over the socket
// when pulls are off; small ones always go inline. Both deliver every byte.
TEST(LocalTransport, PullsLargeMessagesAndStreamsWhenPullsAreOff) {
  for (auto [pull, eager] : std::vector<std::pair<bool, size_t>>{
           {true, 64 << 10}, {false, 64 << 10}, {true, DeviceOptions{}.local_eager_bytes}}) {
    SCOPED_TRACE(absl::StrCat(pull ? "pull" : "stream", ", eager up to ", eager));
    DeviceOptions o;
    o.local_pull = pull;
    o.local_eager_bytes = eager;
    o.eager_bytes = 1;  // the TCP threshold: not the local transport's
    auto a = CreateDevice("local", o);
    auto b = CreateDevice("local", o);
    ASSERT_TRUE(a.ok() && b.ok()) << a.status() << b.status();
    EXPECT_EQ((*a)->kind(), "local");
    absl::StatusOr<std::unique_ptr<Connection>> rb;
    std::thread t([&] { rb = (*b)->Connect({"", 5, false, "a", absl::Seconds(10)}); });
    auto ra = (*a)->Connect({(*b)->address(), 5, true, "b", absl::Seconds(10)});
    t.join();
    ASSERT_TRUE(ra.ok() && rb.ok()) << ra.status() << rb.status();
    const std::vector<size_t> sizes = {0,        1000,           16 << 10, (16 << 10) + 1,
                                       64 << 10, (64 << 10) + 1, 3 << 20};
    size_t large = 0;
    for (size_t n : sizes) large += n > eager ? 1 : 0;
    for (size_t i = 0; i < sizes.size(); ++i) {
      std::vector<uint8_t> src = Pattern(sizes[i], static_cast<uint32_t>(i + 1));
      std::vector<uint8_t> dst(sizes[i] + 8, 0xAB);
      auto s = (*ra)->Isend(src.data(), src.size(), 7);
      auto r = (*rb)->Irecv(dst.data(), dst.size(), 7);
      ASSERT_TRUE(s.ok() && r.ok());
      ASSERT_TRUE((*r)->Wait(absl::Seconds(10)).ok());
      ASSERT_TRUE((*s)->Wait(absl::Seconds(10)).ok());
      EXPECT_EQ((*r)->bytes(), sizes[i]);
      EXPECT_TRUE(std::equal(src.begin(), src.end(), dst.begin())) << sizes[i] << " bytes";
      EXPECT_EQ(dst[sizes[i]], 0xAB) << "wrote past the message";
    }
    auto* conn = dynamic_cast<tcp::TcpConnection*>(rb->get());
    ASSERT_NE(conn, nullptr);
    EXPECT_EQ(conn->pulled_messages(), pull ? large : 0u);
  }
}

// What tells a peer that aborted (alive) from one that died: a zombie or a
// vanished pid is dead, a running one alive.
TEST(LocalTransport, ProcessAliveTellsRunningFromDead) {
  EXPECT_TRUE(tcp::ProcessAlive(getpid()));
  EXPECT_FALSE(tcp::ProcessAlive(0));
  fflush(nullptr);
  pid_t child = fork();
  ASSERT_GE(child, 0);
  if (child == 0) {
    pause();
    _exit(0);
  }
  EXPECT_TRUE(tcp::ProcessAlive(child));
  kill(child, SIGKILL);
  // Until reaped the child is a zombie: dead all the same.
  const absl::Time deadline = absl::Now() + absl::Seconds(5);
  while (tcp::ProcessAlive(child) && absl::Now() < deadline) absl::SleepFor(absl::Milliseconds(1));
  EXPECT_FALSE(tcp::ProcessAlive(child));
  int wstatus = 0;
  waitpid(child, &wstatus, 0);
  EXPECT_FALSE(tcp::ProcessAlive(child));
}

TEST(LocalTransport, RejectsANetworkAddress) {
  auto a = CreateDevice("local", {});
  ASSERT_TRUE(a.ok()) << a.status();
  auto c = (*a)->Connect({"127.0.0.1:1", 1, true, "rank 1", absl::Seconds(1)});
  ASSERT_FALSE(c.ok());
  EXPECT_EQ(c.status().code(), absl::StatusCode::kInvalidArgument) << c.status();
  EXPECT_NE(c.status().message().find("rank 1"), std::string::npos) << c.status();
}

// CPU time (ns) of this process's threads named `name`, from schedstat.
int64_t ThreadsCpuNs(const std::string& name) {
  int64_t total = 0;
  for (const auto& task : std::filesystem::directory_iterator("/proc/self/task")) {
    std::ifstream comm(task.path() / "comm");
    std::string n;
    std::getline(comm, n);
    if (n != name) continue;
    std::ifstream stat(task.path() / "schedstat");
    int64_t ns = 0;
    if (stat >> ns) total += ns;
  }
  return total;
}

// After traffic the progress thread polls for DeviceOptions::progress_spin,
// then sleeps in epoll_wait: it must not keep burning a CPU while idle.
TEST(ProgressSpin, PollsAfterTrafficThenSleeps) {
  for (absl::Duration spin : {absl::Milliseconds(200), absl::ZeroDuration()}) {
    DeviceOptions o;
    o.progress_spin = spin;
    auto a = CreateDevice("local", o);
    auto b = CreateDevice("local", o);
    ASSERT_TRUE(a.ok() && b.ok());
    absl::StatusOr<std::unique_ptr<Connection>> cb;
    std::thread t([&] { cb = (*b)->Connect({(*a)->address(), 5, false, "a", absl::Seconds(10)}); });
    auto ca = (*a)->Connect({(*b)->address(), 5, true, "b", absl::Seconds(10)});
    t.join();
    ASSERT_TRUE(ca.ok() && cb.ok());
    uint64_t x = 42, y = 0;
    auto r = (*cb)->Irecv(&y, sizeof(y), 1);
    auto s = (*ca)->Isend(&x, sizeof(x), 1);
    ASSERT_TRUE((*r)->Wait(absl::Seconds(10)).ok());
    ASSERT_TRUE((*s)->Wait(absl::Seconds(10)).ok());
    const int64_t t0 = ThreadsCpuNs("mx-local");
    absl::SleepFor(absl::Milliseconds(50));
    const int64_t t1 = ThreadsCpuNs("mx-local");
    const uint64_t backoffs = static_cast<tcp::TcpDevice*>(a->get())->polling_backoffs() +
                              static_cast<tcp::TcpDevice*>(b->get())->polling_backoffs();
    if (spin > absl::ZeroDuration() && backoffs == 0) {
      // A sleeping thread uses next to nothing; a polling one far more.
      // (Unless a busy neighbour made it stop polling: see the next test.)
      EXPECT_GT(t1 - t0, 100'000) << "no polling right after traffic";
    }
    absl::SleepFor(spin + absl::Milliseconds(100));
    const int64_t t2 = ThreadsCpuNs("mx-local");
    absl::SleepFor(absl::Milliseconds(300));
    const int64_t t3 = ThreadsCpuNs("mx-local");
    EXPECT_LT(t3 - t2, 5'000'000) << "still polling " << absl::FormatDuration(spin)
                                  << " after the last event";
    EXPECT_EQ(y, 42u);
  }
}

// A polling progress thread that shares its CPU with a busy thread stops
// polling: it would only be counted as busy too, and its wake-ups would wait
// behind the other thread's time slices. It sleeps on events instead.
TEST(ProgressSpin, StopsPollingWhenItsCpuIsBusy) {
  absl::StatusOr<std::vector<int>> cpus = AllowedCpus();
  ASSERT_TRUE(cpus.ok() && !cpus->empty()) << cpus.status();
  const int cpu = cpus->front();
  DeviceOptions o;
  o.progress_spin = absl::Seconds(10);  // without the backoff: polls all along
  auto a = CreateDevice("local", o);
  auto b = CreateDevice("local", o);
  ASSERT_TRUE(a.ok() && b.ok());
  ASSERT_TRUE((*a)->PinProgressThread(cpu).ok());
  ASSERT_TRUE((*b)->PinProgressThread(cpu).ok());
  absl::StatusOr<std::unique_ptr<Connection>> cb;
  std::thread t([&] { cb = (*b)->Connect({(*a)->address(), 6, false, "a", absl::Seconds(10)}); });
  auto ca = (*a)->Connect({(*b)->address(), 6, true, "b", absl::Seconds(10)});
  t.join();
  ASSERT_TRUE(ca.ok() && cb.ok());

  std::atomic<bool> stop{false};
  std::thread hog([&] {
    while (!stop.load(std::memory_order_relaxed)) {
    }
  });
  ASSERT_TRUE(PinThread(hog, cpu, "hog").ok());
  uint64_t x = 7, y = 0;
  auto r = (*cb)->Irecv(&y, sizeof(y), 1);
  auto s = (*ca)->Isend(&x, sizeof(x), 1);  // starts the polling window
  ASSERT_TRUE((*r)->Wait(absl::Seconds(10)).ok());
  ASSERT_TRUE((*s)->Wait(absl::Seconds(10)).ok());
  absl::SleepFor(absl::Milliseconds(100));
  const int64_t t0 = ThreadsCpuNs("mx-local");
  // Messages keep coming, as in a run of collectives (each restarts the
  // polling window, were it not for the backoff).
  for (int i = 0; i < 50; ++i) {
    auto r2 = (*cb)->Irecv(&y, sizeof(y), 2);
    auto s2 = (*ca)->Isend(&x, sizeof(x), 2);
    ASSERT_TRUE((*r2)->Wait(absl::Seconds(10)).ok());
    ASSERT_TRUE((*s2)->Wait(absl::Seconds(10)).ok());
    absl::SleepFor(absl::Milliseconds(4));
  }
  const int64_t t1 = ThreadsCpuNs("mx-local");
  stop.store(true);
  hog.join();
  const uint64_t backoffs = static_cast<tcp::TcpDevice*>(a->get())->polling_backoffs() +
                            static_cast<tcp::TcpDevice*>(b->get())->polling_backoffs();
  EXPECT_GE(backoffs, 1u) << "kept polling on a CPU shared with a busy thread";
  // Sleeping on events, the two threads handle 51 messages in well under a
  // millisecond of CPU.
  EXPECT_LT(t1 - t0, 20'000'000);
  EXPECT_EQ(y, 7u);
}

}  // namespace
}  // namespace mixnet::transport
