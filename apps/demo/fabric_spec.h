// Cluster specs of the demo's three fabrics, as YAML text (written to the run
// dir so that workers, mixnet-controller and the emulation read the same file):
//   eps         each host: eps0 on the EPS bridge + k OCS NICs cabled to switch
//               ocs0, no circuits (the OCS NICs stay dark);
//   mixnet      the same spec; circuits come from mixnet-controller at run time;
//   nonblocking each host: 1 + k EPS NICs (same rate) on the EPS bridge, no OCS.
// Emulated (netns) addresses: EPS NIC i of host h 10.10.i.(h+1)/16, OCS NIC j
// 10.20.j.(h+1)/16, OCS port h*k + j + 1. Loopback mode: the same NICs on
// distinct 127.x addresses (no rate limits). Pure functions; any thread.
#pragma once

#include <string>

#include "absl/strings/string_view.h"

namespace mixnet::demo {

enum class FabricKind { kEps, kMixnet, kNonblocking };
absl::string_view FabricName(FabricKind kind);  // "eps", "mixnet", "nonblocking"

struct FabricShape {
  int hosts = 8;
  int ocs_nics = 3;  // k
  // Low on purpose: two shared cores must move every byte of 8 hosts x (1 + k)
  // NICs; at 0.2 Gbit/s the runs were CPU-bound and every fabric looked alike.
  double gbps = 0.01;
  double switch_ms = 10;
  bool loopback = false;
};

std::string FabricSpecYaml(FabricKind kind, const FabricShape& shape);

}  // namespace mixnet::demo
