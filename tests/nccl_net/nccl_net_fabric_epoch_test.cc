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
// traffic (the first test, without a warm-up sweep). The second lets the
// plugin ask for the controller's warm-up sweep once its mesh is up, then
// runs two pairings without opening a TCP connection. The fabric and the
// daemons are removed whatever happens.
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
#include "runtime/common/tcp_counters.h"
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
// (and a sysfs of it) and configure the plugin from the spec; `warm_ms`:
// its MIXNET_NCCL_WARM_PATHS_MS (0: no warm-up sweep).
absl::Status EnterHost(const std::string& ns, const std::string& host, const std::string& spec,
                       const std::string& controller, const char* warm_ms) {
  RETURN_IF_ERROR(EnterHostNamespace(ns));
  setenv("MIXNET_CLUSTER_SPEC", spec.c_str(), 1);
  setenv("MIXNET_HOST", host.c_str(), 1);
  setenv("MIXNET_CONTROLLER", controller.c_str(), 1);
  setenv("MIXNET_NCCL_REPORT_MS", "100", 1);
  setenv("MIXNET_CONNECT_TIMEOUT_MS", "5000", 1);
  setenv("MIXNET_TRANSPORT", "tcp", 1);
  setenv("MIXNET_NCCL_WARM_PATHS_MS", warm_ms, 1);
  return absl::OkStatus();
}

// Waits (at most `timeout`) until the plugin logged the end of its warm-up
// sweep; an incomplete sweep is an error naming its line.
absl::Status AwaitWarmed(int me, absl::Duration timeout) {
  const absl::Time deadline = absl::Now() + timeout;
  while (CountLoggedLines("warm-up sweep done") == 0) {
    for (const std::string& l : LoggedLines()) {
      NT_REQUIRE(l.find("warm-up sweep incomplete") == std::string::npos, "rank ", me, ": ", l);
    }
    NT_REQUIRE(absl::Now() < deadline, "rank ", me, ": no warm-up sweep within ",
               absl::FormatDuration(timeout));
    absl::SleepFor(absl::Milliseconds(10));
  }
  return absl::OkStatus();
}

// One rank of the warm-up test: the full mesh makes the plugin ask for the
// sweep, which lights every host pairing once (K4's three matchings) and
// restores the empty topology; each comm moves onto each circuit while it is
// lit and keeps that lane. Then the traffic of the epoch test (partners
// rank^1, then rank^2): every move onto a circuit takes the lane the sweep
// made, and this rank's namespace opens no TCP connection meanwhile.
absl::Status WarmRank(int me, Board* b) {
  ASSIGN_OR_RETURN(Net net, OpenNet(/*capture_logs=*/true));
  ASSIGN_OR_RETURN(Mesh m, BuildMesh(net, me, b));
  RETURN_IF_ERROR(AwaitWarmed(me, absl::Seconds(60)));
  for (int p = 0; p < kEpochWorld; ++p) {
    if (p == me) continue;
    // The lanes kept over the pairing's circuit: one per direction's comm.
    const int kept = Established(OcsAddress(me), OcsAddress(p));
    NT_REQUIRE(kept >= 2, "rank ", me, ": ", kept,
               " TCP connection(s) kept over the circuit to rank ", p,
               " after the warm-up sweep, expected one per direction");
  }
  RETURN_IF_ERROR(Barrier(b, absl::Seconds(60)));
  const absl::StatusOr<TcpCounters> before = ReadTcpCounters();
  RETURN_IF_ERROR(before.status());
  int seq = 0;
  RETURN_IF_ERROR(Exchange(net, m, me, std::vector<size_t>(kEpochWorld, 12345),
                           std::vector<size_t>(kEpochWorld, 12345), seq++));
  for (const int partner : {me ^ 1, me ^ 2}) {
    RETURN_IF_ERROR(SkewedUntil(
        net, m, b, me, partner, &seq,
        [&] {
          return CountLoggedLines(absl::StrCat("send comm to h", partner, " "),
                                  "(a kept lane: no new connection)") > 0;
        },
        5, absl::Seconds(40),
        absl::StrCat("moving onto the lane the sweep kept to partner rank ", partner)));
    RETURN_IF_ERROR(Barrier(b, absl::Seconds(60)));
  }
  const absl::StatusOr<TcpCounters> after = ReadTcpCounters();
  RETURN_IF_ERROR(after.status());
  const uint64_t opened = after->opens() - before->opens();
  fprintf(stderr, "rank %d: after the warm-up sweep, two pairings: %llu TCP connection(s) opened\n",
          me, static_cast<unsigned long long>(opened));
  NT_REQUIRE(opened == 0, "rank ", me, ": ", opened,
             " TCP connection(s) opened after the warm-up sweep");
  RETURN_IF_ERROR(Barrier(b, absl::Seconds(60)));
  return CloseMesh(net, m);
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

  // A real mixnet-ocsd (netns backend) on the emulated switch and a real
  // mixnet-controller (warm-up sweeps on, its default) driving it.
  void StartDaemons() {
    DaemonProcess::Options oo;
    oo.binary = MIXNET_OCSD_BIN;
    auto ocsd = DaemonProcess::Start(
        {"--backend", "netns", "--netns", fabric_->OcsNamespace(), "--ports", "4", "--switch-ms",
         "5", "--listen", "unix:" + dir_.path() + "/ocs.sock"},
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
  ASSERT_NO_FATAL_FAILURE(StartDaemons());
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
        return EnterHost(fabric_->HostNamespace(host), host, spec_path_, controller, "0");
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

TEST_F(NcclNetFabricEpochTest, AWarmUpSweepMakesTheLanesSoTheTrafficOpensNoConnection) {
  ASSERT_NO_FATAL_FAILURE(StartDaemons());
  const std::string controller = ctl_->address();
  absl::Status s = RunRanks(
      kEpochWorld,
      [&](int me, Board* b) {
        absl::Status st = WarmRank(me, b);
        if (!st.ok()) {  // what the plugin logged in this rank, for the diagnosis
          for (const std::string& l : LoggedLines())
            fprintf(stderr, "rank %d: %s\n", me, l.c_str());
        }
        return st;
      },
      absl::Seconds(150),
      [&](int rank) {
        const std::string& host = spec_.hosts[rank].name;
        return EnterHost(fabric_->HostNamespace(host), host, spec_path_, controller, "60000");
      });
  ASSERT_TRUE(s.ok()) << s << "\ncontroller log:\n" << ctl_->Log();
  const std::string log = ctl_->Log();
  EXPECT_NE(log.find("warm-up sweep done, 4 rounds"), std::string::npos) << log;
}

}  // namespace
}  // namespace mixnet::nccl_test
