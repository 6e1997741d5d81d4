// Communicator as a router::TopologyFollower: direct (OCS) links that follow
// the topology epochs (Prepare / Commit / Abort), and the per-transfer
// offer/registration the collectives use (see communicator.h).
//
// Threads: Prepare/Commit/Abort run on the WorkerAgent's event thread;
// OfferDirect/BeginTransfer/EndTransfer on the communicator's caller thread;
// OnDirectFailure on transport progress threads. topo_mu_ guards the shared
// state; connections are made and destroyed outside it.
#include <algorithm>
#include <csignal>
#include <map>
#include <thread>

#include "absl/strings/str_cat.h"
#include "runtime/collectives/alltoall_internal.h"
#include "runtime/collectives/communicator.h"
#include "runtime/common/log.h"
#include "runtime/common/status.h"
#include "runtime/router/route_table_v2.h"

namespace mixnet::collectives {
namespace {

// A resumed direct link's probe: one byte each way. Collective calls use tag
// bases from 1 << 16 up (NextCollectiveTag), so tags below are the
// communicator's own.
constexpr uint64_t kTagResumeProbe = 1;

// How long a Prepare waits for the leaving links' last bytes to be
// acknowledged (the peer's delayed ACK, at most 40 ms on Linux, is flushed
// by its own Prepare).
constexpr absl::Duration kQuiesceBound = absl::Milliseconds(100);

// FNV-1a 64 of `text`, top bit set so it never equals a fixed-path id.
uint64_t DirectLinkId(const std::string& text) {
  uint64_t h = 0xcbf29ce484222325ull;
  for (unsigned char c : text) {
    h ^= c;
    h *= 0x100000001b3ull;
  }
  return h | (1ull << 63);
}

}  // namespace

std::string CircuitKey(const router::Path& path, const std::string& peer_host) {
  return absl::StrCat(peer_host, "|", path.local_nic, ">", path.remote_nic);
}

std::set<std::string> Communicator::DirectKeys(const router::RouteTable& table) const {
  std::set<std::string> keys;
  for (int peer = 0; peer < world_size_; ++peer) {
    if (!dynamic_[peer]) continue;
    for (const router::Path& p : table.PathsTo(hosts_[peer])) {
      if (p.kind == router::PathKind::kOcs) keys.insert(CircuitKey(p, hosts_[peer]));
    }
  }
  return keys;
}

absl::Status Communicator::ConnectDirect(const router::RouteTable& table, uint64_t epoch,
                                         const std::set<std::string>& skip,
                                         std::vector<DirectLinks>* made, absl::Time deadline,
                                         const std::set<std::pair<int, std::string>>& skip_peer,
                                         absl::Duration attempt) {
  made->assign(world_size_, {});
  auto skipped = [&](int peer, const std::string& key) {
    return skip.count(key) != 0 || skip_peer.count({peer, key}) != 0;
  };
  absl::Mutex first_mu;
  absl::Status first;
  auto connect_peer = [&](int peer, bool initiator) {
    if (!dynamic_[peer]) return;
    for (const router::Path& p : table.PathsTo(hosts_[peer])) {
      if (p.kind != router::PathKind::kOcs) continue;
      if (skipped(peer, CircuitKey(p, hosts_[peer]))) continue;
      const int lo = std::min(rank_, peer), hi = std::max(rank_, peer);
      const std::string& lo_nic = rank_ == lo ? p.local_nic : p.remote_nic;
      const std::string& hi_nic = rank_ == lo ? p.remote_nic : p.local_nic;
      const uint64_t id =
          DirectLinkId(absl::StrCat("direct|", lo, "|", hi, "|", lo_nic, "|", hi_nic, "|", epoch));
      const std::string name = absl::StrCat(PeerName(peer), " via circuit ", p.local_nic, "->",
                                            p.remote_nic, " (epoch ", epoch, ")");
      auto addr = nic_addresses_[peer].find(p.remote_nic);
      auto dev = nic_device_.find(p.local_nic);
      absl::Status s;
      if (addr == nic_addresses_[peer].end() || dev == nic_device_.end()) {
        s = absl::InternalError(absl::StrCat("rank ", rank_, ": no device address for ", name));
      } else {
        transport::ConnectOptions c;
        c.remote_address = addr->second;
        c.connection_id = id;
        c.initiator = initiator;
        c.peer_name = name;
        c.timeout = std::max(absl::Milliseconds(1),
                             std::min({connect_timeout_, attempt, deadline - absl::Now()}));
        const absl::Time t0 = absl::Now();
        absl::StatusOr<std::unique_ptr<transport::Connection>> conn = dev->second->Connect(c);
        if (absl::Now() - t0 > absl::Milliseconds(20)) {
          log::Debug("rank {}: {} connect to {} took {}", rank_,
                     initiator ? "initiator" : "passive", name,
                     absl::FormatDuration(absl::Now() - t0));
        }
        if (conn.ok()) {
          direct_connected_.fetch_add(1);
          (*made)[peer].push_back(
              std::make_shared<DirectLink>(p, peer, id, epoch, *std::move(conn)));
        } else {
          s = conn.status();
        }
      }
      if (!s.ok()) {
        log::Warn("rank {}: direct link to {} not made (EPS carries its bytes): {}", rank_, name,
                  s.ToString());
        absl::MutexLock lock(&first_mu);
        if (first.ok()) first = s;
      }
    }
  };
  // Dials to higher ranks and accepts from lower ones at the same time (see
  // Communicator::Create: a transport whose dial completes only once the
  // peer accepts would otherwise wait in a cycle).
  // A round whose circuits were all seen before connects nothing: no thread.
  auto needs = [&](int peer) {
    if (!dynamic_[peer]) return false;
    for (const router::Path& p : table.PathsTo(hosts_[peer])) {
      if (p.kind == router::PathKind::kOcs && !skipped(peer, CircuitKey(p, hosts_[peer]))) {
        return true;
      }
    }
    return false;
  };
  bool accepts = false;
  for (int peer = 0; peer < rank_ && !accepts; ++peer) accepts = needs(peer);
  std::thread acceptor;
  if (accepts) {
    acceptor = std::thread([&] {
      for (int peer = 0; peer < rank_; ++peer) connect_peer(peer, false);
    });
  }
  for (int peer = rank_ + 1; peer < world_size_; ++peer) connect_peer(peer, true);
  if (acceptor.joinable()) acceptor.join();
  for (DirectLinks& l : *made) {
    std::sort(l.begin(), l.end(), [](const auto& a, const auto& b) { return a->id() < b->id(); });
  }
  return first;
}

bool Communicator::Allowed(const DirectLink& link) const {
  return !restricted_ || allowed_.count(CircuitKey(link.path(), hosts_[link.peer()])) != 0;
}

DirectLinks Communicator::ReapAndOffer(int peer, DirectLinks* dead) {
  DirectLinks out;
  if (peer < 0 || peer >= static_cast<int>(links_.size())) return out;
  DirectLinks& mine = links_[peer];
  for (auto it = mine.begin(); it != mine.end();) {
    if (!(*it)->usable()) {
      dead->push_back(std::move(*it));
      it = mine.erase(it);
      continue;
    }
    if (Allowed(**it)) out.push_back(*it);
    ++it;
  }
  return out;
}

DirectLinks Communicator::OfferDirect(int peer) {
  DirectLinks dead, out;
  {
    absl::MutexLock lock(&topo_mu_);
    out = ReapAndOffer(peer, &dead);
  }
  for (auto& l : dead) l->Kill(absl::UnavailableError("direct link failed"));
  return out;
}

std::vector<DirectLinks> Communicator::BeginTransfer(size_t max_per_peer,
                                                     std::vector<PeerRouting>* routing,
                                                     absl::Span<const size_t> send_counts,
                                                     absl::Span<const size_t> recv_counts) {
  std::vector<DirectLinks> out(world_size_);
  DirectLinks dead;
  {
    absl::MutexLock lock(&topo_mu_);
    if (routing != nullptr) {
      // The plan or its reverse, whichever the call's counts weigh more on.
      bool reverse = false;
      if (!routing_reverse_.empty()) {
        const std::vector<double> sent(send_counts.begin(), send_counts.end());
        const std::vector<double> received(recv_counts.begin(), recv_counts.end());
        reverse = router::PrefersReverse(sent, received, plan_out_, plan_in_);
      }
      if (reverse) {
        *routing = routing_reverse_;
        reverse_routed_calls_.fetch_add(1);
      } else {
        *routing = routing_;
      }
    }
    transfer_links_.clear();
    for (int peer = 0; peer < world_size_; ++peer) {
      if (peer == rank_ || !dynamic_[peer]) continue;
      out[peer] = ReapAndOffer(peer, &dead);
      if (out[peer].size() > max_per_peer) out[peer].resize(max_per_peer);
      for (const auto& l : out[peer]) transfer_links_.push_back(l);
    }
    transfer_active_ = true;
  }
  for (auto& l : dead) l->Kill(absl::UnavailableError("direct link failed"));
  return out;
}

void Communicator::EndTransfer() {
  DirectLinks release;
  absl::MutexLock lock(&topo_mu_);
  transfer_active_ = false;
  release.swap(transfer_links_);
}

bool Communicator::transfer_active() const {
  absl::MutexLock lock(&topo_mu_);
  return transfer_active_;
}

bool Communicator::TestOnlyKillDirectLink(int peer) {
  std::shared_ptr<DirectLink> victim;
  {
    absl::MutexLock lock(&topo_mu_);
    if (peer < 0 || peer >= static_cast<int>(links_.size()) || links_[peer].empty()) return false;
    victim = links_[peer].front();
  }
  victim->Kill(absl::UnavailableError(
      absl::StrCat("rank ", rank_, ": direct link to ", PeerName(peer), " killed by a test")));
  return true;
}

DirectLinks Communicator::InstalledDirect(int peer) {
  absl::MutexLock lock(&topo_mu_);
  if (peer < 0 || peer >= static_cast<int>(links_.size())) return {};
  return links_[peer];
}

absl::Status Communicator::Prepare(const router::Topology& target, absl::Time deadline) {
  absl::StatusOr<router::RouteTable> table = router::BuildRouteTable(spec_, target, host_);
  if (!table.ok()) {
    return Annotate(table.status(), absl::StrCat("rank ", rank_, ": prepare epoch ", target.epoch));
  }
  std::set<std::string> keys = DirectKeys(*table);
  DirectLinks leaving;
  {
    absl::MutexLock lock(&topo_mu_);
    restricted_ = true;
    restrict_epoch_ = target.epoch;
    allowed_ = std::move(keys);
    auto drained = [this]() ABSL_SHARED_LOCKS_REQUIRED(topo_mu_) {
      if (!transfer_active_) return true;
      for (const auto& l : transfer_links_) {
        if (!Allowed(*l)) return false;
      }
      return true;
    };
    if (!topo_mu_.AwaitWithDeadline(absl::Condition(&drained), deadline)) {
      return absl::DeadlineExceededError(
          absl::StrCat("rank ", rank_, " (host ", host_, "): prepare epoch ", target.epoch,
                       ": a collective using a changing direct path is still running"));
    }
    for (const DirectLinks& per_peer : links_) {
      for (const auto& l : per_peer) {
        if (!Allowed(*l) && l->usable()) leaving.push_back(l);
      }
    }
  }
  // The leaving circuits go dark while the switch applies: their links stop
  // probing the path (no keepalive verdict in the dark window) and stay
  // open. Nothing may be in flight on them then: a segment or ACK lost in
  // the dark is retransmitted into it until the stall timeout kills the
  // link. So each end sends its pending ACKs now and waits (bounded) until
  // the peer acknowledged everything it sent.
  for (const auto& l : leaving) (void)l->SetSuspended(true);  // a dead link is reaped later
  const absl::Time quiet_by = std::min(deadline, absl::Now() + kQuiesceBound);
  const absl::Time t0 = absl::Now();
  size_t unacked = 0;
  for (;;) {
    unacked = 0;
    for (const auto& l : leaving) unacked += l->UnacknowledgedBytes();
    if (unacked == 0 || absl::Now() >= quiet_by) break;
    absl::SleepFor(absl::Microseconds(500));
  }
  if (unacked > 0) {
    log::Warn(
        "rank {}: prepare epoch {}: {} byte(s) still unacknowledged on the leaving circuits' "
        "links after {}; they may fail in the dark and be re-made",
        rank_, target.epoch, unacked, absl::FormatDuration(absl::Now() - t0));
  } else if (absl::Now() - t0 > absl::Milliseconds(5)) {
    log::Debug("rank {}: prepare epoch {}: leaving links quiet after {}", rank_, target.epoch,
               absl::FormatDuration(absl::Now() - t0));
  }
  return absl::OkStatus();
}

absl::Status Communicator::Commit(const router::Topology& target, absl::Time deadline) {
  absl::MutexLock commit_lock(&commit_mu_);
  absl::StatusOr<router::RouteTable> table = router::BuildRouteTable(spec_, target, host_);
  if (!table.ok()) {
    return Annotate(table.status(), absl::StrCat("rank ", rank_, ": commit epoch ", target.epoch));
  }
  const std::set<std::string> keys = DirectKeys(*table);
  std::set<std::string> have;
  {
    absl::MutexLock lock(&topo_mu_);
    have = installed_keys_;
  }
  // Circuits seen before: their suspended links resume; only the others
  // are connected.
  // A probe that goes unanswered within the stall time means the circuit
  // did not come back: that link is not re-dialled now (EPS carries its
  // bytes until a later Commit brings the circuit again).
  std::set<std::pair<int, std::string>> skip_keys;
  std::vector<DirectLinks> resumed = ResumeDirect(*table, have, deadline, &skip_keys);
  for (int peer = 0; peer < world_size_; ++peer) {
    for (const auto& l : resumed[peer])
      skip_keys.insert({peer, CircuitKey(l->path(), hosts_[peer])});
  }
  std::vector<DirectLinks> made;
  absl::Status st =
      ConnectDirect(*table, target.epoch, have, &made, deadline, skip_keys, CommitAttempt());
  DirectLinks dropped;
  {
    absl::MutexLock lock(&topo_mu_);
    if (links_.size() != static_cast<size_t>(world_size_)) links_.resize(world_size_);
    for (int peer = 0; peer < world_size_; ++peer) {
      DirectLinks keep;
      for (auto& l : links_[peer]) {
        if (keys.count(CircuitKey(l->path(), hosts_[peer]))) {
          (void)l->SetSuspended(false);  // a Prepare for another target may have
          keep.push_back(std::move(l));
        } else {
          dropped.push_back(std::move(l));
        }
      }
      for (auto& l : made[peer]) keep.push_back(std::move(l));
      for (auto& l : resumed[peer]) keep.push_back(std::move(l));
      std::sort(keep.begin(), keep.end(),
                [](const auto& a, const auto& b) { return a->id() < b->id(); });
      links_[peer] = std::move(keep);
    }
    // Links whose circuits left: kept open and suspended while they are
    // alive and the cap allows; the others close below.
    DirectLinks closing;
    for (auto& l : dropped) {
      const int peer = l->peer();
      if (suspended_paths_ == 0 || !l->usable() || !l->SetSuspended(true).ok()) {
        closing.push_back(std::move(l));
        continue;
      }
      SuspendedLink& slot = suspended_[{peer, CircuitKey(l->path(), hosts_[peer])}];
      if (slot.link != nullptr) closing.push_back(std::move(slot.link));
      slot = SuspendedLink{std::move(l), ++suspend_seq_};
    }
    EvictSuspendedLocked(&closing);
    direct_closed_.fetch_add(closing.size());
    dropped = std::move(closing);
    installed_keys_ = keys;
    installed_epoch_ = target.epoch;
    installed_topology_ = target;
    routing_.assign(world_size_, PeerRouting{});  // v1 until the plan for this topology
    routing_reverse_.clear();
    routing_plan_.reset();
    restricted_ = false;
    allowed_.clear();
  }
  // Links a running collective still holds close when it lets go.
  const absl::Time t1 = absl::Now();
  dropped.clear();
  if (absl::Now() - t1 > absl::Milliseconds(20)) {
    log::Debug("rank {}: closing old links took {}", rank_, absl::FormatDuration(absl::Now() - t1));
  }
  if (!st.ok()) {
    return Annotate(st, absl::StrCat("rank ", rank_, ": commit epoch ", target.epoch,
                                     " installed without some new circuits"));
  }
  return absl::OkStatus();
}

void Communicator::Abort(uint64_t epoch) {
  absl::MutexLock lock(&topo_mu_);
  if (restricted_ && restrict_epoch_ == epoch) {
    // The installed circuits stay: the links Prepare suspended resume.
    for (const DirectLinks& per_peer : links_) {
      for (const auto& l : per_peer) {
        if (!Allowed(*l)) (void)l->SetSuspended(false);
      }
    }
    restricted_ = false;
    allowed_.clear();
  }
}

absl::Duration Communicator::CommitAttempt() const {
  return path_stall_ > absl::ZeroDuration() ? std::min(path_stall_, connect_timeout_)
                                            : connect_timeout_;
}

std::vector<DirectLinks> Communicator::ResumeDirect(const router::RouteTable& table,
                                                    const std::set<std::string>& have,
                                                    absl::Time deadline,
                                                    std::set<std::pair<int, std::string>>* dark) {
  std::vector<DirectLinks> out(world_size_);
  DirectLinks candidates, dead;
  {
    absl::MutexLock lock(&topo_mu_);
    for (int peer = 0; peer < world_size_; ++peer) {
      if (!dynamic_[peer]) continue;
      for (const router::Path& p : table.PathsTo(hosts_[peer])) {
        if (p.kind != router::PathKind::kOcs) continue;
        const std::string key = CircuitKey(p, hosts_[peer]);
        if (have.count(key)) continue;
        auto it = suspended_.find({peer, key});
        if (it == suspended_.end()) continue;
        (it->second.link->usable() ? candidates : dead).push_back(std::move(it->second.link));
        suspended_.erase(it);
      }
    }
  }
  // Both ends probe at once: each sends one byte and waits for the other's,
  // so a link that one end lost while dark (or whose peer did not keep it)
  // is re-made by both rather than resumed by one.
  struct Probe {
    std::shared_ptr<DirectLink> link;
    uint8_t out = 1, in = 0;
    std::unique_ptr<transport::Request> send, recv;
    absl::Status status;
  };
  std::vector<Probe> probes(candidates.size());
  for (size_t i = 0; i < candidates.size(); ++i) {
    Probe& pr = probes[i];
    pr.link = std::move(candidates[i]);
    pr.status = pr.link->SetSuspended(false);
    if (!pr.status.ok()) continue;
    absl::StatusOr<std::unique_ptr<transport::Request>> r =
        pr.link->Irecv(&pr.in, 1, kTagResumeProbe);
    if (r.ok()) pr.recv = *std::move(r);
    absl::StatusOr<std::unique_ptr<transport::Request>> s =
        pr.link->Isend(&pr.out, 1, kTagResumeProbe);
    if (s.ok()) pr.send = *std::move(s);
    pr.status = !r.ok() ? r.status() : s.status();
  }
  const absl::Time until = std::min(deadline, absl::Now() + CommitAttempt());
  for (Probe& pr : probes) {
    if (pr.status.ok())
      pr.status = pr.recv->Wait(std::max(absl::ZeroDuration(), until - absl::Now()));
    if (pr.status.ok())
      pr.status = pr.send->Wait(std::max(absl::ZeroDuration(), until - absl::Now()));
    const int peer = pr.link->peer();
    if (pr.status.ok()) {
      direct_resumed_.fetch_add(1);
      out[peer].push_back(std::move(pr.link));
      continue;
    }
    // Unanswered: the circuit is dark (or the peer is not probing); an
    // error: the link broke while suspended, re-made now by both ends.
    const bool silent = absl::IsDeadlineExceeded(pr.status);
    if (silent) dark->insert({peer, CircuitKey(pr.link->path(), hosts_[peer])});
    log::Warn("rank {}: direct link to {} via circuit {}->{} not resumed ({}): {}", rank_,
              PeerName(peer), pr.link->path().local_nic, pr.link->path().remote_nic,
              silent ? "no answer: EPS carries its bytes" : "re-made", pr.status.ToString());
    pr.send.reset();
    pr.recv.reset();
    dead.push_back(std::move(pr.link));
  }
  for (auto& l : dead) {
    l->Kill(absl::UnavailableError("direct link not resumed"));
    direct_closed_.fetch_add(1);
  }
  return out;
}

void Communicator::EvictSuspendedLocked(DirectLinks* closing) {
  while (suspended_.size() > suspended_paths_) {
    auto oldest = suspended_.begin();
    for (auto it = suspended_.begin(); it != suspended_.end(); ++it) {
      if (it->second.seq < oldest->second.seq) oldest = it;
    }
    closing->push_back(std::move(oldest->second.link));
    suspended_.erase(oldest);
  }
}

size_t Communicator::suspended_direct() const {
  absl::MutexLock lock(&topo_mu_);
  return suspended_.size();
}

absl::Status Communicator::SetRouting(const router::RoutingPlan& plan) {
  if (router_ != "v2") return absl::OkStatus();
  router::Topology topology;
  {
    absl::MutexLock lock(&topo_mu_);
    topology = installed_topology_;
  }
  const std::string what =
      absl::StrCat("rank ", rank_, " (host ", host_, "): routing for epoch ", topology.epoch);
  absl::StatusOr<TrafficMatrix> demand = router::PlanDemand(spec_, plan);
  if (!demand.ok()) return Annotate(demand.status(), what);
  // The plan's reverse: the transposed demand.
  TrafficMatrix reverse_demand(demand->hosts());
  for (int i = 0; i < demand->hosts(); ++i) {
    for (int j = 0; j < demand->hosts(); ++j) reverse_demand.at(i, j) = demand->at(j, i);
  }
  // Ranks per host, for relay hosts.
  std::map<std::string, std::vector<int>> ranks_on;
  for (int r = 0; r < world_size_; ++r) ranks_on[hosts_[r]].push_back(r);
  // Each dynamic peer's shares under the split of `d`.
  auto route = [&](const TrafficMatrix& d) -> absl::StatusOr<std::vector<PeerRouting>> {
    absl::StatusOr<router::RouteTable> table = router::BuildRouteTableV2(
        spec_, topology, host_, d,
        router::RouterV2Options{.relay = plan.relay,
                                .relay_chunk_bytes = static_cast<double>(relay_chunk_bytes_),
                                .split = route_function_});
    if (!table.ok()) return Annotate(table.status(), what);
    std::vector<PeerRouting> routing(world_size_);
    for (int peer = 0; peer < world_size_; ++peer) {
      if (peer == rank_ || !dynamic_[peer]) continue;
      const router::PeerShares shares = router::SharesTo(*table, hosts_[peer]);
      PeerRouting& out = routing[peer];
      out.eps_share = shares.eps;
      for (const auto& [host, share] : shares.relays) {
        auto it = ranks_on.find(host);
        // A relay host with no rank of this job, or too many ranks for the
        // tag space: its share goes over EPS.
        if (it == ranks_on.end() || world_size_ > internal::kMaxRelayWorld || host == host_ ||
            host == hosts_[peer] || out.relays.size() == internal::kMaxRelays) {
          out.eps_share += share;
          continue;
        }
        const std::vector<int>& ranks = it->second;
        out.relays.push_back(RelayRoute{ranks[(rank_ + peer) % ranks.size()], share});
      }
      out.eps_share = std::clamp(out.eps_share, 0.0, 1.0);
    }
    return routing;
  };
  ASSIGN_OR_RETURN(std::vector<PeerRouting> routing, route(*demand));
  ASSIGN_OR_RETURN(std::vector<PeerRouting> reverse, route(reverse_demand));
  // The plan's bytes from and to this host, per peer rank.
  std::vector<double> out_bytes(world_size_, 0), in_bytes(world_size_, 0);
  auto index_of = [&](const std::string& host) {
    const cluster::HostSpec* h = spec_.FindHost(host);
    return h == nullptr ? -1 : static_cast<int>(h - spec_.hosts.data());
  };
  const int me = index_of(host_);
  for (int peer = 0; peer < world_size_; ++peer) {
    const int other = index_of(hosts_[peer]);
    if (me < 0 || other < 0 || other == me) continue;
    out_bytes[peer] = demand->at(me, other);
    in_bytes[peer] = demand->at(other, me);
  }
  absl::MutexLock lock(&topo_mu_);
  // A Commit since we read the topology: these weights are for the old one.
  if (installed_topology_.epoch != topology.epoch) {
    return absl::AbortedError(
        absl::StrCat(what, ": epoch ", installed_topology_.epoch, " was installed meanwhile"));
  }
  routing_ = std::move(routing);
  routing_reverse_ = std::move(reverse);
  plan_out_ = std::move(out_bytes);
  plan_in_ = std::move(in_bytes);
  routing_plan_ = plan;
  relays_planned_.store(plan.relay);
  return absl::OkStatus();
}

router::Topology Communicator::installed_topology() const {
  absl::MutexLock lock(&topo_mu_);
  return installed_topology_;
}

std::optional<router::RoutingPlan> Communicator::routing_plan() const {
  absl::MutexLock lock(&topo_mu_);
  return routing_plan_;
}

void Communicator::CountRelayForwarded(uint64_t n) {
  const uint64_t total = relay_bytes_forwarded_.fetch_add(n) + n;
  const uint64_t die = die_after_forwarding_.load();
  if (die > 0 && total >= die) {
    log::Warn("rank {}: killing this process after forwarding {} bytes (test hook)", rank_, total);
    raise(SIGKILL);
  }
}

double Communicator::eps_share(int peer) const {
  absl::MutexLock lock(&topo_mu_);
  return peer >= 0 && peer < static_cast<int>(routing_.size()) ? routing_[peer].eps_share : 0.0;
}

PeerRouting Communicator::routing(int peer, bool reverse) const {
  absl::MutexLock lock(&topo_mu_);
  const std::vector<PeerRouting>& r = reverse ? routing_reverse_ : routing_;
  return peer >= 0 && peer < static_cast<int>(r.size()) ? r[peer] : PeerRouting{};
}

uint64_t Communicator::installed_epoch() const {
  absl::MutexLock lock(&topo_mu_);
  return installed_epoch_;
}

}  // namespace mixnet::collectives
