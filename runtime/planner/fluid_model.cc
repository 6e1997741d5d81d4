// The fluid completion-time model (see fluid_model.h). Pure functions; called
// from whichever thread plans or routes.
#include "runtime/planner/fluid_model.h"

#include <algorithm>
#include <cmath>
#include <utility>

namespace mixnet::planner {
namespace {

// One circuit peer of a side: its bytes d and rate c > 0; it has carried
// them all at d / c (compared as d >= T c, so no division in the loops).
struct Breakpoint {
  double d;
  double c;
};

// The smallest T with total - sum_k min(d_k, T c_k) <= T eps, without
// sorting the breakpoints: start with every circuit busy (a lower bound on
// T), mark the circuits that have carried all their bytes by then, solve
// again, until none is added. T only grows, so at most k + 1 passes; usually
// one or two (cheaper than sorting inside the planner's inner loops).
// Reorders b: the saturated circuits end up behind the busy ones.
double Solve(double total, double eps, Breakpoint* b, int k) {
  double active = 0;  // circuit rate of the peers not yet saturated (b[0, k))
  for (int i = 0; i < k; ++i) active += b[i].c;
  double sat = 0;   // bytes of saturated peers
  double last = 0;  // the latest saturation time
  while (k > 0 && eps + active > 0) {
    const double t = (total - sat) / (eps + active);
    const int before = k;
    for (int i = 0; i < k;) {
      if (b[i].d >= t * b[i].c) {
        ++i;
        continue;
      }
      sat += b[i].d;
      active -= b[i].c;
      last = std::max(last, b[i].d / b[i].c);
      std::swap(b[i], b[--k]);  // b[i] is now unseen: look at it again
    }
    if (k == before) return std::max(t, last);
    if (active < 0) active = 0;  // rounding
  }
  const double rest = total - sat;
  if (rest <= 1e-12 * total) return last;
  if (eps <= 0) return kInfinity;
  return std::max(rest / eps, last);
}

}  // namespace

Adjacency MakeAdjacency(int hosts, const std::vector<UndirectedCircuit>& circuits) {
  Adjacency adj(hosts);
  std::vector<int> degree(hosts, 0);
  for (const UndirectedCircuit& c : circuits) {
    if (c.a == c.b || c.a < 0 || c.b < 0 || c.a >= hosts || c.b >= hosts) continue;
    ++degree[c.a];
    ++degree[c.b];
  }
  for (int h = 0; h < hosts; ++h) adj[h].reserve(degree[h]);
  auto add = [&](int from, int to, double Bps) {
    for (CircuitLink& l : adj[from]) {
      if (l.peer == to) {
        l.Bps += Bps;
        ++l.circuits;
        return;
      }
    }
    adj[from].push_back({to, Bps, 1});
  };
  for (const UndirectedCircuit& c : circuits) {
    if (c.a == c.b || c.a < 0 || c.b < 0 || c.a >= hosts || c.b >= hosts) continue;
    add(c.a, c.b, c.Bps);
    add(c.b, c.a, c.Bps);
  }
  return adj;
}

double SideTime(double total, double eps, const double* d, const double* c, int k) {
  if (total <= 0) return 0;
  constexpr int kStack = 32;
  Breakpoint stack[kStack];
  std::vector<Breakpoint> heap;
  Breakpoint* b = stack;
  if (k > kStack) {
    heap.resize(k);
    b = heap.data();
  }
  int m = 0;
  for (int i = 0; i < k; ++i) {
    if (c[i] <= 0) continue;
    b[m++] = Breakpoint{d[i], c[i]};
  }
  return Solve(total, eps, b, m);
}

FluidModel::FluidModel(const TrafficMatrix& demand, std::vector<double> eps_Bps)
    : n_(demand.hosts()), d_(demand.data()), eps_(std::move(eps_Bps)), row_(n_, 0), col_(n_, 0) {
  eps_.resize(n_, 0);
  for (int i = 0; i < n_; ++i) {
    d_[static_cast<size_t>(i) * n_ + i] = 0;
    for (int j = 0; j < n_; ++j) {
      const double v = d_[static_cast<size_t>(i) * n_ + j];
      row_[i] += v;
      col_[j] += v;
    }
  }
}

double FluidModel::HostTime(int h, const CircuitLink* links, int count) const {
  constexpr int kStack = 32;
  Breakpoint out_stack[kStack], in_stack[kStack];
  std::vector<Breakpoint> out_heap, in_heap;
  Breakpoint* out = out_stack;
  Breakpoint* in = in_stack;
  if (count > kStack) {
    out_heap.resize(count);
    in_heap.resize(count);
    out = out_heap.data();
    in = in_heap.data();
  }
  int m = 0;
  const double* row = &d_[static_cast<size_t>(h) * n_];
  for (int i = 0; i < count; ++i) {
    const double c = links[i].Bps;
    if (c <= 0) continue;
    const int p = links[i].peer;
    const double dout = row[p];
    const double din = d_[static_cast<size_t>(p) * n_ + h];
    out[m] = Breakpoint{dout, c};
    in[m] = Breakpoint{din, c};
    ++m;
  }
  // Solve the heavier side first; the other side only needs solving when it
  // is still busy at that time (f(t) > 0, an O(k) check).
  double first_total = row_[h], second_total = col_[h];
  if (second_total > first_total) {
    std::swap(first_total, second_total);
    std::swap(out, in);
  }
  if (first_total <= 0) return 0;
  const double t = Solve(first_total, eps_[h], out, m);
  if (second_total <= 0 || std::isinf(t)) return t;
  double left = second_total - t * eps_[h];
  for (int i = 0; i < m; ++i) left -= std::min(in[i].d, t * in[i].c);
  if (left <= 1e-12 * second_total) return t;
  return std::max(t, Solve(second_total, eps_[h], in, m));
}

FluidEstimate FluidModel::Estimate(const Adjacency& adjacency) const {
  FluidEstimate e;
  e.host_s.assign(n_, 0);
  for (int h = 0; h < n_; ++h) {
    const std::vector<CircuitLink>& links =
        h < static_cast<int>(adjacency.size()) ? adjacency[h] : std::vector<CircuitLink>{};
    e.host_s[h] = HostTime(h, links);
    if (e.host_s[h] > e.completion_s || (e.bottleneck_host < 0 && e.host_s[h] > 0)) {
      e.completion_s = e.host_s[h];
      e.bottleneck_host = h;
    }
  }
  return e;
}

double FluidModel::Completion(const Adjacency& adjacency) const {
  double t = 0;
  for (int h = 0; h < n_; ++h) {
    if (h < static_cast<int>(adjacency.size())) {
      t = std::max(t, HostTime(h, adjacency[h].data(), static_cast<int>(adjacency[h].size())));
    } else {
      t = std::max(t, HostTime(h, nullptr, 0));
    }
  }
  return t;
}

double FluidModel::LowerBound(const std::vector<double>& ocs_Bps) const {
  double bound = 0;
  for (int h = 0; h < n_; ++h) {
    const double bytes = std::max(row_[h], col_[h]);
    if (bytes <= 0) continue;
    const double rate = eps_[h] + (h < static_cast<int>(ocs_Bps.size()) ? ocs_Bps[h] : 0.0);
    bound = std::max(bound, rate > 0 ? bytes / rate : kInfinity);
  }
  return bound;
}

}  // namespace mixnet::planner
