// The improved planner's last phase when plans are scored with relays
// (PlannerOptions::relay, routed_search_evaluations): a first-improvement
// local search over the circuit set scored by the routing the workers run
// (OptimiseRouting with relays and the relay chunk), not by the direct model
// the earlier phases use. So the plan is chosen for the routed floor: a hot
// receiver fed through its partners' circuits, relays, EPS, all in the
// score. Pure function of its inputs (deterministic: an evaluation budget,
// no clock); the planning thread.
#include <algorithm>
#include <set>
#include <tuple>
#include <vector>

#include "runtime/planner/plan_graph.h"
#include "runtime/planner/routing.h"

namespace mixnet::planner::internal {
namespace {

constexpr double kRoutedRel = 1e-9;  // an improvement smaller than this is none
// Within this of the lower bound no change can gain more: stop.
constexpr double kRoutedNearBound = 1e-3;

// One change of the circuit set: remove up to two circuits, add up to two.
struct Change {
  double key = 0;  // the ordering heuristic (larger first)
  HostCircuit remove[2];
  int removes = 0;
  HostCircuit add[2];
  int adds = 0;
};

void Apply(const Change& c, PlanGraph& g) {
  for (int i = 0; i < c.removes; ++i) g.Remove(c.remove[i].a, c.remove[i].b, c.remove[i].s);
  for (int i = 0; i < c.adds; ++i) g.Add(c.add[i].a, c.add[i].b, c.add[i].s);
}

void Undo(const Change& c, PlanGraph& g) {
  for (int i = 0; i < c.adds; ++i) g.Remove(c.add[i].a, c.add[i].b, c.add[i].s);
  for (int i = 0; i < c.removes; ++i) g.Add(c.remove[i].a, c.remove[i].b, c.remove[i].s);
}

// Bytes both ways between a and b: what a circuit there can carry directly.
double PairBytes(const FluidModel& m, int a, int b) { return m.demand(a, b) + m.demand(b, a); }

// The ordering heuristic: the direct bytes the added circuits could carry
// less what the removed ones did, each share divided among the pair's
// circuits (a pair's k-th circuit is worth 1/k of its bytes).
double Key(const FluidModel& m, const PlanGraph& g, const Change& c) {
  double key = 0;
  for (int i = 0; i < c.adds; ++i) {
    const HostCircuit& x = c.add[i];
    key += PairBytes(m, x.a, x.b) / (g.count(x.a, x.b) + 1);
  }
  for (int i = 0; i < c.removes; ++i) {
    const HostCircuit& x = c.remove[i];
    key -= PairBytes(m, x.a, x.b) / std::max(1, g.count(x.a, x.b));
  }
  return key;
}

// Every change of one step: swap the ends of two circuits on one switch,
// move one end of a circuit to a host with a free port, add a circuit where
// two hosts have free ports on one switch. Duplicates (parallel circuits)
// are listed once.
std::vector<Change> Neighbours(const FluidModel& m, const PlanGraph& g) {
  const int n = g.hosts();
  std::vector<Change> out;
  std::set<std::tuple<int, int, int, int, int, int>> seen;  // (kind, pairs..., switch)
  auto lo = [](int a, int b) { return std::min(a, b); };
  auto hi = [](int a, int b) { return std::max(a, b); };
  const std::vector<HostCircuit>& cs = g.circuits();
  for (size_t i = 0; i < cs.size(); ++i) {
    const HostCircuit& x = cs[i];
    // Swaps with every later circuit on the same switch.
    for (size_t j = i + 1; j < cs.size(); ++j) {
      const HostCircuit& y = cs[j];
      if (y.s != x.s) continue;
      const int pairs[2][4] = {{x.a, y.a, x.b, y.b}, {x.a, y.b, x.b, y.a}};
      for (const auto& p : pairs) {
        if (p[0] == p[1] || p[2] == p[3]) continue;
        // The same two pairs as before: no change.
        const auto old1 = std::make_pair(lo(x.a, x.b), hi(x.a, x.b));
        const auto old2 = std::make_pair(lo(y.a, y.b), hi(y.a, y.b));
        const auto new1 = std::make_pair(lo(p[0], p[1]), hi(p[0], p[1]));
        const auto new2 = std::make_pair(lo(p[2], p[3]), hi(p[2], p[3]));
        if ((new1 == old1 && new2 == old2) || (new1 == old2 && new2 == old1)) continue;
        const auto k =
            std::make_tuple(0, std::min(old1, old2).first * n + std::min(old1, old2).second,
                            std::max(old1, old2).first * n + std::max(old1, old2).second,
                            std::min(new1, new2).first * n + std::min(new1, new2).second,
                            std::max(new1, new2).first * n + std::max(new1, new2).second, x.s);
        if (!seen.insert(k).second) continue;
        Change c;
        c.remove[0] = x;
        c.remove[1] = y;
        c.removes = 2;
        c.add[0] = {p[0], p[1], x.s};
        c.add[1] = {p[2], p[3], x.s};
        c.adds = 2;
        out.push_back(c);
      }
    }
    // Moves: keep one end, re-point the other to a host with a free port.
    for (int keep = 0; keep < 2; ++keep) {
      const int a = keep == 0 ? x.a : x.b;
      const int b = keep == 0 ? x.b : x.a;
      for (int v = 0; v < n; ++v) {
        if (v == a || v == b || g.free(v, x.s) <= 0) continue;
        if (!seen.insert({1, lo(a, b) * n + hi(a, b), lo(a, v) * n + hi(a, v), 0, 0, x.s}).second)
          continue;
        Change c;
        c.remove[0] = x;
        c.removes = 1;
        c.add[0] = {a, v, x.s};
        c.adds = 1;
        out.push_back(c);
      }
    }
  }
  // Adds: two hosts with a free port on one switch.
  for (int a = 0; a < n; ++a) {
    for (int b = a + 1; b < n; ++b) {
      const int s = g.CommonSwitch(a, b);
      if (s < 0) continue;
      Change c;
      c.add[0] = {a, b, s};
      c.adds = 1;
      out.push_back(c);
    }
  }
  for (Change& c : out) c.key = Key(m, g, c);
  std::stable_sort(out.begin(), out.end(),
                   [](const Change& x, const Change& y) { return x.key > y.key; });
  return out;
}

}  // namespace

double RoutedSearch(const FluidModel& model, const RoutingOptions& routing, double lower_bound,
                    int max_evaluations, PlanGraph& g) {
  double best = OptimiseRouting(model, g.adjacency(), routing).completion_s;
  int evaluations = 1;
  while (evaluations < max_evaluations && best > lower_bound * (1 + kRoutedNearBound)) {
    bool improved = false;
    for (const Change& c : Neighbours(model, g)) {
      if (evaluations >= max_evaluations) break;
      Apply(c, g);
      const double t = OptimiseRouting(model, g.adjacency(), routing).completion_s;
      ++evaluations;
      if (t < best * (1 - kRoutedRel)) {
        best = t;
        improved = true;
        break;
      }
      Undo(c, g);
    }
    if (!improved) break;
  }
  return best;
}

}  // namespace mixnet::planner::internal
