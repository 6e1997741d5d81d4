// EmulatedFabric on real network namespaces (label netns, needs root):
// EPS reachability, circuits through the netns OCS backend, dark ports, tbf
// rates, counters, sysctls, commands in a namespace, and clean teardown.
// Test thread plus short helper threads that enter namespaces.
#include "emulation/emulated_fabric.h"

#include <netinet/tcp.h>

#include <thread>

#include "absl/cleanup/cleanup.h"
#include "absl/strings/match.h"
#include "emulation/fabric_names.h"
#include "emulation/netns_exec.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "ocs_driver/netns/netns.h"
#include "ocs_driver/netns/nl_socket.h"
#include "tests/emulation/netns_test_util.h"
#include "tests/emulation/test_spec.h"

namespace mixnet::emulation {
namespace {

using ::mixnet::testing::EventuallyConnects;
using ::mixnet::testing::Listener;
using ::mixnet::testing::TcpConnect;
using ::testing::ElementsAre;
using ::testing::HasSubstr;

MATCHER_P2(IsCircuit, a, b, "") { return arg.a == a && arg.b == b; }

// Namespaces with the prefix, plus root-namespace links named with it.
std::vector<std::string> Leftovers(const std::string& prefix) {
  std::vector<std::string> out =
      netns::ListNamespaces(prefix + "-").value_or(std::vector<std::string>{});
  auto root = netns::NlSocket::Open("");
  if (root.ok()) {
    auto links = ReadLinks(**root);
    if (links.ok()) {
      for (const LinkInfo& l : *links) {
        if (absl::StartsWith(l.name, prefix)) out.push_back("root link " + l.name);
      }
    }
  }
  return out;
}

// The congestion windows (segments, TCP_INFO) of both ends of a fresh TCP
// connection from `from_address` in `from_ns` to `to_address` in `to_ns`,
// before any data: the routes' initial window (ip route ... initcwnd).
absl::StatusOr<std::pair<uint32_t, uint32_t>> FreshCwnds(const std::string& from_ns,
                                                         const std::string& from_address,
                                                         const std::string& to_ns,
                                                         const std::string& to_address) {
  ASSIGN_OR_RETURN(Listener l, Listener::Open(to_ns, to_address));
  int fd = -1;
  RETURN_IF_ERROR(netns::RunInNamespace(from_ns, [&]() -> absl::Status {
    fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (fd < 0) return ErrnoStatus(from_ns, "socket");
    return absl::OkStatus();
  }));
  auto close_fd = absl::MakeCleanup([&] { close(fd); });
  timeval tv{5, 0};  // a blocking connect gives up after this
  setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof(tv));
  sockaddr_in sa{};
  sa.sin_family = AF_INET;
  inet_pton(AF_INET, from_address.c_str(), &sa.sin_addr);
  if (bind(fd, reinterpret_cast<sockaddr*>(&sa), sizeof(sa)) != 0) {
    return ErrnoStatus(from_address, "bind");
  }
  sa.sin_port = htons(l.port());
  inet_pton(AF_INET, to_address.c_str(), &sa.sin_addr);
  if (connect(fd, reinterpret_cast<sockaddr*>(&sa), sizeof(sa)) != 0) {
    return ErrnoStatus(absl::StrCat(from_address, " -> ", to_address), "connect");
  }
  pollfd p{l.fd(), POLLIN, 0};
  if (poll(&p, 1, 5000) != 1) return absl::DeadlineExceededError("no connection to accept");
  const int conn = accept4(l.fd(), nullptr, nullptr, SOCK_CLOEXEC);
  if (conn < 0) return ErrnoStatus(to_address, "accept4");
  auto close_conn = absl::MakeCleanup([&] { close(conn); });
  tcp_info a{}, b{};
  socklen_t la = sizeof(a), lb = sizeof(b);
  if (getsockopt(fd, IPPROTO_TCP, TCP_INFO, &a, &la) != 0 ||
      getsockopt(conn, IPPROTO_TCP, TCP_INFO, &b, &lb) != 0) {
    return ErrnoStatus(to_address, "getsockopt(TCP_INFO)");
  }
  return std::make_pair(a.tcpi_snd_cwnd, b.tcpi_snd_cwnd);
}

class EmulatedFabricTest : public ::testing::Test {
 protected:
  void SetUp() override {
    MIXNET_SKIP_UNLESS_NETNS();
    auto spec = cluster::ClusterSpec::Parse(testing::kThreeHostSpec, "test_spec.h");
    ASSERT_TRUE(spec.ok()) << spec.status();
    spec_ = *spec;
    prefix_ = testing::UniquePrefix("ef");
    auto fabric = EmulatedFabric::Up(spec_, prefix_);
    ASSERT_TRUE(fabric.ok()) << fabric.status();
    fabric_ = std::move(*fabric);
  }
  void TearDown() override {
    if (!fabric_) return;
    EXPECT_TRUE(fabric_->Down().ok());
    fabric_.reset();
    EXPECT_THAT(Leftovers(prefix_), ::testing::IsEmpty());
  }

  std::string Ns(const std::string& host) { return fabric_->HostNamespace(host); }

  // Reachable = a TCP connection from `from` to a listener at `address` in `to`.
  absl::Status Probe(const std::string& from, const std::string& to, const std::string& address,
                     bool expect_reachable) {
    auto l = Listener::Open(Ns(to), address);
    if (!l.ok()) return l.status();
    if (expect_reachable) return EventuallyConnects(Ns(from), address, l->port());
    return TcpConnect(Ns(from), address, l->port(), absl::Milliseconds(1200));
  }

  cluster::ClusterSpec spec_;
  std::string prefix_;
  std::unique_ptr<EmulatedFabric> fabric_;
};

TEST_F(EmulatedFabricTest, NamespacesAndNames) {
  EXPECT_EQ(fabric_->prefix(), prefix_);
  EXPECT_EQ(fabric_->HostNamespace("h1"), prefix_ + "-h1");
  EXPECT_EQ(fabric_->EpsNamespace(), prefix_ + "-eps");
  EXPECT_EQ(fabric_->OcsNamespace(), prefix_ + "-ocs-ocs0");
  EXPECT_THAT(netns::ListNamespaces(prefix_ + "-").value(),
              ElementsAre(prefix_ + "-eps", prefix_ + "-h0", prefix_ + "-h1", prefix_ + "-h2",
                          prefix_ + "-ocs-ocs0"));
  auto links = fabric_->ReadLinks(Ns("h0"));
  ASSERT_TRUE(links.ok()) << links.status();
  std::vector<std::string> names;
  for (const LinkInfo& l : *links) {
    names.push_back(l.name);
    EXPECT_TRUE(l.admin_up) << l.name;
  }
  EXPECT_THAT(names, ElementsAre("lo", "eps0", "ocs0", "ocs1"));
  EXPECT_THAT((*links)[1].addresses, ElementsAre("10.10.0.1/24"));
  EXPECT_THAT((*links)[3].addresses, ElementsAre("10.21.0.1/24"));
  auto ports = fabric_->ocs().Ports();
  ASSERT_TRUE(ports.ok()) << ports.status();
  EXPECT_THAT(*ports, ElementsAre("p1", "p2", "p3", "p4", "p5", "p6"));
}

TEST_F(EmulatedFabricTest, EpsReachesEveryHost) {
  const std::vector<std::string> hosts = {"h0", "h1", "h2"};
  for (size_t i = 0; i < hosts.size(); ++i) {
    for (size_t j = 0; j < hosts.size(); ++j) {
      if (i == j) continue;
      EXPECT_TRUE(Probe(hosts[i], hosts[j], absl::StrCat("10.10.0.", j + 1), true).ok())
          << hosts[i] << " -> " << hosts[j];
    }
  }
}

TEST_F(EmulatedFabricTest, CircuitMakesOcsAddressReachable) {
  // The spec's initial circuit p1<->p3 joins h0.ocs0 and h1.ocs0.
  EXPECT_THAT(fabric_->ocs().List().value(), ElementsAre(IsCircuit("p1", "p3")));
  EXPECT_TRUE(Probe("h0", "h1", "10.20.0.2", true).ok());
  // h0.ocs1 (p2) and h2.ocs1 (p6) are dark: unreachable.
  absl::Status s = Probe("h0", "h2", "10.21.0.3", false);
  EXPECT_FALSE(s.ok());
  EXPECT_TRUE(absl::IsDeadlineExceeded(s) || absl::IsUnavailable(s)) << s;

  ASSERT_TRUE(fabric_->ocs().Connect("p2", "p6").ok());
  EXPECT_THAT(fabric_->ocs().List().value(),
              ElementsAre(IsCircuit("p1", "p3"), IsCircuit("p2", "p6")));
  EXPECT_TRUE(Probe("h0", "h2", "10.21.0.3", true).ok());
  EXPECT_TRUE(Probe("h2", "h0", "10.21.0.1", true).ok());

  ASSERT_TRUE(fabric_->ocs().Disconnect("p6").ok());
  EXPECT_THAT(fabric_->ocs().List().value(), ElementsAre(IsCircuit("p1", "p3")));
  EXPECT_TRUE(fabric_->ocs().ListRedirects().value().size() == 2);
  EXPECT_FALSE(Probe("h0", "h2", "10.21.0.3", false).ok());
  // The untouched circuit still carries traffic.
  EXPECT_TRUE(Probe("h1", "h0", "10.20.0.1", true).ok());
}

TEST_F(EmulatedFabricTest, ApplyIsDeclarativeAndListMatches) {
  ocs::NetnsOcs& ocs = fabric_->ocs();
  auto r = ocs.Apply({{"p5", "p1"}, {"p2", "p4"}});
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_THAT(r->changed_ports, ElementsAre("p1", "p2", "p3", "p4", "p5"));
  EXPECT_THAT(ocs.List().value(), ElementsAre(IsCircuit("p1", "p5"), IsCircuit("p2", "p4")));
  EXPECT_TRUE(Probe("h0", "h2", "10.20.0.3", true).ok());
  EXPECT_TRUE(Probe("h1", "h0", "10.21.0.1", true).ok());
  EXPECT_FALSE(Probe("h0", "h1", "10.20.0.2", false).ok());

  // Same set again: nothing changes.
  r = ocs.Apply({{"p2", "p4"}, {"p1", "p5"}});
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_TRUE(r->changed_ports.empty());

  // Bad requests change nothing.
  for (const std::vector<ocs::PortPair>& bad : std::vector<std::vector<ocs::PortPair>>{
           {{"p1", "p3"}, {"p3", "p5"}}, {{"p2", "p2"}}, {{"p1", "p9"}}}) {
    auto b = ocs.Apply(bad);
    EXPECT_TRUE(absl::IsInvalidArgument(b.status())) << b.status();
  }
  EXPECT_THAT(ocs.List().value(), ElementsAre(IsCircuit("p1", "p5"), IsCircuit("p2", "p4")));

  // The spec-level form, and going dark for the switching time.
  ASSERT_TRUE(fabric_->ApplyCircuits({{"ocs0", 4, 6}}).ok());
  EXPECT_THAT(ocs.List().value(), ElementsAre(IsCircuit("p4", "p6")));
  EXPECT_TRUE(Probe("h1", "h2", "10.21.0.3", true).ok());
  r = ocs.Apply({}, absl::Milliseconds(20));
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_THAT(r->changed_ports, ElementsAre("p4", "p6"));
  EXPECT_TRUE(ocs.List().value().empty());
  EXPECT_TRUE(ocs.ListRedirects().value().empty());
  EXPECT_FALSE(fabric_->ApplyCircuits({{"ocs0", 1, 2}}).ok());  // one host's two NICs
}

TEST_F(EmulatedFabricTest, ConnectReplacesAndReportsErrors) {
  ocs::NetnsOcs& ocs = fabric_->ocs();
  // p1 was joined to p3; joining p1 to p5 leaves no half circuit on p3.
  ASSERT_TRUE(ocs.Connect("p1", "p5").ok());
  EXPECT_THAT(ocs.List().value(), ElementsAre(IsCircuit("p1", "p5")));
  EXPECT_EQ(ocs.ListRedirects().value().size(), 2u);

  absl::Status s = ocs.Connect("p1", "p42");
  EXPECT_TRUE(absl::IsNotFound(s)) << s;
  EXPECT_THAT(std::string(s.message()), HasSubstr("p42"));
  EXPECT_TRUE(absl::IsInvalidArgument(ocs.Connect("p2", "p2")));
  EXPECT_TRUE(ocs.Disconnect("p4").ok());  // no circuit: no-op
  EXPECT_TRUE(absl::IsNotFound(ocs::NetnsOcs::Open(prefix_ + "-nosuch").status()));
}

TEST_F(EmulatedFabricTest, DarkPortDropsCarrier) {
  auto carrier = [&]() {
    auto l = ReadLink(*netns::NlSocket::Open(Ns("h0")).value(), "ocs0");
    return l.ok() && l->carrier;
  };
  EXPECT_TRUE(carrier());
  ASSERT_TRUE(fabric_->ocs().SetPortsDark({"p1"}, true).ok());
  EXPECT_FALSE(carrier());
  EXPECT_FALSE(Probe("h0", "h1", "10.20.0.2", false).ok());
  ASSERT_TRUE(fabric_->ocs().SetPortsDark({"p1"}, false).ok());
  EXPECT_TRUE(carrier());
  EXPECT_TRUE(Probe("h0", "h1", "10.20.0.2", true).ok());
  EXPECT_TRUE(absl::IsNotFound(fabric_->ocs().SetPortsDark({"p99"}, true)));
}

TEST_F(EmulatedFabricTest, TbfOnBothEndsOfEveryLink) {
  const uint32_t eps_rate = TbfFor(0.2)->rate_bytes_per_s;
  const uint32_t ocs_rate = TbfFor(0.4)->rate_bytes_per_s;
  EXPECT_EQ(eps_rate, 25'000'000u);
  // Bucket: 1 ms of line rate (25 kB at 0.2 Gbit/s, 50 kB at 0.4 Gbit/s).
  for (const char* host : {"h0", "h1", "h2"}) {
    auto links = fabric_->ReadLinks(Ns(host)).value();
    for (const LinkInfo& l : links) {
      if (l.name == "eps0") {
        EXPECT_EQ(l.tbf_rate_bytes_per_s, eps_rate) << host;
      }
      if (l.name == "ocs0" || l.name == "ocs1") {
        EXPECT_EQ(l.tbf_rate_bytes_per_s, ocs_rate) << host << " " << l.name;
      }
      if (l.name == "eps0") {
        EXPECT_EQ(l.tbf_burst_bytes, 25'000u) << host;
      }
      if (l.name == "ocs0" || l.name == "ocs1") {
        EXPECT_EQ(l.tbf_burst_bytes, 50'000u) << host;
      }
    }
  }
  int bridge_ports = 0;
  const std::vector<LinkInfo> eps_links = fabric_->ReadLinks(fabric_->EpsNamespace()).value();
  for (const LinkInfo& l : eps_links) {
    if (l.master != kBridgeName) continue;
    ++bridge_ports;
    EXPECT_EQ(l.tbf_rate_bytes_per_s, eps_rate) << l.name;
  }
  EXPECT_EQ(bridge_ports, 3);
  int ports = 0;
  const std::vector<LinkInfo> ocs_links = fabric_->ReadLinks(fabric_->OcsNamespace()).value();
  for (const LinkInfo& l : ocs_links) {
    if (l.name == "lo") continue;
    ++ports;
    EXPECT_EQ(l.tbf_rate_bytes_per_s, ocs_rate) << l.name;
    EXPECT_TRUE(l.ingress_qdisc) << l.name;
  }
  EXPECT_EQ(ports, 6);
}

TEST_F(EmulatedFabricTest, CircuitTrafficLeavesThroughOcsNic) {
  auto listener = Listener::Open(Ns("h1"), "10.20.0.2");
  ASSERT_TRUE(listener.ok()) << listener.status();
  auto ocs_before = fabric_->ReadCounters("h0", "ocs0").value();
  auto eps_before = fabric_->ReadCounters("h0", "eps0").value();
  std::thread drain([&] { testing::DrainAccepted(*listener, absl::Seconds(20)); });
  absl::Status s = TcpConnect(Ns("h0"), "10.20.0.2", listener->port(), absl::Seconds(5), 2 << 20);
  drain.join();
  ASSERT_TRUE(s.ok()) << s;
  auto ocs_after = fabric_->ReadCounters("h0", "ocs0").value();
  auto eps_after = fabric_->ReadCounters("h0", "eps0").value();
  EXPECT_GE(ocs_after.tx_bytes - ocs_before.tx_bytes, 2u << 20);
  EXPECT_LT(eps_after.tx_bytes - eps_before.tx_bytes, 10000u);
  EXPECT_TRUE(absl::IsNotFound(fabric_->ReadCounters("h0", "nosuch").status()));
  EXPECT_TRUE(absl::IsNotFound(fabric_->ReadCounters("h9", "eps0").status()));
}

TEST_F(EmulatedFabricTest, HostSysctls) {
  for (const char* path : {"net/ipv4/conf/all/arp_ignore", "net/ipv4/conf/eps0/arp_ignore",
                           "net/ipv4/conf/ocs1/arp_ignore"}) {
    EXPECT_EQ(netns::GetSysctl(Ns("h2"), path).value_or("?"), "1") << path;
  }
  EXPECT_EQ(netns::GetSysctl(Ns("h2"), "net/ipv4/conf/ocs0/arp_announce").value_or("?"), "2");
  EXPECT_EQ(netns::GetSysctl(Ns("h2"), "net/ipv4/conf/all/rp_filter").value_or("?"), "0");
  EXPECT_EQ(netns::GetSysctl(Ns("h2"), "net/ipv4/conf/ocs0/rp_filter").value_or("?"), "0");
}

// Without EmulationOptions::init_cwnd a connection starts at the kernel's
// initial window, 10 segments (RFC 6928; include/net/tcp.h TCP_INIT_CWND;
// written out here, not kKernelInitCwnd), over EPS and over a circuit.
TEST_F(EmulatedFabricTest, KernelInitialWindowByDefault) {
  auto eps = FreshCwnds(Ns("h0"), "10.10.0.1", Ns("h1"), "10.10.0.2");
  ASSERT_TRUE(eps.ok()) << eps.status();
  EXPECT_EQ(eps->first, 10u);
  EXPECT_EQ(eps->second, 10u);
  // The spec's initial circuit p1<->p3 joins h0.ocs0 and h1.ocs0.
  auto ocs = FreshCwnds(Ns("h0"), "10.20.0.1", Ns("h1"), "10.20.0.2");
  ASSERT_TRUE(ocs.ok()) << ocs.status();
  EXPECT_EQ(ocs->first, 10u);
  EXPECT_EQ(ocs->second, 10u);
}

TEST_F(EmulatedFabricTest, RunsCommandsInsideHostNamespace) {
  EXPECT_EQ(RunCommandInNamespace(Ns("h0"), {"sh", "-c", "exit 3"}).value_or(-1), 3);
  // /sys is the namespace's own: eps0 exists there, not in the root namespace.
  EXPECT_EQ(RunCommandInNamespace(Ns("h0"), {"test", "-e", "/sys/class/net/ocs1"}).value_or(-1), 0);
  EXPECT_EQ(RunCommandInNamespace(Ns("h0"), {"sh", "-c", "test \"$MIXNET_X\" = y"},
                                  absl::Seconds(10), {"MIXNET_X=y"})
                .value_or(-1),
            0);
  auto slow = RunCommandInNamespace(Ns("h0"), {"sleep", "10"}, absl::Milliseconds(100));
  EXPECT_TRUE(absl::IsDeadlineExceeded(slow.status())) << slow.status();
  EXPECT_EQ(RunCommandInNamespace(Ns("h0"), {"/nonexistent/binary"}).value_or(-1), 127);
  EXPECT_TRUE(absl::IsNotFound(RunCommandInNamespace(prefix_ + "-nosuch", {"true"}).status()));
}

// Without a fixture fabric: teardown paths and refusals.
class FabricLifecycleTest : public ::testing::Test {
 protected:
  void SetUp() override {
    MIXNET_SKIP_UNLESS_NETNS();
    spec_ = cluster::ClusterSpec::Parse(testing::kThreeHostSpec, "test_spec.h").value();
  }
  cluster::ClusterSpec spec_;
};

// EmulationOptions::init_cwnd: every host route's initial window, so a new
// connection (the runtime opens one on every new circuit) starts there,
// at both ends, over EPS and over a circuit.
TEST_F(FabricLifecycleTest, InitialWindowOnEveryRoute) {
  EmulationOptions o;
  o.init_cwnd = 64;
  auto fabric = EmulatedFabric::Up(spec_, testing::UniquePrefix("iw"), o);
  ASSERT_TRUE(fabric.ok()) << fabric.status();
  auto down = absl::MakeCleanup([&] { EXPECT_TRUE((*fabric)->Down().ok()); });
  auto eps = FreshCwnds((*fabric)->HostNamespace("h2"), "10.10.0.3", (*fabric)->HostNamespace("h0"),
                        "10.10.0.1");
  ASSERT_TRUE(eps.ok()) << eps.status();
  EXPECT_EQ(eps->first, 64u);
  EXPECT_EQ(eps->second, 64u);
  // The spec's initial circuit p1<->p3 joins h0.ocs0 and h1.ocs0.
  auto ocs = FreshCwnds((*fabric)->HostNamespace("h0"), "10.20.0.1", (*fabric)->HostNamespace("h1"),
                        "10.20.0.2");
  ASSERT_TRUE(ocs.ok()) << ocs.status();
  EXPECT_EQ(ocs->first, 64u);
  EXPECT_EQ(ocs->second, 64u);
}

TEST_F(FabricLifecycleTest, DownRemovesEverythingAndIsIdempotent) {
  const std::string prefix = testing::UniquePrefix("dn");
  auto fabric = EmulatedFabric::Up(spec_, prefix);
  ASSERT_TRUE(fabric.ok()) << fabric.status();
  EXPECT_EQ(Leftovers(prefix).size(), 5u);
  EXPECT_TRUE((*fabric)->Down().ok());
  EXPECT_TRUE(Leftovers(prefix).empty());
  EXPECT_TRUE((*fabric)->Down().ok());
  EXPECT_TRUE(absl::IsNotFound((*fabric)->Ocs().status()));
  EXPECT_TRUE(EmulatedFabric::DownPrefix(prefix).ok());
}

TEST_F(FabricLifecycleTest, DownAfterCrashNeedsOnlyThePrefix) {
  const std::string prefix = testing::UniquePrefix("cr");
  {
    auto fabric = EmulatedFabric::Up(spec_, prefix);
    ASSERT_TRUE(fabric.ok()) << fabric.status();
    (*fabric)->Release();  // as if the process died
  }
  EXPECT_EQ(Leftovers(prefix).size(), 5u);
  absl::Status s = EmulatedFabric::DownPrefix(prefix);
  EXPECT_TRUE(s.ok()) << s;
  EXPECT_TRUE(Leftovers(prefix).empty());
}

TEST_F(FabricLifecycleTest, DestructorTearsDown) {
  const std::string prefix = testing::UniquePrefix("ds");
  { ASSERT_TRUE(EmulatedFabric::Up(spec_, prefix).ok()); }
  EXPECT_TRUE(Leftovers(prefix).empty());
}

TEST_F(FabricLifecycleTest, PrefixInUseIsRefused) {
  const std::string prefix = testing::UniquePrefix("dup");
  auto first = EmulatedFabric::Up(spec_, prefix);
  ASSERT_TRUE(first.ok()) << first.status();
  auto second = EmulatedFabric::Up(spec_, prefix);
  EXPECT_TRUE(absl::IsAlreadyExists(second.status())) << second.status();
  EXPECT_EQ(Leftovers(prefix).size(), 5u);  // the first one is intact
  EXPECT_THAT((*first)->ocs().List().value(), ElementsAre(IsCircuit("p1", "p3")));
}

TEST_F(FabricLifecycleTest, BadInputCreatesNothing) {
  const std::string prefix = testing::UniquePrefix("bad");
  cluster::ClusterSpec spec = spec_;
  spec.hosts[1].nics[0].name = "lo";
  EXPECT_TRUE(absl::IsInvalidArgument(EmulatedFabric::Up(spec, prefix).status()));
  spec = spec_;
  spec.hosts[2].nics[1].name = "a_very_long_nic_name";
  auto s = EmulatedFabric::Up(spec, prefix).status();
  EXPECT_TRUE(absl::IsInvalidArgument(s));
  EXPECT_THAT(std::string(s.message()), HasSubstr("a_very_long_nic_name"));
  spec = spec_;
  spec.hosts[0].nics[2].name = "all";
  EXPECT_TRUE(absl::IsInvalidArgument(EmulatedFabric::Up(spec, prefix).status()));
  for (const char* p : {"Bad", "has-dash", "0abc", "a_prefix_that_is_far_too_long_for_us"}) {
    EXPECT_TRUE(absl::IsInvalidArgument(EmulatedFabric::Up(spec_, p).status())) << p;
  }
  EXPECT_TRUE(Leftovers(prefix).empty());
}

TEST_F(FabricLifecycleTest, FailureHalfwayRemovesWhatWasBuilt) {
  const std::string prefix = testing::UniquePrefix("half");
  cluster::ClusterSpec spec = spec_;
  spec.hosts[2].nics[2].address = "not-an-address";  // caught only when the address is added
  auto fabric = EmulatedFabric::Up(spec, prefix);
  EXPECT_TRUE(absl::IsInvalidArgument(fabric.status())) << fabric.status();
  EXPECT_THAT(std::string(fabric.status().message()), HasSubstr("h2"));
  EXPECT_TRUE(Leftovers(prefix).empty());
}

// Several OCS NICs in one subnet (as on real MixNet hosts): a socket bound to
// the NIC that holds the circuit reaches the peer through it, thanks to
// arp_ignore/arp_announce/rp_filter in the host namespaces.
TEST_F(FabricLifecycleTest, SeveralNicsInOneSubnet) {
  auto spec = cluster::ClusterSpec::Parse(R"(
name: subnet
ocs_switches: [{name: sw, ports: 4}]
hosts:
  - name: a
    nics:
      - {name: ocs0, role: ocs, address: 10.30.0.1/16, gbps: 0.4, switch: sw, port: 1}
      - {name: ocs1, role: ocs, address: 10.30.1.1/16, gbps: 0.4, switch: sw, port: 2}
  - name: b
    nics:
      - {name: ocs0, role: ocs, address: 10.30.0.2/16, gbps: 0.4, switch: sw, port: 3}
      - {name: ocs1, role: ocs, address: 10.30.1.2/16, gbps: 0.4, switch: sw, port: 4}
circuits:
  - {switch: sw, ports: [2, 4]}
)",
                                          "subnet spec");
  ASSERT_TRUE(spec.ok()) << spec.status();
  const std::string prefix = testing::UniquePrefix("ef");
  auto fabric = EmulatedFabric::Up(*spec, prefix);
  ASSERT_TRUE(fabric.ok()) << fabric.status();
  EXPECT_EQ(netns::ListNamespaces(prefix + "-").value().size(), 3u);  // no EPS namespace
  auto l = Listener::Open((*fabric)->HostNamespace("b"), "10.30.1.2");
  ASSERT_TRUE(l.ok()) << l.status();
  absl::Status s;
  for (int i = 0; i < 30; ++i) {
    s = TcpConnect((*fabric)->HostNamespace("a"), "10.30.1.2", l->port(), absl::Seconds(1), 0,
                   "ocs1");
    if (s.ok()) break;
    absl::SleepFor(absl::Milliseconds(100));
  }
  EXPECT_TRUE(s.ok()) << s;
  // Bound to the NIC without the circuit: no way through.
  EXPECT_FALSE(TcpConnect((*fabric)->HostNamespace("a"), "10.30.1.2", l->port(),
                          absl::Milliseconds(1200), 0, "ocs0")
                   .ok());
}

TEST(FabricNamesTest, DefaultPrefixIsUniqueAndRecognised) {
  std::string a = DefaultPrefix("My Spec");
  std::string b = DefaultPrefix("My Spec");
  EXPECT_NE(a, b);
  EXPECT_TRUE(ValidatePrefix(a).ok()) << a;
  EXPECT_TRUE(IsDefaultPrefixOf(a, "My Spec"));
  EXPECT_TRUE(IsDefaultPrefixOf(b, "My Spec"));
  EXPECT_FALSE(IsDefaultPrefixOf(a, "My Spec_1"));
  EXPECT_EQ(PrefixOfNamespace(a + "-h-0"), a);
}

}  // namespace
}  // namespace mixnet::emulation
