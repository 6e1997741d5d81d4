// Router v1: builds one host's route table for one topology epoch from the
// cluster spec and the live circuits. Runs on whichever thread installs a new
// epoch (the worker agent, or the caller at start-up); the table it returns is
// immutable and read by the collectives from any thread.
#include "runtime/router/route_table.h"

#include <algorithm>
#include <map>
#include <tuple>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/string_view.h"
#include "runtime/common/absl_view.h"
#include "runtime/common/status.h"

namespace mixnet::router {
namespace {

using cluster::ClusterSpec;
using cluster::HostSpec;
using cluster::NicRole;
using cluster::NicSpec;

// This abseil's string_view is its own type; std::string_view needs a hop.

const std::vector<Path>& NoPaths() {
  static const std::vector<Path>* empty = new std::vector<Path>();
  return *empty;
}

Path MakePath(PathKind kind, const NicSpec& local, const NicSpec& remote) {
  Path p;
  p.kind = kind;
  p.local_nic = local.name;
  p.local_address = local.address;
  p.remote_nic = remote.name;
  p.remote_address = remote.address;
  p.gbps = std::min(local.gbps, remote.gbps);
  return p;
}

std::vector<const NicSpec*> EpsNics(const HostSpec& host) {
  std::vector<const NicSpec*> out;
  for (const NicSpec& n : host.nics) {
    if (n.role == NicRole::kEps) out.push_back(&n);
  }
  return out;
}

// EPS NICs paired in order; the shorter list wraps around, so there are
// max(|local|, |remote|) paths, and the peer's table holds the mirror image.
std::vector<Path> EpsPaths(const std::vector<const NicSpec*>& local,
                           const std::vector<const NicSpec*>& remote) {
  std::vector<Path> out;
  if (local.empty() || remote.empty()) return out;
  const size_t n = std::max(local.size(), remote.size());
  for (size_t i = 0; i < n; ++i) {
    out.push_back(MakePath(PathKind::kEps, *local[i % local.size()], *remote[i % remote.size()]));
  }
  return out;
}

// One circuit seen from the local host. Ordered by (switch, lower port) so
// that both ends of a striped pair list the circuits in the same order.
struct LocalCircuit {
  std::string ocs_switch;
  int low_port;
  const HostSpec* peer;
  const NicSpec* local_nic;
  const NicSpec* remote_nic;
};

}  // namespace

std::string_view PathKindName(PathKind kind) {
  switch (kind) {
    case PathKind::kIntraHost:
      return "intra-host";
    case PathKind::kOcs:
      return "ocs";
    case PathKind::kEps:
      return "eps";
    case PathKind::kRelay:
      return "relay";
  }
  return "unknown";
}

const std::vector<Path>& RouteTable::PathsTo(std::string_view peer_host) const {
  auto it = routes_.find(peer_host);
  return it == routes_.end() ? NoPaths() : it->second;
}

const std::vector<Path>& RouteTable::EpsPathsTo(std::string_view peer_host) const {
  auto it = eps_routes_.find(peer_host);
  return it == eps_routes_.end() ? NoPaths() : it->second;
}

absl::Status ValidateTopology(const ClusterSpec& spec, const Topology& topology) {
  return Annotate(cluster::ValidateCircuits(spec, topology.circuits),
                  absl::StrCat("topology epoch ", topology.epoch));
}

absl::StatusOr<RouteTable> BuildRouteTable(const ClusterSpec& spec, const Topology& topology,
                                           std::string_view local_host) {
  const std::string what =
      absl::StrCat("route table for host ", Av(local_host), " at epoch ", topology.epoch);
  const HostSpec* local = spec.FindHost(local_host);
  if (local == nullptr) {
    return absl::InvalidArgumentError(absl::StrCat(what, ": host '", Av(local_host),
                                                   "' is not in cluster spec '", spec.name, "'"));
  }
  if (local->nics.empty()) {
    return absl::InvalidArgumentError(absl::StrCat(what, ": host ", local->name, " has no NIC"));
  }
  RETURN_IF_ERROR(ValidateTopology(spec, topology));

  // The circuits with one end on this host, in a canonical order.
  using PortKey = std::pair<std::string_view, int>;
  std::map<PortKey, ClusterSpec::PortOwner> cabled;
  for (const HostSpec& h : spec.hosts) {
    for (const NicSpec& n : h.nics) {
      if (n.role == NicRole::kOcs) {
        cabled.emplace(PortKey{n.ocs_switch, n.ocs_port}, ClusterSpec::PortOwner{&h, &n});
      }
    }
  }
  std::vector<LocalCircuit> mine;
  for (const cluster::CircuitSpec& c : topology.circuits) {
    // Validated above: both ports are cabled, on different hosts.
    auto a = cabled.find(PortKey{c.ocs_switch, c.port_a});
    auto b = cabled.find(PortKey{c.ocs_switch, c.port_b});
    if (a == cabled.end() || b == cabled.end()) continue;
    const ClusterSpec::PortOwner& ea = a->second;
    const ClusterSpec::PortOwner& eb = b->second;
    const int low = std::min(c.port_a, c.port_b);
    if (ea.host == local) mine.push_back({c.ocs_switch, low, eb.host, ea.nic, eb.nic});
    if (eb.host == local) mine.push_back({c.ocs_switch, low, ea.host, eb.nic, ea.nic});
  }
  std::sort(mine.begin(), mine.end(), [](const LocalCircuit& x, const LocalCircuit& y) {
    return std::tie(x.ocs_switch, x.low_port) < std::tie(y.ocs_switch, y.low_port);
  });

  RouteTable table;
  table.epoch_ = topology.epoch;
  table.local_host_ = local->name;
  const std::vector<const NicSpec*> local_eps = EpsNics(*local);
  for (const HostSpec& peer : spec.hosts) {
    if (table.routes_.count(peer.name) != 0) continue;  // duplicate names: first wins
    if (&peer == local) {
      const NicSpec& nic = local_eps.empty() ? local->nics.front() : *local_eps.front();
      std::vector<Path> intra = {MakePath(PathKind::kIntraHost, nic, nic)};
      table.eps_routes_.emplace(peer.name, intra);
      table.routes_.emplace(peer.name, std::move(intra));
      continue;
    }
    std::vector<Path> eps = EpsPaths(local_eps, EpsNics(peer));
    std::vector<Path> paths;
    for (const LocalCircuit& c : mine) {
      if (c.peer == &peer) paths.push_back(MakePath(PathKind::kOcs, *c.local_nic, *c.remote_nic));
    }
    if (paths.empty()) paths = eps;
    if (paths.empty()) {
      const std::string& without = local_eps.empty() ? local->name : peer.name;
      return absl::InvalidArgumentError(
          absl::StrCat(what, ": host ", peer.name, " is unreachable from host ", local->name,
                       ": host ", without, " has no EPS NIC and no circuit joins the two"));
    }
    table.routes_.emplace(peer.name, std::move(paths));
    table.eps_routes_.emplace(peer.name, std::move(eps));
  }
  for (auto* routes : {&table.routes_, &table.eps_routes_}) {
    for (auto& [peer, paths] : *routes) {
      for (Path& p : paths) p.weight = 1.0 / static_cast<double>(paths.size());
    }
  }
  return table;
}

}  // namespace mixnet::router
