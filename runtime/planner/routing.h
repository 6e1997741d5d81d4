// Splitting each host pair's bytes across its direct circuits, EPS and two-hop
// relays through a third host (circuit-circuit, EPS-circuit, circuit-EPS), so that the fluid-model
// completion time (fluid_model.h) is smallest: the water-filling router v2
// builds its per-path weights from, and the planner and the simulator score
// topologies with. Pure computation, callable from any thread.
//
// Algorithm (OptimiseRouting):
//  1. Direct routing: T0 is the exact direct-routing optimum of the fluid
//     model; pair (i, j) puts min(D, T0 c) on its circuits, the rest on EPS.
//  2. With relaying: binary search on a target T below T0. For a target, each
//     circuit direction keeps its direct bytes min(D, T c) and offers the rest
//     of T c as spare; every host whose EPS egress (or ingress) exceeds T E
//     moves EPS bytes of its pairs (i, j) onto relays i -> k -> j with spare on
//     both circuits, as much as the excess, until no excess remains (the
//     target is feasible) or no relay has spare (it is not). Relays over
//     two circuits go first (a byte moved relieves both ends); then a host
//     whose EPS ingress is still over is fed EPS-then-circuit through its
//     circuit peers (i -EPS-> k -circuit-> j, using k's spare EPS ingress),
//     and one whose egress is still over sends circuit-then-EPS (i -circuit->
//     k -EPS-> j, using k's spare EPS egress). A one-sided relay goes only
//     through a host k with no circuit on the EPS hop's pair: the data plane
//     sends each hop over the pair's circuits when it has any (see
//     runtime/collectives/alltoall_relay.cc).
//  3. With store and forward (below) a smaller target relays more but need
//     not finish sooner: when the tails bind, a golden-section search over
//     targets between the smallest feasible one and T0 finds the best
//     evaluated routing. It is kept only if its evaluated completion time
//     (EvaluateRouting, store and forward included) beats T0.
// Relays store and forward (runtime/collectives/alltoall_relay.cc): the relay
// receives a whole chunk (`relay_chunk_bytes`, MIXNET_RELAY_CHUNK_BYTES)
// before it sends it on, one chunk on one circuit. So the last chunk of a
// relayed piece still has to cross the second hop once the first hop has
// carried it, and a relay route i -> k -> j of b bytes finishes no earlier
// than load(i, k) / c(i, k) + min(chunk, b) / (one circuit of (k, j)): the
// first hop's time in the fluid model, then the last chunk alone on one
// circuit. With chunk 0 the relays are fluid (no such tail).
// So the result is never slower than direct routing, which is never slower
// than "circuits if any, else EPS" (the paper) or EPS only.
#pragma once

#include <functional>
#include <utility>
#include <vector>

#include "runtime/planner/fluid_model.h"

namespace mixnet::planner {

// How the bytes of one ordered pair (i, j) travel.
struct PairSplit {
  double circuit = 0;                         // over the circuits joining i and j
  double eps = 0;                             // over EPS
  std::vector<std::pair<int, double>> relay;  // (relay host k, bytes) over i -> k -> j, circuits
  // (k, bytes) over i -> k on EPS, then k -> j on k's circuits to j.
  std::vector<std::pair<int, double>> eps_circuit;
  // (k, bytes) over i -> k on i's circuits to k, then k -> j on EPS.
  std::vector<std::pair<int, double>> circuit_eps;

  double total() const {
    double t = circuit + eps;
    for (const auto& r : relay) t += r.second;
    for (const auto& r : eps_circuit) t += r.second;
    for (const auto& r : circuit_eps) t += r.second;
    return t;
  }
};

struct RegionRouting {
  int hosts = 0;
  std::vector<PairSplit> pairs;  // hosts * hosts, row-major; the diagonal is unused
  double completion_s = 0;       // EvaluateRouting of this routing

  const PairSplit& at(int src, int dst) const {
    return pairs[static_cast<size_t>(src) * hosts + dst];
  }
  PairSplit& at(int src, int dst) { return pairs[static_cast<size_t>(src) * hosts + dst]; }
};

struct RoutingOptions {
  bool relay = true;  // allow two-hop relays over circuits
  // Also allow relays with one hop over EPS (EPS-circuit, circuit-EPS);
  // only with `relay`.
  bool eps_relay = true;
  int search_steps = 24;  // binary-search steps on the target time
  // The relays' unit of store and forward, bytes (the origin's
  // MIXNET_RELAY_CHUNK_BYTES); 0: fluid relays.
  double relay_chunk_bytes = 0;
};

// The routing with the smallest completion time found (see the algorithm above).
RegionRouting OptimiseRouting(const FluidModel& model, const Adjacency& adjacency,
                              const RoutingOptions& options = {});

// A way to split a region's bytes (router v2's, RouterV2Options::split):
// OptimiseRouting, or lp_routing.h's BestRouting where a program links the LP.
using RoutingFunction =
    std::function<RegionRouting(const FluidModel&, const Adjacency&, const RoutingOptions&)>;

// The paper's routing: a pair's bytes go over its circuits when it has any, else over EPS.
RegionRouting CircuitOnlyRouting(const FluidModel& model, const Adjacency& adjacency);
// Everything over EPS.
RegionRouting EpsOnlyRouting(const FluidModel& model);

// The completion time of a given routing: the largest load / capacity over
// every circuit direction (direct bytes, plus every relay hop over it) and
// every host's EPS egress and ingress (direct EPS bytes plus every relay hop
// over EPS), and, with relay_chunk_bytes > 0, every relay route's first-hop
// time plus its last chunk's second hop (see above; a hop over EPS runs at
// the slower of its two ends' EPS time). Infinity when bytes use a path of
// capacity 0.
double EvaluateRouting(const FluidModel& model, const Adjacency& adjacency,
                       const RegionRouting& routing, double relay_chunk_bytes = 0);

}  // namespace mixnet::planner
