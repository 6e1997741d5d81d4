// The TCP counters reader (label cpu): parsing a net/snmp text written out by
// hand, a missing field refused, and this namespace's own counters read.
#include "runtime/common/tcp_counters.h"

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace mixnet {
namespace {

// The layout of Linux 6.x's /proc/net/snmp Tcp lines (other lines around).
constexpr char kSnmp[] =
    "Ip: Forwarding DefaultTTL\nIp: 1 64\n"
    "Tcp: RtoAlgorithm RtoMin RtoMax MaxConn ActiveOpens PassiveOpens AttemptFails EstabResets "
    "CurrEstab InSegs OutSegs RetransSegs InErrs OutRsts InCsumErrors\n"
    "Tcp: 1 200 120000 -1 17 5 2 3 4 1000 900 42 0 6 0\n"
    "Udp: InDatagrams NoPorts\nUdp: 7 8\n";

TEST(TcpCounters, ParsesTheTcpLines) {
  absl::StatusOr<TcpCounters> c = ParseTcpCounters(kSnmp);
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_EQ(c->active_opens, 17u);
  EXPECT_EQ(c->passive_opens, 5u);
  EXPECT_EQ(c->estab_resets, 3u);
  EXPECT_EQ(c->retrans_segs, 42u);
  EXPECT_EQ(c->opens(), 22u);
}

TEST(TcpCounters, AMissingFieldIsDataLoss) {
  absl::StatusOr<TcpCounters> c = ParseTcpCounters("Tcp: ActiveOpens\nTcp: 3\n");
  EXPECT_EQ(c.status().code(), absl::StatusCode::kDataLoss);
  EXPECT_THAT(c.status().message(), ::testing::HasSubstr("PassiveOpens"));
  EXPECT_FALSE(ParseTcpCounters("").ok());
}

TEST(TcpCounters, ReadsThisNamespace) {
  absl::StatusOr<TcpCounters> c = ReadTcpCounters();
  ASSERT_TRUE(c.ok()) << c.status();
}

}  // namespace
}  // namespace mixnet
