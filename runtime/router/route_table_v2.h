// Router v2: the route table of one host for one topology epoch, with per-path
// weights that split each peer's bytes across its direct circuits, EPS and
// (optionally) two-hop relays through a third host (two circuits, or one
// circuit and one EPS hop: Path::first_hop, second_hop), so
// that the fluid-model completion time of the host's region is smallest
// (planner::OptimiseRouting, water-filling). Every host of a region computes
// the same region-wide split from the same inputs (deterministic), so relays
// agree on what they forward. Runs on whichever thread installs an epoch; the
// table is immutable afterwards.
//
// Compared with v1 (route_table.h), for a peer in the local host's region
// with predicted bytes:
//  - PathsTo lists the circuit paths, EPS paths and kRelay paths that carry a
//    positive share, each with its weight (the shares sum to 1; circuits of
//    one pair share their bytes by rate, EPS paths likewise);
//  - a peer with no predicted bytes, a peer outside the region and the local
//    host keep v1's paths and equal weights.
// EpsPathsTo is v1's, whatever the split.
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/types/span.h"
#include "runtime/cluster/cluster_spec.h"
#include "runtime/locality/traffic_matrix.h"
#include "runtime/planner/routing.h"
#include "runtime/router/route_table.h"

namespace mixnet::router {

struct RouterV2Options {
  bool relay = true;  // allow kRelay paths
  // This host's relay chunk (MIXNET_RELAY_CHUNK_BYTES: the origin's rules),
  // for the relays' store and forward in the model (planner/routing.h); 0:
  // fluid relays.
  double relay_chunk_bytes = 0;
  // How the region's bytes are split (planner/lp_routing.h's
  // RoutingFunctionFor where the program links the LP); null: the
  // water-filling, planner::OptimiseRouting.
  planner::RoutingFunction split = nullptr;
};

// A controller's routing for one plan (mixnet.control.v1.Routing): the
// demand matrix of the plan's regions, over `hosts` (names of the spec).
struct RoutingPlan {
  int version = 2;
  bool relay = false;
  std::vector<std::string> hosts;
  std::vector<double> bytes;  // row-major, hosts.size() squared
};

// The plan's matrix in spec.hosts order (hosts it does not name: 0).
// InvalidArgument naming the culprit for a version other than 2, a size
// mismatch, an unknown or repeated host, or a negative or non-finite entry.
absl::StatusOr<TrafficMatrix> PlanDemand(const cluster::ClusterSpec& spec, const RoutingPlan& plan);

// The share of the bytes to `peer_host` that a table sends over EPS when
// the pair's circuits are usable, counting relay shares as EPS: the weights
// of its kEps and kRelay paths. 0 for a pair whose paths are all circuits
// (router v1), 1 for one with none.
double EpsShare(const RouteTable& table, std::string_view peer_host);

// How a table splits the bytes to `peer_host`: the share of its kEps paths
// and, per relay host (in path order, one entry per host), the share of its
// kRelay paths through that host; the circuits carry the rest. A peer with
// no paths: eps 1.
struct PeerShares {
  double eps = 0;
  std::vector<std::pair<std::string, double>> relays;  // (relay host, share)
};
PeerShares SharesTo(const RouteTable& table, std::string_view peer_host);

// A plan serves a MoE dispatch and its combine (the transposed demand), so
// the collectives keep its split and its reverse's. Whether a call that
// sends sent[p] to and receives received[p] from each peer p weighs more on
// the reverse: sum of sent x from + received x to against sum of sent x to +
// received x from, where to[p] and from[p] are the plan's bytes from this
// host to p and from p to it (a tie, or spans of unequal size: the plan).
bool PrefersReverse(absl::Span<const double> sent, absl::Span<const double> received,
                    absl::Span<const double> to, absl::Span<const double> from);

// `demand` holds bytes per ordered host pair, indexed in spec.hosts order
// (spec.hosts.size() square); only the local host's region is used.
// InvalidArgument as BuildRouteTable, or when the matrix has the wrong size
// or an entry is negative or not finite (naming the two hosts).
absl::StatusOr<RouteTable> BuildRouteTableV2(const cluster::ClusterSpec& spec,
                                             const Topology& topology, std::string_view local_host,
                                             const TrafficMatrix& demand,
                                             const RouterV2Options& options = {});

}  // namespace mixnet::router
