// The paper's planner, as the baseline (planner.h, README.md): degree-bounded
// greedy matching on the symmetrised matrix. Single-threaded: one call per
// region and planning step.
#include <algorithm>
#include <vector>

#include "runtime/planner/plan_graph.h"

namespace mixnet::planner::internal {

// 1. w(i, j) = D(i, j) + D(j, i) (circuits are duplex);
// 2. every host starts with its free OCS ports and no circuit;
// 3. repeatedly take the heaviest pair with traffic and a free port at both
//    ends (on a common switch), add one circuit, demote the pair: after its
//    k-th circuit w <- w / (100 k) (the released simulator's demotion); hosts
//    with no free port drop out. Stop when no pair with traffic and free ports
//    remains. Ties go to the lowest (i, j).
void PaperGreedy(const FluidModel& model, PlanGraph& g) {
  // A max-heap of pairs by weight, lowest (i, j) first on ties: the same
  // choices as scanning all pairs each step, in O((pairs + circuits) log pairs).
  struct Entry {
    double w;
    int i;
    int j;
  };
  auto lower = [](const Entry& x, const Entry& y) {
    if (x.w != y.w) return x.w < y.w;
    if (x.i != y.i) return x.i > y.i;
    return x.j > y.j;
  };
  const int n = g.hosts();
  std::vector<Entry> heap;
  heap.reserve(static_cast<size_t>(n) * (n - 1) / 2);
  for (int i = 0; i < n; ++i) {
    for (int j = i + 1; j < n; ++j) {
      const double w = model.demand(i, j) + model.demand(j, i);
      if (w > 0) heap.push_back({w, i, j});
    }
  }
  std::make_heap(heap.begin(), heap.end(), lower);
  while (!heap.empty()) {
    std::pop_heap(heap.begin(), heap.end(), lower);
    Entry e = heap.back();
    heap.pop_back();
    // Free ports only ever shrink: a pair that cannot take a circuit now
    // never will, so it leaves the heap for good.
    const int s = g.CommonSwitch(e.i, e.j);
    if (s < 0) continue;
    g.Add(e.i, e.j, s);
    e.w /= 100.0 * g.count(e.i, e.j);
    if (e.w > 0) {
      heap.push_back(e);
      std::push_heap(heap.begin(), heap.end(), lower);
    }
  }
}

}  // namespace mixnet::planner::internal
