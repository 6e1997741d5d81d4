// The planner's host-level circuit multigraph and port assignment (see
// plan_graph.h). Single-threaded: one graph per planning call.
#include "runtime/planner/plan_graph.h"

#include <algorithm>

namespace mixnet::planner::internal {

PlanGraph::PlanGraph(const Region& region)
    : n_(region.hosts()),
      s_(region.switches()),
      free_(static_cast<size_t>(n_) * s_, 0),
      free_mask_(n_, 0),
      count_(static_cast<size_t>(n_) * n_, 0),
      count_s_(static_cast<size_t>(n_) * n_ * s_, 0),
      rate_(region.pair_Bps().data()),
      adj_(n_) {
  size_t ports = 0;
  for (int h = 0; h < n_; ++h) ports += region.input().ports[h].size();
  circuits_.reserve(ports / 2);
  for (int h = 0; h < n_; ++h) {
    for (int s = 0; s < s_; ++s) SetFree(h, s, static_cast<int>(region.ports_on(h, s).size()));
    adj_[h].reserve(region.input().ports[h].size());
  }
}

void PlanGraph::SetFree(int h, int s, int delta) {
  const int f = free_[h * s_ + s] += delta;
  if (s < 64) {
    const uint64_t bit = uint64_t{1} << s;
    free_mask_[h] = f > 0 ? free_mask_[h] | bit : free_mask_[h] & ~bit;
  }
}

bool PlanGraph::AnyFreeSlow(int h) const {
  for (int s = 0; s < s_; ++s) {
    if (free_[h * s_ + s] > 0) return true;
  }
  return false;
}

int PlanGraph::CommonSwitch(int a, int b) const {
  int best = -1, best_free = 0;
  for (int s = 0; s < s_; ++s) {
    const int f = std::min(free_[a * s_ + s], free_[b * s_ + s]);
    if (f > best_free) {
      best = s;
      best_free = f;
    }
  }
  return best;
}

void PlanGraph::Bump(int a, int b) {
  std::vector<CircuitLink>& links = adj_[a];
  const int c = count_[a * n_ + b];
  for (size_t i = 0; i < links.size(); ++i) {
    if (links[i].peer != b) continue;
    if (c == 0) {
      links.erase(links.begin() + static_cast<long>(i));
    } else {
      links[i].Bps = c * rate_[a * n_ + b];
      links[i].circuits = c;
    }
    return;
  }
  if (c > 0) links.push_back({b, c * rate_[a * n_ + b], c});
}

void PlanGraph::Add(int a, int b, int s) {
  SetFree(a, s, -1);
  SetFree(b, s, -1);
  ++count_[a * n_ + b];
  ++count_[b * n_ + a];
  ++count_s_[(a * n_ + b) * s_ + s];
  ++count_s_[(b * n_ + a) * s_ + s];
  Bump(a, b);
  Bump(b, a);
  circuits_.push_back({a, b, s});
}

bool PlanGraph::Remove(int a, int b, int s) {
  if (count_s_[(a * n_ + b) * s_ + s] == 0) return false;
  for (size_t i = 0; i < circuits_.size(); ++i) {
    const HostCircuit& c = circuits_[i];
    if (c.s == s && ((c.a == a && c.b == b) || (c.a == b && c.b == a))) {
      circuits_[i] = circuits_.back();
      circuits_.pop_back();
      break;
    }
  }
  SetFree(a, s, 1);
  SetFree(b, s, 1);
  --count_[a * n_ + b];
  --count_[b * n_ + a];
  --count_s_[(a * n_ + b) * s_ + s];
  --count_s_[(b * n_ + a) * s_ + s];
  Bump(a, b);
  Bump(b, a);
  return true;
}

double TimeWith(const FluidModel& model, const PlanGraph& g, int h, int add, int remove) {
  constexpr int kStack = 32;
  const std::vector<CircuitLink>& links = g.links(h);
  std::vector<CircuitLink> heap;
  // Left uninitialised (CircuitLink's member initialisers would zero all
  // kStack entries on every call); only [0, k) is written and read.
  union Stack {
    Stack() {}
    CircuitLink links[kStack];
  } stack;
  CircuitLink* buf = stack.links;
  if (links.size() + 1 > kStack) {
    heap.resize(links.size() + 1);
    buf = heap.data();
  }
  int k = 0;
  bool added = add < 0;
  for (const CircuitLink& l : links) {
    int c = g.count(h, l.peer);
    if (l.peer == add) {
      ++c;
      added = true;
    }
    if (l.peer == remove) --c;
    buf[k++] = CircuitLink{l.peer, c * g.circuit_Bps(h, l.peer), c};
  }
  if (!added) buf[k++] = CircuitLink{add, g.circuit_Bps(h, add), 1};
  return model.HostTime(h, buf, k);
}

std::vector<int> CurrentCounts(const Region& region, const std::vector<PlannedCircuit>& current) {
  const int n = region.hosts();
  std::vector<int> c(static_cast<size_t>(n) * n, 0);
  for (const PlannedCircuit& pc : current) {
    ++c[pc.a.host * n + pc.b.host];
    ++c[pc.b.host * n + pc.a.host];
  }
  return c;
}

PortAssignment AssignPorts(const Region& region, const PlanGraph& g,
                           const std::vector<PlannedCircuit>& current) {
  const int n = region.hosts();
  PortAssignment out;
  out.circuits.reserve(g.circuits().size());
  // Flat per-port arrays: port p of host h is at off[h] + p. old_peer: the
  // other end in the current topology; new_peer: in the plan.
  std::vector<int> off(n + 1, 0);
  for (int h = 0; h < n; ++h)
    off[h + 1] = off[h] + static_cast<int>(region.input().ports[h].size());
  std::vector<PortRef> old_peer(off[n]), new_peer(off[n]);
  // Current circuits bucketed by host pair (linked lists through `next`).
  std::vector<int> head(static_cast<size_t>(n) * n, -1), next(current.size(), -1);
  for (int i = static_cast<int>(current.size()) - 1; i >= 0; --i) {
    const PlannedCircuit& c = current[i];
    old_peer[off[c.a.host] + c.a.port] = c.b;
    old_peer[off[c.b.host] + c.b.port] = c.a;
    const int key = std::min(c.a.host, c.b.host) * n + std::max(c.a.host, c.b.host);
    next[i] = head[key];
    head[key] = i;
  }
  auto link = [&](const PortRef& x, const PortRef& y) {
    new_peer[off[x.host] + x.port] = y;
    new_peer[off[y.host] + y.port] = x;
  };
  std::vector<const HostCircuit*> pending;
  for (const HostCircuit& hc : g.circuits()) {
    const int key = std::min(hc.a, hc.b) * n + std::max(hc.a, hc.b);
    int prev = -1, i = head[key];
    while (i >= 0 && region.switch_of(current[i].a) != hc.s) {
      prev = i;
      i = next[i];
    }
    if (i < 0) {
      pending.push_back(&hc);
      continue;
    }
    (prev < 0 ? head[key] : next[prev]) = next[i];  // unlink: kept once
    out.circuits.push_back(current[i]);
    link(current[i].a, current[i].b);
    ++out.kept;
  }
  // A free port of h on s: one whose old circuit is gone (it changes anyway)
  // before an idle one (which would otherwise stay untouched).
  auto pick = [&](int h, int s) -> int {
    int idle = -1;
    for (int p : region.ports_on(h, s)) {
      if (new_peer[off[h] + p].host >= 0) continue;
      if (old_peer[off[h] + p].host >= 0) return p;
      if (idle < 0) idle = p;
    }
    return idle;
  };
  for (const HostCircuit* hc : pending) {
    const int pa = pick(hc->a, hc->s);
    if (pa < 0) continue;                            // cannot happen: the graph respects free ports
    new_peer[off[hc->a] + pa] = PortRef{hc->b, -2};  // reserve while picking b's port
    const int pb = pick(hc->b, hc->s);
    if (pb < 0) {
      new_peer[off[hc->a] + pa] = PortRef{};
      continue;
    }
    const PlannedCircuit c{PortRef{hc->a, pa}, PortRef{hc->b, pb}};
    link(c.a, c.b);
    out.circuits.push_back(c);
  }
  for (int x = 0; x < off[n]; ++x) {
    if (!(old_peer[x] == new_peer[x])) ++out.ports_changed;
  }
  return out;
}

}  // namespace mixnet::planner::internal
