// mixnet-ocsd --backend netns against the OCS namespace of an emulated
// cluster (EmulatedFabric, the 3-host spec of tests/emulation/test_spec.h):
// the daemon reads the circuits the fabric set up, a TCP connection between
// two hosts' OCS NICs succeeds exactly when a circuit joins them, and the
// changed ports (only they) carry nothing during the switching time; circuits stay
// when the daemon stops. Label netns: needs root, skips with the reason
// otherwise, and removes its namespaces even on failure. Test thread plus one
// client thread.
#include <future>
#include <map>
#include <set>

#include "absl/time/clock.h"
#include "emulation/emulated_fabric.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "runtime/cluster/cluster_spec.h"
#include "tests/emulation/netns_test_util.h"
#include "tests/emulation/test_spec.h"
#include "tests/ocs_driver/daemon_process.h"
#include "tests/ocs_driver/service/ocsd_test_util.h"

namespace mixnet::testing {
namespace {

using ::testing::ElementsAre;
using ::testing::Pair;

constexpr int kSwitchMs = 600;

class OcsdNetnsTest : public ::testing::Test {
 protected:
  void SetUp() override {
    MIXNET_SKIP_UNLESS_NETNS();
    auto spec = cluster::ClusterSpec::Parse(kThreeHostSpec, "test_spec.h");
    ASSERT_TRUE(spec.ok()) << spec.status();
    // "ocst" is a stem netns_test_util.h knows, so a crashed run's
    // namespaces are removed by the next one.
    auto fabric = emulation::EmulatedFabric::Up(*spec, UniquePrefix("ocst"));
    ASSERT_TRUE(fabric.ok()) << fabric.status();
    fabric_ = std::move(*fabric);
  }
  void TearDown() override {
    daemon_.reset();  // before the namespaces go
    if (fabric_) {
      absl::Status down = fabric_->Down();
      EXPECT_TRUE(down.ok()) << down;
    }
  }

  std::string Ns(const std::string& host) { return fabric_->HostNamespace(host); }

  // A TCP connection from h0 to a listener on `address` in `to`.
  absl::Status Probe(const std::string& to, const std::string& address, bool expect) {
    auto l = Listener::Open(Ns(to), address);
    if (!l.ok()) return l.status();
    if (expect) return EventuallyConnects(Ns("h0"), address, l->port());
    return TcpConnect(Ns("h0"), address, l->port(), absl::Milliseconds(500));
  }

  // Admin state of the OCS ports.
  std::map<std::string, bool> PortsUp() {
    std::map<std::string, bool> up;
    auto links = fabric_->ReadLinks(fabric_->OcsNamespace());
    EXPECT_TRUE(links.ok()) << links.status();
    for (const auto& l : links.value_or(std::vector<emulation::LinkInfo>{})) {
      if (l.name != "lo") up[l.name] = l.admin_up;
    }
    return up;
  }

  std::unique_ptr<emulation::EmulatedFabric> fabric_;
  std::unique_ptr<DaemonProcess> daemon_;
};

TEST_F(OcsdNetnsTest, CircuitsDecideReachabilityAndChangedPortsGoDark) {
  auto d =
      DaemonProcess::Start({"--backend", "netns", "--netns", fabric_->OcsNamespace(), "--switch-ms",
                            std::to_string(kSwitchMs), "--listen", "127.0.0.1:0"},
                           {});
  ASSERT_TRUE(d.ok()) << d.status();
  daemon_ = std::move(*d);
  auto stub = StubFor(daemon_->address());
  v1::GetInfoResponse info = Info(*stub);
  EXPECT_EQ(info.backend(), "netns");
  EXPECT_EQ(info.port_count(), 6u);  // the highest p<N> of the spec
  EXPECT_EQ(info.switching_time_us(), kSwitchMs * 1000u);
  // The spec's initial circuit h0.ocs0 (port 1) - h1.ocs0 (port 3) is read
  // from the kernel, not cleared.
  EXPECT_THAT(PairsOf(Get(*stub).actual()), ElementsAre(Pair(1, 3)));
  EXPECT_TRUE(Probe("h1", "10.20.0.2", true).ok());
  EXPECT_FALSE(Probe("h2", "10.20.0.3", false).ok());

  // Re-wire port 1 to h2.ocs0 (port 5): ports 1, 3, 5 go dark for the
  // switching time, the others stay up.
  const absl::Time start = absl::Now();
  auto apply = std::async(std::launch::async, [&] { return Apply(*stub, Req(1, 1, {{1, 5}})); });
  absl::SleepFor(absl::Milliseconds(kSwitchMs / 4));
  // Dark = no light path: the changed ports have no redirect; every link
  // stays up (no carrier flap on the hosts).
  auto redirects = fabric_->ocs().ListRedirects();
  ASSERT_TRUE(redirects.ok()) << redirects.status();
  for (const auto& r : *redirects) {
    EXPECT_TRUE(r.from != "p1" && r.from != "p3" && r.from != "p5")
        << r.from << " carries light while switching";
  }
  for (const auto& [port, is_up] : PortsUp()) EXPECT_TRUE(is_up) << port << " lost its link";
  EXPECT_FALSE(Probe("h2", "10.20.0.3", false).ok()) << "reachable while dark";
  ApplyOutcome r = apply.get();
  ASSERT_TRUE(r.status.ok()) << r.status.error_message();
  EXPECT_GE(absl::Now() - start, absl::Milliseconds(kSwitchMs));
  EXPECT_THAT(PairsOf(r.response.actual()), ElementsAre(Pair(1, 5)));
  for (const auto& [port, is_up] : PortsUp()) EXPECT_TRUE(is_up) << port << " left dark";
  EXPECT_TRUE(Probe("h2", "10.20.0.3", true).ok());
  EXPECT_FALSE(Probe("h1", "10.20.0.2", false).ok());

  // Adding h0.ocs1 - h1.ocs1 (ports 2, 4) leaves the circuit 1-5 alone.
  apply = std::async(std::launch::async, [&] { return Apply(*stub, Req(1, 2, {{1, 5}, {2, 4}})); });
  absl::SleepFor(absl::Milliseconds(kSwitchMs / 4));
  redirects = fabric_->ocs().ListRedirects();
  ASSERT_TRUE(redirects.ok()) << redirects.status();
  std::set<std::string> lit;
  for (const auto& r : *redirects) lit.insert(r.from);
  EXPECT_TRUE(lit.count("p1") && lit.count("p5")) << "the untouched circuit 1-5 went dark";
  EXPECT_FALSE(lit.count("p2") || lit.count("p4")) << "ports 2, 4 carry light while switching";
  r = apply.get();
  ASSERT_TRUE(r.status.ok()) << r.status.error_message();
  EXPECT_EQ(r.response.ports_changed(), 2u);
  EXPECT_TRUE(Probe("h1", "10.21.0.2", true).ok());
  EXPECT_TRUE(Probe("h2", "10.20.0.3", true).ok());

  // Stopping the daemon leaves the circuits in place.
  ASSERT_TRUE(daemon_->Stop().ok());
  auto held = fabric_->ocs().List();
  ASSERT_TRUE(held.ok()) << held.status();
  EXPECT_EQ(held->size(), 2u);
}

}  // namespace
}  // namespace mixnet::testing
