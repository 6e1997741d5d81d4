// The improved planner (planner.h, README.md): worst-host-first marginal-gain
// greedy on the fluid model, a fill of the ports left over, then local search
// (moves and swaps around the slowest host). Single-threaded: one call per
// region and planning step.
#include <algorithm>
#include <chrono>
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

// An upper bound on how much one more circuit to a peer j can cut host b's
// time. Each side's time T_x solves F_x(T) = 0 with F_x(T) = bytes - what
// circuits carry by T - T E, convex and decreasing, so for T' < T_x
// F_x(T') >= (T_x - T') s_x with s_x = E + the rate of the circuits still busy
// at T_x. The new circuit carries at most min(c T_x, d_j) by then, so the side
// drops by at most that over s_x; the host's time is the max of its sides.
class GainBounds {
 public:
  GainBounds(const FluidModel& model, const PlanGraph& g, int b)
      : GainBounds(model, b, g.links(b).data(), static_cast<int>(g.links(b).size())) {}
  // For host b with circuits `links` (aggregated per peer; entries may be 0).
  GainBounds(const FluidModel& model, int b, const CircuitLink* links, int k) : b_(b) {
    constexpr int kStack = 32;
    double dout[kStack], din[kStack], c[kStack];
    if (k > kStack) {  // not worth bounding: every candidate is evaluated
      side_[0] = side_[1] = Side{kInfinity, 0, 0};
      valid_ = false;
      unbounded_ = true;
      return;
    }
    for (int i = 0; i < k; ++i) {
      dout[i] = model.demand(b, links[i].peer);
      din[i] = model.demand(links[i].peer, b);
      c[i] = links[i].Bps;
    }
    const double eps = model.eps_Bps(b);
    const double totals[2] = {model.egress_bytes(b), model.ingress_bytes(b)};
    const double* d[2] = {dout, din};
    for (int x = 0; x < 2; ++x) {
      Side& side = side_[x];
      side.time = SideTime(totals[x], eps, d[x], c, k);
      side.slope = eps;
      for (int i = 0; i < k; ++i) {
        if (c[i] > 0 && d[x][i] >= side.time * c[i]) side.slope += c[i];
      }
      if (side.time > 0 && (!std::isfinite(side.time) || side.slope <= 0)) unbounded_ = true;
      if (side.slope > 0) side.inv_slope = 1 / side.slope;
    }
  }

  // b's time (max of its sides), when the bounds were computed (valid()).
  bool valid() const { return valid_; }
  double time() const { return std::max(side_[0].time, side_[1].time); }

  // Bound on t_b - (b's time with one more circuit to j); t_b is b's time.
  double Upper(const FluidModel& model, const PlanGraph& g, int j, double t_b) const {
    const double cj = g.circuit_Bps(b_, j);
    const double dj[2] = {model.demand(b_, j), model.demand(j, b_)};
    double floor = 0;  // no side ends before this
    if (unbounded_) return kInfinity;
    for (int x = 0; x < 2; ++x) {
      const Side& side = side_[x];
      if (side.time <= 0) continue;
      floor = std::max(floor, side.time - std::min(cj * side.time, dj[x]) * side.inv_slope);
    }
    return t_b - floor;
  }

 private:
  struct Side {
    double time = 0;
    double slope = 0;
    double inv_slope = 0;
  };
  int b_;
  bool valid_ = true;
  bool unbounded_ = false;  // a busy side that more circuits cannot be shown to help
  Side side_[2];
};

// Phase 1. The slowest host that still has a free port takes the circuit that
// cuts its own time most; ties go to re-using a current circuit, then to the
// partner whose time drops most. A host no circuit can speed up is skipped
// for good (its gains only depend on its own circuits).
void WorstFirst(const FluidModel& model, const std::vector<int>& current, PlanGraph& g,
                std::vector<double>& t) {
  const int n = g.hosts();
  std::vector<char> blocked(n, 0);
  std::vector<double> ub(n);
  std::vector<char> candidate(n);  // b may take one more circuit to j
  while (true) {
    int b = -1;
    for (int h = 0; h < n; ++h) {
      if (blocked[h] || !g.AnyFree(h)) continue;
      if (b < 0 || t[h] > t[b]) b = h;
    }
    if (b < 0 || t[b] <= 0) break;
    const double tol = kRel * t[b];
    // Bound every candidate's gain in O(1) (GainBounds), evaluate the most
    // promising one exactly, and skip the candidates whose bound cannot come
    // near it: the same choice as evaluating all of them, with fewer solves.
    const GainBounds bounds(model, g, b);
    int seed = -1;
    for (int j = 0; j < n; ++j) {
      ub[j] = -1;
      candidate[j] = 0;
      if (j == b || model.demand(b, j) + model.demand(j, b) <= 0) continue;
      if (!g.MayConnect(b, j) || Saturated(model, g, b, j, t[b])) continue;
      candidate[j] = 1;
      ub[j] = bounds.Upper(model, g, j, t[b]);
      if (seed < 0 || ub[j] > ub[seed]) seed = j;
    }
    double seed_nb = 0, threshold = 0;
    if (seed >= 0) {
      seed_nb = TimeWith(model, g, b, seed, -1);
      threshold = t[b] - seed_nb - 4 * tol;
    }
    int best = -1;
    double best_gain = 0, best_nb = 0;
    double best_gj = -1;  // the partner's own gain, computed only to break ties
    bool best_keep = false;
    auto partner_gain = [&](int j) { return t[j] - TimeWith(model, g, j, b, -1); };
    for (int j = 0; j < n; ++j) {
      if (!candidate[j] || ub[j] < threshold) continue;
      const double nb = j == seed ? seed_nb : TimeWith(model, g, b, j, -1);
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
      best_gain = gain;
      best_gj = gj;
      best_nb = nb;
      best_keep = keep;
    }
    if (best < 0) {
      blocked[b] = 1;
      continue;
    }
    g.Add(b, best, g.CommonSwitch(b, best));
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

// Phase 3. Around the slowest host b: move one of its circuits (b, u) to a
// host v with a free port, or swap (b, u), (v, w) for (b, v), (u, w); take
// the first change that lowers (max time, sum of squared times)
// lexicographically; stop when none does, after `rounds` changes or when the
// budget runs out. A change only alters the times of the (at most four) hosts
// it touches, so a candidate is scored in O(1): the max of the untouched hosts
// comes from the few slowest hosts, the sum of squares by difference; and a
// candidate is dropped as soon as one touched host would exceed the current
// max (it cannot be better). No allocation inside the loops.
void LocalSearch(const FluidModel& model, double lower_bound, int rounds, double budget_s,
                 PlanGraph& g, std::vector<double>& t) {
  const int n = g.hosts();
  const int switches = g.switches();
  constexpr int kTop = 5;  // > the hosts one change touches
  int top[kTop];
  int top_n = 0;
  std::vector<CircuitLink> b_links, v_links, b_minus;
  std::vector<double> u_gains(n);  // u's time when (b, u) becomes (u, w), per w
  b_links.reserve(16);
  b_minus.reserve(16);
  v_links.reserve(16);
  const auto start =
      budget_s > 0 ? std::chrono::steady_clock::now() : std::chrono::steady_clock::time_point{};
  for (int round = 0; round < rounds; ++round) {
    if (budget_s > 0 && round > 0 &&
        std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count() >
            budget_s) {
      return;
    }
    // The kTop slowest hosts, slowest first (ties: lowest index).
    top_n = 0;
    double cur_sumsq = 0;
    for (int h = 0; h < n; ++h) {
      cur_sumsq += t[h] * t[h];
      int pos = top_n;
      while (pos > 0 && t[top[pos - 1]] < t[h]) --pos;
      if (pos >= kTop) continue;
      for (int x = std::min(top_n, kTop - 1); x > pos; --x) top[x] = top[x - 1];
      top[pos] = h;
      top_n = std::min(top_n + 1, kTop);
    }
    if (top_n == 0) return;  // no hosts (Plan rejects that; this keeps top[0] defined)
    const int b = top[0];
    const double cur_max = t[b];
    if (cur_max <= 0 || cur_max <= lower_bound * (1 + kRel)) return;
    auto better = [&](const int* hosts, const double* times, int k) {
      double mx = 0;
      for (int x = 0; x < top_n; ++x) {
        bool touched = false;
        for (int y = 0; y < k; ++y) touched |= hosts[y] == top[x];
        if (!touched) {
          mx = t[top[x]];
          break;
        }
      }
      double sq = cur_sumsq;
      for (int y = 0; y < k; ++y) {
        mx = std::max(mx, times[y]);
        sq += times[y] * times[y] - t[hosts[y]] * t[hosts[y]];
      }
      return mx < cur_max * (1 - kRel) || (mx <= cur_max && sq < cur_sumsq * (1 - kRel));
    };
    bool changed = false;
    b_links.assign(g.links(b).begin(), g.links(b).end());
    for (size_t li = 0; li < b_links.size() && !changed; ++li) {
      const int u = b_links[li].peer;
      double u_loses = -1;  // u's time without one circuit to b (computed once)
      std::fill(u_gains.begin(), u_gains.end(), -1.0);
      // b without one circuit to u, to bound in O(1) what adding v can give:
      // candidates v that cannot bring b below its time are skipped unsolved.
      b_minus.assign(b_links.begin(), b_links.end());
      b_minus[li].Bps -= g.circuit_Bps(b, u);
      const GainBounds minus_bounds(model, b, b_minus.data(), static_cast<int>(b_minus.size()));
      const double tb_minus =
          minus_bounds.valid()
              ? minus_bounds.time()
              : model.HostTime(b, b_minus.data(), static_cast<int>(b_minus.size()));
      const double no_gain = t[b] * (1 - kRel) * (1 + 1e-12);
      for (int s = 0; s < switches && !changed; ++s) {
        if (g.count_on(b, u, s) == 0) continue;
        for (int v = 0; v < n && !changed; ++v) {
          if (v == b || v == u || model.demand(b, v) + model.demand(v, b) <= 0) continue;
          if (Saturated(model, g, b, v, t[b])) continue;
          if (tb_minus - minus_bounds.Upper(model, g, v, tb_minus) > no_gain) continue;
          const double nb = TimeWith(model, g, b, v, u);
          if (nb >= t[b] * (1 - kRel)) continue;
          if (g.free(v, s) > 0) {
            if (u_loses < 0) u_loses = TimeWith(model, g, u, -1, b);
            if (u_loses <= cur_max) {
              const double tv = TimeWith(model, g, v, b, -1);
              const int hosts[3] = {b, u, v};
              const double times[3] = {nb, u_loses, tv};
              if (tv <= cur_max && better(hosts, times, 3)) {
                g.Remove(b, u, s);
                g.Add(b, v, s);
                for (int x = 0; x < 3; ++x) t[hosts[x]] = times[x];
                changed = true;
                break;
              }
            }
          }
          v_links.assign(g.links(v).begin(), g.links(v).end());
          for (const CircuitLink& vl : v_links) {
            const int w = vl.peer;
            if (w == b || w == u || g.count_on(v, w, s) == 0) continue;
            // u's side of the swap depends on (u, w) only: solved once per w.
            if (u_gains[w] < 0) u_gains[w] = TimeWith(model, g, u, w, b);
            const double tu = u_gains[w];
            if (tu > cur_max) continue;
            const double tv = TimeWith(model, g, v, b, w);
            if (tv > cur_max) continue;
            const double tw = TimeWith(model, g, w, u, v);
            if (tw > cur_max) continue;
            const int hosts[4] = {b, u, v, w};
            const double times[4] = {nb, tu, tv, tw};
            if (!better(hosts, times, 4)) continue;
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
  LocalSearch(model, model.LowerBound(region.ocs_Bps()), options.local_search_rounds,
              options.local_search_budget_us * 1e-6, g, t);
}

}  // namespace mixnet::planner::internal
