// The verbs Device: opens the RDMA device (VerbsContext), starts its poller
// thread and TCP bootstrap listener, and sets up Connections: an RC queue
// pair per connection, connected through a handshake on a TCP socket
// (initiator dials the peer's bootstrap listener; both match on
// connection_id), then INIT -> RTR -> RTS, then a ready byte each way.
// CreateVerbsDevice runs on the caller's thread, Connect on each caller's.
#include "runtime/transport/verbs/verbs_device.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>

#include <atomic>
#include <thread>
#include <utility>

#include "absl/strings/str_cat.h"
#include "runtime/common/log.h"
#include "runtime/common/status.h"
#include "runtime/transport/verbs/address.h"
#include "runtime/transport/verbs/bootstrap.h"
#include "runtime/transport/verbs/device_memory.h"
#include "runtime/transport/verbs/nic_adapter.h"
#include "runtime/transport/verbs/poller.h"
#include "runtime/transport/verbs/verbs_connection.h"
#include "runtime/transport/verbs/verbs_context.h"

namespace mixnet::transport {
namespace verbs {
namespace {

// The IPv4 address peers dial for the bootstrap: the bound address, the
// interface's, the IPv4 inside a RoCE GID, or the first non-loopback one.
std::string AdvertisedIp(const DeviceOptions& o, const VerbsContext& ctx) {
  if (!o.bind_address.empty() && o.bind_address != "0.0.0.0") return o.bind_address;
  if (!o.ifname.empty()) {
    absl::StatusOr<std::string> ip = InterfaceIpv4(o.ifname);
    if (ip.ok()) return *ip;
    log::Warn("verbs: {}; advertising another address", ip.status().ToString());
  }
  const std::string in_gid = ctx.ethernet() ? GidIpv4(ctx.gid()) : "";
  return in_gid.empty() ? DefaultIpv4() : in_gid;
}

// "a.b.c.d" of the socket's remote end, for messages.
std::string PeerIp(int fd) {
  sockaddr_in sa{};
  socklen_t len = sizeof(sa);
  char buf[INET_ADDRSTRLEN] = "?";
  if (getpeername(fd, reinterpret_cast<sockaddr*>(&sa), &len) == 0) {
    inet_ntop(AF_INET, &sa.sin_addr, buf, sizeof(buf));
  }
  return buf;
}

class VerbsDevice;

// The device's loopback connection (both ends on its own adapter), made at
// the first FlushDeviceWrites: its RDMA reads of GPU memory flush the NIC's
// writes. Shared with the connections' flushers, which find `device` null
// once the device is going.
struct Loopback {
  absl::Mutex mu;
  VerbsDevice* device ABSL_GUARDED_BY(mu) = nullptr;
  std::shared_ptr<VerbsConnection> reader ABSL_GUARDED_BY(mu);
  std::unique_ptr<Connection> ends[2] ABSL_GUARDED_BY(mu);  // close them on the way out
};

class VerbsDevice : public Device {
 public:
  VerbsDevice(DeviceOptions options, std::shared_ptr<VerbsContext> ctx,
              std::unique_ptr<BootstrapListener> listener, std::shared_ptr<Poller> poller,
              VerbsAddress address)
      : options_(std::move(options)),
        ctx_(std::move(ctx)),
        listener_(std::move(listener)),
        poller_(std::move(poller)),
        address_(std::move(address)),
        name_(absl::StrCat("verbs:", ctx_->short_name(), "(", address_.ip, ")")),
        device_memory_(ProbeDeviceMemory(ctx_->pd(), options_.sysfs_root, ctx_->label())),
        loopback_(std::make_shared<Loopback>()) {
    absl::MutexLock lock(&loopback_->mu);
    loopback_->device = this;
  }

  ~VerbsDevice() override {
    std::unique_ptr<Connection> ends[2];
    {
      absl::MutexLock lock(&loopback_->mu);
      loopback_->device = nullptr;
      loopback_->reader.reset();
      for (int i = 0; i < 2; ++i) ends[i] = std::move(loopback_->ends[i]);
    }
    for (auto& e : ends) e.reset();  // orderly close while the poller runs
    poller_->Stop();
  }

  std::string kind() const override { return "verbs"; }
  std::string name() const override { return name_; }
  std::string address() const override { return address_.Encode(); }
  absl::StatusOr<std::unique_ptr<Connection>> Connect(const ConnectOptions& options) override;
  // Connect without the handle: the connection itself.
  absl::StatusOr<std::shared_ptr<VerbsConnection>> Establish(const ConnectOptions& options);
  // Sets up the loopback connection (l.mu held by the caller).
  absl::Status MakeLoopback(Loopback& l) ABSL_EXCLUSIVE_LOCKS_REQUIRED(l.mu);
  absl::Status PinProgressThread(int cpu) override { return poller_->Pin(cpu); }
  absl::StatusOr<std::vector<int>> ProgressThreadCpus() override { return poller_->Cpus(); }
  DeviceMemorySupport device_memory() const override { return device_memory_; }

 private:
  const DeviceOptions options_;
  const std::shared_ptr<VerbsContext> ctx_;
  const std::unique_ptr<BootstrapListener> listener_;
  const std::shared_ptr<Poller> poller_;
  const VerbsAddress address_;
  const std::string name_;
  const DeviceMemorySupport device_memory_;
  const std::shared_ptr<Loopback> loopback_;
};

// Connection::FlushDeviceWrites of every connection of the device.
absl::StatusOr<std::unique_ptr<Request>> FlushThrough(const std::weak_ptr<Loopback>& weak,
                                                      const void* buf) {
  std::shared_ptr<Loopback> l = weak.lock();
  if (l == nullptr) return absl::FailedPreconditionError("flush after the verbs device closed");
  absl::MutexLock lock(&l->mu);
  if (l->device == nullptr) {
    return absl::FailedPreconditionError("flush after the verbs device closed");
  }
  if (l->reader == nullptr || !l->reader->health().ok()) {
    RETURN_IF_ERROR(l->device->MakeLoopback(*l));
  }
  return l->reader->ReadLocal(buf);
}

absl::Status VerbsDevice::MakeLoopback(Loopback& l) {
  static std::atomic<uint64_t> next{1};
  const uint64_t id = (uint64_t{0xF1u} << 56) | next++;  // apart from callers' ids
  ConnectOptions o;
  o.remote_address = address();
  o.connection_id = id;
  o.peer_name = absl::StrCat(name_, " loopback (GPU write flushes)");
  o.timeout = absl::Seconds(10);
  absl::StatusOr<std::shared_ptr<VerbsConnection>> passive;
  std::thread t([&] {
    ConnectOptions p = o;
    p.initiator = false;
    passive = Establish(p);
  });
  o.initiator = true;
  absl::StatusOr<std::shared_ptr<VerbsConnection>> active = Establish(o);
  t.join();
  if (!active.ok()) return Annotate(active.status(), "setting up the loopback for GPU flushes");
  if (!passive.ok()) return Annotate(passive.status(), "setting up the loopback for GPU flushes");
  l.reader = *active;
  l.ends[0] = std::make_unique<VerbsConnectionHandle>(std::move(*active));
  l.ends[1] = std::make_unique<VerbsConnectionHandle>(std::move(*passive));
  return absl::OkStatus();
}

absl::StatusOr<std::unique_ptr<Connection>> VerbsDevice::Connect(const ConnectOptions& o) {
  ASSIGN_OR_RETURN(std::shared_ptr<VerbsConnection> conn, Establish(o));
  std::weak_ptr<Loopback> weak = loopback_;
  return std::unique_ptr<Connection>(new VerbsConnectionHandle(
      std::move(conn), [weak](const void* buf, size_t) { return FlushThrough(weak, buf); }));
}

absl::StatusOr<std::shared_ptr<VerbsConnection>> VerbsDevice::Establish(const ConnectOptions& o) {
  const absl::Time deadline = absl::Now() + o.timeout;
  const std::string name = o.peer_name.empty() ? "peer" : o.peer_name;
  std::string what =
      absl::StrCat(name_, ": connecting to ", name, " (connection id ", o.connection_id, ")");
  ConnectionConfig cfg;
  if (o.traffic_class > 255) {
    return absl::InvalidArgumentError(
        absl::StrCat(what, ": traffic class ", o.traffic_class, " outside 0..255"));
  }
  cfg.traffic_class = o.traffic_class >= 0 ? o.traffic_class : ctx_->traffic_class();
  cfg.unexpected_bytes = static_cast<size_t>(options_.ib_unexpected_bytes);
  cfg.device_receives =
      o.device_receives ||
      (options_.device_receives && (device_memory_.dmabuf || device_memory_.peer_memory));
  std::shared_ptr<VerbsConnection> conn;
  Fd fd;
  absl::StatusOr<Handshake> theirs;
  if (o.initiator) {
    // Dial the peer's bootstrap listener and send our queue pair first.
    absl::StatusOr<VerbsAddress> remote = VerbsAddress::Decode(o.remote_address);
    if (!remote.ok()) return Annotate(remote.status(), what);
    const std::string peer = absl::StrCat(name, " (", remote->ToString(), ")");
    ASSIGN_OR_RETURN(conn, VerbsConnection::Create(ctx_, poller_, cfg, peer, options_.on_failure));
    ASSIGN_OR_RETURN(fd, Dial(remote->ip, remote->tcp_port, options_.bind_address, deadline, what));
    Handshake mine;
    mine.connection_id = o.connection_id;
    mine.qp = conn->LocalInfo();
    const std::string hello = mine.Encode();
    RETURN_IF_ERROR(WriteFully(fd.get(), hello.data(), hello.size(), deadline, what));
    std::string bytes(kHandshakeBytes, '\0');
    RETURN_IF_ERROR(ReadFully(fd.get(), bytes.data(), bytes.size(), deadline, what));
    theirs = Handshake::Decode(bytes);
  } else {
    // Wait for the peer's dial (remote_address is not needed).
    ASSIGN_OR_RETURN(BootstrapListener::Accepted a,
                     listener_->Accept(o.connection_id, deadline, what));
    fd = std::move(a.fd);
    theirs = Handshake::Decode(a.hello);
    if (theirs.ok()) {
      const std::string peer =
          absl::StrCat(name, " (", theirs->qp.name, " at ", PeerIp(fd.get()), ")");
      what =
          absl::StrCat(name_, ": connecting to ", peer, " (connection id ", o.connection_id, ")");
      ASSIGN_OR_RETURN(conn,
                       VerbsConnection::Create(ctx_, poller_, cfg, peer, options_.on_failure));
    }
  }
  if (!theirs.ok()) return Annotate(theirs.status(), what);
  if (theirs->connection_id != o.connection_id) {
    return absl::DataLossError(
        absl::StrCat(what, ": peer answered for connection id ", theirs->connection_id));
  }
  if (theirs->status != kHandshakeOk) {
    return absl::UnavailableError(
        absl::StrCat(what, ": the peer could not set up its queue pair (see its log)"));
  }
  absl::Status connected = conn->ConnectQp(theirs->qp);
  if (!o.initiator) {
    // Answer even on failure, so the dialer gets a reason instead of a timeout.
    Handshake reply;
    reply.connection_id = o.connection_id;
    reply.qp = conn->LocalInfo();
    if (!connected.ok()) reply.status = kHandshakeRefused;
    const std::string bytes = reply.Encode();
    absl::Status w = WriteFully(fd.get(), bytes.data(), bytes.size(), deadline, what);
    if (connected.ok()) connected = w;
  }
  if (!connected.ok()) return Annotate(connected, what);

  // From here the peer may send as soon as it sees our ready byte, so the
  // poller must already route this QP's completions.
  conn->Activate(std::move(fd));
  poller_->Add(conn);
  char ready = kReadyByte;
  char got = 0;
  absl::Status s = WriteFully(conn->bootstrap_fd(), &ready, 1, deadline, what);
  if (s.ok()) s = ReadFully(conn->bootstrap_fd(), &got, 1, deadline, what);
  if (s.ok() && got != kReadyByte) {
    s = absl::DataLossError(absl::StrCat(what, ": bad ready byte from the peer"));
  }
  if (!s.ok()) {
    poller_->Remove(conn->qpn());
    return s;
  }
  poller_->Watch(conn->qpn());
  log::Debug("{}: connected, QP {} -> {} QP {}", name_, conn->qpn(), theirs->qp.name,
             theirs->qp.qpn);
  return conn;
}

}  // namespace
}  // namespace verbs

absl::StatusOr<std::unique_ptr<Device>> CreateVerbsDevice(const DeviceOptions& options) {
  using namespace verbs;  // NOLINT(build/namespaces)
  ASSIGN_OR_RETURN(std::shared_ptr<VerbsContext> ctx, VerbsContext::Open(options));
  absl::StatusOr<std::unique_ptr<BootstrapListener>> listener =
      BootstrapListener::Create(options.bind_address);
  if (!listener.ok()) return Annotate(listener.status(), ctx->label());
  VerbsAddress addr;
  addr.ip = AdvertisedIp(options, *ctx);
  addr.tcp_port = (*listener)->port();
  addr.device = ctx->device_name();
  addr.ib_port = static_cast<uint8_t>(ctx->port());
  addr.lid = ctx->lid();
  addr.gid = ctx->gid();
  ASSIGN_OR_RETURN(std::shared_ptr<Poller> poller,
                   Poller::Start(ctx, absl::StrCat("mx-verbs-", ctx->device_name())));
  log::Info("verbs: opened {} ({}, LID {}, GID {}, MTU code {}, ODP {}), bootstrap {}:{}",
            ctx->label(), ctx->ethernet() ? "RoCE" : "InfiniBand", ctx->lid(),
            GidToString(ctx->gid()), static_cast<int>(ctx->active_mtu()), ctx->odp() ? "on" : "off",
            addr.ip, addr.tcp_port);
  return std::unique_ptr<Device>(new VerbsDevice(options, std::move(ctx), std::move(*listener),
                                                 std::move(poller), std::move(addr)));
}

}  // namespace mixnet::transport
