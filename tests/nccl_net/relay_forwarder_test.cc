// The relay host's forwarder of the NCCL plugin (relay_forwarder.h): three
// devices in one process, A -> B -> C, parameterised over transports (verbs
// skips without an adapter). Expected bytes come from a pattern generator,
// the buffering bound from the piece sizes.
#include "plugins/nccl_net/relay_forwarder.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cstring>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "absl/synchronization/mutex.h"
#include "runtime/transport/transport.h"

namespace mixnet::nccl {
namespace {

using transport::Connection;
using transport::ConnectOptions;
using transport::Device;
using transport::DeviceOptions;

struct Param {
  std::string transport;
  int sockets;
};

std::string ParamName(const testing::TestParamInfo<Param>& info) {
  return info.param.transport + "_" + std::to_string(info.param.sockets) + "sock";
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

class RelayForwarderTest : public testing::TestWithParam<Param> {
 protected:
  std::unique_ptr<Device> MakeDevice(std::string* why) {
    DeviceOptions o;
    o.ifname = "lo";
    o.sockets_per_connection = GetParam().sockets;
    auto d = transport::CreateDevice(GetParam().transport, o);
    if (!d.ok()) {
      *why = std::string(d.status().message());
      return nullptr;
    }
    return *std::move(d);
  }
  void SetUp() override {
    std::string why;
    a_ = MakeDevice(&why);
    if (a_ == nullptr) GTEST_SKIP() << GetParam().transport << " unavailable: " << why;
    b_ = MakeDevice(&why);
    c_ = MakeDevice(&why);
    ASSERT_NE(b_, nullptr) << why;
    ASSERT_NE(c_, nullptr) << why;
    ConnectPair(a_.get(), b_.get(), 1, &a_up_, &b_in_);
    ConnectPair(b_.get(), c_.get(), 2, &b_out_, &c_in_);
  }
  static void ConnectPair(Device* x, Device* y, uint64_t id, std::unique_ptr<Connection>* cx,
                          std::unique_ptr<Connection>* cy) {
    absl::StatusOr<std::unique_ptr<Connection>> ry;
    std::thread t([&] {
      ConnectOptions o{x->address(), id, false, "the dialer", absl::Seconds(10)};
      ry = y->Connect(o);
    });
    ConnectOptions o{y->address(), id, true, "the listener", absl::Seconds(10)};
    absl::StatusOr<std::unique_ptr<Connection>> rx = x->Connect(o);
    t.join();
    ASSERT_TRUE(rx.ok()) << rx.status();
    ASSERT_TRUE(ry.ok()) << ry.status();
    *cx = *std::move(rx);
    *cy = *std::move(ry);
  }
  std::unique_ptr<RelayForwarder> Forwarder(RelayForwarderOptions o = {}) {
    o.name = "relay a -> c via b";
    return std::make_unique<RelayForwarder>(std::move(b_in_), std::move(b_out_), o);
  }
  // Advances `f` on this thread until `done` or 20 s.
  template <typename Pred>
  static bool Pump(RelayForwarder& f, Pred done) {
    const absl::Time deadline = absl::Now() + absl::Seconds(20);
    while (absl::Now() < deadline) {
      f.Advance();
      if (done()) return true;
      absl::SleepFor(absl::Microseconds(200));
    }
    return false;
  }

  std::unique_ptr<Device> a_, b_, c_;
  std::unique_ptr<Connection> a_up_, b_in_, b_out_, c_in_;
};

TEST_P(RelayForwarderTest, ForwardsEveryPieceUnderItsTagInOrder) {
  // Two tags interleaved, sizes around the transports' eager limits; C
  // receives all of tag 9 before any of tag 7, into buffers 5 bytes larger.
  const std::vector<size_t> sizes = {0, 1, 4095, (64 << 10) + 1, (1 << 20) + 3, 8 << 20};
  const std::vector<uint64_t> tags = {7, 9, 7, 9, 7, 9};
  std::vector<std::vector<uint8_t>> src;
  std::vector<std::unique_ptr<transport::Request>> sends;
  RelayService service;
  service.Add(Forwarder());
  for (size_t i = 0; i < sizes.size(); ++i) {
    src.push_back(Pattern(sizes[i], static_cast<uint32_t>(i + 1)));
    auto s = PostRelaySend(*a_up_, src[i].data(), sizes[i], tags[i]);
    ASSERT_TRUE(s.ok()) << s.status();
    sends.push_back(*std::move(s));
  }
  std::vector<std::vector<uint8_t>> dst(sizes.size());
  std::vector<std::unique_ptr<transport::Request>> recvs(sizes.size());
  for (uint64_t tag : {9, 7}) {
    for (size_t i = 0; i < sizes.size(); ++i) {
      if (tags[i] != tag) continue;
      dst[i].assign(sizes[i] + 5, 0xEE);
      auto r = c_in_->Irecv(dst[i].data(), dst[i].size(), tag);
      ASSERT_TRUE(r.ok()) << r.status();
      recvs[i] = *std::move(r);
    }
  }
  uint64_t total = 0;
  for (size_t i = 0; i < sizes.size(); ++i) {
    ASSERT_TRUE(recvs[i]->Wait(absl::Seconds(30)).ok()) << i << ": " << recvs[i]->status();
    EXPECT_EQ(recvs[i]->bytes(), sizes[i]) << i;
    EXPECT_TRUE(std::equal(src[i].begin(), src[i].end(), dst[i].begin())) << "piece " << i;
    for (size_t j = sizes[i]; j < dst[i].size(); ++j) ASSERT_EQ(dst[i][j], 0xEE) << i;
    total += sizes[i];
  }
  for (size_t i = 0; i < sends.size(); ++i) {
    EXPECT_TRUE(sends[i]->Wait(absl::Seconds(10)).ok()) << sends[i]->status();
    EXPECT_EQ(sends[i]->bytes(), sizes[i]);
  }
  const absl::Time deadline = absl::Now() + absl::Seconds(10);
  while (service.counts().pieces < sizes.size() && absl::Now() < deadline) {
    absl::SleepFor(absl::Milliseconds(1));
  }
  const RelayService::Counts counts = service.counts();
  EXPECT_EQ(counts.running, 1);
  EXPECT_EQ(counts.pieces, sizes.size());
  EXPECT_EQ(counts.bytes, total);
  EXPECT_EQ(counts.failed, 0u);
}

TEST_P(RelayForwarderTest, HoldsAtMostItsBufferAndHoldsTheSenderBack) {
  // 12 pieces of 512 KiB (over every transport's eager limit) against a
  // 1 MiB buffer: the relay holds two, and while C posts nothing A's sends
  // beyond those two cannot complete.
  constexpr size_t kPiece = 512 << 10;
  constexpr int kPieces = 12;
  RelayForwarderOptions o;
  o.max_buffered_bytes = 1 << 20;
  auto f = Forwarder(o);
  std::vector<std::vector<uint8_t>> src;
  std::vector<std::unique_ptr<transport::Request>> sends;
  for (int i = 0; i < kPieces; ++i) {
    src.push_back(Pattern(kPiece, 100 + i));
    sends.push_back(*PostRelaySend(*a_up_, src[i].data(), kPiece, 3));
  }
  const absl::Time until = absl::Now() + absl::Milliseconds(300);
  Pump(*f, [&] { return absl::Now() >= until; });
  EXPECT_EQ(f->stats().buffered_bytes, 2 * kPiece);
  int sent = 0;
  for (const auto& s : sends) sent += s->Done() ? 1 : 0;
  EXPECT_LE(sent, 2);
  std::vector<std::vector<uint8_t>> dst(kPieces, std::vector<uint8_t>(kPiece));
  std::vector<std::unique_ptr<transport::Request>> recvs;
  for (int i = 0; i < kPieces; ++i) recvs.push_back(*c_in_->Irecv(dst[i].data(), kPiece, 3));
  ASSERT_TRUE(Pump(*f, [&] { return f->stats().pieces == kPieces; }));
  for (int i = 0; i < kPieces; ++i) {
    ASSERT_TRUE(recvs[i]->Wait(absl::Seconds(10)).ok()) << recvs[i]->status();
    EXPECT_EQ(dst[i], src[i]) << "piece " << i;
  }
  EXPECT_EQ(f->stats().peak_buffered_bytes, 2 * kPiece);
  EXPECT_EQ(f->stats().bytes, kPieces * kPiece);
  EXPECT_EQ(f->state(), RelayForwarder::State::kForwarding);
}

TEST_P(RelayForwarderTest, AnUpstreamClosedInOrderDrainsThenClosesDownstreamInOrder) {
  // As a lane is dropped: C has every piece (the comm's DONE), then A closes.
  std::vector<std::vector<uint8_t>> src;
  std::vector<std::unique_ptr<transport::Request>> sends;
  for (int i = 0; i < 3; ++i) {
    src.push_back(Pattern(1000 * (i + 1), 7 + i));
    sends.push_back(*PostRelaySend(*a_up_, src[i].data(), src[i].size(), 5));
  }
  auto f = Forwarder();
  for (int i = 0; i < 3; ++i) {
    std::vector<uint8_t> dst(4000);
    auto r = *c_in_->Irecv(dst.data(), dst.size(), 5);
    ASSERT_TRUE(Pump(*f, [&] { return r->Done(); }));
    ASSERT_TRUE(r->status().ok()) << r->status();
    ASSERT_EQ(r->bytes(), src[i].size());
    dst.resize(r->bytes());
    EXPECT_EQ(dst, src[i]);
  }
  char extra[8];
  auto r = *c_in_->Irecv(extra, sizeof(extra), 5);
  a_up_.reset();
  ASSERT_TRUE(Pump(*f, [&] { return f->state() != RelayForwarder::State::kForwarding; }));
  EXPECT_EQ(f->state(), RelayForwarder::State::kDrained) << f->status();
  EXPECT_EQ(f->stats().pieces, 3u);
  const absl::Status closed = r->Wait(absl::Seconds(10));
  EXPECT_EQ(closed.code(), absl::StatusCode::kUnavailable) << closed;
  EXPECT_TRUE(transport::PeerClosedInOrder(closed)) << closed;
}

TEST_P(RelayForwarderTest, AnUpstreamThatEndsMidPieceFailsTheRelayAndClosesDownstream) {
  std::vector<std::pair<std::string, absl::Status>> failures;
  absl::Mutex mu;
  RelayService service([&](const RelayForwarder& ended) {
    absl::MutexLock lock(&mu);
    failures.emplace_back(ended.name(), ended.status());
  });
  service.Add(Forwarder());
  // C waits for a piece; A announces 8 MiB, sends none of it and closes.
  std::vector<uint8_t> dst(8 << 20);
  auto recv = *c_in_->Irecv(dst.data(), dst.size(), 11);
  RelayHeader h;
  h.tag = 11;
  h.bytes = 8 << 20;
  auto header = *a_up_->Isend(&h, sizeof(h), kRelayHeaderTag);
  ASSERT_TRUE(header->Wait(absl::Seconds(10)).ok());
  a_up_.reset();
  const absl::Status at_c = recv->Wait(absl::Seconds(20));
  EXPECT_EQ(at_c.code(), absl::StatusCode::kUnavailable) << at_c;
  const absl::Time deadline = absl::Now() + absl::Seconds(10);
  while (service.counts().failed == 0 && absl::Now() < deadline) {
    absl::SleepFor(absl::Milliseconds(1));
  }
  EXPECT_EQ(service.counts().failed, 1u);
  EXPECT_EQ(service.counts().drained, 0u);
  absl::MutexLock lock(&mu);
  ASSERT_EQ(failures.size(), 1u);
  EXPECT_EQ(failures[0].first, "relay a -> c via b");
  EXPECT_NE(failures[0].second.message().find("relay a -> c via b: receiving a piece from"),
            std::string::npos)
      << failures[0].second;
}

TEST_P(RelayForwarderTest, ADownstreamLossFailsTheRelayAndClosesUpstream) {
  RelayService service;
  service.Add(Forwarder());
  // A 1 MiB piece waits for C's receive (rendezvous), which never comes: C goes.
  std::vector<uint8_t> src = Pattern(1 << 20, 4);
  auto send = *PostRelaySend(*a_up_, src.data(), src.size(), 2);
  absl::SleepFor(absl::Milliseconds(50));
  c_in_.reset();
  const absl::Time deadline = absl::Now() + absl::Seconds(20);
  // A learns of it: the relay closed the upstream. Its send either reached
  // the relay (then the upstream's close shows on a later post) or failed.
  ASSERT_NE(send->Wait(absl::Seconds(20)).code(), absl::StatusCode::kDeadlineExceeded);
  while (service.counts().failed == 0 && absl::Now() < deadline) {
    absl::SleepFor(absl::Milliseconds(1));
  }
  EXPECT_EQ(service.counts().failed, 1u);
  uint8_t byte = 0;
  auto later = a_up_->Irecv(&byte, 1, 99);
  if (later.ok()) {
    EXPECT_EQ((*later)->Wait(absl::Seconds(10)).code(), absl::StatusCode::kUnavailable);
  }
}

TEST_P(RelayForwarderTest, AHeaderThatIsNotThePluginsFailsTheRelay) {
  auto f = Forwarder();
  const char junk[sizeof(RelayHeader)] = "not a relay header";
  auto s = *a_up_->Isend(junk, sizeof(junk), kRelayHeaderTag);
  ASSERT_TRUE(Pump(*f, [&] { return f->state() != RelayForwarder::State::kForwarding; }));
  EXPECT_EQ(f->state(), RelayForwarder::State::kFailed);
  EXPECT_EQ(f->status().code(), absl::StatusCode::kDataLoss) << f->status();
  EXPECT_NE(f->status().message().find("is not the plugin's"), std::string::npos) << f->status();
}

TEST_P(RelayForwarderTest, APieceOverTheLimitFailsTheRelayBeforeAnyBufferIsTaken) {
  RelayForwarderOptions o;
  o.max_piece_bytes = 1 << 20;
  auto f = Forwarder(o);
  RelayHeader h;
  h.tag = 1;
  h.bytes = (1 << 20) + 1;
  auto s = *a_up_->Isend(&h, sizeof(h), kRelayHeaderTag);
  ASSERT_TRUE(Pump(*f, [&] { return f->state() != RelayForwarder::State::kForwarding; }));
  EXPECT_EQ(f->status().code(), absl::StatusCode::kInvalidArgument) << f->status();
  EXPECT_NE(
      f->status().message().find("announces 1048577 bytes, over the relay's limit of 1048576"),
      std::string::npos)
      << f->status();
  EXPECT_EQ(f->stats().peak_buffered_bytes, 0u);
}

INSTANTIATE_TEST_SUITE_P(Transports, RelayForwarderTest,
                         testing::Values(Param{"tcp", 1}, Param{"tcp", 2}, Param{"local", 1},
                                         Param{"verbs", 1}),
                         ParamName);

}  // namespace
}  // namespace mixnet::nccl
