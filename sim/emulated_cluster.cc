// Emulation mode, one all-to-all (see emulated_cluster.h).
#include "sim/emulated_cluster.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <map>
#include <tuple>
#include <vector>

#include "absl/strings/str_cat.h"
#include "runtime/common/status.h"
#include "runtime/router/route_table_v2.h"
#include "sim/flow_solver.h"

namespace mixnet::sim {
namespace {

// The links of the emulated cluster, made as flows name them.
class Links {
 public:
  Links(const cluster::ClusterSpec& spec, const EmulatedFabric& fabric)
      : spec_(spec), fabric_(fabric) {}

  // A host NIC in one direction (tx: out of the host, rx: into it).
  absl::StatusOr<int> Nic(int host, const std::string& nic, bool tx) {
    auto key = std::make_tuple(host, nic, tx);
    auto it = nic_ids_.find(key);
    if (it != nic_ids_.end()) return it->second;
    const cluster::NicSpec* n = spec_.hosts[host].FindNic(nic);
    if (n == nullptr) {
      return absl::InvalidArgumentError(
          absl::StrCat("host ", spec_.hosts[host].name, " has no NIC ", nic));
    }
    const int id =
        Add(n->gbps * 1e9 / 8, absl::StrCat(spec_.hosts[host].name, "/", nic, tx ? " tx" : " rx"));
    nic_ids_.emplace(key, id);
    return id;
  }
  // Leaf `leaf`'s uplink towards (up) or from (down) the spine.
  int Uplink(int leaf, bool up) {
    auto key = std::make_pair(leaf, up);
    auto it = uplink_ids_.find(key);
    if (it != uplink_ids_.end()) return it->second;
    const int id = Add(fabric_.leaf_uplink_Bps, absl::StrCat("leaf", leaf, up ? " up" : " down"));
    uplink_ids_.emplace(key, id);
    return id;
  }
  int Leaf(int host) const { return fabric_.leaf_hosts > 0 ? host / fabric_.leaf_hosts : 0; }
  bool Leaves() const { return fabric_.leaf_hosts > 0; }

  FlowNetwork& network() { return net_; }
  const std::vector<std::string>& names() const { return names_; }

 private:
  int Add(double Bps, std::string name) {
    names_.push_back(std::move(name));
    return net_.AddLink(Bps);
  }
  const cluster::ClusterSpec& spec_;
  const EmulatedFabric& fabric_;
  FlowNetwork net_;
  std::vector<std::string> names_;
  std::map<std::tuple<int, std::string, bool>, int> nic_ids_;
  std::map<std::pair<int, bool>, int> uplink_ids_;
};

}  // namespace

absl::StatusOr<std::vector<router::RouteTable>> EmulatedRouteTables(
    const cluster::ClusterSpec& spec, const router::Topology& topology,
    const EmulatedRouting& routing) {
  if (routing.version != 1 && routing.version != 2) {
    return absl::InvalidArgumentError(absl::StrCat("emulation: router v", routing.version));
  }
  if (routing.version == 2 && routing.demand == nullptr) {
    return absl::InvalidArgumentError("emulation: router v2 needs the demand it splits by");
  }
  std::vector<router::RouteTable> tables;
  for (const cluster::HostSpec& h : spec.hosts) {
    absl::StatusOr<router::RouteTable> table =
        routing.version == 2
            ? router::BuildRouteTableV2(
                  spec, topology, h.name, *routing.demand,
                  router::RouterV2Options{.relay = routing.relay,
                                          .relay_chunk_bytes = routing.relay_chunk_bytes,
                                          .split = routing.split})
            : router::BuildRouteTable(spec, topology, h.name);
    if (!table.ok()) return Annotate(table.status(), "emulation");
    tables.push_back(*std::move(table));
  }
  return tables;
}

absl::StatusOr<EmulatedPrediction> PredictAlltoall(const cluster::ClusterSpec& spec,
                                                   const router::Topology& topology,
                                                   const TrafficMatrix& matrix,
                                                   const EmulatedFabric& fabric,
                                                   const EmulatedRouting& routing) {
  ASSIGN_OR_RETURN(std::vector<router::RouteTable> tables,
                   EmulatedRouteTables(spec, topology, routing));
  return PredictAlltoall(spec, tables, matrix, fabric);
}

absl::StatusOr<EmulatedPrediction> PredictAlltoall(const cluster::ClusterSpec& spec,
                                                   const std::vector<router::RouteTable>& tables,
                                                   const TrafficMatrix& matrix,
                                                   const EmulatedFabric& fabric) {
  const int n = static_cast<int>(spec.hosts.size());
  if (matrix.hosts() != n || static_cast<int>(tables.size()) != n) {
    return absl::InvalidArgumentError(absl::StrCat("emulation: a ", matrix.hosts(),
                                                   "-host matrix and ", tables.size(),
                                                   " route tables for a ", n, "-host spec"));
  }
  if (fabric.leaf_hosts > 0 && !(fabric.leaf_uplink_Bps > 0)) {
    return absl::InvalidArgumentError("emulation: leaves without an uplink rate");
  }
  if (!(fabric.wire_per_payload >= 1)) {
    return absl::InvalidArgumentError("emulation: fewer wire bytes than payload bytes");
  }
  if (!(fabric.ack_per_payload >= 0 && fabric.ack_per_payload < 1)) {
    return absl::InvalidArgumentError(
        absl::StrCat("emulation: ACK bytes per payload byte ", fabric.ack_per_payload));
  }
  std::map<std::string, int> index;
  for (int h = 0; h < n; ++h) index[spec.hosts[h].name] = h;
  Links links(spec, fabric);
  // Bytes per link, for the floor.
  std::vector<double> carried;
  auto carry = [&](const std::vector<int>& ids, double bytes) {
    for (int id : ids) {
      if (id >= static_cast<int>(carried.size())) carried.resize(id + 1, 0);
      carried[id] += bytes;
    }
  };
  EmulatedPrediction out;
  // Relayed flows and their store-and-forward tails: the relay sends a
  // chunk on once it has all of it, so the last chunk crosses the second hop
  // after the flow's fluid end, alone on that hop's first link.
  std::vector<std::pair<int, double>> tails;
  for (int s = 0; s < n; ++s) {
    const router::RouteTable& table = tables[s];
    for (int d = 0; d < n; ++d) {
      const double bytes = matrix.at(s, d);
      if (d == s || !(bytes > 0)) continue;
      for (const router::Path& p : table.PathsTo(spec.hosts[d].name)) {
        if (p.kind == router::PathKind::kIntraHost || !(p.weight > 0)) continue;
        // The data's links, and per hop the links its ACKs take back.
        std::vector<int> ids;
        std::vector<std::vector<int>> acks;
        auto nic = [&](std::vector<int>& to, int host, const std::string& name,
                       bool tx) -> absl::Status {
          ASSIGN_OR_RETURN(int id, links.Nic(host, name, tx));
          to.push_back(id);
          return absl::OkStatus();
        };
        // One hop from `a`'s NIC `an` to `b`'s NIC `bn` (through the leaves'
        // uplinks when it crosses them).
        auto hop = [&](int a, const std::string& an, int b, const std::string& bn,
                       bool eps) -> absl::Status {
          const bool up = eps && links.Leaves() && links.Leaf(a) != links.Leaf(b);
          RETURN_IF_ERROR(nic(ids, a, an, true));
          if (up) {
            ids.push_back(links.Uplink(links.Leaf(a), true));
            ids.push_back(links.Uplink(links.Leaf(b), false));
          }
          RETURN_IF_ERROR(nic(ids, b, bn, false));
          std::vector<int>& back = acks.emplace_back();
          RETURN_IF_ERROR(nic(back, b, bn, true));
          if (up) {
            back.push_back(links.Uplink(links.Leaf(b), true));
            back.push_back(links.Uplink(links.Leaf(a), false));
          }
          return nic(back, a, an, false);
        };
        if (p.kind == router::PathKind::kRelay) {
          auto r = index.find(p.relay_host);
          if (r == index.end()) {
            return absl::InvalidArgumentError(
                absl::StrCat("emulation: unknown relay host ", p.relay_host));
          }
          // Each hop over its circuit or, for one-sided relays, over EPS.
          RETURN_IF_ERROR(
              hop(s, p.local_nic, r->second, p.remote_nic, p.first_hop == router::PathKind::kEps));
          RETURN_IF_ERROR(
              hop(r->second, p.relay_nic, d, p.peer_nic, p.second_hop == router::PathKind::kEps));
        } else {
          RETURN_IF_ERROR(hop(s, p.local_nic, d, p.remote_nic, p.kind == router::PathKind::kEps));
        }
        const double f = bytes * p.weight * fabric.wire_per_payload;
        const int flow = links.network().AddFlow(f, ids);
        carry(ids, f);
        if (p.kind == router::PathKind::kRelay && fabric.relay_chunk_bytes > 0 && flow >= 0) {
          ASSIGN_OR_RETURN(const int second, links.Nic(index.at(p.relay_host), p.relay_nic, true));
          const double rate = links.network().capacity(second);
          const double last = std::min(fabric.relay_chunk_bytes * fabric.wire_per_payload, f);
          tails.emplace_back(flow,
                             rate > 0 ? last / rate : std::numeric_limits<double>::infinity());
        }
        ++out.flows;
        if (fabric.ack_per_payload > 0) {
          const double a = bytes * p.weight * fabric.ack_per_payload;
          for (const std::vector<int>& back : acks) {
            links.network().AddFlow(a, back);
            carry(back, a);
          }
        }
      }
    }
  }
  const SolveResult r = SolveMaxMin(links.network());
  out.time_s = r.completion_s;
  for (const auto& [flow, tail] : tails) out.time_s = std::max(out.time_s, r.finish_s[flow] + tail);
  for (size_t id = 0; id < carried.size(); ++id) {
    const double rate = links.network().capacity(static_cast<int>(id));
    if (!(rate > 0)) continue;
    const double t = std::max(0.0, carried[id] / rate - fabric.burst_s);
    if (t > out.floor_s) {
      out.floor_s = t;
      out.busiest = links.names()[id];
    }
  }
  return out;
}

}  // namespace mixnet::sim
