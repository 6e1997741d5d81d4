// Router v1: for one host, the paths to every other host of the cluster under
// one topology epoch. Built from the cluster spec and the set of live OCS
// circuits; immutable once built, shared read-only by the collectives.
// Router v2 (route_table_v2.h) builds the same table with per-path weights
// from a traffic matrix, EPS next to circuits and optional two-hop relays.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "runtime/cluster/cluster_spec.h"

namespace mixnet {
class TrafficMatrix;
}

namespace mixnet::router {

struct RouterV2Options;

// kRelay (router v2 only): two hops through a relay host, each over
// circuits (kOcs) or EPS (kEps), not both over EPS (Path::first_hop,
// second_hop).
enum class PathKind { kIntraHost, kOcs, kEps, kRelay };
std::string_view PathKindName(PathKind kind);

// One way from the local host to a peer host: leave through `local_nic`,
// arrive at `remote_nic`.
struct Path {
  PathKind kind = PathKind::kEps;
  std::string local_nic;       // interface name on the local host
  std::string local_address;   // its IPv4 address
  std::string remote_nic;      // interface name on the peer host
  std::string remote_address;  // its IPv4 address
  double gbps = 0;             // min of both ends' link speeds (both hops for kRelay)
  // Share of the bytes to this peer that should take this path; the weights
  // of one peer's paths sum to 1. Router v1: equal weights.
  double weight = 0;
  // kRelay only: the first hop ends at `remote_nic` of `relay_host`, which
  // forwards through its `relay_nic` to the peer's `peer_nic`. Each hop is
  // kOcs (a circuit: the NICs of the pair's first circuit) or kEps (the
  // pair's first EPS path).
  PathKind first_hop = PathKind::kOcs;
  PathKind second_hop = PathKind::kOcs;
  std::string relay_host;
  std::string relay_nic;
  std::string peer_nic;
  std::string peer_address;
};

// The live circuits of the OCS fabric at one epoch.
struct Topology {
  uint64_t epoch = 0;
  std::vector<cluster::CircuitSpec> circuits;
};

class RouteTable {
 public:
  uint64_t epoch() const { return epoch_; }
  const std::string& local_host() const { return local_host_; }
  // Paths to `peer_host`, never empty for a host of the spec. Intra-host: one
  // kIntraHost path. Hosts joined by circuits: one kOcs path per circuit
  // (striped). Otherwise: kEps paths (EPS NICs paired in order).
  const std::vector<Path>& PathsTo(std::string_view peer_host) const;
  const std::map<std::string, std::vector<Path>, std::less<>>& all() const { return routes_; }
  // The kEps paths to `peer_host` whether or not circuits join the two hosts
  // (where the data plane re-sends a dead OCS path's chunks). Empty when one of
  // the two hosts has no EPS NIC or the host is unknown; for the local host, its
  // kIntraHost path.
  const std::vector<Path>& EpsPathsTo(std::string_view peer_host) const;
  // 1 for BuildRouteTable, 2 for BuildRouteTableV2.
  int version() const { return version_; }
  // Router v2: the fluid-model completion time of the local host's region
  // under the table's split (0 for v1).
  double predicted_completion_s() const { return predicted_completion_s_; }

 private:
  friend absl::StatusOr<RouteTable> BuildRouteTable(const cluster::ClusterSpec&, const Topology&,
                                                    std::string_view);
  friend absl::StatusOr<RouteTable> BuildRouteTableV2(const cluster::ClusterSpec&, const Topology&,
                                                      std::string_view, const TrafficMatrix&,
                                                      const RouterV2Options&);
  uint64_t epoch_ = 0;
  int version_ = 1;
  double predicted_completion_s_ = 0;
  std::string local_host_;
  std::map<std::string, std::vector<Path>, std::less<>> routes_;
  std::map<std::string, std::vector<Path>, std::less<>> eps_routes_;
};

// Checks a topology against the spec (see cluster::ValidateCircuits):
// InvalidArgument "topology epoch N: circuits[i].<field>: ..." when a circuit
// names an unknown switch, a port out of range or uncabled, a port used twice,
// a self-loop, two NICs of one host, or hosts of different regions.
absl::Status ValidateTopology(const cluster::ClusterSpec& spec, const Topology& topology);

// InvalidArgument when the local host is unknown, a circuit names an unknown
// switch or uncabled port, a port is used twice, or a circuit joins two NICs of
// one host (see ValidateTopology); every peer host must be reachable (a host
// with no EPS NIC and no circuit to some peer is an error naming both).
absl::StatusOr<RouteTable> BuildRouteTable(const cluster::ClusterSpec& spec,
                                           const Topology& topology, std::string_view local_host);

}  // namespace mixnet::router
