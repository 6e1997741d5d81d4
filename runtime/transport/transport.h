// The data-plane transport interface: a Device per local NIC, Connections
// between two endpoints, and tag-matched, non-blocking send/recv Requests.
//
// Threads: Device::Connect and Isend/Irecv may be called from any thread;
// each Device runs its own progress thread (named "mx-<kind>-<nic>") that
// moves bytes and completes requests. Request::Wait blocks the caller only.
//
// Semantics every implementation provides (tested by transport_test.cc, which
// is parameterised over transports):
//  - Messages on one Connection with the same tag match receives in FIFO order;
//    different tags are independent.
//  - A receive may be larger than the message; Request reports the bytes that
//    arrived. A message larger than its receive fails the receive with
//    InvalidArgument and writes nothing into it; the stream goes on.
//  - A message sent before its receive is posted is not lost: small ones are
//    held by the receiver, large ones may wait at the sender (rendezvous), so a
//    large send may complete only once a matching receive is posted.
//  - When the remote end dies or closes, every pending and future request on
//    the connection fails with Unavailable naming the peer; a wait past its
//    deadline returns DeadlineExceeded and leaves the request pending.
//  - Zero-length messages are legal.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/cord.h"
#include "absl/strings/str_cat.h"
#include "absl/time/time.h"

namespace mixnet::transport {

class CompletionGroup;

// A posted send or receive.
class Request {
 public:
  virtual ~Request() = default;
  // Non-blocking: true once complete (then status() and bytes() are final).
  virtual bool Done() const = 0;
  // Blocks until complete or until `timeout` passes (DeadlineExceeded). Returns
  // the request's final status when complete.
  virtual absl::Status Wait(absl::Duration timeout) = 0;
  // Final status; OK while pending.
  virtual absl::Status status() const = 0;
  // Bytes transferred (for a receive: the size of the matched message).
  virtual size_t bytes() const = 0;
  // Has `group` notified once when this request completes (at once when it
  // already has). At most one group per request. Returns false when the
  // implementation cannot notify; the caller then waits request by request.
  virtual bool NotifyOnDone(std::shared_ptr<CompletionGroup> group) {
    (void)group;
    return false;
  }
};

// A bidirectional, reliable, tag-matched channel between two endpoints.
class Connection {
 public:
  virtual ~Connection() = default;
  // `buf` must stay valid (and unmodified, for sends) until the request is done.
  virtual absl::StatusOr<std::unique_ptr<Request>> Isend(const void* buf, size_t len,
                                                         uint64_t tag) = 0;
  virtual absl::StatusOr<std::unique_ptr<Request>> Irecv(void* buf, size_t len, uint64_t tag) = 0;
  // Human-readable name of the remote end ("rank 3 (10.0.0.4:4711 via eth1)").
  virtual std::string peer_name() const = 0;
  // OK while healthy; the error that broke the connection otherwise.
  virtual absl::Status health() const = 0;
  // A connection whose path goes dark on purpose (a circuit leaving the
  // topology in a planned round) is suspended while no request is pending on
  // it: the transport stops probing the idle path (TCP: keepalive off), so
  // the dark time is not taken for a failure, and nothing is closed; resuming
  // (the circuit is back) restores the probing. Requests may be posted while
  // suspended (the caller's business). Transports that never probe an idle
  // connection (verbs RC: a queue pair without traffic sends nothing) need
  // no action. Errors name the peer and the syscall.
  virtual absl::Status SetSuspended(bool suspended) {
    (void)suspended;
    return absl::OkStatus();
  }
  // Bytes handed to the network and not yet acknowledged by the peer's end
  // (TCP: the sockets' send queues, SIOCOUTQ), so a caller can let a path go
  // dark only once nothing is in flight on it. Suspending also sends any
  // acknowledgement the transport was holding back (TCP: TCP_QUICKACK), so
  // the peer's count drains. 0 where the transport cannot tell.
  virtual size_t UnacknowledgedBytes() const { return 0; }
  // Registers [buf, buf + len) with this connection's device until the
  // returned object is destroyed, so that sends and receives inside the range
  // register nothing themselves (verbs: one ibv_reg_mr for its adapter, kept
  // by its registration cache; the NCCL plugin's regMr). The memory must stay
  // mapped until then. Transports that need no registration return nullptr.
  virtual absl::StatusOr<std::shared_ptr<const void>> RegisterMemory(const void* buf, size_t len) {
    (void)buf;
    (void)len;
    return std::shared_ptr<const void>();
  }
  // Registers GPU memory [buf, buf + len) (a CUDA device pointer) so that
  // sends and receives inside the range move it with the NIC, never the CPU:
  // through the dma-buf `dmabuf_fd` (from cuMemGetHandleForAddressRange) at
  // `dmabuf_offset` when dmabuf_fd >= 0, else by peer memory (the
  // nvidia-peermem kernel module resolves the pointer). The fd is used only
  // during the call. Held until the returned object is destroyed. Only
  // transports whose device reports DeviceMemorySupport can; the others
  // return Unimplemented naming the peer.
  virtual absl::StatusOr<std::shared_ptr<const void>> RegisterDeviceMemory(const void* buf,
                                                                           size_t len,
                                                                           int dmabuf_fd,
                                                                           uint64_t dmabuf_offset) {
    (void)buf;
    (void)len;
    (void)dmabuf_fd;
    (void)dmabuf_offset;
    return absl::UnimplementedError(absl::StrCat(
        "the connection to ", peer_name(),
        " cannot move GPU memory: its transport copies with the CPU (GPUDirect RDMA needs verbs)"));
  }
  // Makes what this connection's NIC wrote into registered GPU memory
  // [buf, buf + len) visible to the GPU before it reads it (NCCL's iflush):
  // verbs reads a byte of it through the same adapter (a loopback queue
  // pair), which PCIe orders after the NIC's writes. nullptr: nothing to
  // wait for (transports that never write GPU memory).
  virtual absl::StatusOr<std::unique_ptr<Request>> FlushDeviceWrites(const void* buf, size_t len) {
    (void)buf;
    (void)len;
    return std::unique_ptr<Request>();
  }
};

// What a device can do with GPU memory (GPUDirect RDMA), probed when it is
// created. `why` says what was found, for the log.
struct DeviceMemorySupport {
  bool dmabuf = false;       // ibv_reg_dmabuf_mr works on the adapter
  bool peer_memory = false;  // a peer-memory module (nvidia-peermem) is loaded
  std::string why;
};

// How to establish one Connection. Both ends call Device::Connect with the same
// `connection_id` (unique per pair of endpoints and path); the one with
// `initiator` set dials `remote_address`, the other waits for that dial.
struct ConnectOptions {
  std::string remote_address;  // the peer Device's address() blob
  uint64_t connection_id = 0;
  bool initiator = false;
  std::string peer_name;  // for messages: "rank 3 on host h1"
  absl::Duration timeout = absl::Seconds(60);
  // Traffic class (0..255), NCCL's per communicator: verbs puts it in the
  // queue pair's GRH (-1: the device's, DeviceOptions::ib_tc), TCP in the
  // sockets' IPv4 TOS byte (-1: the kernel's default). The intra-host
  // transport ignores it.
  int traffic_class = -1;
  // Verbs: receives on this connection may be GPU memory (the NCCL plugin
  // with GPUDirect RDMA), so the CPU must never copy into them: the peer is
  // told in the handshake and sends every message with a payload by
  // rendezvous (the NIC writes it in place). Other transports ignore it.
  bool device_receives = false;
};

// Payload key on an Unavailable status: the connection was lost, but the
// peer process is known to be alive (the intra-host transport checks), so it
// closed on purpose, usually aborting because some other rank failed. Callers
// that collect failures prefer a status without it as the root cause.
inline constexpr char kPeerAlivePayload[] = "mixnet/peer-alive";
inline bool PeerWasAlive(const absl::Status& s) {
  return s.GetPayload(kPeerAlivePayload).has_value();
}

// Payload key on an Unavailable status: the peer closed the connection in
// order (its Close ran and said so), not a reset, a timeout or a bare EOF.
// A caller whose connection was idle can take it as the peer's teardown.
inline constexpr char kPeerClosedPayload[] = "mixnet/peer-closed";
inline bool PeerClosedInOrder(const absl::Status& s) {
  return s.GetPayload(kPeerClosedPayload).has_value();
}
// "<what>: peer closed the connection", Unavailable, with the payload above.
inline absl::Status PeerClosedError(const std::string& what) {
  absl::Status s = absl::UnavailableError(absl::StrCat(what, ": peer closed the connection"));
  s.SetPayload(kPeerClosedPayload, absl::Cord("1"));
  return s;
}

// Called (from the progress thread) when a connection of this device breaks.
using FailureCallback = std::function<void(const absl::Status&)>;

struct DeviceOptions {
  // Local NIC: interface name ("eth1", "lo") and/or IPv4 address to bind.
  // Connections leave through this NIC.
  std::string ifname;
  std::string bind_address;
  // TCP: sockets per connection, striping chunk and socket buffer sizes.
  int sockets_per_connection = 2;
  size_t chunk_bytes = 256 << 10;
  size_t socket_buffer_bytes = 4 << 20;
  // TCP: messages up to this size go eagerly (buffered by the receiver when
  // no receive is posted); larger ones wait for the receiver (rendezvous).
  size_t eager_bytes = 64 << 10;
  // The same for the local (intra-host) transport, where a larger message is
  // pulled straight from the sender's memory (one copy, no socket payload).
  size_t local_eager_bytes = 16 << 10;
  // TCP/local: after handling events the progress thread keeps polling (with
  // sched_yield between polls) this long before it sleeps in epoll_wait. A
  // sleeping thread costs a wake-up on the next message (an IPI, and a VM exit
  // where the CPU is virtual); polling through the gaps inside a collective
  // avoids it. A thread that finds its CPU held by another busy thread stops
  // polling for a while (see TcpDevice::ProgressLoop). Zero: always sleep.
  absl::Duration progress_spin = absl::ZeroDuration();
  // Local (intra-host) transport: receivers copy large messages straight out
  // of the sender's memory (process_vm_readv). Off: they stream over the
  // Unix socket (two copies). Refused reads fall back to streaming anyway.
  bool local_pull = true;
  // Verbs: device name (empty: the adapter behind `ifname`, else the first),
  // port (0: the port behind `ifname`, else 1), GID index (-1: auto, see
  // MIXNET_IB_GID_INDEX). `sysfs_root`: where /sys is (tests point it at a
  // tree of their own).
  std::string ib_device;
  int ib_port = 0;
  int ib_gid_index = -1;
  std::string sysfs_root = "/sys";
  int ib_tc = 0;  // traffic class of global (RoCE) queue pairs, 0..255
  int ib_sl = 0;  // service level, 0..15
  // TCP: the IPv4 TOS byte of socket 0 of connections with two or more
  // sockets (it carries the control frames and small messages, never
  // chunks), so that a switch with a strict-priority queue for that class
  // passes them ahead of the bulk queue; -1: the connection's own class.
  // Verbs and the intra-host transport ignore it (verbs' control messages
  // share the data's queue pair).
  int control_tos = -1;
  // Eager payload one connection holds in copies for receives not yet posted;
  // beyond it such messages wait in their receive slots and the sender is
  // held back by credits (verbs_connection.h). Rendezvous messages hold no
  // payload at the receiver.
  int64_t ib_unexpected_bytes = int64_t{4} << 20;
  // Verbs: bytes of idle registrations the registration cache keeps (least
  // recently used dropped first). Only on-demand-paging registrations are
  // kept idle; pinned ones are dropped when their last request is done.
  int64_t ib_reg_cache_bytes = int64_t{1} << 30;
  // Verbs: the default of every connection's ConnectOptions::device_receives
  // (its receives may be GPU memory), taken only when the adapter can
  // register GPU memory (device_memory()); the NCCL plugin with GPUDirect.
  bool device_receives = false;
  // Invoked once per connection that fails.
  FailureCallback on_failure;
  // Stall detection (zero: off). TCP: TCP_USER_TIMEOUT plus keepalive probes
  // derived from it, so a connection whose path goes dark (a cut circuit)
  // fails on both ends within about this time, even when idle.
  absl::Duration stall_timeout = absl::ZeroDuration();
};

// One local NIC. Owns the progress thread and the listening endpoint.
class Device {
 public:
  virtual ~Device() = default;
  // "tcp", "verbs" or "local".
  virtual std::string kind() const = 0;
  // e.g. "tcp:eth1(10.0.0.1)".
  virtual std::string name() const = 0;
  // Opaque blob that a peer passes as ConnectOptions::remote_address.
  virtual std::string address() const = 0;
  virtual absl::StatusOr<std::unique_ptr<Connection>> Connect(const ConnectOptions& options) = 0;
  // Restricts the device's progress (or completion-poller) thread to `cpu`.
  virtual absl::Status PinProgressThread(int cpu) {
    (void)cpu;
    return absl::UnimplementedError(absl::StrCat(name(), " has no progress thread to pin"));
  }
  // The CPUs that thread may run on.
  virtual absl::StatusOr<std::vector<int>> ProgressThreadCpus() {
    return absl::UnimplementedError(absl::StrCat(name(), " has no progress thread"));
  }
  // GPU memory support (Connection::RegisterDeviceMemory); none by default.
  virtual DeviceMemorySupport device_memory() const {
    return DeviceMemorySupport{
        false, false,
        absl::StrCat(name(), ": the ", kind(),
                     " transport moves bytes with the CPU (host memory only)")};
  }
};

// Creates a device of the given kind ("tcp", "verbs", or "local": the
// intra-host transport for peers on the same host, which ignores the NIC
// fields). Kinds not compiled in, or with no hardware, return Unavailable
// naming what is missing.
absl::StatusOr<std::unique_ptr<Device>> CreateDevice(const std::string& kind,
                                                     const DeviceOptions& options);

// Fills DeviceOptions defaults from the MIXNET_* settings.
DeviceOptions DeviceOptionsFromSettings();

}  // namespace mixnet::transport
