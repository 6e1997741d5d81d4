// The cluster spec: hosts, GPUs, NICs (EPS or OCS, with the OCS switch port
// each OCS NIC is cabled to), OCS switches, regions and optional initial
// circuits, loaded from YAML. Immutable after loading; safe to share across
// threads.
//
// Example:
//   name: demo
//   ocs_switches:
//     - {name: ocs0, ports: 16, switch_ms: 25}
//   hosts:
//     - name: h0
//       gpus: 8
//       nics:
//         - {name: eps0, role: eps, address: 10.10.0.1/16, gbps: 0.2}
//         - {name: ocs0, role: ocs, address: 10.20.0.1/16, gbps: 0.4, switch: ocs0, port: 1}
//   regions:
//     - {name: r0, hosts: [h0, h1]}
//   circuits:                       # optional initial circuits
//     - {switch: ocs0, ports: [1, 3]}
#pragma once

#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"

namespace mixnet::cluster {

enum class NicRole { kEps, kOcs };
std::string_view NicRoleName(NicRole role);

struct NicSpec {
  std::string name;  // interface name inside the host ("eps0", "ocs1", "lo")
  NicRole role = NicRole::kEps;
  std::string address;     // IPv4 address, without prefix
  int prefix_len = 32;     // from "a.b.c.d/len"; 32 when absent
  double gbps = 0;         // link speed in Gbit/s (> 0)
  std::string ocs_switch;  // OCS NICs only: switch name
  int ocs_port = 0;        // OCS NICs only: 1-based switch port
};

struct HostSpec {
  std::string name;
  int gpus = 1;
  std::vector<NicSpec> nics;
  std::string region;  // filled from `regions` (empty when in none)

  const NicSpec* FindNic(std::string_view nic) const;
};

struct OcsSwitchSpec {
  std::string name;
  int ports = 0;
  double switch_ms = 0;
};

struct RegionSpec {
  std::string name;
  std::vector<std::string> hosts;
};

// One duplex circuit between two ports of one switch.
struct CircuitSpec {
  std::string ocs_switch;
  int port_a = 0;
  int port_b = 0;
};

struct ClusterSpec {
  std::string name;
  std::vector<HostSpec> hosts;
  std::vector<OcsSwitchSpec> ocs_switches;
  std::vector<RegionSpec> regions;
  std::vector<CircuitSpec> circuits;

  // Parses YAML text. Errors are InvalidArgument naming the source, line and
  // field path, e.g. "spec.yaml:12: hosts[1].nics[0].role: expected eps or ocs, got 'foo'".
  static absl::StatusOr<ClusterSpec> Parse(std::string_view yaml,
                                           std::string_view source = "<spec>");
  static absl::StatusOr<ClusterSpec> LoadFile(const std::string& path);

  // A one-host spec named `host` with a single EPS NIC (used when no spec is
  // given: every rank on this machine, talking over `ifname`/`address`).
  static ClusterSpec SingleHost(std::string_view host, std::string_view ifname,
                                std::string_view address, double gbps = 100);

  const HostSpec* FindHost(std::string_view host) const;
  const OcsSwitchSpec* FindSwitch(std::string_view name) const;
  // The host and NIC cabled to (switch, port), or nullopt.
  struct PortOwner {
    const HostSpec* host;
    const NicSpec* nic;
  };
  std::optional<PortOwner> FindPort(std::string_view ocs_switch, int port) const;
};

// Checks a set of circuits (the spec's initial ones or a live topology)
// against the spec's cabling: every switch known, every port in 1..ports and
// cabled to an OCS NIC, no port used twice, no self-loop, no circuit joining
// two NICs of one host, no circuit between hosts of different regions (when
// both are in a region). InvalidArgument "circuits[i].<field>: ..." otherwise.
absl::Status ValidateCircuits(const ClusterSpec& spec, const std::vector<CircuitSpec>& circuits);

// Parses "a.b.c.d" or "a.b.c.d/len" (decimal octets without leading zeros,
// len 0..32). `prefix_len` is 32 when absent. InvalidArgument otherwise.
struct Ipv4Address {
  std::string address;  // "a.b.c.d"
  int prefix_len = 32;
};
absl::StatusOr<Ipv4Address> ParseIpv4(std::string_view text);

}  // namespace mixnet::cluster
