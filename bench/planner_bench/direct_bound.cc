// Per-host direct-routing lower bound (see direct_bound.h). Main thread of the bench.
#include "bench/planner_bench/direct_bound.h"

#include <algorithm>
#include <cmath>
#include <vector>

namespace mixnet::bench {
namespace {

using planner::CircuitLink;

// Allocations to enumerate per host before falling back to the per-side bound.
constexpr double kMaxLeaves = 2e5;

struct Peer {
  int id;
  double out;  // bytes h -> peer
  double in;   // bytes peer -> h
  double Bps;  // one circuit's rate
  int cap;     // circuits the peer can take (its port count)
};

// One side alone: the smallest T with some allocation of at most `ports`
// circuits covering total - T E. For a fixed T the best allocation is greedy
// on the (non-increasing) marginal bytes of each circuit, so binary search T.
double SideBound(double total, double eps, const std::vector<Peer>& peers, bool out, int ports) {
  if (total <= 0) return 0;
  auto feasible = [&](double t) {
    std::vector<int> k(peers.size(), 0);
    double carried = 0;
    for (int c = 0; c < ports; ++c) {
      int best = -1;
      double gain = 0;
      for (size_t p = 0; p < peers.size(); ++p) {
        if (k[p] >= peers[p].cap) continue;
        const double d = out ? peers[p].out : peers[p].in;
        const double g = std::min(t * peers[p].Bps, std::max(0.0, d - k[p] * t * peers[p].Bps));
        if (g > gain) {
          gain = g;
          best = static_cast<int>(p);
        }
      }
      if (best < 0) break;
      ++k[best];
      carried += gain;
    }
    return carried + t * eps >= total;
  };
  double lo = 0, hi = 1;
  while (!feasible(hi)) {
    hi *= 2;
    if (hi > 1e9) return planner::kInfinity;
  }
  for (int i = 0; i < 100 && hi - lo > 1e-12 * hi; ++i) {
    const double mid = 0.5 * (lo + hi);
    (feasible(mid) ? hi : lo) = mid;
  }
  return lo;
}

}  // namespace

DirectBound DirectLowerBound(const planner::Region& region, const planner::FluidModel& model) {
  DirectBound out;
  const int n = region.hosts();
  for (int h = 0; h < n; ++h) {
    const int ports = static_cast<int>(region.input().ports[h].size());
    std::vector<Peer> all;
    for (int p = 0; p < n; ++p) {
      const int cap = std::min(ports, static_cast<int>(region.input().ports[p].size()));
      if (p == h || cap == 0) continue;
      if (model.demand(h, p) + model.demand(p, h) <= 0) continue;
      all.push_back({p, model.demand(h, p), model.demand(p, h), region.circuit_Bps(h, p), cap});
    }
    // A peer dominated (more bytes both ways, no slower circuit) by at least
    // `ports` others is never needed: some dominating peer is always unused
    // and takes its circuits at no loss.
    std::vector<Peer> cand;
    for (const Peer& q : all) {
      int dominated = 0;
      for (const Peer& p : all) {
        if (p.id != q.id && p.out >= q.out && p.in >= q.in && p.Bps >= q.Bps && p.cap >= q.cap &&
            (p.out > q.out || p.in > q.in || p.id < q.id)) {
          ++dominated;
        }
      }
      if (dominated < ports) cand.push_back(q);
    }
    const int m = static_cast<int>(cand.size());
    // Compositions of `ports` circuits over m peers: C(m + ports - 1, ports).
    double leaves = 1;
    for (int i = 1; i <= ports; ++i) leaves = leaves * (m + i - 1) / i;
    double best;
    if (m == 0 || ports == 0) {
      best = model.HostTime(h, nullptr, 0);
    } else if (leaves <= kMaxLeaves) {
      best = planner::kInfinity;
      std::vector<CircuitLink> links(m);
      std::vector<int> k(m, 0);
      // Depth-first over peers; the last peer takes what is left (more
      // circuits never slow a host down).
      auto rec = [&](auto&& self, int i, int left) -> void {
        if (i == m - 1) {
          k[i] = std::min(left, cand[i].cap);
          int c = 0;
          for (int x = 0; x < m; ++x) {
            if (k[x] > 0) links[c++] = CircuitLink{cand[x].id, k[x] * cand[x].Bps, k[x]};
          }
          best = std::min(best, model.HostTime(h, links.data(), c));
          return;
        }
        for (int take = std::min(left, cand[i].cap); take >= 0; --take) {
          k[i] = take;
          self(self, i + 1, left - take);
        }
        k[i] = 0;
      };
      rec(rec, 0, ports);
    } else {
      out.exact = false;
      best =
          std::max(SideBound(model.egress_bytes(h), model.eps_Bps(h), cand, /*out=*/true, ports),
                   SideBound(model.ingress_bytes(h), model.eps_Bps(h), cand, /*out=*/false, ports));
    }
    out.bound_s = std::max(out.bound_s, best);
  }
  return out;
}

}  // namespace mixnet::bench
