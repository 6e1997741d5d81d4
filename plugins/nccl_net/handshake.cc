// Control handshake of plugin connections (see handshake.h). Runs on the
// Background threads that connect and accept start.
#include "plugins/nccl_net/handshake.h"

#include <arpa/inet.h>
#include <unistd.h>

#include <cstring>

#include "absl/strings/str_cat.h"
#include "runtime/common/status.h"
#include "runtime/transport/tcp/socket_util.h"

namespace mixnet::nccl {
namespace {

// Layout inside NCCL's handle buffer.
struct WireHandle {
  uint32_t magic;
  uint16_t version;
  uint16_t nic;
  uint32_t ipv4;  // network byte order
  uint16_t port;  // host byte order
  uint16_t reserved;
  uint64_t listen_id;
  uint64_t connect_token;
  char host[64];
  char nic_name[24];  // the listener NIC's cluster-spec name ("" without a spec)
};
static_assert(sizeof(WireHandle) <= 128, "must fit NCCL_NET_HANDLE_MAXSIZE");

// Connector -> listener.
struct ControlRequest {
  uint32_t magic;
  uint32_t version;
  uint64_t listen_id;
  uint64_t connection_id;
};
// Listener -> connector, followed by `address_len` bytes of transport address.
struct ControlReply {
  uint32_t magic;
  uint32_t status;  // 0 ok, 1 unknown listen id
  uint32_t address_len;
  uint32_t reserved;
};
inline constexpr uint32_t kRequestMagic = 0x514E584Du;  // "MXNQ"
inline constexpr uint32_t kReplyMagic = 0x504E584Du;    // "MXNP"
inline constexpr uint32_t kMaxAddressLen = 4096;

// Closes a descriptor when it goes out of scope.
struct FdCloser {
  int fd;
  ~FdCloser() {
    if (fd >= 0) close(fd);
  }
};

absl::Status CheckCancelled(const std::atomic<bool>& cancelled, const std::string& what) {
  if (cancelled.load()) return absl::CancelledError(absl::StrCat(what, ": cancelled"));
  return absl::OkStatus();
}

}  // namespace

void WriteHandle(void* buf, const HandleInfo& info) {
  WireHandle w{};
  w.magic = kHandleMagic;
  w.version = kHandleVersion;
  w.nic = info.nic;
  in_addr a{};
  inet_pton(AF_INET, info.ip.c_str(), &a);
  w.ipv4 = a.s_addr;
  w.port = static_cast<uint16_t>(info.port);
  w.listen_id = info.listen_id;
  w.connect_token = info.connect_token;
  std::strncpy(w.host, info.host.c_str(), sizeof(w.host) - 1);
  std::strncpy(w.nic_name, info.nic_name.c_str(), sizeof(w.nic_name) - 1);
  std::memset(buf, 0, 128);
  std::memcpy(buf, &w, sizeof(w));
}

absl::StatusOr<HandleInfo> ReadHandle(const void* buf) {
  if (buf == nullptr) return absl::InvalidArgumentError("connection handle is NULL");
  WireHandle w;
  std::memcpy(&w, buf, sizeof(w));
  if (w.magic != kHandleMagic || w.version != kHandleVersion) {
    return absl::InvalidArgumentError(absl::StrCat("not a mixnet connection handle (magic ",
                                                   absl::Hex(w.magic), ", version ", w.version,
                                                   "); was it written by this plugin's listen?"));
  }
  HandleInfo info;
  info.nic = w.nic;
  char ip[INET_ADDRSTRLEN] = {};
  in_addr a{};
  a.s_addr = w.ipv4;
  inet_ntop(AF_INET, &a, ip, sizeof(ip));
  info.ip = ip;
  info.port = w.port;
  info.listen_id = w.listen_id;
  info.connect_token = w.connect_token;
  w.host[sizeof(w.host) - 1] = '\0';
  info.host = w.host;
  w.nic_name[sizeof(w.nic_name) - 1] = '\0';
  info.nic_name = w.nic_name;
  if (info.port == 0) return absl::InvalidArgumentError("mixnet connection handle has port 0");
  return info;
}

void SetConnectToken(void* buf, uint64_t token) {
  std::memcpy(static_cast<char*>(buf) + offsetof(WireHandle, connect_token), &token, sizeof(token));
}

absl::StatusOr<ControlListener> OpenControlListener(const std::string& ip) {
  ASSIGN_OR_RETURN(int fd, transport::tcp::Listen(ip));
  absl::StatusOr<transport::tcp::SocketAddress> local = transport::tcp::LocalAddress(fd);
  if (!local.ok()) {
    close(fd);
    return local.status();
  }
  return ControlListener{fd, local->ip, local->port};
}

absl::StatusOr<std::unique_ptr<transport::Connection>> DialPeer(
    transport::Device* device, const std::string& local_ip, const std::string& ifname,
    const HandleInfo& peer, uint64_t connection_id, absl::Duration timeout,
    const std::atomic<bool>& cancelled) {
  const absl::Time deadline = absl::Now() + timeout;
  const std::string peer_name =
      absl::StrCat("nccl peer ", peer.host, " (", peer.ip, ":", peer.port, ")");
  const std::string what = absl::StrCat("connecting to ", peer_name, " via ", device->name());
  transport::tcp::SocketAddress remote{peer.ip, peer.port};
  ASSIGN_OR_RETURN(int fd, transport::tcp::ConnectTo(remote, local_ip, ifname, timeout));
  FdCloser closer{fd};
  ControlRequest req{kRequestMagic, kHandleVersion, peer.listen_id, connection_id};
  RETURN_IF_ERROR(transport::tcp::WriteFully(fd, &req, sizeof(req), deadline, what));
  ControlReply rep{};
  RETURN_IF_ERROR(transport::tcp::ReadFully(fd, &rep, sizeof(rep), deadline, what));
  if (rep.magic != kReplyMagic || rep.address_len == 0 || rep.address_len > kMaxAddressLen) {
    return absl::UnavailableError(absl::StrCat(what, ": malformed control reply"));
  }
  if (rep.status != 0) {
    return absl::InvalidArgumentError(
        absl::StrCat(what, ": the peer has no listen comm ", peer.listen_id, " (closed?)"));
  }
  std::string address(rep.address_len, '\0');
  RETURN_IF_ERROR(transport::tcp::ReadFully(fd, address.data(), address.size(), deadline, what));
  RETURN_IF_ERROR(CheckCancelled(cancelled, what));
  transport::ConnectOptions o;
  o.remote_address = address;
  o.connection_id = connection_id;
  o.initiator = true;
  o.peer_name = peer_name;
  o.timeout = std::max(deadline - absl::Now(), absl::Seconds(1));
  return device->Connect(o);
}

absl::StatusOr<std::unique_ptr<transport::Connection>> AnswerPeer(
    transport::Device* device, int fd, uint64_t listen_id, absl::Duration timeout,
    const std::atomic<bool>& cancelled) {
  FdCloser closer{fd};
  const absl::Time deadline = absl::Now() + timeout;
  const std::string what =
      absl::StrCat("accepting on listen comm ", listen_id, " of ", device->name());
  ControlRequest req{};
  absl::Status s = transport::tcp::ReadFully(fd, &req, sizeof(req), deadline, what);
  if (!s.ok() || req.magic != kRequestMagic || req.version != kHandleVersion) {
    return absl::NotFoundError(absl::StrCat(what, ": stray dial dropped"));
  }
  const std::string address = device->address();
  ControlReply rep{kReplyMagic, req.listen_id == listen_id ? 0u : 1u,
                   static_cast<uint32_t>(address.size()), 0};
  RETURN_IF_ERROR(transport::tcp::WriteFully(fd, &rep, sizeof(rep), deadline, what));
  if (rep.status != 0) return absl::NotFoundError(absl::StrCat(what, ": dial for another comm"));
  RETURN_IF_ERROR(transport::tcp::WriteFully(fd, address.data(), address.size(), deadline, what));
  RETURN_IF_ERROR(CheckCancelled(cancelled, what));
  transport::ConnectOptions o;
  o.connection_id = req.connection_id;
  o.initiator = false;
  o.peer_name = absl::StrCat("nccl peer of listen comm ", listen_id);
  o.timeout = std::max(deadline - absl::Now(), absl::Seconds(1));
  return device->Connect(o);
}

}  // namespace mixnet::nccl
