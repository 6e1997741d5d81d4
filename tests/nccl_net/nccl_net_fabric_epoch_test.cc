// The NCCL net plugin following topology epochs on the emulated cluster
// (label netns; needs root, skips with the reason otherwise): 4 hosts, each
// with an EPS NIC (1 Gbit/s, Linux bridge) and an OCS NIC (4 Gbit/s) cabled to
// one emulated optical switch; a real mixnet-ocsd with the netns backend
// (circuits are ingress redirects, changed ports go dark while switching) and
// a real mixnet-controller; one forked rank per host in its namespace, the
// plugin configured from the spec with the controller. The ranks run the
// same skewed / pipelined traffic as the loopback test (epoch_traffic.h):
// the controller joins partners rank^1, then re-pairs to rank^2; the comms
// move onto the circuits, off them at PREPARE and onto the new ones, every
// byte checked. The OCS NIC counters show the circuits carried the partner
// traffic. The fabric and the daemons are removed whatever happens.
// Runs on the test thread; the daemons are child processes; the ranks are
// forked processes (plugin_harness.h).
#include <sched.h>
#include <sys/mount.h>
#include <unistd.h>

#include <cstdint>
#include <fstream>
#include <iostream>
#include <memory>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "emulation/emulated_fabric.h"
#include "gtest/gtest.h"
#include "mixnet_build_paths.h"  // MIXNET_OCSD_BIN, MIXNET_CONTROLLER_BIN
#include "ocs_driver/netns/netns.h"
#include "runtime/cluster/cluster_spec.h"
#include "tests/emulation/fabric_test_util.h"
#include "tests/emulation/netns_test_util.h"
#include "tests/nccl_net/enter_host.h"
#include "tests/nccl_net/epoch_traffic.h"
#include "tests/nccl_net/plugin_harness.h"
#include "tests/nccl_net/two_fabric_spec.h"
#include "tests/ocs_driver/daemon_process.h"

namespace mixnet::nccl_test {
namespace {

using ::mixnet::testing::DaemonProcess;
using ::mixnet::testing::TempDir;

std::string OcsAddress(int host) { return HostAddress("10.43.0.", host); }

std::string SpecYaml() {
  return TwoFabricSpecYaml(TwoFabricSpec{.name = "nccl_fabric_epochs",
                                         .hosts = kEpochWorld,
                                         .eps_prefix = "10.42.0.",
                                         .ocs_prefix = "10.43.0.",
                                         .mask = "/24",
                                         .eps_gbps = 1,
                                         .ocs_gbps = 4,
                                         .switch_ms = 5,
                                         .circuits = {}});
}

// In the forked rank, before the plugin loads: enter the host's namespace
// (and a sysfs of it) and configure the plugin from the spec.
absl::Status EnterHost(const std::string& ns, const std::string& host, const std::string& spec,
                       const std::string& controller) {
  RETURN_IF_ERROR(EnterHostNamespace(ns));
  setenv("MIXNET_CLUSTER_SPEC", spec.c_str(), 1);
  setenv("MIXNET_HOST", host.c_str(), 1);
  setenv("MIXNET_CONTROLLER", controller.c_str(), 1);
  setenv("MIXNET_NCCL_REPORT_MS", "100", 1);
  setenv("MIXNET_CONNECT_TIMEOUT_MS", "5000", 1);
  setenv("MIXNET_TRANSPORT", "tcp", 1);
  return absl::OkStatus();
}

class NcclNetFabricEpochTest : public ::testing::Test {
 protected:
  void SetUp() override {
    MIXNET_SKIP_UNLESS_NETNS();
    ASSERT_FALSE(dir_.path().empty());
    spec_path_ = dir_.path() + "/spec.yaml";
    std::ofstream(spec_path_) << SpecYaml();
    absl::StatusOr<cluster::ClusterSpec> spec = cluster::ClusterSpec::LoadFile(spec_path_);
    ASSERT_TRUE(spec.ok()) << spec.status();
    spec_ = *std::move(spec);
    prefix_ = testing::UniquePrefix("ncce");
    absl::StatusOr<std::unique_ptr<emulation::EmulatedFabric>> fabric =
        emulation::EmulatedFabric::Up(spec_, prefix_);
    ASSERT_TRUE(fabric.ok()) << fabric.status();  // Up removes what it made on failure
    fabric_ = *std::move(fabric);
  }

  void TearDown() override {
    ctl_.reset();  // the daemons go before the fabric they drive
    ocsd_.reset();
    testing::DownFabric(fabric_, prefix_);
  }

  TempDir dir_;
  std::string spec_path_;
  cluster::ClusterSpec spec_;
  std::string prefix_;
  std::unique_ptr<emulation::EmulatedFabric> fabric_;
  std::unique_ptr<DaemonProcess> ocsd_, ctl_;
};

TEST_F(NcclNetFabricEpochTest, CommsMoveOntoEmulatedCircuitsAndBackWithNothingLost) {
  DaemonProcess::Options oo;
  oo.binary = MIXNET_OCSD_BIN;
  auto ocsd = DaemonProcess::Start(
      {"--backend", "netns", "--netns", fabric_->OcsNamespace(), "--ports", "4", "--switch-ms", "5",
       "--listen", "unix:" + dir_.path() + "/ocs.sock"},
      oo);
  ASSERT_TRUE(ocsd.ok()) << ocsd.status();
  ocsd_ = *std::move(ocsd);
  DaemonProcess::Options co;
  co.binary = MIXNET_CONTROLLER_BIN;
  auto ctl = DaemonProcess::Start(
      {"--spec", spec_path_, "--listen", "unix:" + dir_.path() + "/ctl.sock", "--ocs",
       "ocs0=" + ocsd_->address(), "--predictor", "last", "--report-timeout-ms", "400",
       "--prepare-deadline-ms", "5000", "--log-level", "info"},
      co);
  ASSERT_TRUE(ctl.ok()) << ctl.status();
  ctl_ = *std::move(ctl);

  std::vector<emulation::LinkCounters> before;
  for (const cluster::HostSpec& h : spec_.hosts) {
    absl::StatusOr<emulation::LinkCounters> c = fabric_->ReadCounters(h.name, "ocs0");
    ASSERT_TRUE(c.ok()) << c.status();
    before.push_back(*c);
  }
  const std::string controller = ctl_->address();
  const absl::Time t0 = absl::Now();
  absl::Status s = RunRanks(
      kEpochWorld, [&](int me, Board* b) { return EpochRank(me, b, OcsAddress); },
      absl::Seconds(150),
      [&](int rank) {
        const std::string& host = spec_.hosts[rank].name;
        return EnterHost(fabric_->HostNamespace(host), host, spec_path_, controller);
      });
  ASSERT_TRUE(s.ok()) << s << "\ncontroller log:\n" << ctl_->Log();
  std::cout << "ranks took " << absl::FormatDuration(absl::Now() - t0) << "\n";
  // Each host sent its partners at least 20 rounds of 1 MiB in each phase;
  // most of that must have crossed its OCS NIC (the circuits).
  for (int r = 0; r < kEpochWorld; ++r) {
    const std::string& host = spec_.hosts[r].name;
    absl::StatusOr<emulation::LinkCounters> c = fabric_->ReadCounters(host, "ocs0");
    ASSERT_TRUE(c.ok()) << c.status();
    const uint64_t tx = c->tx_bytes - before[r].tx_bytes;
    std::cout << absl::StrFormat("  %s.ocs0 tx %d bytes\n", host, tx);
    EXPECT_GE(tx, uint64_t{2 * 20} << 20) << host << ": the circuits did not carry the partner "
                                          << "traffic";
  }
}

}  // namespace
}  // namespace mixnet::nccl_test
