// PathMover's routing state (see path_mover.h): the route table each
// topology epoch gives, router v2's EPS shares per peer (multipath.h), the
// path a send comm should run over, and the TopologyFollower calls. Threads:
// the worker agent's event thread (Prepare/Commit/Abort/Settle/SetRouting), the
// mover thread and NCCL's proxy threads (Desired, EpsShare, Vanishing).
#include <algorithm>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "plugins/nccl_net/path_mover.h"
#include "plugins/nccl_net/result.h"
#include "runtime/common/status.h"
#include "runtime/locality/traffic_matrix.h"

namespace mixnet::nccl {
namespace {

cluster::CircuitSpec Normalized(cluster::CircuitSpec c) {
  if (c.port_a > c.port_b) std::swap(c.port_a, c.port_b);
  return c;
}

bool SameCircuit(const cluster::CircuitSpec& a, const cluster::CircuitSpec& b) {
  cluster::CircuitSpec x = Normalized(a), y = Normalized(b);
  return x.ocs_switch == y.ocs_switch && x.port_a == y.port_a && x.port_b == y.port_b;
}

}  // namespace

absl::Status PathMover::InstallRouting(const router::Topology& topology, bool restricted) {
  ASSIGN_OR_RETURN(router::RouteTable table,
                   router::BuildRouteTable(options_.spec, topology, options_.host));
  absl::MutexLock lock(&routing_mu_);
  if (!restricted) {
    installed_ = topology;
    installed_epoch_.store(topology.epoch);
  }
  routing_ = topology;
  routing_generation_.fetch_add(1);
  table_ = std::make_shared<const router::RouteTable>(std::move(table));
  return absl::OkStatus();
}

LaneWeights RelayLaneWeights(const std::vector<double>& circuit_gbps, double eps,
                             const std::vector<double>& relays) {
  LaneWeights w;
  double relayed = 0;
  for (double r : relays) relayed += r;
  if (circuit_gbps.empty()) {
    w.weights.push_back(eps);
    for (double r : relays) w.weights.push_back(r);
    return w;
  }
  w.home_share = eps;
  double rate = 0;
  for (double g : circuit_gbps) rate += g;
  w.weights = circuit_gbps;
  const double circuit_share = std::max(1.0 - eps - relayed, 1e-9);
  for (double r : relays) w.weights.push_back(r * rate / circuit_share);
  return w;
}

std::optional<LanePath> PathMover::Desired(const Comm& c) const {
  if (c.peer_host.empty() || c.peer_host == options_.host) return std::nullopt;
  const cluster::HostSpec* peer = options_.spec.FindHost(c.peer_host);
  const cluster::HostSpec* self = options_.spec.FindHost(options_.host);
  if (peer == nullptr || self == nullptr) return std::nullopt;
  std::shared_ptr<const router::RouteTable> table;
  {
    absl::MutexLock lock(&routing_mu_);
    table = table_;
  }
  const std::vector<router::Path>& paths = table->PathsTo(c.peer_host);
  if (paths.empty() || paths[0].kind == router::PathKind::kIntraHost) return std::nullopt;
  const router::Path* p = &paths[c.key % paths.size()];
  const double share = EpsShare(c);
  const std::vector<router::Path> relays = UsableRelays(c.peer_host);
  double relayed = 0;
  for (const router::Path& r : relays) relayed += r.weight;
  bool v2 = false;  // a router v2 routing for this peer is in place
  {
    absl::MutexLock lock(&routing_mu_);
    v2 = eps_share_.contains(c.peer_host);
  }
  if (p->kind == router::PathKind::kOcs && share + relayed >= 1 - 1e-9) {
    // Router v2 gives the circuits nothing: EPS (and relays) carry the comm.
    const std::vector<router::Path>& eps = table->EpsPathsTo(c.peer_host);
    if (eps.empty()) return std::nullopt;
    p = &eps[c.key % eps.size()];
  }
  LanePath out;
  out.local_nic = p->local_nic;
  out.remote_nic = p->remote_nic;
  out.direct = p->kind == router::PathKind::kOcs;
  if (out.direct) {
    const cluster::NicSpec* a = self->FindNic(p->local_nic);
    const cluster::NicSpec* b = peer->FindNic(p->remote_nic);
    if (a == nullptr || b == nullptr) return std::nullopt;
    out.circuit = Normalized(cluster::CircuitSpec{a->ocs_switch, a->ocs_port, b->ocs_port});
    out.gbps = p->gbps;
    // Router v2 splits the pair's bytes over the circuit and EPS (home).
    if (share > 0) out.split_min_bytes = options_.split_min_bytes;
    // ... and over all of the pair's circuits: the comm's lane stripes over
    // the others too, starting after its own (multipath.h).
    if (v2) {
      std::vector<const router::Path*> circuits;
      for (const router::Path& q : paths) {
        if (q.kind == router::PathKind::kOcs) circuits.push_back(&q);
      }
      const size_t first = std::find(circuits.begin(), circuits.end(), p) - circuits.begin();
      for (size_t k = 1; k < circuits.size() && first < circuits.size(); ++k) {
        const router::Path* q = circuits[(first + k) % circuits.size()];
        const cluster::NicSpec* qa = self->FindNic(q->local_nic);
        const cluster::NicSpec* qb = peer->FindNic(q->remote_nic);
        if (qa == nullptr || qb == nullptr) continue;
        StripePath sp;
        sp.local_nic = q->local_nic;
        sp.remote_nic = q->remote_nic;
        sp.circuit = Normalized(cluster::CircuitSpec{qa->ocs_switch, qa->ocs_port, qb->ocs_port});
        sp.gbps = q->gbps;
        out.stripes.push_back(std::move(sp));
      }
      if (!out.stripes.empty()) out.split_min_bytes = options_.split_min_bytes;
    }
  }
  if (relays.empty()) return out;
  // Relay stripes after the circuits, weighted so the cut gives each its
  // share (RelayLaneWeights).
  std::vector<double> circuit_gbps;
  if (out.direct) {
    circuit_gbps.push_back(out.gbps);
    for (const StripePath& sp : out.stripes) circuit_gbps.push_back(sp.gbps);
  }
  std::vector<double> relay_shares;
  for (const router::Path& r : relays) relay_shares.push_back(r.weight);
  const LaneWeights w = RelayLaneWeights(circuit_gbps, share, relay_shares);
  if (!out.direct) out.gbps = w.weights[0];
  for (size_t j = 0; j < relays.size(); ++j) {
    const router::Path& r = relays[j];
    const cluster::HostSpec* relay_spec = options_.spec.FindHost(r.relay_host);
    if (relay_spec == nullptr) return std::nullopt;
    const cluster::NicSpec* a = self->FindNic(r.local_nic);
    const cluster::NicSpec* b_in = relay_spec->FindNic(r.remote_nic);
    const cluster::NicSpec* b_out = relay_spec->FindNic(r.relay_nic);
    const cluster::NicSpec* d = peer->FindNic(r.peer_nic);
    if (a == nullptr || b_in == nullptr || b_out == nullptr || d == nullptr) return std::nullopt;
    StripePath sp;
    sp.local_nic = r.local_nic;
    sp.remote_nic = r.peer_nic;
    sp.gbps = w.weights[circuit_gbps.empty() ? 1 + j : circuit_gbps.size() + j];
    sp.relay_host = r.relay_host;
    sp.relay_in_nic = r.remote_nic;
    sp.relay_out_nic = r.relay_nic;
    sp.first_direct = r.first_hop == router::PathKind::kOcs;
    sp.second_direct = r.second_hop == router::PathKind::kOcs;
    if (sp.first_direct) {
      sp.first_circuit =
          Normalized(cluster::CircuitSpec{a->ocs_switch, a->ocs_port, b_in->ocs_port});
    }
    if (sp.second_direct) {
      sp.circuit =
          Normalized(cluster::CircuitSpec{b_out->ocs_switch, b_out->ocs_port, d->ocs_port});
    }
    out.stripes.push_back(std::move(sp));
  }
  out.split_min_bytes = options_.split_min_bytes;
  return out;
}

double PathMover::EpsShare(const Comm& c) const {
  const bool relayed = !UsableRelays(c.peer_host).empty();
  absl::MutexLock lock(&routing_mu_);
  if (auto r = relay_split_.find(c.peer_host); relayed && r != relay_split_.end()) {
    return r->second.eps_share;
  }
  auto it = eps_share_.find(c.peer_host);
  return it == eps_share_.end() ? 0.0 : it->second;
}

double PathMover::HomeShare(const Comm& c, const LanePath& lane) const {
  return lane.direct ? EpsShare(c) : 0.0;
}

absl::Status PathMover::SetRouting(const router::RoutingPlan& plan) {
  if (options_.router != "v2") return absl::OkStatus();  // router v1: one lane per comm
  router::Topology topology;
  {
    absl::MutexLock lock(&routing_mu_);
    topology = installed_;
  }
  const std::string what =
      absl::StrCat("NCCL plugin on host ", options_.host, ": routing for epoch ", topology.epoch);
  absl::StatusOr<TrafficMatrix> demand = router::PlanDemand(options_.spec, plan);
  if (!demand.ok()) return Annotate(demand.status(), what);
  // The split without relays, for peers whose relays cannot be set up (no
  // comm of ours reaches the relay host): a relay plan's split would move
  // bytes off a pair's circuit to make room for relayed bytes that would
  // then go over EPS.
  absl::StatusOr<router::RouteTable> table = router::BuildRouteTableV2(
      options_.spec, topology, options_.host, *demand, router::RouterV2Options{.relay = false});
  if (!table.ok()) return Annotate(table.status(), what);
  absl::flat_hash_map<std::string, double> shares;
  std::vector<std::string> split;
  for (const cluster::HostSpec& h : options_.spec.hosts) {
    if (h.name == options_.host) continue;
    const double share = router::EpsShare(*table, h.name);
    shares[h.name] = share;
    if (share > 0 && share < 1) split.push_back(absl::StrCat(h.name, " ", share));
  }
  // With relays (the plan allows them): the relay host forwards (relay_forwarder.h).
  absl::flat_hash_map<std::string, RelaySplit> relay_split;
  std::vector<std::string> relayed;
  if (plan.relay) {
    absl::StatusOr<router::RouteTable> with = router::BuildRouteTableV2(
        options_.spec, topology, options_.host, *demand, router::RouterV2Options{.relay = true});
    if (!with.ok()) return Annotate(with.status(), what);
    for (const cluster::HostSpec& h : options_.spec.hosts) {
      if (h.name == options_.host) continue;
      RelaySplit rs;
      rs.eps_share = router::SharesTo(*with, h.name).eps;
      for (const router::Path& q : with->PathsTo(h.name)) {
        if (q.kind == router::PathKind::kRelay && q.weight > 0) rs.paths.push_back(q);
      }
      if (rs.paths.empty()) continue;
      for (const router::Path& q : rs.paths) {
        relayed.push_back(absl::StrCat(h.name, " via ", q.relay_host, " ", q.weight));
      }
      relay_split[h.name] = std::move(rs);
    }
  }
  {
    absl::MutexLock lock(&routing_mu_);
    // A Commit since we read the topology: these weights are for the old one.
    if (installed_.epoch != topology.epoch) {
      return absl::AbortedError(
          absl::StrCat(what, ": epoch ", installed_.epoch, " was installed meanwhile"));
    }
    eps_share_ = std::move(shares);
    relay_split_ = std::move(relay_split);
    routing_generation_.fetch_add(1);
  }
  if (!relayed.empty()) {
    LogInfo(absl::StrCat(what,
                         " (router v2): relay shares (used while a comm reaches the relay "
                         "host): ",
                         absl::StrJoin(relayed, ", ")));
  }
  LogInfo(absl::StrCat(what, " (router v2): EPS shares of split peers: ",
                       split.empty() ? std::string("none") : absl::StrJoin(split, ", ")));
  return absl::OkStatus();
}

bool RunsOverMissingCircuit(const LanePath& p, const std::vector<cluster::CircuitSpec>& circuits) {
  auto missing = [&](const cluster::CircuitSpec& circuit) {
    for (const cluster::CircuitSpec& c : circuits) {
      if (SameCircuit(c, circuit)) return false;
    }
    return true;
  };
  if (p.direct && missing(p.circuit)) return true;
  for (const StripePath& s : p.stripes) {
    if (!s.relay() && missing(s.circuit)) return true;
    if (s.relay() &&
        ((s.first_direct && missing(s.first_circuit)) || (s.second_direct && missing(s.circuit)))) {
      return true;
    }
  }
  return false;
}

bool PathMover::Vanishing(const LanePath& p) const {
  if (!p.direct && p.stripes.empty()) return false;
  absl::MutexLock lock(&routing_mu_);
  return RunsOverMissingCircuit(p, routing_.circuits);
}

std::string PathMover::DescribeBlocked() const {
  std::vector<std::string> out;
  absl::MutexLock lock(&comms_mu_);
  for (Comm* c : comms_) {
    absl::MutexLock cl(&c->mu);
    if (c->lane == nullptr || c->lane_failed) continue;  // a failed comm carries nothing
    bool blocked = Vanishing(c->lane->path);
    if (c->move != nullptr) {
      blocked |= Vanishing(c->move->target) || (c->move->old && Vanishing(c->move->old->path));
    }
    if (blocked) out.push_back(CommName(*c));
    if (out.size() >= 4) break;
  }
  return absl::StrJoin(out, "; ");
}

absl::Status PathMover::Prepare(const router::Topology& target, absl::Time deadline) {
  router::Topology restricted;
  {
    absl::MutexLock lock(&routing_mu_);
    restricted.epoch = installed_.epoch;
    for (const cluster::CircuitSpec& c : installed_.circuits) {
      for (const cluster::CircuitSpec& t : target.circuits) {
        if (SameCircuit(c, t)) {
          restricted.circuits.push_back(c);
          break;
        }
      }
    }
  }
  RETURN_IF_ERROR(InstallRouting(restricted, true));
  while (true) {
    const std::string blocked = DescribeBlocked();
    if (blocked.empty()) return absl::OkStatus();
    if (absl::Now() >= deadline) {
      return absl::DeadlineExceededError(absl::StrCat("NCCL plugin on host ", options_.host,
                                                      ": comms still on circuits leaving at epoch ",
                                                      target.epoch, ": ", blocked));
    }
    absl::SleepFor(absl::Milliseconds(1));
  }
}

absl::Status PathMover::Commit(const router::Topology& target, absl::Time deadline) {
  {
    // Router v1's paths until a routing for the new topology comes.
    absl::MutexLock lock(&routing_mu_);
    eps_share_.clear();
    relay_split_.clear();
  }
  RETURN_IF_ERROR(InstallRouting(target, false));
  if (options_.static_plan.has_value()) return SetRouting(*options_.static_plan);
  return absl::OkStatus();
}

std::string PathMover::DescribeUnsettled(absl::Time deadline) const {
  std::vector<std::string> out;
  const uint64_t generation = routing_generation_.load();
  absl::MutexLock lock(&comms_mu_);
  for (Comm* c : comms_) {
    absl::MutexLock cl(&c->mu);
    if (c->lane == nullptr || c->lane_failed) continue;  // a failed comm goes nowhere
    // A send comm the mover has not found right for this routing yet will
    // start a move, also after a failed one's backoff when that ends before
    // the deadline (the peer refuses a move onto a circuit it has not
    // installed yet: its COMMIT came later than ours).
    const bool unrouted =
        c->is_send && c->routed_generation != generation && c->retry_after < deadline;
    if (c->move != nullptr || unrouted) out.push_back(CommName(*c));
    if (out.size() >= 4) break;
  }
  return absl::StrJoin(out, "; ");
}

absl::Status PathMover::Settle(absl::Time deadline) {
  while (true) {
    const std::string moving = DescribeUnsettled(deadline);
    if (moving.empty()) return absl::OkStatus();
    if (absl::Now() >= deadline) {
      return absl::DeadlineExceededError(absl::StrCat(
          "NCCL plugin on host ", options_.host, ": comms still moving onto the paths of epoch ",
          installed_epoch(), ": ", moving));
    }
    absl::SleepFor(absl::Milliseconds(1));
  }
}

absl::Status PathMover::CommitWithRouting(const router::Topology& target,
                                          const router::RoutingPlan* plan, absl::Time deadline,
                                          absl::Status* routing_status) {
  routing_pending_.store(true);
  absl::Status st = Commit(target, deadline);
  *routing_status = plan != nullptr ? SetRouting(*plan) : absl::OkStatus();
  routing_pending_.store(false);
  return st;
}

void PathMover::Abort(uint64_t epoch) {
  router::Topology installed;
  {
    absl::MutexLock lock(&routing_mu_);
    installed = installed_;
  }
  absl::Status s = InstallRouting(installed, false);
  if (!s.ok()) LogWarn(absl::StrCat("abort of epoch ", epoch, ": ", s.ToString()));
}

uint64_t PathMover::installed_epoch() const { return installed_epoch_.load(); }

}  // namespace mixnet::nccl
