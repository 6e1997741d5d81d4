// Communicator set-up: rendezvous, route table, devices, connections (see communicator.h).
#include "runtime/collectives/communicator.h"

#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <fstream>
#include <map>
#include <set>
#include <thread>

#include "absl/strings/str_cat.h"
#include "nlohmann/json.hpp"
#include "runtime/common/cpu_affinity.h"
#include "runtime/common/log.h"
#include "runtime/common/settings.h"
#include "runtime/common/status.h"
#include "runtime/transport/completion_group.h"
#include "runtime/transport/tcp/socket_util.h"

namespace mixnet::collectives {
namespace {

std::string RankKey(int rank) { return absl::StrCat("mixnet/rank/", rank); }

// The kernel's boot id: ranks with the same one share a kernel, hence CPUs.
std::string MachineId() {
  std::string id;
  std::ifstream boot("/proc/sys/kernel/random/boot_id");
  std::getline(boot, id);
  return id;
}

// Where an intra-host (abstract Unix socket, cross-memory) connection can
// reach: one kernel boot (`machine`) and one network namespace. Ranks that a
// spec puts on one host but that run elsewhere fall back to the NIC path.
std::string LocalScope(const std::string& machine) {
  std::string scope = machine;
  char ns[128] = {};
  ssize_t n = readlink("/proc/self/ns/net", ns, sizeof(ns) - 1);
  if (n > 0) absl::StrAppend(&scope, "/", std::string(ns, static_cast<size_t>(n)));
  return scope;
}

}  // namespace

// ---- DirectLink ----

DirectLink::DirectLink(router::Path path, int peer, uint64_t id, uint64_t epoch,
                       std::unique_ptr<transport::Connection> connection)
    : path_(std::move(path)),
      peer_(peer),
      id_(id),
      epoch_(epoch),
      connection_(std::move(connection)) {}

DirectLink::~DirectLink() { Kill(absl::CancelledError("direct link released")); }

absl::Status DirectLink::SetSuspended(bool suspended) {
  absl::MutexLock lock(&mu_);
  if (connection_ == nullptr) return dead_;
  return connection_->SetSuspended(suspended);
}

size_t DirectLink::UnacknowledgedBytes() const {
  absl::MutexLock lock(&mu_);
  return connection_ == nullptr ? 0 : connection_->UnacknowledgedBytes();
}

bool DirectLink::usable() const {
  absl::MutexLock lock(&mu_);
  return dead_.ok() && connection_ != nullptr && connection_->health().ok();
}

void DirectLink::Kill(const absl::Status& why) {
  std::unique_ptr<transport::Connection> doomed;
  {
    absl::MutexLock lock(&mu_);
    if (dead_.ok()) dead_ = why.ok() ? absl::CancelledError("direct link closed") : why;
    doomed = std::move(connection_);
  }
  // Destroyed outside the lock: this waits for the progress thread, after
  // which the transport touches no user buffer and pending requests fail.
  doomed.reset();
}

absl::StatusOr<std::unique_ptr<transport::Request>> DirectLink::Isend(const void* buf, size_t len,
                                                                      uint64_t tag) {
  absl::MutexLock lock(&mu_);
  if (connection_ == nullptr) return dead_;
  return connection_->Isend(buf, len, tag);
}

absl::StatusOr<std::unique_ptr<transport::Request>> DirectLink::Irecv(void* buf, size_t len,
                                                                      uint64_t tag) {
  absl::MutexLock lock(&mu_);
  if (connection_ == nullptr) return dead_;
  return connection_->Irecv(buf, len, tag);
}

namespace {

// A connection id both ends derive alike: the pair of ranks and the path index.
uint64_t ConnectionId(int a, int b, size_t path) {
  uint64_t lo = static_cast<uint64_t>(std::min(a, b));
  uint64_t hi = static_cast<uint64_t>(std::max(a, b));
  return (lo << 40) | (hi << 16) | static_cast<uint64_t>(path);
}

}  // namespace

absl::StatusOr<CommunicatorOptions> CommunicatorOptions::FromSettings(int rank, int world_size,
                                                                      rendezvous::Store* store) {
  ASSIGN_OR_RETURN(Settings s, Settings::FromEnv());
  CommunicatorOptions o;
  o.rank = rank;
  o.world_size = world_size;
  o.store = store;
  o.transport = s.transport;
  o.intra_host = s.intra_host;
  o.router = s.router;
  o.relay_chunk_bytes = static_cast<size_t>(s.relay_chunk_bytes);
  o.relay_buffer_bytes = static_cast<size_t>(s.relay_buffer_bytes);
  o.pull_chunk_bytes = static_cast<size_t>(std::max<int64_t>(0, s.pull_chunk_bytes));
  o.suspended_paths = static_cast<size_t>(std::max<int64_t>(0, s.suspended_paths));
  o.progress_cpus = s.progress_cpus;
  o.timeout = absl::Milliseconds(s.timeout_ms);
  o.connect_timeout = absl::Milliseconds(s.connect_timeout_ms);
  o.device_options = transport::DeviceOptionsFromSettings();
  o.host = s.host;
  if (!s.cluster_spec.empty()) {
    ASSIGN_OR_RETURN(cluster::ClusterSpec spec, cluster::ClusterSpec::LoadFile(s.cluster_spec));
    o.spec = std::move(spec);
  }
  return o;
}

absl::StatusOr<std::unique_ptr<Communicator>> Communicator::Create(CommunicatorOptions options) {
  std::unique_ptr<Communicator> comm(new Communicator());
  RETURN_IF_ERROR(comm->Init(options));
  return comm;
}

Communicator::~Communicator() {
  std::vector<DirectLinks> links;
  {
    absl::MutexLock lock(&topo_mu_);
    links.swap(links_);
    transfer_links_.clear();
    DirectLinks suspended;
    for (auto& [key, s] : suspended_) suspended.push_back(std::move(s.link));
    suspended_.clear();
    links.push_back(std::move(suspended));
  }
  links.clear();  // connections before their devices
  peers_.clear();
  devices_.clear();
}

std::string Communicator::PeerName(int peer) const {
  if (peer < 0 || peer >= static_cast<int>(hosts_.size())) return absl::StrCat("rank ", peer);
  return absl::StrCat("rank ", peer, " (host ", hosts_[peer], ")");
}

absl::Status Communicator::Init(CommunicatorOptions& o) {
  if (o.world_size < 1) {
    return absl::InvalidArgumentError(absl::StrCat("world size ", o.world_size, " must be >= 1"));
  }
  if (o.rank < 0 || o.rank >= o.world_size) {
    return absl::InvalidArgumentError(
        absl::StrCat("rank ", o.rank, " outside world of size ", o.world_size));
  }
  if (o.store == nullptr)
    return absl::InvalidArgumentError("communicator needs a rendezvous store");
  rank_ = o.rank;
  world_size_ = o.world_size;
  timeout_ = o.timeout;
  if (!o.spec.has_value()) {
    ASSIGN_OR_RETURN(auto ifs, transport::tcp::MatchInterfaces(GetSettings().socket_ifname));
    if (o.host.empty()) o.host = "localhost";
    o.spec = cluster::ClusterSpec::SingleHost(o.host, ifs[0].first, ifs[0].second);
  }
  if (o.host.empty()) {
    return absl::InvalidArgumentError(
        "communicator: a cluster spec was given but not this rank's host (set MIXNET_HOST)");
  }
  spec_ = *o.spec;
  host_ = o.host;
  transport_ = o.transport;
  if (o.router != "v1" && o.router != "v2") {
    return absl::InvalidArgumentError(
        absl::StrCat("communicator: router '", o.router, "' must be v1 or v2"));
  }
  router_ = o.router;
  if (o.relay_chunk_bytes < 4096 || o.relay_chunk_bytes > (1u << 30) ||
      o.relay_buffer_bytes < o.relay_chunk_bytes) {
    return absl::InvalidArgumentError(absl::StrCat(
        "communicator: relay chunk ", o.relay_chunk_bytes, " bytes must be in [4096, 2^30] and ",
        "the relay buffer (", o.relay_buffer_bytes, " bytes) at least one chunk"));
  }
  relay_chunk_bytes_ = o.relay_chunk_bytes;
  route_function_ = o.route_function;
  relay_buffer_bytes_ = o.relay_buffer_bytes;
  suspended_paths_ = o.suspended_paths;
  if (o.pull_chunk_bytes != 0 && (o.pull_chunk_bytes < 4096 || o.pull_chunk_bytes > (1u << 30))) {
    return absl::InvalidArgumentError(absl::StrCat("communicator: pull chunk ", o.pull_chunk_bytes,
                                                   " bytes must be 0 (off) or in [4096, 2^30]"));
  }
  pull_chunk_bytes_ = o.pull_chunk_bytes;
  connect_timeout_ = o.connect_timeout;
  path_stall_ = o.device_options.stall_timeout > absl::ZeroDuration()
                    ? o.device_options.stall_timeout
                    : absl::Milliseconds(std::max<int64_t>(0, GetSettings().path_stall_ms));
  const cluster::ClusterSpec& spec = spec_;
  router::Topology topology = o.topology.value_or(router::Topology{0, spec.circuits});
  ASSIGN_OR_RETURN(routes_, router::BuildRouteTable(spec, topology, o.host));
  const cluster::HostSpec* local = spec.FindHost(o.host);
  if (local == nullptr) {
    return absl::InvalidArgumentError(
        absl::StrCat("rank ", rank_, ": host '", o.host, "' is not in the cluster spec"));
  }

  // One device per NIC of the host, EPS and OCS (circuits may reach an OCS
  // NIC later), route NICs first. OCS devices report failures to
  // OnDirectFailure and detect stalls; EPS failures abort the communicator.
  auto open_nic = [&](const std::string& nic, const std::string& address,
                      bool ocs) -> absl::Status {
    if (nic_device_.count(nic)) return absl::OkStatus();
    transport::DeviceOptions d = o.device_options;
    d.bind_address = address;
    d.ifname.clear();  // resolved from the address, so spec NIC names may be symbolic
    if (ocs) {
      d.on_failure = [this](const absl::Status& s) { OnDirectFailure(s); };
      if (d.stall_timeout == absl::ZeroDuration()) {
        d.stall_timeout = absl::Milliseconds(std::max<int64_t>(0, GetSettings().path_stall_ms));
      }
    } else {
      d.on_failure = [this](const absl::Status& s) { OnTransportFailure(s); };
    }
    absl::StatusOr<std::unique_ptr<transport::Device>> dev =
        transport::CreateDevice(o.transport, d);
    if (!dev.ok()) {
      return Annotate(dev.status(),
                      absl::StrCat("rank ", rank_, ": opening ", o.transport, " device on NIC ",
                                   nic, " (", address, ") of host ", o.host));
    }
    nic_device_[nic] = dev->get();
    devices_.push_back(*std::move(dev));
    return absl::OkStatus();
  };
  for (const auto& [peer_host, paths] : routes_.all()) {
    for (const router::Path& p : paths) {
      RETURN_IF_ERROR(open_nic(p.local_nic, p.local_address, p.kind == router::PathKind::kOcs));
    }
  }
  for (const auto& [peer_host, paths] : routes_.all()) {
    for (const router::Path& p : routes_.EpsPathsTo(peer_host)) {
      RETURN_IF_ERROR(open_nic(p.local_nic, p.local_address, false));
    }
  }
  for (const cluster::NicSpec& nic : local->nics) {
    RETURN_IF_ERROR(open_nic(nic.name, nic.address, nic.role == cluster::NicRole::kOcs));
  }
  if (o.intra_host == "local" && world_size_ > 1) {
    transport::DeviceOptions d = o.device_options;
    d.on_failure = [this](const absl::Status& s) { OnTransportFailure(s); };
    absl::StatusOr<std::unique_ptr<transport::Device>> dev = transport::CreateDevice("local", d);
    if (!dev.ok()) {
      return Annotate(dev.status(),
                      absl::StrCat("rank ", rank_, ": opening the intra-host device on ", o.host));
    }
    local_device_ = dev->get();
    devices_.push_back(*std::move(dev));
  } else if (o.intra_host != "local" && o.intra_host != "nic") {
    return absl::InvalidArgumentError(
        absl::StrCat("intra_host '", o.intra_host, "' must be local or nic"));
  }

  // Publish who we are and where we listen; learn the same of everyone.
  nlohmann::json me;
  me["host"] = o.host;
  me["world_size"] = world_size_;
  me["transport"] = o.transport;
  for (const auto& [nic, dev] : nic_device_) me["nics"][nic] = dev->address();
  const std::string machine = MachineId();
  const std::string local_scope = LocalScope(machine);
  me["machine"] = machine;
  if (local_device_ != nullptr) {
    me["local"] = local_device_->address();
    me["local_scope"] = local_scope;
  }
  RETURN_IF_ERROR(o.store->Set(RankKey(rank_), me.dump()));
  std::vector<nlohmann::json> info(world_size_);
  hosts_.resize(world_size_);
  nic_addresses_.resize(world_size_);
  local_addresses_.resize(world_size_);
  for (int r = 0; r < world_size_; ++r) {
    absl::StatusOr<std::string> v = o.store->Get(RankKey(r), o.connect_timeout);
    if (!v.ok()) {
      return Annotate(v.status(), absl::StrCat("rank ", rank_, ": waiting for rank ", r,
                                               " to join (world size ", world_size_, ")"));
    }
    info[r] = nlohmann::json::parse(*v, nullptr, /*allow_exceptions=*/false);
    if (info[r].is_discarded() || !info[r].contains("host")) {
      return absl::DataLossError(absl::StrCat("rank ", r, " published a malformed record"));
    }
    int theirs = info[r].value("world_size", -1);
    if (theirs != world_size_) {
      return absl::InvalidArgumentError(absl::StrCat("world-size mismatch: rank ", rank_, " has ",
                                                     world_size_, ", rank ", r, " has ", theirs));
    }
    if (info[r].value("transport", "") != o.transport) {
      return absl::InvalidArgumentError(absl::StrCat("transport mismatch: rank ", rank_, " uses ",
                                                     o.transport, ", rank ", r, " uses ",
                                                     info[r].value("transport", "")));
    }
    hosts_[r] = info[r]["host"].get<std::string>();
    if (spec.FindHost(hosts_[r]) == nullptr) {
      return absl::InvalidArgumentError(
          absl::StrCat("rank ", r, " is on host '", hosts_[r], "', which the cluster spec lacks"));
    }
    if (info[r].value("local_scope", "") == local_scope) {
      local_addresses_[r] = info[r].value("local", "");
    }
    if (r != rank_ && !machine.empty() && info[r].value("machine", "") == machine) {
      ++local_ranks_;
      if (r < rank_) ++local_rank_;
    }
    if (info[r].contains("nics") && info[r]["nics"].is_object()) {
      for (const auto& [nic, addr] : info[r]["nics"].items()) {
        if (addr.is_string()) nic_addresses_[r][nic] = addr.get<std::string>();
      }
    }
  }

  RETURN_IF_ERROR(PlaceProgressThreads(o.progress_cpus));

  // Which pairs follow the topology: different hosts of one region (or
  // regionless), both with EPS and OCS NICs.
  auto has_role = [](const cluster::HostSpec& h, cluster::NicRole role) {
    for (const cluster::NicSpec& n : h.nics) {
      if (n.role == role) return true;
    }
    return false;
  };
  dynamic_.assign(world_size_, false);
  for (int r = 0; r < world_size_; ++r) {
    if (r == rank_ || hosts_[r] == o.host) continue;
    const cluster::HostSpec* peer = spec.FindHost(hosts_[r]);
    bool same_region =
        local->region.empty() || peer->region.empty() || local->region == peer->region;
    dynamic_[r] = same_region && has_role(*local, cluster::NicRole::kOcs) &&
                  has_role(*peer, cluster::NicRole::kOcs) && !routes_.EpsPathsTo(hosts_[r]).empty();
    any_dynamic_ |= dynamic_[r];
  }

  // Connect: dial every higher rank (in rank order) while a second thread
  // accepts every lower one (in rank order). Rank 0's dials are each the
  // first its peer accepts, then rank 1's, and so on, so no rank waits on a
  // rank that is itself waiting, even on a transport whose dial completes
  // only when the peer accepts (verbs: the passive end's queue pair is made
  // by its Connect). Dialling all before accepting any deadlocked verbs with
  // 3 ranks: 0 -> 1 waits for 1, which waits in 1 -> 2 for 2, which waits to
  // accept 0.
  peers_.resize(world_size_);
  std::atomic<int> local_peers{0};
  auto connect_peer = [&](int peer, bool initiator) -> absl::Status {
    const std::vector<router::Path>& paths =
        dynamic_[peer] ? routes_.EpsPathsTo(hosts_[peer]) : routes_.PathsTo(hosts_[peer]);
    for (size_t i = 0; i < paths.size(); ++i) {
      const router::Path& p = paths[i];
      if (p.kind == router::PathKind::kIntraHost && local_device_ != nullptr &&
          !local_addresses_[peer].empty()) {
        // Both ends offer the intra-host transport, so both pick it.
        transport::ConnectOptions c;
        c.remote_address = local_addresses_[peer];
        c.connection_id = ConnectionId(rank_, peer, i);
        c.initiator = initiator;
        c.peer_name = absl::StrCat(PeerName(peer), " via the intra-host transport");
        c.timeout = o.connect_timeout;
        ASSIGN_OR_RETURN(auto conn, local_device_->Connect(c));
        peers_[peer].push_back(PeerPath{p, std::move(conn)});
        ++local_peers;
        continue;
      }
      auto addr = nic_addresses_[peer].find(p.remote_nic);
      if (addr == nic_addresses_[peer].end()) {
        return absl::InternalError(absl::StrCat(PeerName(peer), " has no device on NIC ",
                                                p.remote_nic, " that rank ", rank_,
                                                "'s route expects"));
      }
      transport::ConnectOptions c;
      c.remote_address = addr->second;
      c.connection_id = ConnectionId(rank_, peer, i);
      c.initiator = initiator;
      c.peer_name = absl::StrCat(PeerName(peer), " via ", p.local_nic, "->", p.remote_nic);
      c.timeout = o.connect_timeout;
      ASSIGN_OR_RETURN(auto conn, nic_device_[p.local_nic]->Connect(c));
      peers_[peer].push_back(PeerPath{p, std::move(conn)});
    }
    return absl::OkStatus();
  };
  absl::Status accepted;
  std::thread acceptor([&] {
    for (int peer = 0; peer < rank_ && accepted.ok(); ++peer) accepted = connect_peer(peer, false);
  });
  absl::Status dialed;
  for (int peer = rank_ + 1; peer < world_size_ && dialed.ok(); ++peer) {
    dialed = connect_peer(peer, true);
  }
  acceptor.join();
  local_peers_ += local_peers.load();
  RETURN_IF_ERROR(dialed);
  RETURN_IF_ERROR(accepted);

  // The initial circuits' direct links (the same dial-first order).
  std::vector<DirectLinks> made;
  RETURN_IF_ERROR(
      ConnectDirect(routes_, topology.epoch, {}, &made, absl::Now() + o.connect_timeout));
  {
    absl::MutexLock lock(&topo_mu_);
    links_ = std::move(made);
    installed_epoch_ = topology.epoch;
    installed_topology_ = topology;
    routing_.assign(world_size_, PeerRouting{});
    routing_reverse_.clear();
    routing_plan_.reset();
    installed_keys_ = DirectKeys(routes_);
  }
  log::Debug("rank {} on {}: connected to {} peers over {} devices", rank_, o.host, world_size_ - 1,
             devices_.size());
  return absl::OkStatus();
}

void Communicator::OnTransportFailure(const absl::Status& status) {
  absl::MutexLock lock(&mu_);
  // First failure wins, except that a peer known to be alive (it aborted)
  // gives way to a real loss.
  if (failure_.ok() || (transport::PeerWasAlive(failure_) && !transport::PeerWasAlive(status))) {
    failure_ = status;
  }
  failed_.store(true);
}

absl::Status Communicator::health() const {
  absl::MutexLock lock(&mu_);
  return failure_;
}

absl::Status Communicator::CheckUsable() {
  if (!failed_.load()) return absl::OkStatus();
  return Fail(health());
}

absl::Status Communicator::Fail(absl::Status status) {
  auto secondary = [this] {
    if (!failed_.load()) return true;
    return transport::PeerWasAlive(health());
  };
  // Waited once already: the root cause is what surfaced by then.
  if (status.code() == absl::StatusCode::kUnavailable && !grace_given_.exchange(true) &&
      secondary()) {
    // A peer that closed mid-collective (in an orderly way, or abruptly while
    // alive) usually aborted because a third rank died: give that root cause
    // a moment to surface and report it instead.
    const absl::Time grace = absl::Now() + absl::Seconds(1);
    while (secondary() && absl::Now() < grace) absl::SleepFor(absl::Milliseconds(5));
    if (failed_.load()) status = health();
  }
  Abort(status);
  return health();
}

void Communicator::Abort(const absl::Status& status) {
  {
    absl::MutexLock lock(&mu_);
    if (failure_.ok() ||
        (transport::PeerWasAlive(failure_) && !transport::PeerWasAlive(status) && !status.ok())) {
      failure_ = status;
    }
    failed_.store(true);
  }
  std::vector<DirectLinks> links;
  {
    absl::MutexLock lock(&topo_mu_);
    links.swap(links_);
    links_.resize(world_size_);
    // Also the links a running collective holds that a Commit has dropped
    // since it offered them: its receives (a relay's forwards) may still be
    // posted there, into buffers the call frees when it returns.
    links.push_back(transfer_links_);
    DirectLinks suspended;
    for (auto& [key, s] : suspended_) suspended.push_back(std::move(s.link));
    suspended_.clear();
    links.push_back(std::move(suspended));
  }
  for (auto& per_peer : links) {
    for (auto& l : per_peer) l->Kill(status);
  }
  for (auto& paths : peers_) paths.clear();
}

void Communicator::OnDirectFailure(const absl::Status& status) {
  log::Info("rank {}: direct path failed; its bytes go over EPS: {}", rank_, status.ToString());
  links_dirty_.store(true);
}

std::vector<transport::Device*> Communicator::DevicesInPlacementOrder() const {
  std::vector<transport::Device*> order;
  if (local_device_ != nullptr) order.push_back(local_device_);
  for (const auto& d : devices_) {
    if (d.get() != local_device_) order.push_back(d.get());
  }
  return order;
}

absl::Status Communicator::PlaceProgressThreads(const std::string& policy) {
  if (policy == "none") return absl::OkStatus();
  std::vector<int> cpus;
  if (policy == "auto") {
    absl::StatusOr<std::vector<int>> allowed = AllowedCpus();
    if (!allowed.ok() || allowed->empty()) {
      log::Warn("rank {}: progress threads stay unpinned: {}", rank_,
                allowed.ok() ? "no allowed CPUs" : allowed.status().ToString());
      return absl::OkStatus();
    }
    cpus = *std::move(allowed);
  } else {
    absl::StatusOr<std::vector<int>> listed = ParseCpuList(policy);
    if (!listed.ok() || listed->empty()) {
      return absl::InvalidArgumentError(absl::StrCat(
          "rank ", rank_, ": progress CPUs '", policy, "' must be auto, none or a CPU list",
          listed.ok() ? "" : absl::StrCat(": ", listed.status().message())));
    }
    cpus = *std::move(listed);
  }
  const std::vector<transport::Device*> order = DevicesInPlacementOrder();
  const size_t n = cpus.size();
  for (size_t k = 0; k < order.size(); ++k) {
    const int cpu = cpus[(static_cast<size_t>(local_rank_) + k * local_ranks_) % n];
    absl::Status st = order[k]->PinProgressThread(cpu);
    if (st.ok() || st.code() == absl::StatusCode::kUnimplemented) continue;
    // A CPU the user named must exist; "auto" only picks allowed ones.
    if (policy != "auto") return Annotate(st, absl::StrCat("rank ", rank_));
    log::Warn("rank {}: {}", rank_, st.ToString());
  }
  return absl::OkStatus();
}

std::vector<std::pair<std::string, std::vector<int>>> Communicator::ProgressThreadCpus() const {
  std::vector<std::pair<std::string, std::vector<int>>> out;
  for (transport::Device* d : DevicesInPlacementOrder()) {
    absl::StatusOr<std::vector<int>> cpus = d->ProgressThreadCpus();
    out.emplace_back(d->name(), cpus.ok() ? *cpus : std::vector<int>{});
  }
  return out;
}

absl::Status Communicator::WaitAll(std::vector<std::unique_ptr<transport::Request>>& requests,
                                   const std::vector<int>& owner, const char* what) {
  const absl::Time deadline = absl::Now() + timeout_;
  // One wake-up for the whole set where the transport supports it.
  auto group = std::make_shared<transport::CompletionGroup>();
  bool grouped = true;
  for (auto& r : requests) grouped = grouped && r->NotifyOnDone(group);
  absl::Status first;
  for (size_t i = 0; i < requests.size(); ++i) {
    transport::Request* r = requests[i].get();
    while (!r->Done()) {
      RETURN_IF_ERROR(CheckUsable());
      absl::Duration left = deadline - absl::Now();
      if (left <= absl::ZeroDuration()) {
        std::set<int> pending;
        for (size_t j = i; j < requests.size(); ++j) {
          if (!requests[j]->Done()) pending.insert(owner[j]);
        }
        std::string names;
        for (int p : pending) absl::StrAppend(&names, names.empty() ? "" : ", ", PeerName(p));
        return Fail(absl::DeadlineExceededError(
            absl::StrCat(what, " on rank ", rank_, " timed out after ",
                         absl::FormatDuration(timeout_), " waiting for ", names)));
      }
      const absl::Duration slice = std::min(left, absl::Milliseconds(20));
      if (!grouped) {
        (void)r->Wait(slice);
      } else if (group->Wait(requests.size(), slice)) {
        // Everything is done, or something failed hard: find it below.
        for (size_t j = i; j < requests.size(); ++j) {
          if (!requests[j]->Done()) continue;
          absl::Status s = requests[j]->status();
          if (!s.ok() && s.code() != absl::StatusCode::kInvalidArgument) return Fail(s);
        }
      }
    }
    absl::Status s = r->status();
    if (!s.ok() && first.ok()) first = s;
    if (!s.ok() && s.code() != absl::StatusCode::kInvalidArgument) {
      // A broken path: nothing more will arrive reliably.
      return Fail(s);
    }
  }
  return first;
}

}  // namespace mixnet::collectives
