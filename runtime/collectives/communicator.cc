// Communicator set-up: rendezvous, route table, devices, connections (see communicator.h).
#include "runtime/collectives/communicator.h"

#include <map>
#include <set>

#include "absl/strings/str_cat.h"
#include "nlohmann/json.hpp"
#include "runtime/common/log.h"
#include "runtime/common/settings.h"
#include "runtime/common/status.h"
#include "runtime/transport/tcp/socket_util.h"

namespace mixnet::collectives {
namespace {

std::string RankKey(int rank) { return absl::StrCat("mixnet/rank/", rank); }

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
  peers_.clear();  // connections before their devices
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
  const cluster::ClusterSpec& spec = *o.spec;
  router::Topology topology = o.topology.value_or(router::Topology{0, spec.circuits});
  ASSIGN_OR_RETURN(routes_, router::BuildRouteTable(spec, topology, o.host));

  // One device per local NIC that some route leaves through.
  std::map<std::string, transport::Device*> nic_device;
  for (const auto& [peer_host, paths] : routes_.all()) {
    for (const router::Path& p : paths) {
      if (nic_device.count(p.local_nic)) continue;
      transport::DeviceOptions d = o.device_options;
      d.bind_address = p.local_address;
      d.ifname.clear();  // resolved from the address, so spec NIC names may be symbolic
      d.on_failure = [this](const absl::Status& s) { OnTransportFailure(s); };
      absl::StatusOr<std::unique_ptr<transport::Device>> dev =
          transport::CreateDevice(o.transport, d);
      if (!dev.ok()) {
        return Annotate(dev.status(),
                        absl::StrCat("rank ", rank_, ": opening ", o.transport, " device on NIC ",
                                     p.local_nic, " (", p.local_address, ") of host ", o.host));
      }
      nic_device[p.local_nic] = dev->get();
      devices_.push_back(*std::move(dev));
    }
  }

  // Publish who we are and where we listen; learn the same of everyone.
  nlohmann::json me;
  me["host"] = o.host;
  me["world_size"] = world_size_;
  me["transport"] = o.transport;
  for (const auto& [nic, dev] : nic_device) me["nics"][nic] = dev->address();
  RETURN_IF_ERROR(o.store->Set(RankKey(rank_), me.dump()));
  std::vector<nlohmann::json> info(world_size_);
  hosts_.resize(world_size_);
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
  }

  // Connect: dial every higher rank first, then accept every lower one, so no
  // rank waits on a rank that is itself waiting.
  peers_.resize(world_size_);
  auto connect_peer = [&](int peer, bool initiator) -> absl::Status {
    const std::vector<router::Path>& paths = routes_.PathsTo(hosts_[peer]);
    for (size_t i = 0; i < paths.size(); ++i) {
      const router::Path& p = paths[i];
      const nlohmann::json& nics = info[peer]["nics"];
      if (!nics.contains(p.remote_nic)) {
        return absl::InternalError(absl::StrCat(PeerName(peer), " has no device on NIC ",
                                                p.remote_nic, " that rank ", rank_,
                                                "'s route expects"));
      }
      transport::ConnectOptions c;
      c.remote_address = nics[p.remote_nic].get<std::string>();
      c.connection_id = ConnectionId(rank_, peer, i);
      c.initiator = initiator;
      c.peer_name = absl::StrCat(PeerName(peer), " via ", p.local_nic, "->", p.remote_nic);
      c.timeout = o.connect_timeout;
      ASSIGN_OR_RETURN(auto conn, nic_device[p.local_nic]->Connect(c));
      peers_[peer].push_back(PeerPath{p, std::move(conn)});
    }
    return absl::OkStatus();
  };
  for (int peer = rank_ + 1; peer < world_size_; ++peer) RETURN_IF_ERROR(connect_peer(peer, true));
  for (int peer = 0; peer < rank_; ++peer) RETURN_IF_ERROR(connect_peer(peer, false));
  log::Debug("rank {} on {}: connected to {} peers over {} devices", rank_, o.host, world_size_ - 1,
             devices_.size());
  return absl::OkStatus();
}

void Communicator::OnTransportFailure(const absl::Status& status) {
  absl::MutexLock lock(&mu_);
  if (failure_.ok()) failure_ = status;
  failed_.store(true);
}

absl::Status Communicator::health() const {
  absl::MutexLock lock(&mu_);
  return failure_;
}

absl::Status Communicator::Fail(absl::Status status) {
  if (status.code() == absl::StatusCode::kUnavailable && !failed_.load()) {
    // A peer that closed in an orderly way mid-collective usually aborted
    // because a third rank died: give that root cause a moment to surface
    // and report it instead.
    const absl::Time grace = absl::Now() + absl::Seconds(1);
    while (!failed_.load() && absl::Now() < grace) absl::SleepFor(absl::Milliseconds(5));
    if (failed_.load()) status = health();
  }
  Abort(status);
  return health();
}

void Communicator::Abort(const absl::Status& status) {
  {
    absl::MutexLock lock(&mu_);
    if (failure_.ok()) failure_ = status;
    failed_.store(true);
  }
  for (auto& paths : peers_) paths.clear();
}

absl::Status Communicator::WaitAll(std::vector<std::unique_ptr<transport::Request>>& requests,
                                   const std::vector<int>& owner, const char* what) {
  const absl::Time deadline = absl::Now() + timeout_;
  absl::Status first;
  for (size_t i = 0; i < requests.size(); ++i) {
    transport::Request* r = requests[i].get();
    while (!r->Done()) {
      if (failed_.load()) return Fail(health());
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
      (void)r->Wait(std::min(left, absl::Milliseconds(20)));
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
