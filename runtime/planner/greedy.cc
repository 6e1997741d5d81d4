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
  // The pairs in one sorted run (heaviest first, lowest (i, j) on ties) plus
  // a small max-heap of the demoted pairs put back; the next pair is the
  // larger head of the two. The same choices as scanning all pairs each step
  // (the order is total), in O(pairs log pairs + circuits log circuits).
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
  std::vector<Entry> run;
  run.reserve(static_cast<size_t>(n) * (n - 1) / 2);
  for (int i = 0; i < n; ++i) {
    for (int j = i + 1; j < n; ++j) {
      const double w = model.demand(i, j) + model.demand(j, i);
      if (w > 0) run.push_back({w, i, j});
    }
  }
  // Pairs were generated in (i, j) order, so a stable sort on weight alone
  // yields the total order (heaviest first, lowest (i, j) on ties).
  std::stable_sort(run.begin(), run.end(),
                   [](const Entry& x, const Entry& y) { return x.w > y.w; });
  std::vector<Entry> demoted;
  size_t next = 0;
  while (next < run.size() || !demoted.empty()) {
    Entry e;
    if (!demoted.empty() && (next == run.size() || lower(run[next], demoted.front()))) {
      std::pop_heap(demoted.begin(), demoted.end(), lower);
      e = demoted.back();
      demoted.pop_back();
    } else {
      e = run[next++];
    }
    // Free ports only ever shrink: a pair that cannot take a circuit now
    // never will, so it leaves for good.
    if (!g.MayConnect(e.i, e.j)) continue;
    const int s = g.CommonSwitch(e.i, e.j);
    g.Add(e.i, e.j, s);
    e.w /= 100.0 * g.count(e.i, e.j);
    if (e.w > 0) {
      demoted.push_back(e);
      std::push_heap(demoted.begin(), demoted.end(), lower);
    }
  }
}

}  // namespace mixnet::planner::internal
