// The rail-optimised fabric: NIC k of every server cabled to rail k's leaf
// switch; a leaf serves `rail_group_servers` servers; leaves reach each other
// through a spine whose capacity per leaf is its servers' NIC rate divided by
// `rail_spine_oversub`. Each GPU's bytes travel on the rail of the GPU they go
// to: when that is not the sender's own rail, the sender first moves them over
// NVLink to its GPU on that rail (NCCL's PXN), so a byte's up-link is the
// source server's NIC on the destination rail and its down-link the
// destination GPU's own NIC; bytes between servers under different leaves
// also cross the spine. Unlike the fat-tree model (a server's 8 NICs pooled),
// a server's NICs are separate links here, so rails load unevenly whenever the
// bytes per destination rail differ. Main thread only.
#pragma once

#include <memory>

#include "absl/status/statusor.h"
#include "sim/fabric.h"

namespace mixnet::sim {

// InvalidArgument for a group of fewer than one server or a ratio below 1.
absl::StatusOr<std::unique_ptr<Fabric>> MakeRailFabric(const FabricOptions& options,
                                                       const Layout& layout);

}  // namespace mixnet::sim
