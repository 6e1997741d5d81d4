// The emulated OCS mixnet_ocs_bench drives with --backend netns: an emulated
// fabric (emulation/) of ports/2 hosts, each with two OCS NICs cabled to
// switch "ocs0" (host i on ports 2i+1 and 2i+2), no EPS NICs, and no initial
// circuits. Needs root. The fabric's namespaces go away when the returned
// object is destroyed (EmulatedFabric's destructor).
//
// Threading: the calling thread only.
#pragma once

#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "emulation/emulated_fabric.h"

namespace mixnet::ocs::bench {

// The cluster spec as YAML (ports even, 4..508).
std::string BenchFabricSpec(int ports);

// Builds the fabric under a prefix unique to this process.
absl::StatusOr<std::unique_ptr<emulation::EmulatedFabric>> UpBenchFabric(int ports);

// True when duplex ports a and b are the two NICs of one host.
inline bool SameBenchHost(int a, int b) { return (a - 1) / 2 == (b - 1) / 2; }

}  // namespace mixnet::ocs::bench
