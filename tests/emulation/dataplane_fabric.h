// Shared by circuit_cut_test and reconfig_dataplane_test (label netns): the
// 4-host spec (one EPS NIC and two OCS NICs per host, tbf rates low enough
// that a transfer takes about a second), a fixture that brings the emulated
// fabric up and down, and EnterHost, which moves the calling rank thread
// into its host's network namespace (threads it starts inherit it). Header-only.
#pragma once

#include <fcntl.h>
#include <sched.h>
#include <unistd.h>

#include <memory>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "emulation/emulated_fabric.h"
#include "gtest/gtest.h"
#include "ocs_driver/netns/netns.h"
#include "runtime/cluster/cluster_spec.h"
#include "runtime/collectives/communicator.h"
#include "runtime/common/status.h"
#include "tests/collectives/rank_harness.h"
#include "tests/emulation/fabric_test_util.h"
#include "tests/emulation/netns_test_util.h"

namespace mixnet::testing {

// Host i: eps0 10.10.0.(i+1) at 0.2 Gbit/s; ocs0/ocs1 10.20.0.(2i+1)/(2i+2)
// at 0.4 Gbit/s on ports 2i+1 / 2i+2 of switch ocs0.
inline constexpr char kDataplaneSpec[] = R"(name: dpfabric
ocs_switches:
  - {name: ocs0, ports: 8, switch_ms: 10}
hosts:
  - name: h0
    nics:
      - {name: eps0, role: eps, address: 10.10.0.1/24, gbps: 0.2}
      - {name: ocs0, role: ocs, address: 10.20.0.1/24, gbps: 0.4, switch: ocs0, port: 1}
      - {name: ocs1, role: ocs, address: 10.20.0.2/24, gbps: 0.4, switch: ocs0, port: 2}
  - name: h1
    nics:
      - {name: eps0, role: eps, address: 10.10.0.2/24, gbps: 0.2}
      - {name: ocs0, role: ocs, address: 10.20.0.3/24, gbps: 0.4, switch: ocs0, port: 3}
      - {name: ocs1, role: ocs, address: 10.20.0.4/24, gbps: 0.4, switch: ocs0, port: 4}
  - name: h2
    nics:
      - {name: eps0, role: eps, address: 10.10.0.3/24, gbps: 0.2}
      - {name: ocs0, role: ocs, address: 10.20.0.5/24, gbps: 0.4, switch: ocs0, port: 5}
      - {name: ocs1, role: ocs, address: 10.20.0.6/24, gbps: 0.4, switch: ocs0, port: 6}
  - name: h3
    nics:
      - {name: eps0, role: eps, address: 10.10.0.4/24, gbps: 0.2}
      - {name: ocs0, role: ocs, address: 10.20.0.7/24, gbps: 0.4, switch: ocs0, port: 7}
      - {name: ocs1, role: ocs, address: 10.20.0.8/24, gbps: 0.4, switch: ocs0, port: 8}
regions:
  - {name: r0, hosts: [h0, h1, h2, h3]}
circuits:
  - {switch: ocs0, ports: [1, 3]}
  - {switch: ocs0, ports: [2, 4]}
  - {switch: ocs0, ports: [5, 7]}
)";

class DataplaneFabricTest : public ::testing::Test {
 protected:
  // `yaml`: the spec to bring up (kDataplaneSpec unless a test rewires it).
  void Up(const std::string& stem, const std::string& yaml = kDataplaneSpec) {
    MIXNET_SKIP_UNLESS_NETNS();
    absl::StatusOr<cluster::ClusterSpec> spec = cluster::ClusterSpec::Parse(yaml, stem);
    ASSERT_TRUE(spec.ok()) << spec.status();
    spec_ = *std::move(spec);
    prefix_ = UniquePrefix(stem);
    absl::StatusOr<std::unique_ptr<emulation::EmulatedFabric>> fabric =
        emulation::EmulatedFabric::Up(spec_, prefix_);
    ASSERT_TRUE(fabric.ok()) << fabric.status();
    fabric_ = *std::move(fabric);
  }

  void TearDown() override { DownFabric(fabric_, prefix_); }

  // A communicator for `rank` on host h<rank> running `router`, created on
  // the calling thread after it entered the host's namespace.
  // `pull_chunk`: CommunicatorOptions::pull_chunk_bytes (0: each path
  // carries its planned share whole).
  absl::StatusOr<std::unique_ptr<collectives::Communicator>> Join(
      int rank, int world, rendezvous::Store& store, const std::string& router = "v2",
      size_t pull_chunk = collectives::CommunicatorOptions{}.pull_chunk_bytes) {
    const std::string host = absl::StrCat("h", rank);
    RETURN_IF_ERROR(EnterNamespace(fabric_->HostNamespace(host)));
    collectives::CommunicatorOptions o = TestOptions(rank, world, &store);
    o.timeout = absl::Seconds(40);
    o.spec = spec_;
    o.host = host;
    o.router = router;
    o.device_options.stall_timeout = absl::Seconds(1);
    o.pull_chunk_bytes = pull_chunk;
    return collectives::Communicator::Create(std::move(o));
  }

  absl::StatusOr<uint64_t> TxBytes(const std::string& host, const std::string& nic) const {
    ASSIGN_OR_RETURN(emulation::LinkCounters c, fabric_->ReadCounters(host, nic));
    return c.tx_bytes;
  }

  cluster::ClusterSpec spec_;
  std::string prefix_;
  std::unique_ptr<emulation::EmulatedFabric> fabric_;
};

}  // namespace mixnet::testing
