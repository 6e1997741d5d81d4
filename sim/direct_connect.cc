// TopoOpt's direct-connect plan, multi-hop routes and fabric (see
// direct_connect.h). Main thread.
#include "sim/direct_connect.h"

#include <algorithm>
#include <cmath>
#include <deque>
#include <limits>
#include <map>

#include "absl/strings/str_cat.h"

namespace mixnet::sim {
namespace {

struct Edge {
  int src = 0, dst = 0;
  double bytes = 0;
  int links = 0;
  int hops = 1;  // on the topology so far
  // The link capacity the pair's bytes take now (bytes x hops), per direct
  // link it would then have.
  double weight() const { return bytes * hops / (1 + links); }
};

// Hop counts from every edge's source over the links planned so far
// (unreachable: one more than the servers).
void UpdateHops(const DirectTopology& t, std::vector<Edge*>& edges) {
  const int n = t.servers();
  std::vector<int> dist(n);
  std::deque<int> q;
  std::sort(edges.begin(), edges.end(),
            [](const Edge* a, const Edge* b) { return a->src < b->src; });
  for (size_t i = 0; i < edges.size();) {
    const int src = edges[i]->src;
    std::fill(dist.begin(), dist.end(), -1);
    dist[src] = 0;
    q.assign(1, src);
    while (!q.empty()) {
      const int u = q.front();
      q.pop_front();
      for (int v : t.out[u])
        if (v >= 0 && dist[v] < 0) {
          dist[v] = dist[u] + 1;
          q.push_back(v);
        }
    }
    for (; i < edges.size() && edges[i]->src == src; ++i)
      edges[i]->hops = dist[edges[i]->dst] < 0 ? n + 1 : dist[edges[i]->dst];
  }
}

class TopoOptFabric final : public Fabric {
 public:
  TopoOptFabric(const FabricOptions& o, const Layout& l) : o_(o), l_(l) {}
  FabricKind kind() const override { return FabricKind::kTopoOpt; }
  std::string Routing() const override { return "multihop"; }

  absl::Status Prepare(const JobTraffic& job) override {
    const int n = l_.region_servers;
    std::vector<ServerFlow> demand = job.other;
    for (int r = 0; r < static_cast<int>(job.a2a_mean.size()); ++r)
      for (int i = 0; i < n; ++i)
        for (int j = 0; j < n; ++j) {
          const double b = i == j ? 0 : job.a2a_mean[r].at(i, j) * job.a2a_phases;
          if (b > 0) demand.push_back({r * n + i, r * n + j, b});
        }
    auto plan = PlanDirectConnect(l_.servers, o_.nics_per_server, RingOrder(l_), demand);
    if (!plan.ok()) return plan.status();
    router_ = std::make_unique<MultiHopRouter>(*std::move(plan), o_.link_gbps * kBytesPerGbit,
                                               o_.topoopt_paths);
    return absl::OkStatus();
  }

  absl::StatusOr<PhaseTime> AllToAll(const std::vector<TrafficMatrix>& actual,
                                     const std::vector<TrafficMatrix>&,
                                     const A2AOptions&) override {
    if (!router_) return absl::FailedPreconditionError("topoopt: no topology (Prepare first)");
    FlowNetwork net;
    router_->AddLinks(net);
    const int n = l_.region_servers;
    for (int r = 0; r < static_cast<int>(actual.size()); ++r)
      for (int i = 0; i < n; ++i)
        for (int j = 0; j < n; ++j) {
          const double b = i == j ? 0 : actual[r].at(i, j);
          if (b > 0 && !router_->AddFlow(net, r * n + i, r * n + j, b))
            return absl::FailedPreconditionError(absl::StrCat(
                "topoopt: server ", r * n + j, " unreachable from server ", r * n + i));
        }
    return PhaseTime{.seconds = SolveMaxMin(net).completion_s};
  }

  // DP and pipeline traffic over the same topology (infinite when unreachable
  // or not planned).
  double Transfer(const std::vector<ServerFlow>& flows) override {
    if (!router_) return std::numeric_limits<double>::infinity();
    FlowNetwork net;
    router_->AddLinks(net);
    for (const ServerFlow& f : flows)
      if (f.src != f.dst && f.bytes > 0 && !router_->AddFlow(net, f.src, f.dst, f.bytes))
        return std::numeric_limits<double>::infinity();
    return SolveMaxMin(net).completion_s;
  }

 private:
  FabricOptions o_;
  Layout l_;
  std::unique_ptr<MultiHopRouter> router_;
};

}  // namespace

absl::StatusOr<DirectTopology> PlanDirectConnect(int servers, int nics,
                                                 const std::vector<int>& ring,
                                                 const std::vector<ServerFlow>& demand) {
  if (servers < 1 || nics < 1)
    return absl::InvalidArgumentError(
        absl::StrCat("direct-connect plan: ", servers, " servers, ", nics, " NICs each"));
  std::vector<char> seen(servers, 0);
  for (int s : ring) {
    if (s < 0 || s >= servers || seen[s])
      return absl::InvalidArgumentError(
          absl::StrCat("direct-connect plan: ring visits server ", s, " twice or out of range"));
    seen[s] = 1;
  }
  if (static_cast<int>(ring.size()) != servers)
    return absl::InvalidArgumentError(
        absl::StrCat("direct-connect plan: ring of ", ring.size(), " servers for ", servers));
  DirectTopology t;
  t.out.assign(servers, {});
  std::map<std::pair<int, int>, Edge> by_pair;
  for (const ServerFlow& f : demand) {
    if (f.src == f.dst || !(f.bytes > 0)) continue;
    if (f.src < 0 || f.src >= servers || f.dst < 0 || f.dst >= servers)
      return absl::InvalidArgumentError(
          absl::StrCat("direct-connect plan: flow ", f.src, " -> ", f.dst, " out of range"));
    Edge& e = by_pair[{f.src, f.dst}];
    e.src = f.src;
    e.dst = f.dst;
    e.bytes += f.bytes;
  }
  // NIC 0: the ring permutation (a single server links to nothing).
  for (int i = 0; servers > 1 && i < servers; ++i) {
    const int a = ring[i], b = ring[(i + 1) % servers];
    t.out[a].push_back(b);
    auto it = by_pair.find({a, b});
    if (it != by_pair.end()) ++it->second.links;
  }
  if (servers == 1) t.out[0].push_back(-1);
  std::vector<Edge*> edges;
  for (auto& [k, e] : by_pair) edges.push_back(&e);
  std::vector<char> out_free(servers), in_free(servers);
  for (int round = 1; round < nics; ++round) {
    std::fill(out_free.begin(), out_free.end(), 1);
    std::fill(in_free.begin(), in_free.end(), 1);
    // Heaviest first; ties in (src, dst) order for determinism.
    UpdateHops(t, edges);
    std::stable_sort(edges.begin(), edges.end(), [](const Edge* a, const Edge* b) {
      return a->weight() > b->weight() ||
             (a->weight() == b->weight() &&
              std::make_pair(a->src, a->dst) < std::make_pair(b->src, b->dst));
    });
    for (Edge* e : edges) {
      if (!out_free[e->src] || !in_free[e->dst]) continue;
      out_free[e->src] = in_free[e->dst] = 0;
      t.out[e->src].push_back(e->dst);
      ++e->links;
    }
    // Ports no demand wants: matched off in index order (never to itself).
    std::vector<int> ins;
    for (int s = 0; s < servers; ++s)
      if (in_free[s]) ins.push_back(s);
    for (int s = 0; s < servers; ++s) {
      if (!out_free[s]) continue;
      auto it = std::find_if(ins.begin(), ins.end(), [&](int d) { return d != s; });
      if (it == ins.end()) {
        t.out[s].push_back(-1);
        continue;
      }
      t.out[s].push_back(*it);
      auto e = by_pair.find({s, *it});
      if (e != by_pair.end()) ++e->second.links;
      ins.erase(it);
    }
  }
  return t;
}

std::vector<int> RingOrder(const Layout& l) {
  std::vector<int> order;
  for (int k = 0; k < l.region_servers; ++k)
    for (int d = 0; d < l.dp; ++d)
      for (int p = 0; p < l.pp; ++p) order.push_back(l.region_of(d, p) * l.region_servers + k);
  return order;
}

MultiHopRouter::MultiHopRouter(DirectTopology topology, double link_Bps, int max_paths)
    : t_(std::move(topology)), max_paths_(std::max(1, max_paths)) {
  const int n = t_.servers();
  adj_.assign(n, {});
  radj_.assign(n, {});
  dist_to_.assign(n, {});
  for (int s = 0; s < n; ++s) {
    std::map<int, int> mult;
    for (int d : t_.out[s])
      if (d >= 0 && d != s) ++mult[d];
    for (const auto& [d, m] : mult) {
      adj_[s].push_back({d, static_cast<int>(link_Bps_.size())});
      link_Bps_.push_back(m * link_Bps);
      radj_[d].push_back(s);
    }
  }
}

void MultiHopRouter::AddLinks(FlowNetwork& net) const {
  for (double c : link_Bps_) net.AddLink(c);
}

const std::vector<int>& MultiHopRouter::DistanceTo(int dst) {
  std::vector<int>& d = dist_to_[dst];
  if (!d.empty()) return d;
  d.assign(t_.servers(), -1);
  std::deque<int> q{dst};
  d[dst] = 0;
  while (!q.empty()) {
    const int v = q.front();
    q.pop_front();
    for (int u : radj_[v])
      if (d[u] < 0) {
        d[u] = d[v] + 1;
        q.push_back(u);
      }
  }
  return d;
}

const std::vector<std::vector<int>>& MultiHopRouter::Paths(int src, int dst) {
  const int64_t key = static_cast<int64_t>(src) * t_.servers() + dst;
  auto it = paths_.find(key);
  if (it != paths_.end()) return it->second;
  std::vector<std::vector<int>>& out = paths_[key];
  if (src == dst) return out;
  const std::vector<int>& d = DistanceTo(dst);
  if (d[src] < 0) return out;
  // Depth-first over next hops one step closer, in peer order, until max_paths.
  std::vector<int> path;
  auto walk = [&](auto&& self, int u) -> void {
    if (static_cast<int>(out.size()) >= max_paths_) return;
    if (u == dst) {
      out.push_back(path);
      return;
    }
    for (const auto& [v, link] : adj_[u]) {
      if (d[v] != d[u] - 1) continue;
      path.push_back(link);
      self(self, v);
      path.pop_back();
    }
  };
  walk(walk, src);
  return out;
}

bool MultiHopRouter::AddFlow(FlowNetwork& net, int src, int dst, double bytes) {
  if (src == dst) return true;
  const auto& paths = Paths(src, dst);
  if (paths.empty()) return false;
  const double share = bytes / static_cast<double>(paths.size());
  for (const auto& p : paths) net.AddFlow(share, p);
  return true;
}

absl::StatusOr<std::unique_ptr<Fabric>> MakeTopoOptFabric(const FabricOptions& o, const Layout& l) {
  if (o.nics_per_server < 1)
    return absl::InvalidArgumentError(
        absl::StrCat("topoopt: ", o.nics_per_server, " NICs per server (at least 1)"));
  if (o.topoopt_paths < 1)
    return absl::InvalidArgumentError(
        absl::StrCat("topoopt: ", o.topoopt_paths, " paths per pair (at least 1)"));
  return std::unique_ptr<Fabric>(std::make_unique<TopoOptFabric>(o, l));
}

}  // namespace mixnet::sim
