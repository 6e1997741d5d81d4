// Router v2: weighted paths from the fluid-model split (see route_table_v2.h).
// Runs on whichever thread installs an epoch; the result is immutable.
#include "runtime/router/route_table_v2.h"

#include <algorithm>
#include <cmath>
#include <map>
#include <set>
#include <tuple>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "runtime/common/absl_view.h"
#include "runtime/common/status.h"
#include "runtime/planner/fluid_model.h"
#include "runtime/planner/routing.h"

namespace mixnet::router {
namespace {

using cluster::ClusterSpec;
using cluster::HostSpec;
using cluster::NicSpec;

// One circuit seen from host a towards host b.
struct Hop {
  std::string_view ocs_switch;
  int low_port = 0;
  const NicSpec* a_nic = nullptr;
  const NicSpec* b_nic = nullptr;
};

}  // namespace

absl::StatusOr<TrafficMatrix> PlanDemand(const ClusterSpec& spec, const RoutingPlan& plan) {
  if (plan.version != 2) {
    return absl::InvalidArgumentError(
        absl::StrCat("routing plan: version ", plan.version, " is not 2"));
  }
  const size_t k = plan.hosts.size();
  if (plan.bytes.size() != k * k) {
    return absl::InvalidArgumentError(absl::StrCat("routing plan: ", plan.bytes.size(),
                                                   " matrix entries for ", k, " hosts (want ",
                                                   k * k, ")"));
  }
  std::vector<int> index(k, -1);
  std::map<std::string_view, int> spec_index;
  for (size_t i = 0; i < spec.hosts.size(); ++i) {
    spec_index.emplace(spec.hosts[i].name, static_cast<int>(i));
  }
  std::set<std::string_view> seen;
  for (size_t i = 0; i < k; ++i) {
    auto it = spec_index.find(plan.hosts[i]);
    if (it == spec_index.end()) {
      return absl::InvalidArgumentError(absl::StrCat("routing plan: host '", plan.hosts[i],
                                                     "' is not in cluster spec '", spec.name, "'"));
    }
    if (!seen.insert(plan.hosts[i]).second) {
      return absl::InvalidArgumentError(
          absl::StrCat("routing plan: host '", plan.hosts[i], "' is listed twice"));
    }
    index[i] = it->second;
  }
  TrafficMatrix out(static_cast<int>(spec.hosts.size()));
  for (size_t i = 0; i < k; ++i) {
    for (size_t j = 0; j < k; ++j) {
      const double v = plan.bytes[i * k + j];
      if (!std::isfinite(v) || v < 0) {
        return absl::InvalidArgumentError(
            absl::StrCat("routing plan: traffic from host ", plan.hosts[i], " to host ",
                         plan.hosts[j], " is ", v, " bytes; must be finite and >= 0"));
      }
      out.at(index[i], index[j]) = v;
    }
  }
  return out;
}

double EpsShare(const RouteTable& table, std::string_view peer_host) {
  double eps = 0, all = 0;
  for (const Path& p : table.PathsTo(peer_host)) {
    all += p.weight;
    if (p.kind == PathKind::kEps || p.kind == PathKind::kRelay) eps += p.weight;
  }
  return all > 0 ? std::clamp(eps / all, 0.0, 1.0) : 1.0;
}

PeerShares SharesTo(const RouteTable& table, std::string_view peer_host) {
  PeerShares out;
  double all = 0;
  for (const Path& p : table.PathsTo(peer_host)) {
    all += p.weight;
    if (p.kind == PathKind::kEps) out.eps += p.weight;
    if (p.kind != PathKind::kRelay) continue;
    auto it = std::find_if(out.relays.begin(), out.relays.end(),
                           [&](const auto& r) { return r.first == p.relay_host; });
    if (it == out.relays.end()) {
      out.relays.emplace_back(p.relay_host, p.weight);
    } else {
      it->second += p.weight;
    }
  }
  if (!(all > 0)) return PeerShares{1.0, {}};
  out.eps = std::clamp(out.eps / all, 0.0, 1.0);
  for (auto& r : out.relays) r.second = std::clamp(r.second / all, 0.0, 1.0);
  return out;
}

bool PrefersReverse(absl::Span<const double> sent, absl::Span<const double> received,
                    absl::Span<const double> to, absl::Span<const double> from) {
  const size_t n = sent.size();
  if (received.size() != n || to.size() != n || from.size() != n) return false;
  double forward = 0, reverse = 0;
  for (size_t p = 0; p < n; ++p) {
    forward += sent[p] * to[p] + received[p] * from[p];
    reverse += sent[p] * from[p] + received[p] * to[p];
  }
  return reverse > forward;
}

absl::StatusOr<RouteTable> BuildRouteTableV2(const ClusterSpec& spec, const Topology& topology,
                                             std::string_view local_host,
                                             const TrafficMatrix& demand,
                                             const RouterV2Options& options) {
  ASSIGN_OR_RETURN(RouteTable table, BuildRouteTable(spec, topology, local_host));
  table.version_ = 2;
  const std::string what =
      absl::StrCat("route table v2 for host ", Av(local_host), " at epoch ", topology.epoch);
  const int total = static_cast<int>(spec.hosts.size());
  if (demand.hosts() != total || demand.data().size() != static_cast<size_t>(total) * total) {
    return absl::InvalidArgumentError(absl::StrCat(what, ": traffic matrix is ", demand.hosts(),
                                                   "x", demand.hosts(), " but the spec has ", total,
                                                   " hosts"));
  }
  for (int i = 0; i < total; ++i) {
    for (int j = 0; j < total; ++j) {
      const double v = demand.at(i, j);
      if (!std::isfinite(v) || v < 0) {
        return absl::InvalidArgumentError(
            absl::StrCat(what, ": traffic from host ", spec.hosts[i].name, " to host ",
                         spec.hosts[j].name, " is ", v, " bytes; must be finite and >= 0"));
      }
    }
  }
  const HostSpec* local = spec.FindHost(local_host);  // validated by BuildRouteTable
  if (local->region.empty()) return table;

  // The region's hosts (spec order, first of duplicate names) and their index.
  std::vector<int> members;
  std::map<const HostSpec*, int> pos;
  for (int i = 0; i < total; ++i) {
    const HostSpec* h = &spec.hosts[i];
    if (h->region != local->region || spec.FindHost(h->name) != h) continue;
    pos[h] = static_cast<int>(members.size());
    members.push_back(i);
  }
  const int n = static_cast<int>(members.size());
  const int li = pos.at(local);
  TrafficMatrix sub(n);
  std::vector<double> eps(n, 0);
  for (int a = 0; a < n; ++a) {
    for (int b = 0; b < n; ++b) sub.at(a, b) = a == b ? 0 : demand.at(members[a], members[b]);
    for (const NicSpec& nic : spec.hosts[members[a]].nics) {
      if (nic.role == cluster::NicRole::kEps) eps[a] += nic.gbps * 1e9 / 8;
    }
  }

  // Circuits inside the region, per ordered host pair, in (switch, port) order.
  using PortKey = std::pair<std::string_view, int>;
  std::map<PortKey, std::pair<const HostSpec*, const NicSpec*>> cabled;
  for (const HostSpec& h : spec.hosts) {
    for (const NicSpec& nic : h.nics) {
      if (nic.role == cluster::NicRole::kOcs)
        cabled.emplace(PortKey{nic.ocs_switch, nic.ocs_port}, std::make_pair(&h, &nic));
    }
  }
  std::vector<std::vector<Hop>> hops(static_cast<size_t>(n) * n);
  std::vector<planner::UndirectedCircuit> circuits;
  for (const cluster::CircuitSpec& c : topology.circuits) {
    auto ea = cabled.find(PortKey{c.ocs_switch, c.port_a});
    auto eb = cabled.find(PortKey{c.ocs_switch, c.port_b});
    if (ea == cabled.end() || eb == cabled.end()) continue;  // validated by BuildRouteTable
    auto pa = pos.find(ea->second.first);
    auto pb = pos.find(eb->second.first);
    if (pa == pos.end() || pb == pos.end()) continue;
    const int a = pa->second, b = pb->second;
    const NicSpec* na = ea->second.second;
    const NicSpec* nb = eb->second.second;
    const int low = std::min(c.port_a, c.port_b);
    hops[a * n + b].push_back(Hop{c.ocs_switch, low, na, nb});
    hops[b * n + a].push_back(Hop{c.ocs_switch, low, nb, na});
    circuits.push_back({a, b, std::min(na->gbps, nb->gbps) * 1e9 / 8});
  }
  for (std::vector<Hop>& v : hops) {
    std::sort(v.begin(), v.end(), [](const Hop& x, const Hop& y) {
      return std::tie(x.ocs_switch, x.low_port) < std::tie(y.ocs_switch, y.low_port);
    });
  }

  const planner::FluidModel model(sub, eps);
  const planner::Adjacency adj = planner::MakeAdjacency(n, circuits);
  const planner::RoutingOptions ro{.relay = options.relay,
                                   .relay_chunk_bytes = options.relay_chunk_bytes};
  const planner::RegionRouting routing =
      options.split ? options.split(model, adj, ro) : planner::OptimiseRouting(model, adj, ro);
  table.predicted_completion_s_ = routing.completion_s;

  for (int j = 0; j < n; ++j) {
    const double d = sub.at(li, j);
    if (j == li || d <= 0) continue;
    const std::string& peer = spec.hosts[members[j]].name;
    const planner::PairSplit& split = routing.at(li, j);
    std::vector<Path> out;
    // Adds `paths` of `kind` sharing `bytes` by rate.
    auto share = [&](const std::vector<Path>& paths, PathKind kind, double bytes) {
      if (bytes <= 0) return;
      double sum = 0;
      for (const Path& p : paths) sum += p.kind == kind ? p.gbps : 0;
      for (const Path& p : paths) {
        if (p.kind != kind) continue;
        Path q = p;
        q.weight = bytes / d * (sum > 0 ? p.gbps / sum : 1.0);
        out.push_back(std::move(q));
      }
    };
    share(table.PathsTo(peer), PathKind::kOcs, split.circuit);
    share(table.EpsPathsTo(peer), PathKind::kEps, split.eps);
    // One relay path through host k: each hop over the pair's first circuit
    // or, for kEps, its first EPS path.
    auto relay = [&](int k, double bytes, PathKind first_kind, PathKind second_kind) {
      if (bytes <= 0) return;
      const std::string& via = spec.hosts[members[k]].name;
      Path p;
      p.kind = PathKind::kRelay;
      p.first_hop = first_kind;
      p.second_hop = second_kind;
      p.relay_host = via;
      std::vector<double> rates;
      if (first_kind == PathKind::kOcs) {
        const std::vector<Hop>& first = hops[li * n + k];
        if (first.empty()) return;
        p.local_nic = first[0].a_nic->name;
        p.local_address = first[0].a_nic->address;
        p.remote_nic = first[0].b_nic->name;
        p.remote_address = first[0].b_nic->address;
        rates = {first[0].a_nic->gbps, first[0].b_nic->gbps};
      } else {
        const std::vector<Path>& first = table.EpsPathsTo(via);
        if (first.empty()) return;
        p.local_nic = first[0].local_nic;
        p.local_address = first[0].local_address;
        p.remote_nic = first[0].remote_nic;
        p.remote_address = first[0].remote_address;
        rates = {first[0].gbps};
      }
      if (second_kind == PathKind::kOcs) {
        const std::vector<Hop>& second = hops[k * n + j];
        if (second.empty()) return;
        p.relay_nic = second[0].a_nic->name;
        p.peer_nic = second[0].b_nic->name;
        p.peer_address = second[0].b_nic->address;
        rates.push_back(std::min(second[0].a_nic->gbps, second[0].b_nic->gbps));
      } else {
        // The relay's EPS NIC towards the peer: EPS NICs pair in order, so
        // the relay's first EPS NIC and the peer's first.
        const NicSpec* r_eps = nullptr;
        const NicSpec* p_eps = nullptr;
        for (const NicSpec& nic : spec.hosts[members[k]].nics) {
          if (nic.role == cluster::NicRole::kEps && r_eps == nullptr) r_eps = &nic;
        }
        for (const NicSpec& nic : spec.hosts[members[j]].nics) {
          if (nic.role == cluster::NicRole::kEps && p_eps == nullptr) p_eps = &nic;
        }
        if (r_eps == nullptr || p_eps == nullptr) return;
        p.relay_nic = r_eps->name;
        p.peer_nic = p_eps->name;
        p.peer_address = p_eps->address;
        rates.push_back(std::min(r_eps->gbps, p_eps->gbps));
      }
      p.gbps = *std::min_element(rates.begin(), rates.end());
      p.weight = bytes / d;
      out.push_back(std::move(p));
    };
    for (const auto& [k, bytes] : split.relay) relay(k, bytes, PathKind::kOcs, PathKind::kOcs);
    for (const auto& [k, bytes] : split.eps_circuit)
      relay(k, bytes, PathKind::kEps, PathKind::kOcs);
    for (const auto& [k, bytes] : split.circuit_eps)
      relay(k, bytes, PathKind::kOcs, PathKind::kEps);
    double sum = 0;
    for (const Path& p : out) sum += p.weight;
    if (out.empty() || !(sum > 0)) continue;  // keep v1's paths
    for (Path& p : out) p.weight /= sum;
    table.routes_[peer] = std::move(out);
  }
  return table;
}

}  // namespace mixnet::router
