// TCP transport over an emulated link pair (label netns, needs root; skips
// with the reason otherwise): two hosts send each other 8 MiB at the same
// time, h1 posting 20 ms after h0 (each posts its receive, then its send, as
// an all-to-all does), at 0.025 Gbit/s per direction so that the links, not
// the two CPUs, bound the exchange. Links are full duplex, so both directions
// must move at once: by rendezvous (the default eager threshold) as well as
// eagerly,
//   - the exchange takes under 1.3x the floor (the busier NIC's bytes over
//     its rate; one direction after the other takes about 2x);
//   - when the first direction's receive completes, at least half of the
//     other direction's bytes have crossed its NIC (one direction after the
//     other: a few percent, its ACKs).
// 8 MiB (a floor of about 2.9 s) so that TCP's own two-way dynamics over
// the deep shaped queues (ACKs of one direction queued behind the other's
// data) average out.
// And the CTS's own wait, with 2 MiB by rendezvous: the second direction
// starts (5% of its bytes across) within a tenth of the floor of the first
// (0.07 s). Socket 0 carries no chunks, so the CTS the first sender owes
// waits only for the shaped queue (measured 5-10 ms); when chunks shared
// socket 0 it waited for the kernel's bytes there, about 0.38 s here.
// Over the EPS (through the bridge) and over an OCS circuit; TCP cubic, or
// reno where this machine does not let a namespace choose cubic. Main thread plus
// the helper threads of BidirFabric::Exchange.
#include <cmath>
#include <cstdio>
#include <string>

#include "bench/tcp_bidir/bidir_exchange.h"
#include "gtest/gtest.h"
#include "ocs_driver/netns/netns.h"
#include "tests/emulation/netns_test_util.h"

namespace mixnet::bench {
namespace {

struct Case {
  const char* link;
  bool eager;
};

class TcpBidirTest : public ::testing::TestWithParam<Case> {
 protected:
  void SetUp() override {
    MIXNET_SKIP_UNLESS_NETNS();
    prefix_ = testing::UniquePrefix("tcpbd");
    auto f = BidirFabric::Up(0.025, prefix_, AllowedCongestionControl());
    ASSERT_TRUE(f.ok()) << f.status();
    fabric_ = std::move(*f);
  }
  void TearDown() override {
    if (fabric_ == nullptr) return;
    absl::Status down = fabric_->Down();
    EXPECT_TRUE(down.ok()) << down;
    fabric_.reset();
    EXPECT_TRUE(
        netns::ListNamespaces(prefix_ + "-").value_or(std::vector<std::string>{"?"}).empty())
        << "namespaces of " << prefix_ << " left behind";
  }
  std::string prefix_;
  std::unique_ptr<BidirFabric> fabric_;
};

TEST_P(TcpBidirTest, BothDirectionsMoveAtOnce) {
  BidirOptions o;
  o.link = GetParam().link;
  o.bytes = 8 << 20;
  o.eager_bytes = GetParam().eager ? o.bytes : transport::DeviceOptions{}.eager_bytes;
  o.skew = absl::Milliseconds(20);
  absl::StatusOr<BidirResult> r = fabric_->Exchange(o);
  ASSERT_TRUE(r.ok()) << r.status();
  std::printf(
      "%s %s: %.3f s, floor %.3f s (%.2fx); to h1 from %.3f s done %.3f s, to h0 from %.3f s done "
      "%.3f s; overlap %.0f%%; %llu retransmits\n",
      o.link.c_str(), GetParam().eager ? "eager" : "rendezvous", r->seconds, r->floor_seconds,
      r->ratio(), r->start_s[1], r->done_s[1], r->start_s[0], r->done_s[0], 100 * r->overlap,
      static_cast<unsigned long long>(r->retransmits));
  // Both directions carried the message (and a little more: headers, ACKs).
  EXPECT_GE(r->nic_bytes[0], o.bytes);
  EXPECT_GE(r->nic_bytes[1], o.bytes);
  EXPECT_LT(r->ratio(), 1.3) << "the exchange took " << r->seconds << " s against a floor of "
                             << r->floor_seconds << " s";
  EXPECT_GE(r->overlap, 0.5) << "when the first direction finished, only " << 100 * r->overlap
                             << "% of the other had crossed its link";
}

// Rendezvous only: an eager send waits for no CTS.
class TcpBidirRendezvousTest : public TcpBidirTest {};

TEST_P(TcpBidirRendezvousTest, SecondDirectionStartsAtOnce) {
  BidirOptions o;
  o.link = GetParam().link;
  o.bytes = 2 << 20;
  o.skew = absl::Milliseconds(20);
  absl::StatusOr<BidirResult> r = fabric_->Exchange(o);
  ASSERT_TRUE(r.ok()) << r.status();
  const double gap = std::abs(r->start_s[0] - r->start_s[1]);
  std::printf(
      "%s rendezvous, 2 MiB: to h1 from %.3f s, to h0 from %.3f s (%.3f s apart); %.3f s, "
      "floor %.3f s\n",
      o.link.c_str(), r->start_s[1], r->start_s[0], gap, r->seconds, r->floor_seconds);
  EXPECT_LT(gap, 0.1 * r->floor_seconds)
      << "the second direction started " << gap << " s after the first: its CTS waited behind "
      << "the first direction's payload";
}

INSTANTIATE_TEST_SUITE_P(Links, TcpBidirTest,
                         ::testing::Values(Case{"eps", false}, Case{"eps", true},
                                           Case{"circuit", false}, Case{"circuit", true}),
                         [](const auto& info) {
                           return std::string(info.param.link) +
                                  (info.param.eager ? "_eager" : "_rendezvous");
                         });
INSTANTIATE_TEST_SUITE_P(Links, TcpBidirRendezvousTest,
                         ::testing::Values(Case{"eps", false}, Case{"circuit", false}),
                         [](const auto& info) { return std::string(info.param.link); });

}  // namespace
}  // namespace mixnet::bench
