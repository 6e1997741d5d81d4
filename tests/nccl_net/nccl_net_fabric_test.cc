// The NCCL net plugin on the emulated cluster (label netns; needs root, skips
// with the reason otherwise). A 4-host fabric with two EPS NICs per host
// (eps0 and a decoy eps01, 0.4 Gbit/s); one forked rank per host enters the
// host's network namespace before loading the plugin, with
// MIXNET_SOCKET_IFNAME==eps0 (exact match) choosing that host's eps0. Every
// pair is connected (listen, connect and accept polled from one thread, as
// NCCL does), messages of 0 B .. 1 MiB go both ways with every byte checked,
// and the NIC counters of every host show that the bytes crossed the emulated
// fabric (tx and rx of each eps0 at least the payload, at most payload plus
// headers, ACKs and control traffic) while the decoys stayed idle. The same
// again with MIXNET_SOCKET_IFNAME unset: the plugin's default (the first
// interface that is up with an address and neither loopback nor docker-style,
// here eps0) must reach the other hosts out of the box. The fabric is removed
// whatever happens.
//
// Runs on the test thread; the ranks are forked processes (plugin_harness.h).
#include <sched.h>
#include <sys/mount.h>
#include <unistd.h>

#include <cstdint>
#include <cstdlib>
#include <iostream>
#include <memory>
#include <string>
#include <vector>

#include "absl/strings/str_format.h"
#include "emulation/emulated_fabric.h"
#include "gtest/gtest.h"
#include "ocs_driver/netns/netns.h"
#include "runtime/cluster/cluster_spec.h"
#include "tests/emulation/fabric_test_util.h"
#include "tests/emulation/netns_test_util.h"
#include "tests/nccl_net/enter_host.h"
#include "tests/nccl_net/mesh.h"
#include "tests/nccl_net/plugin_harness.h"

namespace mixnet::nccl_test {
namespace {

// Four hosts on one bridge, each with the NIC the ranks use (eps0) and a
// decoy (eps01, another subnet) whose name the selected one prefixes: only an
// exact match (`=eps0`) gives the plugin one device, and the decoy must stay
// idle.
constexpr char kSpec[] = R"(name: nccl_fabric
hosts:
  - name: h0
    gpus: 8
    nics:
      - {name: eps0, role: eps, address: 10.30.0.1/24, gbps: 0.4}
      - {name: eps01, role: eps, address: 10.31.0.1/24, gbps: 0.4}
  - name: h1
    gpus: 8
    nics:
      - {name: eps0, role: eps, address: 10.30.0.2/24, gbps: 0.4}
      - {name: eps01, role: eps, address: 10.31.0.2/24, gbps: 0.4}
  - name: h2
    gpus: 8
    nics:
      - {name: eps0, role: eps, address: 10.30.0.3/24, gbps: 0.4}
      - {name: eps01, role: eps, address: 10.31.0.3/24, gbps: 0.4}
  - name: h3
    gpus: 8
    nics:
      - {name: eps0, role: eps, address: 10.30.0.4/24, gbps: 0.4}
      - {name: eps01, role: eps, address: 10.31.0.4/24, gbps: 0.4}
)";
constexpr char kNic[] = "eps0";
constexpr char kDecoyNic[] = "eps01";
// What the decoy may carry: nothing of the plugin's (IPv6 is off; allows a
// stray ARP or two).
constexpr uint64_t kDecoyMaxBytes = 4 << 10;

// Sizes exchanged with every peer, each once, in this order.
const std::vector<size_t>& Sizes() {
  static const auto* s = new std::vector<size_t>{0, 1, 4096, 65537, 1 << 20};
  return *s;
}

// On the wire a NIC's tx exceeds its payload by Ethernet/IP/TCP headers
// (about 4.6%) plus the ACKs for what it receives (another 4.6%, the exchange
// is symmetric); kSlackBytes covers handshakes, the plugin's control
// connections and ARP.
constexpr double kOverheadFactor = 1.25;
constexpr uint64_t kSlackBytes = 256 << 10;

// In the forked rank, before the plugin is loaded: enter the host's network
// namespace, give the rank a sysfs of that namespace (so the plugin reads the
// NIC's speed there, as under `ip netns exec`; best effort) and select the NIC
// (or, with `select` false, leave the choice to the plugin).
absl::Status EnterHost(const std::string& ns, const std::string& host, bool select = true) {
  RETURN_IF_ERROR(EnterHostNamespace(ns));
  if (select) {
    setenv("MIXNET_SOCKET_IFNAME", absl::StrCat("=", kNic).c_str(), 1);
  } else {
    unsetenv("MIXNET_SOCKET_IFNAME");
  }
  setenv("MIXNET_HOST", host.c_str(), 1);
  setenv("MIXNET_TRANSPORT", "tcp", 1);
  setenv("MIXNET_CONNECT_TIMEOUT_MS", "10000", 1);
  return absl::OkStatus();
}

// One rank: the plugin must see exactly the selected NIC, then the mesh and
// the exchanges.
absl::Status RunRank(int me, Board* b) {
  ASSIGN_OR_RETURN(Net net, OpenNet());
  int ndev = 0;
  NT_NCCL_OK(net.api->devices(&ndev));
  NT_REQUIRE(ndev == 1, "rank ", me, ": MIXNET_SOCKET_IFNAME==", kNic, " gave ", ndev, " devices");
  ASSIGN_OR_RETURN(Mesh m, BuildMesh(net, me, b));
  int seq = 0;
  for (size_t bytes : Sizes()) RETURN_IF_ERROR(ExchangeAll(net, m, me, b->world, bytes, seq++));
  RETURN_IF_ERROR(Barrier(b));  // nobody closes while a peer may still be receiving
  return CloseMesh(net, m);
}

class NcclNetFabricTest : public ::testing::Test {
 protected:
  void SetUp() override {
    MIXNET_SKIP_UNLESS_NETNS();
    absl::StatusOr<cluster::ClusterSpec> spec =
        cluster::ClusterSpec::Parse(kSpec, "nccl_net_fabric_test");
    ASSERT_TRUE(spec.ok()) << spec.status();
    spec_ = *std::move(spec);
    prefix_ = testing::UniquePrefix("ncclf");
    absl::StatusOr<std::unique_ptr<emulation::EmulatedFabric>> fabric =
        emulation::EmulatedFabric::Up(spec_, prefix_);
    ASSERT_TRUE(fabric.ok()) << fabric.status();  // Up removes what it made on failure
    fabric_ = *std::move(fabric);
  }

  void TearDown() override { testing::DownFabric(fabric_, prefix_); }

  // Counters of NIC `nic` of every host, in host order.
  absl::StatusOr<std::vector<emulation::LinkCounters>> ReadNics(const char* nic) const {
    std::vector<emulation::LinkCounters> out;
    for (const cluster::HostSpec& h : spec_.hosts) {
      ASSIGN_OR_RETURN(emulation::LinkCounters c, fabric_->ReadCounters(h.name, nic));
      out.push_back(c);
    }
    return out;
  }

  cluster::ClusterSpec spec_;
  std::string prefix_;
  std::unique_ptr<emulation::EmulatedFabric> fabric_;

  void AllPairsTransfer(bool select);
};

TEST_F(NcclNetFabricTest, AllPairsTransferOverEachHostsEpsNic) { AllPairsTransfer(true); }

TEST_F(NcclNetFabricTest, WithoutIfnameTheDefaultInterfaceReachesTheOtherHosts) {
  AllPairsTransfer(false);
}

void NcclNetFabricTest::AllPairsTransfer(bool select) {
  if (fabric_ == nullptr) return;  // skipped
  const int world = static_cast<int>(spec_.hosts.size());
  ASSERT_LE(world, kMaxRanks);
  absl::StatusOr<std::vector<emulation::LinkCounters>> before = ReadNics(kNic);
  ASSERT_TRUE(before.ok()) << before.status();
  absl::StatusOr<std::vector<emulation::LinkCounters>> decoy_before = ReadNics(kDecoyNic);
  ASSERT_TRUE(decoy_before.ok()) << decoy_before.status();

  const absl::Time t0 = absl::Now();
  absl::Status ranks = RunRanks(world, RunRank, absl::Seconds(30), [&](int rank) {
    const std::string& host = spec_.hosts[rank].name;
    return EnterHost(fabric_->HostNamespace(host), host, select);
  });
  const absl::Duration took = absl::Now() - t0;
  ASSERT_TRUE(ranks.ok()) << ranks;

  absl::StatusOr<std::vector<emulation::LinkCounters>> after = ReadNics(kNic);
  ASSERT_TRUE(after.ok()) << after.status();
  absl::StatusOr<std::vector<emulation::LinkCounters>> decoy_after = ReadNics(kDecoyNic);
  ASSERT_TRUE(decoy_after.ok()) << decoy_after.status();
  uint64_t per_peer = 0;
  for (size_t s : Sizes()) per_peer += s;
  const uint64_t payload = per_peer * (world - 1);  // each way, per host
  const uint64_t max_bytes = static_cast<uint64_t>(payload * kOverheadFactor) + kSlackBytes;
  std::cout << absl::StrFormat("%d ranks, %d payload bytes each way per host, ranks took %s\n",
                               world, payload, absl::FormatDuration(took));
  for (int r = 0; r < world; ++r) {
    const std::string& host = spec_.hosts[r].name;
    const uint64_t tx = (*after)[r].tx_bytes - (*before)[r].tx_bytes;
    const uint64_t rx = (*after)[r].rx_bytes - (*before)[r].rx_bytes;
    std::cout << absl::StrFormat("  %s.%s tx %d rx %d (bounds %d..%d)\n", host, kNic, tx, rx,
                                 payload, max_bytes);
    EXPECT_GE(tx, payload) << host << "." << kNic
                           << " sent less than the rank's payload: traffic bypassed the fabric";
    EXPECT_GE(rx, payload) << host << "." << kNic
                           << " received less than the rank's payload: traffic bypassed the fabric";
    EXPECT_LE(tx, max_bytes) << host << "." << kNic << " sent more than payload plus overheads";
    EXPECT_LE(rx, max_bytes) << host << "." << kNic << " received more than payload plus overheads";
    const uint64_t decoy_tx = (*decoy_after)[r].tx_bytes - (*decoy_before)[r].tx_bytes;
    const uint64_t decoy_rx = (*decoy_after)[r].rx_bytes - (*decoy_before)[r].rx_bytes;
    std::cout << absl::StrFormat("  %s.%s tx %d rx %d (at most %d)\n", host, kDecoyNic, decoy_tx,
                                 decoy_rx, kDecoyMaxBytes);
    EXPECT_LE(decoy_tx, kDecoyMaxBytes) << host << "." << kDecoyNic << " was not selected";
    EXPECT_LE(decoy_rx, kDecoyMaxBytes) << host << "." << kDecoyNic << " was not selected";
  }
}

}  // namespace
}  // namespace mixnet::nccl_test
