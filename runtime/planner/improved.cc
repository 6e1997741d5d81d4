// The improved planner (planner.h, README.md): worst-host-first marginal-gain
// greedy on the fluid model, a fill of the ports left over, then local search
// (moves and swaps around the slowest host). Single-threaded: one call per
// region and planning step.
#include <algorithm>
#include <cmath>
#include <vector>

#include "runtime/planner/plan_graph.h"

namespace mixnet::planner::internal {
namespace {

constexpr double kRel = 1e-9;  // relative tolerance: gains below it count as ties

// True when one more circuit between b and j cannot lower b's time t: the
// pair's bytes in both directions already finish on its circuits by t (a
// side's time only falls when a peer still busy at t gets more rate).
bool Saturated(const FluidModel& model, const PlanGraph& g, int b, int j, double t) {
  const double cap = g.count(b, j) * g.circuit_Bps(b, j) * t;
  return cap > 0 && model.demand(b, j) <= cap && model.demand(j, b) <= cap;
}

// Phase 1. The slowest host that still has a free port takes the circuit that
// cuts its own time most; ties go to re-using a current circuit, then to the
// partner whose time drops most. A host no circuit can speed up is skipped
// for good (its gains only depend on its own circuits).
void WorstFirst(const FluidModel& model, const std::vector<int>& current, PlanGraph& g,
                std::vector<double>& t) {
  const int n = g.hosts();
  std::vector<char> blocked(n, 0);
  while (true) {
    int b = -1;
    for (int h = 0; h < n; ++h) {
      if (blocked[h] || !g.AnyFree(h)) continue;
      if (b < 0 || t[h] > t[b]) b = h;
    }
    if (b < 0 || t[b] <= 0) break;
    const double tol = kRel * t[b];
    int best = -1, best_s = -1;
    double best_gain = 0, best_nb = 0;
    double best_gj = -1;  // the partner's own gain, computed only to break ties
    bool best_keep = false;
    auto partner_gain = [&](int j) { return t[j] - TimeWith(model, g, j, b, -1); };
    for (int j = 0; j < n; ++j) {
      if (j == b || model.demand(b, j) + model.demand(j, b) <= 0) continue;
      const int s = g.CommonSwitch(b, j);
      if (s < 0 || Saturated(model, g, b, j, t[b])) continue;
      const double nb = TimeWith(model, g, b, j, -1);
      const double gain = t[b] - nb;
      if (gain <= tol) continue;
      const bool keep = current[b * n + j] > g.count(b, j);
      bool take = best < 0 || gain > best_gain + tol;
      double gj = -1;
      if (!take && gain >= best_gain - tol) {
        if (keep != best_keep) {
          take = keep;
        } else {
          if (best_gj < 0) best_gj = partner_gain(best);
          gj = partner_gain(j);
          take = gj > best_gj + kRel * t[j];
        }
      }
      if (!take) continue;
      best = j;
      best_s = s;
      best_gain = gain;
      best_gj = gj;
      best_nb = nb;
      best_keep = keep;
    }
    if (best < 0) {
      blocked[b] = 1;
      continue;
    }
    g.Add(b, best, best_s);
    t[b] = best_nb;
    t[best] = model.HostTime(best, g.links(best));
  }
}

// Phase 2. Ports nobody's time needs: first put back current circuits (no
// port changes), then the heaviest pairs per circuit (helps relaying).
void Fill(const FluidModel& model, const std::vector<int>& current, PlanGraph& g) {
  const int n = g.hosts();
  for (int i = 0; i < n; ++i) {
    for (int j = i + 1; j < n; ++j) {
      while (current[i * n + j] > g.count(i, j)) {
        const int s = g.CommonSwitch(i, j);
        if (s < 0) break;
        g.Add(i, j, s);
      }
    }
  }
  while (true) {
    int bi = -1, bj = -1, bs = -1;
    double bw = 0;
    for (int i = 0; i < n; ++i) {
      if (!g.AnyFree(i)) continue;
      for (int j = i + 1; j < n; ++j) {
        const double w = (model.demand(i, j) + model.demand(j, i)) / (1 + g.count(i, j));
        if (w <= bw) continue;
        const int s = g.CommonSwitch(i, j);
        if (s < 0) continue;
        bw = w;
        bi = i;
        bj = j;
        bs = s;
      }
    }
    if (bi < 0) break;
    g.Add(bi, bj, bs);
  }
}

struct Score {
  double max = 0;
  double sumsq = 0;
};

// Phase 3. Around the slowest host b: move one of its circuits (b, u) to a
// host v with a free port, or swap (b, u), (v, w) for (b, v), (u, w); take
// the first change that lowers (max time, sum of squared times)
// lexicographically; stop when none does or after `rounds` changes.
void LocalSearch(const FluidModel& model, double lower_bound, int rounds, PlanGraph& g,
                 std::vector<double>& t) {
  const int n = g.hosts();
  const int switches = g.switches();
  auto score_with = [&](const int* hosts, const double* times, int k) {
    Score s;
    for (int h = 0; h < n; ++h) {
      double v = t[h];
      for (int x = 0; x < k; ++x) {
        if (hosts[x] == h) v = times[x];
      }
      s.max = std::max(s.max, v);
      s.sumsq += v * v;
    }
    return s;
  };
  for (int round = 0; round < rounds; ++round) {
    int b = 0;
    Score cur;
    for (int h = 0; h < n; ++h) {
      if (t[h] > t[b]) b = h;
      cur.sumsq += t[h] * t[h];
    }
    cur.max = t[b];
    if (cur.max <= 0 || cur.max <= lower_bound * (1 + kRel)) return;
    auto better = [&](const Score& s) {
      return s.max < cur.max * (1 - kRel) || (s.max <= cur.max && s.sumsq < cur.sumsq * (1 - kRel));
    };
    bool changed = false;
    const std::vector<CircuitLink> b_links = g.links(b);
    for (size_t li = 0; li < b_links.size() && !changed; ++li) {
      const int u = b_links[li].peer;
      for (int s = 0; s < switches && !changed; ++s) {
        if (g.count_on(b, u, s) == 0) continue;
        for (int v = 0; v < n && !changed; ++v) {
          if (v == b || v == u || model.demand(b, v) + model.demand(v, b) <= 0) continue;
          if (Saturated(model, g, b, v, t[b])) continue;
          const double nb = TimeWith(model, g, b, v, u);
          if (nb >= t[b] * (1 - kRel)) continue;
          if (g.free(v, s) > 0) {
            const int hosts[3] = {b, u, v};
            const double times[3] = {nb, TimeWith(model, g, u, -1, b),
                                     TimeWith(model, g, v, b, -1)};
            if (better(score_with(hosts, times, 3))) {
              g.Remove(b, u, s);
              g.Add(b, v, s);
              for (int x = 0; x < 3; ++x) t[hosts[x]] = times[x];
              changed = true;
              break;
            }
          }
          const std::vector<CircuitLink> v_links = g.links(v);
          for (const CircuitLink& vl : v_links) {
            const int w = vl.peer;
            if (w == b || w == u || g.count_on(v, w, s) == 0) continue;
            const int hosts[4] = {b, u, v, w};
            const double times[4] = {nb, TimeWith(model, g, u, w, b), TimeWith(model, g, v, b, w),
                                     TimeWith(model, g, w, u, v)};
            if (!better(score_with(hosts, times, 4))) continue;
            g.Remove(b, u, s);
            g.Remove(v, w, s);
            g.Add(b, v, s);
            g.Add(u, w, s);
            for (int x = 0; x < 4; ++x) t[hosts[x]] = times[x];
            changed = true;
            break;
          }
        }
      }
    }
    if (!changed) return;
  }
}

}  // namespace

void ImprovedPlan(const FluidModel& model, const Region& region, const std::vector<int>& current,
                  const PlannerOptions& options, PlanGraph& g) {
  const int n = g.hosts();
  std::vector<double> t(n);
  for (int h = 0; h < n; ++h) t[h] = model.HostTime(h, g.links(h));
  WorstFirst(model, current, g, t);
  Fill(model, current, g);
  for (int h = 0; h < n; ++h) t[h] = model.HostTime(h, g.links(h));
  LocalSearch(model, model.LowerBound(region.ocs_Bps()), options.local_search_rounds, g, t);
}

}  // namespace mixnet::planner::internal
