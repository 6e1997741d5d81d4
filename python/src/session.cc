// The Python package's runtime session (see session.h).
#include "python/src/session.h"

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <numeric>
#include <span>
#include <utility>

#include "absl/strings/str_cat.h"
#include "grpcpp/grpcpp.h"
#include "mixnet/control/v1/controller.grpc.pb.h"
#include "runtime/collectives/alltoall.h"
#include "runtime/collectives/sync.h"
#include "runtime/common/log.h"
#include "runtime/common/settings.h"
#include "runtime/common/status.h"
#include "runtime/control/controller_channel.h"
#include "runtime/control/topology_proto.h"
#include "runtime/locality/expert_placement.h"

namespace mixnet::python {

absl::Status TopologyRecorder::Prepare(const router::Topology& target, absl::Time deadline) {
  return comm_->Prepare(target, deadline);
}

absl::Status TopologyRecorder::Commit(const router::Topology& target, absl::Time deadline) {
  // The epoch is installed even when a new circuit failed to connect (the
  // error is returned; EPS carries that pair), so record it either way.
  absl::Status s = comm_->Commit(target, deadline);
  absl::MutexLock lock(&mu_);
  if (target.epoch >= current_.epoch) current_ = target;
  ++commits_;
  return s;
}

void TopologyRecorder::Abort(uint64_t epoch) { comm_->Abort(epoch); }

router::Topology TopologyRecorder::current() const {
  absl::MutexLock lock(&mu_);
  return current_;
}

uint64_t TopologyRecorder::commits() const {
  absl::MutexLock lock(&mu_);
  return commits_;
}

absl::StatusOr<std::unique_ptr<Session>> Session::Create(SessionOptions options) {
  std::unique_ptr<Session> s(new Session());
  RETURN_IF_ERROR(s->Init(options));
  return s;
}

Session::~Session() {
  if (absl::Status st = FlushTrace(); !st.ok()) log::Warn("{}", st.ToString());
  if (agent_ != nullptr) {
    agent_->Follow(nullptr);
    agent_.reset();  // joins its threads: no call into the recorder after this
  }
  recorder_.reset();
  comm_.reset();
  store_.reset();
}

absl::Status Session::Init(SessionOptions& o) {
  if (o.world_size < 1) {
    return absl::InvalidArgumentError(absl::StrCat("world_size ", o.world_size, " must be >= 1"));
  }
  if (o.rank < 0 || o.rank >= o.world_size) {
    return absl::InvalidArgumentError(
        absl::StrCat("rank ", o.rank, " outside [0, ", o.world_size, ")"));
  }
  if (o.store.empty()) {
    return absl::InvalidArgumentError(
        "no rendezvous store given (store='file:DIR' or 'tcp://HOST:PORT')");
  }
  ASSIGN_OR_RETURN(Settings settings, Settings::FromEnv());
  controller_ = o.controller.empty() ? settings.controller : o.controller;
  if (!controller_.empty() && o.spec_path.empty() && settings.cluster_spec.empty()) {
    return absl::InvalidArgumentError(
        absl::StrCat("controller ", controller_,
                     " given but no cluster spec (spec= or MIXNET_CLUSTER_SPEC) naming the hosts "
                     "the controller plans for"));
  }
  log::SetProcessTag(absl::StrCat("rank ", o.rank));
  const absl::Duration connect_timeout = absl::Milliseconds(
      o.connect_timeout_ms > 0 ? o.connect_timeout_ms : settings.connect_timeout_ms);
  ASSIGN_OR_RETURN(store_, rendezvous::OpenStore(o.store, o.rank == 0, connect_timeout));
  ASSIGN_OR_RETURN(
      collectives::CommunicatorOptions co,
      collectives::CommunicatorOptions::FromSettings(o.rank, o.world_size, store_.get()));
  if (!o.spec_path.empty()) {
    ASSIGN_OR_RETURN(cluster::ClusterSpec spec, cluster::ClusterSpec::LoadFile(o.spec_path));
    co.spec = std::move(spec);
  }
  if (!o.host.empty()) co.host = o.host;
  if (o.timeout_ms > 0) co.timeout = absl::Milliseconds(o.timeout_ms);
  co.connect_timeout = connect_timeout;
  if (co.spec.has_value()) spec_ = *co.spec;
  ASSIGN_OR_RETURN(comm_, collectives::Communicator::Create(std::move(co)));
  host_ = comm_->host_of(comm_->rank());
  recorder_ = std::make_unique<TopologyRecorder>(comm_.get(), router::Topology{0, spec_.circuits});
  if (!controller_.empty()) {
    const cluster::HostSpec* me = spec_.FindHost(host_);
    if (me == nullptr) {
      return absl::InvalidArgumentError(absl::StrCat("host '", host_, "' is not in the spec"));
    }
    control::WorkerAgentOptions ao;
    ao.controller = controller_;
    ao.tls = control::ControllerTlsFromSettings();
    ao.host = host_;
    ao.ranks = {comm_->rank()};
    ao.nics = me->nics;
    ao.job = o.job;
    ASSIGN_OR_RETURN(agent_, control::WorkerAgent::Start(std::move(ao)));
    absl::StatusOr<router::Topology> registered = agent_->WaitRegistered(connect_timeout);
    if (!registered.ok()) {
      return Annotate(registered.status(),
                      absl::StrCat("rank ", comm_->rank(), ": registering with ", controller_));
    }
    agent_->Follow(recorder_.get());
  }
  return collectives::Barrier(*comm_);
}

absl::StatusOr<control::WarmOutcome> Session::WarmPaths(absl::Duration timeout) {
  if (agent_ == nullptr) {
    return absl::FailedPreconditionError(
        "mixnet.warm_paths: no controller configured (controller= or MIXNET_CONTROLLER)");
  }
  return agent_->WarmPaths(timeout);
}

absl::Status Session::Alltoallv(const void* send, size_t send_bytes,
                                const std::vector<size_t>& send_counts, void* recv,
                                size_t recv_bytes, const std::vector<size_t>& recv_counts) {
  std::vector<size_t> send_displs(send_counts.size(), 0), recv_displs(recv_counts.size(), 0);
  for (size_t j = 1; j < send_counts.size(); ++j)
    send_displs[j] = send_displs[j - 1] + send_counts[j - 1];
  for (size_t j = 1; j < recv_counts.size(); ++j)
    recv_displs[j] = recv_displs[j - 1] + recv_counts[j - 1];
  collectives::AlltoallvArgs a;
  a.send = send;
  a.send_bytes = send_bytes;
  a.send_counts = send_counts;
  a.send_displs = send_displs;
  a.recv = recv;
  a.recv_bytes = recv_bytes;
  a.recv_counts = recv_counts;
  a.recv_displs = recv_displs;
  return collectives::Alltoallv(*comm_, a);
}

absl::Status Session::Barrier() { return collectives::Barrier(*comm_); }

absl::Status Session::EnsureCollector(const GateReport& r) {
  if (collector_ != nullptr && collector_experts_ == r.num_experts &&
      collector_hidden_ == r.hidden && collector_element_bytes_ == r.element_bytes &&
      collector_expert_ranks_ == r.expert_ranks) {
    return absl::OkStatus();
  }
  const int n = comm_->size();
  if (r.num_experts <= 0) {
    return absl::InvalidArgumentError(absl::StrCat("num_experts ", r.num_experts, " must be > 0"));
  }
  PlacementTables t;
  // Hosts that hold ranks, in spec order (a placement host needs a rank).
  std::vector<std::string> order;
  for (const cluster::HostSpec& h : spec_.hosts) order.push_back(h.name);
  for (int rank = 0; rank < n; ++rank) {
    if (std::find(order.begin(), order.end(), comm_->host_of(rank)) == order.end())
      order.push_back(comm_->host_of(rank));  // no spec: "localhost"
  }
  for (const std::string& h : order) {
    bool used = false;
    for (int rank = 0; rank < n && !used; ++rank) used = comm_->host_of(rank) == h;
    if (!used) continue;
    t.hosts.push_back(h);
    const cluster::HostSpec* hs = spec_.FindHost(h);
    t.host_region.push_back(hs != nullptr ? hs->region : "");
  }
  for (int rank = 0; rank < n; ++rank) {
    const auto it = std::find(t.hosts.begin(), t.hosts.end(), comm_->host_of(rank));
    t.rank_host.push_back(static_cast<int>(it - t.hosts.begin()));
  }
  if (r.expert_ranks.empty()) {
    if (r.num_experts % n != 0) {
      return absl::InvalidArgumentError(
          absl::StrCat("num_experts ", r.num_experts, " is not a multiple of the world size ", n,
                       "; give expert_ranks (the global rank holding each expert)"));
    }
    for (int e = 0; e < r.num_experts; ++e) t.expert_rank.push_back(e / (r.num_experts / n));
  } else {
    if (static_cast<int>(r.expert_ranks.size()) != r.num_experts) {
      return absl::InvalidArgumentError(absl::StrCat("expert_ranks has ", r.expert_ranks.size(),
                                                     " entries, num_experts is ", r.num_experts));
    }
    t.expert_rank = r.expert_ranks;
  }
  ASSIGN_OR_RETURN(ExpertPlacement placement, ExpertPlacement::Create(std::move(t)));
  LocalityOptions lo;
  lo.hidden = r.hidden;
  lo.element_bytes = r.element_bytes;
  ASSIGN_OR_RETURN(collector_, LocalityCollector::Create(std::move(placement), lo));
  collector_experts_ = r.num_experts;
  collector_hidden_ = r.hidden;
  collector_element_bytes_ = r.element_bytes;
  collector_expert_ranks_ = r.expert_ranks;
  collector_iteration_ = -1;
  return absl::OkStatus();
}

absl::StatusOr<GateRow> Session::ReportGate(const GateReport& r) {
  if (r.layer < 0 || r.micro_batch < 0 || r.iteration < 0) {
    return absl::InvalidArgumentError(absl::StrCat("layer (", r.layer, "), micro_batch (",
                                                   r.micro_batch, ") and iteration (", r.iteration,
                                                   ") must be >= 0"));
  }
  if (r.counts) {
    if (!r.is_int64 || r.numel != r.num_experts) {
      return absl::InvalidArgumentError(
          absl::StrCat("tokens per expert: ", r.numel, " entries, num_experts is ", r.num_experts));
    }
  } else if (r.k <= 0 || r.numel % r.k != 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("gate ids: ", r.numel, " ids are not tokens x k with k = ", r.k));
  }
  if (r.numel > 0 && r.ids == nullptr) return absl::InvalidArgumentError("gate ids: null buffer");
  RETURN_IF_ERROR(EnsureCollector(r));
  if (r.iteration != collector_iteration_) {
    RETURN_IF_ERROR(FlushTrace());
    collector_->Clear();  // rows accumulate within one iteration only
    collector_iteration_ = r.iteration;
  }
  const GateKey key{
      .layer = r.layer, .micro_batch = r.micro_batch, .direction = Direction::kDispatch};
  const size_t n = static_cast<size_t>(r.numel);
  if (r.counts) {
    TokenCounts tc = TokenCounts::Zero(key, comm_->size(), r.num_experts);
    const int64_t* c = static_cast<const int64_t*>(r.ids);
    for (int e = 0; e < r.num_experts; ++e) {
      if (c[e] < 0) {
        return absl::InvalidArgumentError(
            absl::StrCat("tokens per expert: expert ", e, " has a negative count ", c[e]));
      }
      tc.at(comm_->rank(), e) = c[e];
    }
    RETURN_IF_ERROR(collector_->Merge(tc));
  } else {
    const int64_t tokens = r.numel / r.k;
    const GateIds ids =
        r.is_int64 ? GateIds::Of(std::span<const int64_t>(static_cast<const int64_t*>(r.ids), n),
                                 tokens, r.k)
                   : GateIds::Of(std::span<const int32_t>(static_cast<const int32_t*>(r.ids), n),
                                 tokens, r.k);
    RETURN_IF_ERROR(collector_->Record(key, comm_->rank(), ids));
  }
  ASSIGN_OR_RETURN(LocalityMatrices m, collector_->Matrices(key));
  const ExpertPlacement& p = collector_->placement();
  const int me = p.HostOfRank(comm_->rank());
  const int region = p.RegionOfHost(me);
  std::vector<int> peers;
  if (region >= 0) {
    peers = p.RegionHosts(region);
  } else {
    peers.resize(p.num_hosts());
    std::iota(peers.begin(), peers.end(), 0);
  }
  GateRow row;
  for (int h : peers) {
    row.peer_hosts.push_back(p.HostName(h));
    row.bytes.push_back(m.cluster.at(me, h));
  }
  if (agent_ != nullptr && region >= 0) {
    control::TrafficRow t;
    t.iteration = r.iteration;
    t.key = key;
    t.peer_hosts = row.peer_hosts;
    t.bytes = row.bytes;
    agent_->Report(std::move(t));
    row.sent = true;
  }
  return row;
}

absl::Status Session::RecordTrace(const std::string& path) {
  RETURN_IF_ERROR(FlushTrace());
  errno = 0;
  auto out = std::make_unique<std::ofstream>(path, std::ios::out | std::ios::trunc);
  if (!*out) {
    const int err = errno;
    return absl::InvalidArgumentError(absl::StrCat(
        "trace file ", path, ": cannot open",
        err != 0 ? absl::StrCat(": ", ErrnoText(err), " (errno ", err, ")") : std::string()));
  }
  trace_ = std::move(out);
  trace_path_ = path;
  return absl::OkStatus();
}

absl::Status Session::FlushTrace() {
  if (trace_ == nullptr || collector_ == nullptr || collector_iteration_ < 0) {
    return absl::OkStatus();
  }
  const TrafficReport report = collector_->TakeReport(comm_->rank(), collector_iteration_);
  if (report.entries.empty()) return absl::OkStatus();
  *trace_ << report.ToJson() << "\n";
  trace_->flush();
  if (!*trace_)
    return absl::DataLossError(absl::StrCat("trace file ", trace_path_, ": write failed"));
  return absl::OkStatus();
}

TopologyView Session::Topology() const {
  const router::Topology t = recorder_->current();
  TopologyView v;
  v.epoch = comm_->installed_epoch();
  for (const cluster::CircuitSpec& c : t.circuits) {
    CircuitView cv;
    cv.ocs_switch = c.ocs_switch;
    cv.port_a = c.port_a;
    cv.port_b = c.port_b;
    if (auto a = spec_.FindPort(c.ocs_switch, c.port_a)) {
      cv.host_a = a->host->name;
      cv.nic_a = a->nic->name;
    }
    if (auto b = spec_.FindPort(c.ocs_switch, c.port_b)) {
      cv.host_b = b->host->name;
      cv.nic_b = b->nic->name;
    }
    v.circuits.push_back(std::move(cv));
  }
  return v;
}

SessionStats Session::Stats() const {
  SessionStats s;
  s.epoch = comm_->installed_epoch();
  s.direct_bytes_sent = comm_->direct_bytes_sent();
  s.pieces_resent = comm_->pieces_resent();
  s.has_agent = agent_ != nullptr;
  if (agent_ != nullptr) s.agent = agent_->stats();
  s.recorded_commits = recorder_->commits();
  return s;
}

absl::StatusOr<ControllerStatusView> ReadControllerStatus(const std::string& target,
                                                          absl::Duration timeout) {
  absl::StatusOr<std::shared_ptr<grpc::Channel>> channel =
      control::MakeControllerChannel(target, control::ControllerTlsFromSettings());
  if (!channel.ok())
    return Annotate(channel.status(), absl::StrCat("mixnet-controller at ", target));
  auto stub = control::v1::Controller::NewStub(*channel);
  grpc::ClientContext ctx;
  ctx.set_deadline(std::chrono::system_clock::now() +
                   std::chrono::milliseconds(absl::ToInt64Milliseconds(timeout)));
  control::v1::GetStatusRequest req;
  control::v1::ControllerStatus st;
  grpc::Status s = stub->GetStatus(&ctx, req, &st);
  if (!s.ok()) {
    return absl::UnavailableError(
        absl::StrCat("mixnet-controller at ", target, ": GetStatus: ", s.error_message()));
  }
  ControllerStatusView v;
  v.controller_id = st.controller_id();
  v.highest_epoch = st.highest_epoch();
  const router::Topology t = control::TopologyFromProto(st.topology());
  v.topology_epoch = t.epoch;
  v.circuits = t.circuits;
  v.fenced = st.fenced();
  for (const auto& region : st.regions()) {
    ControllerRegionView r;
    r.name = region.name();
    r.hosts.assign(region.hosts().begin(), region.hosts().end());
    r.registered_workers.assign(region.registered_workers().begin(),
                                region.registered_workers().end());
    r.rounds_committed = region.rounds_committed();
    r.rounds_aborted = region.rounds_aborted();
    r.rounds_skipped = region.rounds_skipped();
    v.regions.push_back(std::move(r));
  }
  return v;
}

}  // namespace mixnet::python
