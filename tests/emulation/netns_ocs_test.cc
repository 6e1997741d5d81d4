// The netns OCS backend on its own: a bare OCS namespace with 64 ports (veth
// pairs inside it, no hosts), full re-wirings timed, read-back, port naming.
// Label netns (needs root); the naming tests run anywhere. Test thread only.
#include "ocs_driver/netns/netns_ocs.h"

#include <algorithm>
#include <random>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "emulation/links.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "ocs_driver/netns/netns.h"
#include "ocs_driver/netns/nl_socket.h"
#include "tests/emulation/netns_test_util.h"

namespace mixnet::ocs {
namespace {

using ::testing::ElementsAre;

TEST(PortNamesTest, NamesAndOrder) {
  EXPECT_EQ(NetnsOcs::PortName(7), "p7");
  EXPECT_EQ(NetnsOcs::PortNumber("p12").value(), 12);
  for (const char* bad : {"p", "p0", "p07", "x1", "p1a", "p-1", ""}) {
    EXPECT_FALSE(NetnsOcs::PortNumber(bad).ok()) << bad;
  }
  std::vector<std::string> ports = {"p10", "zz", "p2", "p1", "a"};
  std::sort(ports.begin(), ports.end(), PortLess);
  EXPECT_THAT(ports, ElementsAre("p1", "p2", "p10", "a", "zz"));
}

class NetnsOcsTest : public ::testing::Test {
 protected:
  static constexpr int kPorts = 64;

  void SetUp() override {
    MIXNET_SKIP_UNLESS_NETNS();
    ns_ = testing::UniquePrefix("ocst") + "-ocs";
    ASSERT_TRUE(netns::CreateNamespace(ns_).ok());
    // Both ends of each veth are switch ports here, so a circuit between a
    // pair's ends would loop a packet forever: keep the namespace silent
    // (no IPv6 autoconfiguration traffic; there are no IPv4 addresses).
    ASSERT_TRUE(netns::SetSysctls(ns_, {{"net/ipv6/conf/all/disable_ipv6", "1"},
                                        {"net/ipv6/conf/default/disable_ipv6", "1"}})
                    .ok());
    auto sock = netns::NlSocket::Open(ns_);
    ASSERT_TRUE(sock.ok()) << sock.status();
    for (int p = 1; p <= kPorts; p += 2) {
      const std::string a = NetnsOcs::PortName(p), b = NetnsOcs::PortName(p + 1);
      ASSERT_TRUE(emulation::CreateVeth(**sock, a, ns_, b).ok());
      ASSERT_TRUE(emulation::SetLinkUp(**sock, a).ok());
      ASSERT_TRUE(emulation::SetLinkUp(**sock, b).ok());
    }
    auto ocs = NetnsOcs::Open(ns_);
    ASSERT_TRUE(ocs.ok()) << ocs.status();
    ocs_ = std::move(*ocs);
  }
  void TearDown() override {
    ocs_.reset();  // its socket keeps the namespace alive
    if (!ns_.empty()) {
      EXPECT_TRUE(netns::DeleteNamespace(ns_).ok());
    }
  }

  // A random perfect matching of all ports.
  std::vector<PortPair> RandomMatching(std::mt19937& rng) {
    std::vector<int> p(kPorts);
    for (int i = 0; i < kPorts; ++i) p[i] = i + 1;
    std::shuffle(p.begin(), p.end(), rng);
    std::vector<PortPair> out;
    for (int i = 0; i < kPorts; i += 2) {
      out.push_back({NetnsOcs::PortName(p[i]), NetnsOcs::PortName(p[i + 1])});
    }
    return out;
  }

  static std::vector<PortPair> Normalized(std::vector<PortPair> v) {
    for (PortPair& c : v) {
      if (PortLess(c.b, c.a)) std::swap(c.a, c.b);
    }
    std::sort(v.begin(), v.end(),
              [](const PortPair& x, const PortPair& y) { return PortLess(x.a, y.a); });
    return v;
  }

  std::string ns_;
  std::unique_ptr<NetnsOcs> ocs_;
};

TEST_F(NetnsOcsTest, FullRewiringsReadBackExactly) {
  EXPECT_EQ(ocs_->Ports().value().size(), static_cast<size_t>(kPorts));
  EXPECT_TRUE(ocs_->List().value().empty());
  std::mt19937 rng(42);
  std::vector<absl::Duration> times;
  for (int round = 0; round < 6; ++round) {
    std::vector<PortPair> want = RandomMatching(rng);
    absl::Time start = absl::Now();
    auto r = ocs_->Apply(want);
    times.push_back(absl::Now() - start);
    ASSERT_TRUE(r.ok()) << r.status();
    EXPECT_EQ(ocs_->List().value(), Normalized(want)) << "round " << round;
    EXPECT_EQ(ocs_->ListRedirects().value().size(), static_cast<size_t>(kPorts));
  }
  std::sort(times.begin(), times.end());
  // Issue target: a full 64-port re-wiring within 20 ms; generous bound here
  // because the 2-core build machines are shared.
  std::cout << "netns OCS full re-wiring of " << kPorts << " ports: median "
            << absl::FormatDuration(times[times.size() / 2]) << ", max "
            << absl::FormatDuration(times.back()) << "\n";
  EXPECT_LT(times[times.size() / 2], absl::Milliseconds(200));

  auto r = ocs_->Apply({});
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r->redirects_removed, kPorts);
  EXPECT_TRUE(ocs_->ListRedirects().value().empty());
}

TEST_F(NetnsOcsTest, DarkForSwitchingTimeOnlyOnChangedPorts) {
  ASSERT_TRUE(ocs_->Apply({{"p1", "p3"}, {"p5", "p7"}}).ok());
  auto r = ocs_->Apply({{"p1", "p3"}, {"p5", "p9"}}, absl::Milliseconds(30));
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_THAT(r->changed_ports, ElementsAre("p5", "p7", "p9"));
  EXPECT_EQ(r->redirects_set, 2);
  EXPECT_EQ(r->redirects_removed, 1);
  auto sock = netns::NlSocket::Open(ns_).value();
  const std::vector<emulation::LinkInfo> links = emulation::ReadLinks(*sock).value();
  for (const auto& l : links) {
    if (l.name != "lo") {
      EXPECT_TRUE(l.admin_up) << l.name << " left dark";
    }
  }
}

// A change names only what leaves and what comes: the circuits it does not
// name stay, whichever way round a removal names its ports (hand-worked).
TEST_F(NetnsOcsTest, ChangeKeepsWhatItDoesNotName) {
  ASSERT_TRUE(ocs_->Apply({{"p1", "p3"}, {"p5", "p7"}, {"p9", "p11"}}).ok());
  NetnsOcs::ApplyReport report;
  ASSERT_TRUE(
      ocs_->ChangeReporting({{"p7", "p5"}}, {{"p5", "p13"}, {"p7", "p15"}}, {}, report).ok());
  // p5 and p7 are redirected elsewhere (replaced, not removed); p13, p15 new.
  EXPECT_THAT(report.result.changed_ports, ElementsAre("p5", "p7", "p13", "p15"));
  EXPECT_EQ(report.result.redirects_set, 4);
  EXPECT_EQ(report.result.redirects_removed, 0);
  EXPECT_TRUE(report.failed.empty());
  EXPECT_EQ(ocs_->List().value(),
            Normalized({{"p1", "p3"}, {"p5", "p13"}, {"p7", "p15"}, {"p9", "p11"}}));

  ASSERT_TRUE(ocs_->ChangeReporting({{"p1", "p3"}}, {}, {}, report).ok());
  EXPECT_THAT(report.result.changed_ports, ElementsAre("p1", "p3"));
  EXPECT_EQ(report.result.redirects_removed, 2);
  EXPECT_EQ(ocs_->List().value(), Normalized({{"p5", "p13"}, {"p7", "p15"}, {"p9", "p11"}}));

  // A port that stays in a kept circuit cannot join a new one: nothing sent.
  absl::Status bad = ocs_->ChangeReporting({}, {{"p9", "p17"}}, {}, report);
  EXPECT_TRUE(absl::IsInvalidArgument(bad)) << bad;
  EXPECT_EQ(ocs_->List().value(), Normalized({{"p5", "p13"}, {"p7", "p15"}, {"p9", "p11"}}));
}

TEST(NetnsOcsOpenTest, MissingNamespace) {
  MIXNET_SKIP_UNLESS_NETNS();
  auto o = NetnsOcs::Open("mixnet-no-such-namespace");
  EXPECT_TRUE(absl::IsNotFound(o.status())) << o.status();
  EXPECT_TRUE(absl::IsInvalidArgument(NetnsOcs::Open("").status()));
}

}  // namespace
}  // namespace mixnet::ocs
