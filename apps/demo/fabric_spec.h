// Cluster specs of the demo's fabrics, as YAML text (written to the run dir
// so that workers, mixnet-controller and the emulation read the same file):
//   eps         each host: eps0 on the EPS bridge + k OCS NICs cabled to switch
//               ocs0, no circuits (the OCS NICs stay dark);
//   mixnet      the same spec; circuits come from mixnet-controller at run time;
//   static      the same spec with fixed circuits (planned once, never switched);
//   nonblocking each host: 1 + k EPS NICs (same rate) on one EPS bridge, no OCS;
//   oversub     the same NICs as nonblocking, on leaf bridges whose uplinks to
//               the spine are shaped to the cost-equal oversubscription (the
//               emulation options, not the spec, say so).
// Emulated (netns) addresses: EPS NIC i of host h 10.10.i.(h+1)/16, OCS NIC j
// 10.20.j.(h+1)/16, OCS port h*k + j + 1. Loopback mode: the same NICs on
// distinct 127.x addresses (no rate limits). Pure functions; any thread.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "absl/strings/string_view.h"
#include "runtime/cluster/cluster_spec.h"

namespace mixnet::demo {

enum class FabricKind { kEps, kMixnet, kStatic, kNonblocking, kOversub };
// "eps", "mixnet", "static", "nonblocking", "oversub"
absl::string_view FabricName(FabricKind kind);
std::optional<FabricKind> ParseFabric(absl::string_view name);
inline constexpr const char* kFabricList = "eps,oversub,static,mixnet,nonblocking";

struct FabricShape {
  int hosts = 8;
  int ocs_nics = 3;  // k
  // Every NIC's rate. Low on purpose: two shared cores move every byte of
  // 8 hosts x (1 + k) NICs (see docs/design/demo.md for how the default
  // was chosen).
  double gbps = 0.025;
  double switch_ms = 25;
  bool loopback = false;
};

// `circuits`: the static fabric's fixed circuits (ignored for the others).
std::string FabricSpecYaml(FabricKind kind, const FabricShape& shape,
                           const std::vector<cluster::CircuitSpec>& circuits = {});

}  // namespace mixnet::demo
