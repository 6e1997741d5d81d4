// The NCCL net plugin core (see plugin.h): NIC discovery, contexts,
// connection set-up through Background handshakes, and closing (the request
// path is in plugin_requests.cc). Threads: NCCL's init, proxy service and proxy
// progress threads, as listed in plugin.h; "mx-nccl-warm" waits for the
// warm-up sweep.
#include "plugins/nccl_net/plugin.h"

#include <pthread.h>
#include <sys/socket.h>
#include <unistd.h>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "plugins/nccl_net/handshake.h"
#include "plugins/nccl_net/plugin_util.h"
#include "plugins/nccl_net/result.h"
#include "runtime/common/status.h"
#include "runtime/control/controller_channel.h"

namespace mixnet::nccl {
namespace {

// A connection set-up must be done this long after connect/accept started it,
// however long it waited for a helper thread, so an abandoned one ends soon.
absl::Time HandshakeDeadline(const PluginConfig& c) { return absl::Now() + c.connect_timeout; }

}  // namespace

const char* KindName(Kind kind) {
  switch (kind) {
    case Kind::kContext:
      return "context";
    case Kind::kListen:
      return "listen comm";
    case Kind::kSend:
      return "send comm";
    case Kind::kRecv:
      return "recv comm";
    case Kind::kRequest:
      return "request";
    case Kind::kMemory:
      return "memory handle";
  }
  return "object";
}

void Registry::Add(const void* p, Kind kind) {
  absl::MutexLock lock(&mu_);
  objects_[p] = kind;
}

bool Registry::Remove(const void* p, Kind kind) {
  absl::MutexLock lock(&mu_);
  auto it = objects_.find(p);
  if (it == objects_.end() || it->second != kind) return false;
  objects_.erase(it);
  return true;
}

bool Registry::Contains(const void* p, Kind kind) const {
  if (p == nullptr) return false;
  absl::MutexLock lock(&mu_);
  auto it = objects_.find(p);
  return it != objects_.end() && it->second == kind;
}

void Plugin::AddComm(Comm* comm, Kind kind, std::unique_ptr<transport::Connection> connection,
                     LanePath path) {
  {
    absl::MutexLock lock(&comm->mu);
    comm->lane = std::make_shared<Lane>();
    comm->lane->path = std::move(path);
    comm->lane->connection = std::move(connection);
    comm->home = comm->lane;
  }
  registry_.Add(comm, kind);
  if (mover_ != nullptr) mover_->Add(comm);
  if (kind == Kind::kSend) NoteSendComm(comm->peer_host);
}

void Plugin::NoteSendComm(const std::string& peer_host) {
  if (warm_peers_.empty() || agent_ == nullptr) return;
  absl::MutexLock lock(&warm_mu_);
  if (warm_asked_) return;
  warm_reached_.insert(peer_host);
  for (const std::string& h : warm_peers_) {
    if (!warm_reached_.contains(h)) return;
  }
  warm_asked_ = true;
  LogInfo(absl::StrCat("a send comm reaches each of the ", warm_peers_.size(),
                       " other hosts of the region: asking controller ", config_.controller,
                       " for the warm-up sweep"));
  warm_thread_ = std::thread([this] {
    pthread_setname_np(pthread_self(), "mx-nccl-warm");
    const control::WarmOutcome o = agent_->WarmPaths(config_.warm_paths);
    const std::string what =
        absl::StrCat("warm-up sweep ", o.complete ? "done" : "incomplete", " after ",
                     absl::FormatDuration(o.waited), ": ", o.rounds, " of ", o.planned, " rounds",
                     o.reason.empty() ? std::string() : absl::StrCat(" (", o.reason, ")"));
    if (o.complete) {
      LogInfo(what);
    } else {
      LogWarn(absl::StrCat(what, "; the first round of each pairing makes its connections"));
    }
  });
}

absl::StatusOr<transport::Device*> Plugin::SpecDevice(const std::string& nic) {
  for (const auto& n : nics_) {
    if (n->spec_nic() == nic) return n->device();
  }
  return absl::NotFoundError(
      absl::StrCat("host ", config_.host, " has no NIC '", nic, "' in ", config_.cluster_spec));
}

absl::Status Plugin::InitFabric() {
  ASSIGN_OR_RETURN(cluster::ClusterSpec spec, cluster::ClusterSpec::LoadFile(config_.cluster_spec));
  self_.spec = SpecFingerprint(spec);
  self_.spec_source = config_.cluster_spec;
  ASSIGN_OR_RETURN(nics_, SpecNics(config_, spec, config_.host));
  for (auto& n : nics_) n->set_device_receives(cuda_.usable);
  device_count_ = 0;
  for (const auto& n : nics_) device_count_ += n->ocs() ? 0 : 1;
  PathMover::Options mo;
  mo.host = config_.host;
  mo.initial = router::Topology{0, spec.circuits};
  mo.device = [this](const std::string& nic) { return SpecDevice(nic); };
  mo.connect_timeout = std::min(config_.connect_timeout, absl::Seconds(10));
  mo.router = config_.router;
  mo.split_min_bytes = static_cast<uint64_t>(config_.split_min_bytes);
  mo.kept_lanes = config_.kept_lanes;
  if (!config_.static_demand.empty()) {
    if (!config_.controller.empty()) {
      LogWarn(absl::StrCat("MIXNET_NCCL_STATIC_DEMAND=", config_.static_demand,
                           " is ignored: the controller (", config_.controller,
                           ") gives the routing"));
    } else {
      ASSIGN_OR_RETURN(mo.static_plan, LoadStaticDemand(config_.static_demand));
    }
  }
  const cluster::HostSpec* me = spec.FindHost(config_.host);
  std::vector<cluster::NicSpec> host_nics = me->nics;
  if (!config_.controller.empty() && config_.warm_paths > absl::ZeroDuration()) {
    for (const cluster::RegionSpec& r : spec.regions) {
      if (r.name != me->region) continue;
      for (const std::string& h : r.hosts) {
        if (h != config_.host) warm_peers_.push_back(h);
      }
    }
    if (warm_peers_.empty()) {
      LogInfo(absl::StrCat("no warm-up sweep: host ", config_.host,
                           " shares no region of the spec with another host"));
    }
  }
  mo.spec = std::move(spec);
  if (!config_.controller.empty() && config_.report_period > absl::ZeroDuration()) {
    mo.report_period = config_.report_period;
    mo.report = [this](TrafficSample s) {
      if (agent_ == nullptr) return;
      control::TrafficRow row;
      row.iteration = s.period;
      row.peer_hosts = std::move(s.peer_hosts);
      row.bytes = std::move(s.bytes);
      agent_->Report(std::move(row));
    };
  }
  // The agent first (the mover's reports go to it), then the mover it drives.
  if (!config_.controller.empty()) {
    control::WorkerAgentOptions ao;
    ao.controller = config_.controller;
    ao.tls = control::ControllerTlsFromSettings();
    ao.host = config_.host;
    ao.nics = std::move(host_nics);
    ao.job = "nccl";
    // Distinct from the "<host>/<pid>" default that another agent of this
    // process (the Python module's) uses: one worker id is one registration.
    ao.worker_id = absl::StrCat(config_.host, "/", getpid(), "/nccl");
    ASSIGN_OR_RETURN(agent_, control::WorkerAgent::Start(std::move(ao)));
  }
  ASSIGN_OR_RETURN(mover_, PathMover::Create(std::move(mo)));
  if (agent_ != nullptr) agent_->Follow(mover_.get());
  return absl::OkStatus();
}

Plugin& Plugin::Get() {
  static Plugin* plugin = new Plugin();  // never destroyed: see plugin.h
  return *plugin;
}

absl::Status Plugin::Init(nccl_abi::Logger logger) {
  SetNcclLogger(logger);
  absl::MutexLock lock(&init_mu_);
  if (initialized_) return absl::OkStatus();
  ASSIGN_OR_RETURN(config_, LoadPluginConfig());
  if (config_.gpu_direct != "off" && config_.transport == "verbs") {
    // GPUDirect needs a CUDA driver and a GPU; the adapters are asked when
    // getProperties creates their devices (gpu_direct.h).
    absl::StatusOr<CudaDriverApi> api = LoadCudaDriver(config_.cuda_driver);
    if (api.ok()) {
      cuda_ = ProbeCuda(*api);
    } else {
      cuda_.why = std::string(api.status().message());
    }
    LogInfo(absl::StrCat(
        "CUDA driver for GPUDirect RDMA: ", cuda_.usable ? "usable; " : "not usable; ", cuda_.why));
  }
  next_id_.store(RandomId());
  self_.plugin_version = PluginVersion();
  self_.spec = "none";
  self_.host = config_.host;
  std::string mode = "static routes (no cluster spec)";
  if (config_.cluster_spec.empty()) {
    ASSIGN_OR_RETURN(nics_, DiscoverNics(config_));
    for (auto& n : nics_) n->set_device_receives(cuda_.usable);
    device_count_ = static_cast<int>(nics_.size());
  } else {
    RETURN_IF_ERROR(InitFabric());
    mode =
        agent_ != nullptr
            ? absl::StrCat("cluster spec ", config_.cluster_spec, " (fingerprint ", self_.spec,
                           "), host ", config_.host, ", following controller ", config_.controller)
            : absl::StrCat("cluster spec ", config_.cluster_spec, " (fingerprint ", self_.spec,
                           "), host ", config_.host, ", the spec's circuits (no controller)");
  }
  routes_ = MakeStaticRoutePolicy(device_count_);
  std::vector<std::string> names;
  for (const auto& n : nics_)
    names.push_back(absl::StrCat(n->name(), "=", n->ifname(), "(", n->ip(), ")"));
  LogInfo(absl::StrCat("plugin ", self_.plugin_version, ", transport ", config_.transport, ", ",
                       device_count_, " device(s): ", absl::StrJoin(names, ", "), "; ", mode));
  initialized_ = true;
  ready_.store(true);
  return absl::OkStatus();
}

absl::Status Plugin::CheckDev(int dev) const {
  if (!ready_.load()) {
    return absl::InvalidArgumentError("plugin not initialised: NCCL must call init first");
  }
  if (dev < 0 || dev >= device_count_) {
    return absl::InvalidArgumentError(
        absl::StrCat("device ", dev, " out of range (plugin has ", device_count_, " devices)"));
  }
  return absl::OkStatus();
}

absl::Status Plugin::CheckContext(void* ctx, bool need_ctx, const char* call) const {
  if (need_ctx && !registry_.Contains(ctx, Kind::kContext)) return NotLive(call, ctx, "context");
  return absl::OkStatus();
}

absl::Status Plugin::CheckMemHandle(void* mhandle, const char* call) const {
  if (mhandle != nullptr && !registry_.Contains(mhandle, Kind::kMemory)) {
    return NotLive(call, mhandle, "memory handle");
  }
  return absl::OkStatus();
}

absl::Status Plugin::Devices(int* ndev) {
  if (ndev == nullptr) return NullOut("devices", "ndev");
  if (!ready_.load()) return absl::InvalidArgumentError("devices: plugin not initialised");
  *ndev = device_count_;
  return absl::OkStatus();
}

absl::StatusOr<DeviceInfo> Plugin::Properties(int dev) {
  RETURN_IF_ERROR(CheckDev(dev));
  const Nic& nic = *nics_[dev];
  DeviceInfo info;
  info.name = nic.name().c_str();
  info.guid = static_cast<uint64_t>(dev);
  info.speed_mbps = nic.speed_mbps();
  info.max_comms = 65536;
  info.max_recvs = config_.max_recvs;
  info.max_p2p_bytes = size_t{1} << 30;  // NCCL's step cap; test() reports sizes as int
  ASSIGN_OR_RETURN(GpuDirect g, GpuDirectOf(dev));
  info.ptr_support = g.ptr_support;
  return info;
}

absl::StatusOr<GpuDirect> Plugin::GpuDirectOf(int dev) {
  {
    absl::MutexLock lock(&gpu_mu_);
    auto it = gpu_.find(dev);
    if (it != gpu_.end()) return it->second;
  }
  transport::DeviceMemorySupport nic;
  Nic& n = *nics_[dev];
  if (config_.gpu_direct != "off" && config_.transport == "verbs" && cuda_.usable) {
    // Only then is the adapter asked (opening it: the device is made now).
    ASSIGN_OR_RETURN(transport::Device * d, n.device());
    nic = d->device_memory();
  }
  absl::StatusOr<GpuDirect> g = DecideGpuDirect(config_.gpu_direct, config_.transport, cuda_, nic);
  if (!g.ok()) return Annotate(g.status(), absl::StrCat("NCCL device ", n.name()));
  LogInfo(absl::StrCat("NCCL device ", n.name(), ": ", g->why));
  absl::MutexLock lock(&gpu_mu_);
  gpu_.emplace(dev, *g);
  return *g;
}

absl::Status Plugin::NewContext(void** ctx, uint64_t comm_id, const nccl_abi::CommConfig* config) {
  if (ctx == nullptr) return NullOut("init", "ctx");
  auto* c = new Context();
  c->comm_id = comm_id;
  c->traffic_class = config != nullptr ? config->traffic_class : nccl_abi::kTrafficClassUndef;
  registry_.Add(c, Kind::kContext);
  *ctx = c;
  return absl::OkStatus();
}

absl::Status Plugin::FreeContext(void* ctx) {
  if (ctx == nullptr) return absl::OkStatus();
  if (!registry_.Remove(ctx, Kind::kContext)) return NotLive("finalize", ctx, "context");
  delete static_cast<Context*>(ctx);
  return absl::OkStatus();
}

absl::Status Plugin::SetNetAttr(void* ctx, const nccl_abi::NetAttr* attr) {
  RETURN_IF_ERROR(CheckContext(ctx, true, "setNetAttr"));
  if (attr == nullptr) return absl::InvalidArgumentError("setNetAttr: attributes are NULL");
  return absl::OkStatus();  // hints only; the transports do not use them yet
}

absl::Status Plugin::Listen(void* ctx, bool need_ctx, int dev, void* handle, void** listen_comm) {
  RETURN_IF_ERROR(CheckContext(ctx, need_ctx, "listen"));
  RETURN_IF_ERROR(CheckDev(dev));
  if (handle == nullptr) return NullOut("listen", "handle");
  if (listen_comm == nullptr) return NullOut("listen", "listenComm");
  *listen_comm = nullptr;
  SweepDials();
  Nic* nic = nics_[dev].get();
  RETURN_IF_ERROR(nic->device().status());
  ASSIGN_OR_RETURN(ControlListener control, OpenControlListener(nic->ip()));
  auto* l = new ListenComm();
  l->nic = nic;
  if (ctx != nullptr) l->traffic_class = static_cast<const Context*>(ctx)->traffic_class;
  l->listen_id = next_id_.fetch_add(1);
  l->control = control;
  HandleInfo info;
  info.nic = static_cast<uint16_t>(dev);
  info.ip = control.ip;
  info.port = control.port;
  info.listen_id = l->listen_id;
  info.host = config_.host;
  info.nic_name = nic->spec_nic();
  WriteHandle(handle, info);
  registry_.Add(l, Kind::kListen);
  *listen_comm = l;
  return absl::OkStatus();
}

absl::StatusOr<std::shared_ptr<DialTask>> Plugin::StartDial(const PathChoice& path,
                                                            int traffic_class) {
  Nic* nic = nics_[path.local_nic].get();
  ASSIGN_OR_RETURN(transport::Device * device, nic->device());
  const uint64_t connection_id = RandomId();
  const absl::Time deadline = HandshakeDeadline(config_);
  Identity self = self_;
  self.nic = nic->spec_nic();
  return DialTask::Start(
      HelperPool::Dialing(),
      [device, ip = nic->ip(), ifname = nic->spec_nic().empty() ? nic->ifname() : std::string(),
       peer = path.remote, connection_id, self = std::move(self), deadline,
       traffic_class](const std::atomic<bool>& cancelled) {
        return DialPeer(device, ip, ifname, peer, connection_id, self, deadline, cancelled,
                        traffic_class);
      });
}

void Plugin::SweepDials() {
  const absl::Time now = absl::Now();
  std::vector<std::shared_ptr<DialTask>> dropped;  // destroyed outside the lock
  {
    absl::MutexLock lock(&dial_mu_);
    for (auto it = dials_.begin(); it != dials_.end();) {
      if (now - it->second.last_polled <= config_.connect_timeout) {
        ++it;
        continue;
      }
      it->second.task->Cancel();
      dropped.push_back(std::move(it->second.task));
      dials_.erase(it++);
    }
  }
  if (!dropped.empty()) {
    LogInfo(
        absl::StrCat("dropped ", dropped.size(),
                     " connect(s) that NCCL stopped polling (none for MIXNET_CONNECT_TIMEOUT_MS = ",
                     absl::FormatDuration(config_.connect_timeout), ")"));
  }
}

absl::Status Plugin::Connect(void* ctx, bool need_ctx, int dev, void* handle, void** send_comm,
                             int traffic_class) {
  RETURN_IF_ERROR(CheckContext(ctx, need_ctx, "connect"));
  // NCCL's traffic class: v11 in the context, v10 with connect.
  if (ctx != nullptr) traffic_class = static_cast<const Context*>(ctx)->traffic_class;
  RETURN_IF_ERROR(CheckDev(dev));
  if (send_comm == nullptr) return NullOut("connect", "sendComm");
  *send_comm = nullptr;
  ASSIGN_OR_RETURN(HandleInfo peer, ReadHandle(handle));
  SweepDials();
  std::shared_ptr<DialTask> task;
  if (peer.connect_token != 0) {
    absl::MutexLock lock(&dial_mu_);
    auto it = dials_.find(peer.connect_token);
    if (it == dials_.end()) {
      return absl::DeadlineExceededError(
          absl::StrCat("connect to ", peer.host, " (", peer.ip, ":", peer.port,
                       "): this handle's connection attempt was abandoned (not polled for "
                       "MIXNET_CONNECT_TIMEOUT_MS = ",
                       absl::FormatDuration(config_.connect_timeout), ") and has been closed"));
    }
    it->second.last_polled = absl::Now();
    task = it->second.task;
  }
  if (task == nullptr) {
    ASSIGN_OR_RETURN(PathChoice path, routes_->Choose(dev, peer));
    ASSIGN_OR_RETURN(task, StartDial(path, traffic_class));
    const uint64_t token = next_id_.fetch_add(1);
    {
      absl::MutexLock lock(&dial_mu_);
      dials_[token] = PendingDial{task, absl::Now()};
    }
    SetConnectToken(handle, token);
    return absl::OkStatus();  // *send_comm stays NULL: call again
  }
  std::optional<absl::StatusOr<PeerConnection>> result = task->Poll();
  if (!result.has_value()) return absl::OkStatus();
  {
    absl::MutexLock lock(&dial_mu_);
    dials_.erase(peer.connect_token);
  }
  SetConnectToken(handle, 0);
  if (!result->ok()) return result->status();
  auto* comm = new Comm();
  comm->is_send = true;
  comm->nic = nics_[dev].get();
  comm->peer_host = (*result)->peer.host;  // in full (the handle's copy may be cut)
  comm->key = RandomId();
  comm->max_requests = config_.max_requests;
  comm->traffic_class = traffic_class;
  LanePath path;
  path.local_nic = comm->nic->spec_nic();
  path.remote_nic = (*result)->peer.nic;
  AddComm(comm, Kind::kSend, std::move((*result)->connection), std::move(path));
  *send_comm = comm;
  return absl::OkStatus();
}

absl::Status Plugin::Accept(void* listen_comm, void** recv_comm) {
  if (!registry_.Contains(listen_comm, Kind::kListen)) {
    return NotLive("accept", listen_comm, "listen comm");
  }
  if (recv_comm == nullptr) return NullOut("accept", "recvComm");
  *recv_comm = nullptr;
  auto* l = static_cast<ListenComm*>(listen_comm);
  SweepDials();
  ASSIGN_OR_RETURN(transport::Device * device, l->nic->device());
  Identity self = self_;
  self.nic = l->nic->spec_nic();
  // Take every new control dial and answer it on its own thread.
  while (true) {
    int fd = accept4(l->control.fd, nullptr, nullptr, SOCK_NONBLOCK | SOCK_CLOEXEC);
    if (fd < 0) {
      if (errno == EINTR || errno == ECONNABORTED) continue;
      if (errno == EAGAIN || errno == EWOULDBLOCK) break;
      return ErrnoStatus(absl::StrCat("accept on ", l->control.ip, ":", l->control.port),
                         "accept4");
    }
    const uint64_t id = l->listen_id;
    const absl::Time deadline = HandshakeDeadline(config_);
    const int tc = l->traffic_class;
    absl::StatusOr<std::shared_ptr<DialTask>> task = DialTask::Start(
        HelperPool::Answering(), [device, fd, id, self, deadline, tc](const std::atomic<bool>& c) {
          return AnswerPeer(device, fd, id, self, deadline, c, tc);
        });
    if (!task.ok()) {
      close(fd);  // the job that would own it never started
      return task.status();
    }
    l->pending.push_back(std::move(*task));
  }
  for (auto it = l->pending.begin(); it != l->pending.end();) {
    std::optional<absl::StatusOr<PeerConnection>> result = (*it)->Poll();
    if (!result.has_value()) {
      ++it;
      continue;
    }
    it = l->pending.erase(it);
    if (!result->ok()) {
      if (absl::IsNotFound(result->status())) {
        LogInfo(std::string(result->status().message()));
        continue;
      }
      return result->status();
    }
    auto* comm = new Comm();
    comm->is_send = false;
    comm->nic = l->nic;
    comm->peer_host = (*result)->peer.host;  // for messages (receivers route nothing)
    comm->max_requests = config_.max_requests;
    comm->traffic_class = l->traffic_class;
    LanePath path;
    path.local_nic = l->nic->spec_nic();
    path.remote_nic = (*result)->peer.nic;
    AddComm(comm, Kind::kRecv, std::move((*result)->connection), std::move(path));
    *recv_comm = comm;
    return absl::OkStatus();
  }
  return absl::OkStatus();
}

absl::Status Plugin::CloseComm(void* p, Kind kind) {
  if (!registry_.Remove(p, kind)) {
    return NotLive(kind == Kind::kSend ? "closeSend" : "closeRecv", p, KindName(kind));
  }
  auto* comm = static_cast<Comm*>(p);
  if (mover_ != nullptr) mover_->Remove(comm);
  {
    // Requests still in flight die with the comm; NCCL never tests them again.
    absl::MutexLock lock(&comm->mu);
    for (Request* r : comm->live) {
      registry_.Remove(r, Kind::kRequest);
      delete r;
    }
    comm->live.clear();
    comm->failed_posts.clear();
    if (comm->split.parts > 0)
      LogInfo(absl::StrCat(CommName(*comm), ": ", DescribeSplit(comm->split)));
    comm->move.reset();
    comm->lane.reset();
    comm->home.reset();
  }
  delete comm;
  return absl::OkStatus();
}

absl::Status Plugin::CloseSend(void* send_comm) { return CloseComm(send_comm, Kind::kSend); }
absl::Status Plugin::CloseRecv(void* recv_comm) { return CloseComm(recv_comm, Kind::kRecv); }

absl::Status Plugin::CloseListen(void* listen_comm) {
  if (!registry_.Remove(listen_comm, Kind::kListen)) {
    return NotLive("closeListen", listen_comm, "listen comm");
  }
  auto* l = static_cast<ListenComm*>(listen_comm);
  for (auto& task : l->pending) task->Cancel();  // their threads finish and clean up
  close(l->control.fd);
  delete l;
  return absl::OkStatus();
}

}  // namespace mixnet::nccl
