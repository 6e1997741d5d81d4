// The fluid completion-time model of one region's all-to-all, shared by the
// planner (inside its search loops), router v2 (to split bytes across paths)
// and the fabric simulator. Pure computation; a FluidModel is immutable after
// construction and may be read from any thread.
//
// The model (units: bytes, bytes/s, seconds):
//  - D(i, j) >= 0 is what host i sends host j in one all-to-all; the diagonal
//    stays inside a host (NVLink) and is ignored.
//  - Host h reaches the electrical fabric (EPS) through E(h) bytes/s in each
//    direction (the sum of its EPS NICs); the EPS core is non-blocking, so the
//    only EPS limits are each host's egress and ingress.
//  - A circuit is one NIC pair at line rate, full duplex: c(i, j) is the sum of
//    the rates of the circuits joining i and j, per direction. Circuits are
//    dedicated to their pair (direct routing) unless relaying is allowed.
//  - All flows start together and are perfectly divisible (fluid). With
//    direct routing only, pair (i, j) sends x(i, j) <= D(i, j) over its
//    circuits and the rest over EPS. For a target time T the best split is
//    x(i, j) = min(D(i, j), T c(i, j)), so the completion time is the smallest T
//    with, for every host h,
//        egress:  sum_j max(0, D(h, j) - T c(h, j)) <= T E(h)
//        ingress: sum_i max(0, D(i, h) - T c(i, h)) <= T E(h)
//    Each side is a decreasing piecewise-linear function of T with one
//    breakpoint per circuit peer (at most alpha), so a host's time is found
//    exactly in a few O(alpha) passes: "the slowest host's bytes over the
//    bandwidth its paths give it, EPS carrying what circuits do not".
//    T = max over hosts of max(egress, ingress time). It is infinite when a
//    host with no EPS has bytes for a peer it has no circuit to.
//  - With relaying (see routing.h) bytes of (i, j) may also go i -> k -> j over
//    the circuits (i, k) and (k, j), using their spare capacity; then T is the
//    largest load / capacity over every circuit direction and every EPS side.
#pragma once

#include <limits>
#include <vector>

#include "runtime/locality/traffic_matrix.h"

namespace mixnet::planner {

inline constexpr double kInfinity = std::numeric_limits<double>::infinity();

// The circuits of one host towards one peer, aggregated: `Bps` is the sum of
// the rates of `circuits` circuits per direction (the count matters only to
// relays' store and forward, routing.h: a chunk crosses one circuit).
struct CircuitLink {
  int peer = 0;
  double Bps = 0;
  int circuits = 1;
};

// Circuits per host, aggregated per peer; adjacency[h] lists h's peers once.
// Symmetric: (j, c) in adjacency[i] iff (i, c) in adjacency[j].
using Adjacency = std::vector<std::vector<CircuitLink>>;

// Builds an Adjacency from undirected circuits (a, b) with rate `Bps` each.
struct UndirectedCircuit {
  int a = 0;
  int b = 0;
  double Bps = 0;
};
Adjacency MakeAdjacency(int hosts, const std::vector<UndirectedCircuit>& circuits);

// The time one side (egress or ingress) of a host needs: the smallest T with
// total - sum_k min(d[k], T c[k]) <= T eps. `d[k]` are the bytes to (or from)
// circuit peer k, `c[k]` its circuit rate; total >= sum d. Infinity when the
// bytes cannot all leave (eps 0 and bytes off the circuits).
double SideTime(double total, double eps, const double* d, const double* c, int k);

struct FluidEstimate {
  double completion_s = 0;     // max over hosts
  int bottleneck_host = -1;    // a host whose time is completion_s (-1: no traffic)
  std::vector<double> host_s;  // per host: max(egress, ingress) time
};

class FluidModel {
 public:
  // `demand` must be square with eps_Bps.size() rows, entries finite and >= 0,
  // eps_Bps finite and >= 0 (validated by the planner; not re-checked here).
  FluidModel(const TrafficMatrix& demand, std::vector<double> eps_Bps);

  int hosts() const { return n_; }
  double demand(int src, int dst) const { return d_[static_cast<size_t>(src) * n_ + dst]; }
  double eps_Bps(int h) const { return eps_[h]; }
  double egress_bytes(int h) const { return row_[h]; }
  double ingress_bytes(int h) const { return col_[h]; }

  // max(egress, ingress) time of host h with circuits `links` (aggregated per
  // peer, at most one entry per peer), direct routing.
  double HostTime(int h, const CircuitLink* links, int count) const;
  double HostTime(int h, const std::vector<CircuitLink>& links) const {
    return HostTime(h, links.data(), static_cast<int>(links.size()));
  }

  // The direct-routing completion time of the region under `adjacency`.
  FluidEstimate Estimate(const Adjacency& adjacency) const;
  // Estimate(adjacency).completion_s without the per-host detail (no allocation).
  double Completion(const Adjacency& adjacency) const;

  // A bound no topology or routing beats: every host's bytes over all its
  // NICs, max(egress, ingress) / (E(h) + ocs_Bps[h]), where ocs_Bps[h] is the
  // sum of h's OCS port rates.
  double LowerBound(const std::vector<double>& ocs_Bps) const;

 private:
  int n_ = 0;
  std::vector<double> d_;
  std::vector<double> eps_;
  std::vector<double> row_;
  std::vector<double> col_;
};

}  // namespace mixnet::planner
