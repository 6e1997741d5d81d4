// The whole verbs transport (devices, bootstrap, queue pairs, poller, eager
// and rendezvous protocol, credits, failures) against fake_ibverbs.cc, an
// in-process simulation of libibverbs. Catches protocol bugs on machines
// without RDMA hardware; the real-hardware run is the transport test suite.
#include <arpa/inet.h>
#include <dirent.h>
#include <gmock/gmock.h>
#include <gtest/gtest.h>
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
#include "tests/transport/verbs/fake_fabric_util.h"
#include "tests/transport/verbs/fake_ibverbs.h"
#include "tests/transport/verbs/sysfs_tree.h"

namespace mixnet::transport::verbs {
namespace {

using ::testing::HasSubstr;

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
