// TopoOpt as TopoOpt is (NSDI 2023): every NIC of every server on one static
// direct-connect topology (a patch panel, or an OCS set once), planned once per
// job from the job's traffic, with no electrical fabric; bytes between servers
// without a direct link are forwarded through hosts over shortest paths.
//
// The plan (PlanDirectConnect) follows TopoOpt's mechanism, not its code: a
// NIC's transmit and receive fibres may go to different servers (a directed
// multigraph, each server `nics` links out and in); NIC 0 of every server
// carries one ring permutation over all servers in the order of the
// cross-region traffic (RingOrder: k-aligned servers, pipeline neighbours
// adjacent; TopoOpt's all-reduce ring permutations, which also keep the
// topology strongly connected); every further NIC is one round of a greedy
// maximum-weight directed matching on the job's per-iteration bytes, each
// pair's weight the link capacity its bytes take on the topology so far
// (bytes x hops) / (1 + its direct links) (TopoOpt uses Blossom matchings on
// the model-parallel traffic; greedy is the 1/2 approximation); ports no
// demand wants are matched off in index order.
// Routing (MultiHopRouter): a pair's bytes are split equally over up to
// `max_paths` shortest-hop paths (the direct links when there are any).
// Main thread only; plain values.
#pragma once

#include <cstdint>
#include <memory>
#include <unordered_map>
#include <vector>

#include "absl/status/statusor.h"
#include "sim/fabric.h"
#include "sim/flow_solver.h"

namespace mixnet::sim {

// out[s]: the server each of s's NICs transmits to (one entry per NIC; a
// server appears once per parallel link; -1 for an unused NIC).
struct DirectTopology {
  std::vector<std::vector<int>> out;
  int servers() const { return static_cast<int>(out.size()); }
};

// `ring`: every server once, in the order NIC 0's ring permutation visits
// them. `demand`: per-iteration bytes between servers (any order, repeats
// summed). InvalidArgument when the ring is not a permutation of the servers.
absl::StatusOr<DirectTopology> PlanDirectConnect(int servers, int nics,
                                                 const std::vector<int>& ring,
                                                 const std::vector<ServerFlow>& demand);

// NIC 0's ring order for a layout: server position k by position, within it
// replica by replica, within a replica stage by stage (so pipeline sends and
// the replicas of one server position are a few hops apart).
std::vector<int> RingOrder(const Layout& l);

// Shortest-hop routes over a DirectTopology, each distinct directed server
// pair one link of (parallel links x link_Bps).
class MultiHopRouter {
 public:
  MultiHopRouter(DirectTopology topology, double link_Bps, int max_paths);
  // Adds one link per distinct directed server pair to `net`; call first.
  void AddLinks(FlowNetwork& net) const;
  // Adds `bytes` from src to dst over its paths (split equally). False when dst
  // cannot be reached from src.
  bool AddFlow(FlowNetwork& net, int src, int dst, double bytes);
  // The paths of a pair, as link-id lists (empty when unreachable or src == dst).
  const std::vector<std::vector<int>>& Paths(int src, int dst);

 private:
  const std::vector<int>& DistanceTo(int dst);

  DirectTopology t_;
  int max_paths_;
  std::vector<double> link_Bps_;                       // per link id
  std::vector<std::vector<std::pair<int, int>>> adj_;  // per server: (peer, link id), sorted
  std::vector<std::vector<int>> radj_;                 // per server: servers linking to it
  std::vector<std::vector<int>> dist_to_;              // per destination (lazily), -1 unreachable
  std::unordered_map<int64_t, std::vector<std::vector<int>>> paths_;  // src * servers + dst
};

// The topoopt fabric over a plan (see above); `Prepare` plans it.
// InvalidArgument for fewer than one NIC per server or no paths.
absl::StatusOr<std::unique_ptr<Fabric>> MakeTopoOptFabric(const FabricOptions& options,
                                                          const Layout& layout);

}  // namespace mixnet::sim
