// Max-min fair progressive filling with event-driven completions (see
// flow_solver.h). Single-threaded.
#include "sim/flow_solver.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <numeric>
#include <queue>
#include <utility>

namespace mixnet::sim {
namespace {

constexpr double kInf = std::numeric_limits<double>::infinity();

int Find(std::vector<int>& parent, int x) {
  while (parent[x] != x) {
    parent[x] = parent[parent[x]];
    x = parent[x];
  }
  return x;
}

// The working state of one component: local link and flow indices.
struct Component {
  std::vector<int> flows;  // global flow ids
  std::vector<int> links;  // global link ids
};

// Max-min rates of `active` flows (local indices into comp.flows) by
// progressive filling. `lflows[i]` lists local link indices of local flow i.
// The bottleneck each round is the link with the smallest fair share
// rem / count (ties: the lowest index), found with a min-heap: a link's
// share only grows as flows on it freeze (each freezes at the global
// minimum, which is at most the link's share), so an entry whose key is no
// longer the link's is stale and skipped. O((links + path lengths) log links)
// per fill, where scanning every link per round was O(links^2).
void FillRates(const std::vector<double>& cap, const std::vector<std::vector<int>>& lflows,
               const std::vector<int>& active, std::vector<double>& rate, std::vector<double>& rem,
               std::vector<int>& count, std::vector<char>& frozen,
               const std::vector<std::vector<int>>& link_flows) {
  const int nl = static_cast<int>(cap.size());
  for (int l = 0; l < nl; ++l) {
    rem[l] = cap[l];
    count[l] = 0;
  }
  for (int f : active) {
    frozen[f] = 0;
    for (int l : lflows[f]) ++count[l];
  }
  using Entry = std::pair<double, int>;  // (share, link): smallest first, then lowest link
  std::priority_queue<Entry, std::vector<Entry>, std::greater<Entry>> heap;
  auto share_of = [&](int l) { return std::max(0.0, rem[l]) / count[l]; };
  for (int l = 0; l < nl; ++l) {
    if (count[l] > 0) heap.emplace(share_of(l), l);
  }
  int left = static_cast<int>(active.size());
  while (left > 0 && !heap.empty()) {
    const auto [share, best] = heap.top();
    heap.pop();
    if (count[best] == 0 || share != share_of(best)) continue;  // stale
    // Freeze every unfrozen flow on the bottleneck link at `share`.
    for (int f : link_flows[best]) {
      if (frozen[f]) continue;
      frozen[f] = 1;
      rate[f] = share;
      --left;
      for (int l : lflows[f]) {
        rem[l] -= share;
        --count[l];
      }
      for (int l : lflows[f]) {
        if (count[l] > 0 && l != best) heap.emplace(share_of(l), l);
      }
    }
  }
}

}  // namespace

int FlowNetwork::AddLink(double Bps) {
  capacity_.push_back(std::max(0.0, Bps));
  return static_cast<int>(capacity_.size()) - 1;
}

int FlowNetwork::AddFlow(double bytes, std::span<const int> links) {
  if (!(bytes > 0)) return -1;
  bytes_.push_back(bytes);
  flow_links_.insert(flow_links_.end(), links.begin(), links.end());
  first_.push_back(flow_links_.size());
  return static_cast<int>(bytes_.size()) - 1;
}

SolveResult SolveMaxMin(const FlowNetwork& net) {
  SolveResult out;
  const int nf = net.flows();
  const int nl = net.links();
  out.finish_s.assign(nf, 0.0);
  // Components over links (flows join their links).
  std::vector<int> parent(nl);
  std::iota(parent.begin(), parent.end(), 0);
  for (int f = 0; f < nf; ++f) {
    auto ls = net.flow_links(f);
    for (size_t i = 1; i < ls.size(); ++i) {
      const int a = Find(parent, ls[0]), b = Find(parent, ls[i]);
      if (a != b) parent[a] = b;
    }
  }
  std::vector<int> comp_of_root(nl, -1);
  std::vector<Component> comps;
  std::vector<int> local_link(nl, -1);
  for (int f = 0; f < nf; ++f) {
    auto ls = net.flow_links(f);
    if (ls.empty()) continue;  // inside a server: takes no time
    const int root = Find(parent, ls[0]);
    if (comp_of_root[root] < 0) {
      comp_of_root[root] = static_cast<int>(comps.size());
      comps.emplace_back();
    }
    Component& c = comps[comp_of_root[root]];
    c.flows.push_back(f);
    for (int l : ls) {
      if (local_link[l] < 0) {
        local_link[l] = static_cast<int>(c.links.size());
        c.links.push_back(l);
      }
    }
  }
  out.components = static_cast<int>(comps.size());

  std::vector<double> cap, rate, rem, left_bytes;
  std::vector<int> count, active, next;
  std::vector<char> frozen;
  std::vector<std::vector<int>> lflows, link_flows;
  for (const Component& c : comps) {
    const int cl = static_cast<int>(c.links.size());
    const int cf = static_cast<int>(c.flows.size());
    cap.resize(cl);
    for (int i = 0; i < cl; ++i) cap[i] = net.capacity(c.links[i]);
    lflows.assign(cf, {});
    link_flows.assign(cl, {});
    left_bytes.resize(cf);
    for (int i = 0; i < cf; ++i) {
      for (int l : net.flow_links(c.flows[i])) {
        lflows[i].push_back(local_link[l]);
        link_flows[local_link[l]].push_back(i);
      }
      left_bytes[i] = net.bytes(c.flows[i]);
    }
    rate.assign(cf, 0.0);
    rem.resize(cl);
    count.resize(cl);
    frozen.assign(cf, 1);
    active.resize(cf);
    std::iota(active.begin(), active.end(), 0);
    double now = 0;
    while (!active.empty()) {
      // Finished flows stay frozen, so the link_flows scan skips them.
      FillRates(cap, lflows, active, rate, rem, count, frozen, link_flows);
      ++out.events;
      double dt = kInf;
      for (int f : active) {
        if (rate[f] > 0) dt = std::min(dt, left_bytes[f] / rate[f]);
      }
      if (!std::isfinite(dt)) {
        for (int f : active) out.finish_s[c.flows[f]] = kInf;
        now = kInf;
        break;
      }
      now += dt;
      next.clear();
      for (int f : active) {
        left_bytes[f] -= rate[f] * dt;
        // Relative tolerance: flows finishing within 1e-9 of this event end together.
        if (left_bytes[f] <= 1e-9 * net.bytes(c.flows[f])) {
          out.finish_s[c.flows[f]] = now;
          frozen[f] = 1;
        } else {
          next.push_back(f);
        }
      }
      active.swap(next);
    }
    out.completion_s = std::max(out.completion_s, now);
    for (int l : c.links) local_link[l] = -1;
  }
  return out;
}

std::vector<double> MaxMinRates(const FlowNetwork& net) {
  const int nf = net.flows(), nl = net.links();
  std::vector<double> cap(nl), rate(nf, 0.0), rem(nl);
  std::vector<int> count(nl), active;
  std::vector<char> frozen(nf, 1);
  std::vector<std::vector<int>> lflows(nf), link_flows(nl);
  for (int l = 0; l < nl; ++l) cap[l] = net.capacity(l);
  for (int f = 0; f < nf; ++f) {
    for (int l : net.flow_links(f)) {
      lflows[f].push_back(l);
      link_flows[l].push_back(f);
    }
    if (!lflows[f].empty()) active.push_back(f);
  }
  FillRates(cap, lflows, active, rate, rem, count, frozen, link_flows);
  return rate;
}

}  // namespace mixnet::sim
