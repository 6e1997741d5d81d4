// Control handshake of plugin connections (see handshake.h). Runs on the
// HelperPool threads that connect and accept start (Background jobs).
#include "plugins/nccl_net/handshake.h"

#include <arpa/inet.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cstring>

#include "absl/strings/str_cat.h"
#include "nlohmann/json.hpp"
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

// Control messages: a header, then `body_len` bytes of JSON.
struct ControlHeader {
  uint32_t magic;
  uint32_t version;  // kControlVersion; 2 was the fixed 24-byte request
  uint32_t body_len;
};
inline constexpr uint32_t kRequestMagic = 0x514E584Du;  // "MXNQ"
inline constexpr uint32_t kReplyMagic = 0x504E584Du;    // "MXNP"
inline constexpr uint32_t kMaxBodyLen = 64 << 10;
// A dialer writes its request at once; a socket silent this long is a stray.
inline constexpr absl::Duration kRequestWait = absl::Seconds(10);

nlohmann::json IdentityJson(const Identity& id) {
  return {{"plugin_version", id.plugin_version},
          {"spec", id.spec},
          {"spec_source", id.spec_source},
          {"host", id.host},
          {"nic", id.nic}};
}

Identity IdentityFromJson(const nlohmann::json& j) {
  Identity id;
  id.plugin_version = j.at("plugin_version").get<std::string>();
  id.spec = j.at("spec").get<std::string>();
  id.spec_source = j.value("spec_source", std::string());
  id.host = j.at("host").get<std::string>();
  id.nic = j.value("nic", std::string());
  return id;
}

absl::Status WriteMessage(int fd, uint32_t magic, const nlohmann::json& body, absl::Time deadline,
                          const std::string& what) {
  const std::string text = body.dump();
  ControlHeader h{magic, kControlVersion, static_cast<uint32_t>(text.size())};
  std::string wire(sizeof(h) + text.size(), '\0');
  std::memcpy(wire.data(), &h, sizeof(h));
  std::memcpy(wire.data() + sizeof(h), text.data(), text.size());
  return transport::tcp::WriteFully(fd, wire.data(), wire.size(), deadline, what);
}

// The body after a header already read and checked.
absl::StatusOr<nlohmann::json> ReadBody(int fd, const ControlHeader& h, absl::Time deadline,
                                        const std::string& what) {
  if (h.body_len == 0 || h.body_len > kMaxBodyLen) {
    return absl::UnavailableError(absl::StrCat(what, ": control message of ", h.body_len,
                                               " bytes (limit ", kMaxBodyLen, ")"));
  }
  std::string text(h.body_len, '\0');
  RETURN_IF_ERROR(transport::tcp::ReadFully(fd, text.data(), text.size(), deadline, what));
  nlohmann::json j = nlohmann::json::parse(text, nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded() || !j.is_object()) {
    return absl::UnavailableError(absl::StrCat(what, ": malformed control message"));
  }
  return j;
}

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

absl::Status CheckDeadline(absl::Time deadline, const std::string& what) {
  if (absl::Now() < deadline) return absl::OkStatus();
  return absl::DeadlineExceededError(
      absl::StrCat(what, ": MIXNET_CONNECT_TIMEOUT_MS passed before a helper thread was free"));
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
  if (w.magic == kHandleMagic && w.version != kHandleVersion) {
    return absl::FailedPreconditionError(absl::StrCat(
        "connection handle of version ", w.version, ", this plugin (", PluginVersion(),
        ") reads version ", kHandleVersion,
        ": the listening rank runs another plugin version; every rank must load the same"));
  }
  if (w.magic != kHandleMagic) {
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

absl::StatusOr<PeerConnection> DialPeer(transport::Device* device, const std::string& local_ip,
                                        const std::string& ifname, const HandleInfo& peer,
                                        uint64_t connection_id, const Identity& self,
                                        absl::Time deadline, const std::atomic<bool>& cancelled,
                                        int traffic_class) {
  const std::string where = absl::StrCat("the listener at ", peer.ip, ":", peer.port);
  std::string peer_name = absl::StrCat("nccl peer ", peer.host, " (", peer.ip, ":", peer.port, ")");
  const std::string what = absl::StrCat("connecting to ", peer_name, " via ", device->name());
  RETURN_IF_ERROR(CheckCancelled(cancelled, what));  // abandoned while queued
  RETURN_IF_ERROR(CheckDeadline(deadline, what));
  transport::tcp::SocketAddress remote{peer.ip, peer.port};
  ASSIGN_OR_RETURN(int fd,
                   transport::tcp::ConnectTo(remote, local_ip, ifname, deadline - absl::Now()));
  FdCloser closer{fd};
  nlohmann::json req = IdentityJson(self);
  req["listen_id"] = peer.listen_id;
  req["connection_id"] = connection_id;
  RETURN_IF_ERROR(WriteMessage(fd, kRequestMagic, req, deadline, what));
  ControlHeader h{};
  absl::Status got = transport::tcp::ReadFully(fd, &h, sizeof(h), deadline, what);
  if (!got.ok()) {
    if (!absl::IsUnavailable(got)) return got;
    // A plugin of handshake version 2 drops a request it cannot read.
    return absl::FailedPreconditionError(
        absl::StrCat(what, ": ", where,
                     " closed the control connection without a reply; it probably runs "
                     "an older mixnet plugin (control handshake before version ",
                     kControlVersion, "); this end is ", DescribeIdentity(self), " (handshake ",
                     kControlVersion, "). Every rank must load the same plugin version"));
  }
  if (h.magic != kReplyMagic) {
    return absl::UnavailableError(absl::StrCat(what, ": malformed control reply"));
  }
  if (h.version != kControlVersion) {
    return absl::FailedPreconditionError(
        absl::StrCat(what, ": ", where, " speaks control handshake version ", h.version,
                     ", this end ", kControlVersion, " (", DescribeIdentity(self),
                     "). Every rank must load the same plugin version"));
  }
  ASSIGN_OR_RETURN(nlohmann::json rep, ReadBody(fd, h, deadline, what));
  PeerConnection out;
  std::string status, address;
  try {
    out.peer = IdentityFromJson(rep);
    status = rep.at("status").get<std::string>();
    address = rep.value("address", std::string());
  } catch (const nlohmann::json::exception& e) {
    return absl::UnavailableError(absl::StrCat(what, ": malformed control reply: ", e.what()));
  }
  if (status == "no_listen") {
    return absl::InvalidArgumentError(
        absl::StrCat(what, ": the peer has no listen comm ", peer.listen_id, " (closed?)"));
  }
  // The listener checks too and answers "mismatch" with its values; either
  // way this end names both.
  RETURN_IF_ERROR(CheckCompatible(self, out.peer, where));
  if (status != "ok" || address.empty() || address.size() > kMaxBodyLen) {
    return absl::UnavailableError(
        absl::StrCat(what, ": control reply '", status, "' without a transport address"));
  }
  RETURN_IF_ERROR(CheckCancelled(cancelled, what));
  peer_name = absl::StrCat("nccl peer ", out.peer.host, " (", peer.ip, ":", peer.port, ")");
  transport::ConnectOptions o;
  o.remote_address = address;
  o.connection_id = connection_id;
  o.initiator = true;
  o.peer_name = peer_name;
  o.traffic_class = traffic_class;
  o.timeout = std::max(deadline - absl::Now(), absl::Seconds(1));
  ASSIGN_OR_RETURN(out.connection, device->Connect(o));
  return out;
}

absl::StatusOr<PeerConnection> AnswerPeer(transport::Device* device, int fd, uint64_t listen_id,
                                          const Identity& self, absl::Time deadline,
                                          const std::atomic<bool>& cancelled, int traffic_class) {
  FdCloser closer{fd};
  const std::string what =
      absl::StrCat("accepting on listen comm ", listen_id, " of ", device->name());
  RETURN_IF_ERROR(CheckCancelled(cancelled, what));  // closed while queued
  RETURN_IF_ERROR(CheckDeadline(deadline, what));
  std::string where = "the connecting peer";
  sockaddr_in sa{};
  socklen_t sa_len = sizeof(sa);
  char ip[INET_ADDRSTRLEN] = {};
  if (getpeername(fd, reinterpret_cast<sockaddr*>(&sa), &sa_len) == 0 && sa.sin_family == AF_INET &&
      inet_ntop(AF_INET, &sa.sin_addr, ip, sizeof(ip)) != nullptr) {
    where = absl::StrCat("the connecting peer at ", ip, ":", ntohs(sa.sin_port));
  }
  ControlHeader h{};
  absl::Status s = transport::tcp::ReadFully(fd, &h, sizeof(h),
                                             std::min(deadline, absl::Now() + kRequestWait), what);
  if (!s.ok() || h.magic != kRequestMagic) {
    return absl::NotFoundError(absl::StrCat(what, ": stray dial dropped"));
  }
  if (h.version != kControlVersion) {
    return absl::FailedPreconditionError(
        absl::StrCat(what, ": ", where, " speaks control handshake version ", h.version,
                     h.version < kControlVersion ? " (an older mixnet plugin)" : "", ", this end ",
                     kControlVersion, " (", DescribeIdentity(self),
                     "). Every rank must load the same plugin version"));
  }
  ASSIGN_OR_RETURN(nlohmann::json req, ReadBody(fd, h, deadline, what));
  PeerConnection out;
  uint64_t want_listen = 0, connection_id = 0;
  try {
    out.peer = IdentityFromJson(req);
    want_listen = req.at("listen_id").get<uint64_t>();
    connection_id = req.at("connection_id").get<uint64_t>();
  } catch (const nlohmann::json::exception& e) {
    return absl::NotFoundError(absl::StrCat(what, ": malformed request dropped: ", e.what()));
  }
  where = absl::StrCat(where, " (", out.peer.host, ")");
  const absl::Status compatible = CheckCompatible(self, out.peer, where);
  nlohmann::json rep = IdentityJson(self);
  const std::string address = device->address();
  if (want_listen != listen_id) {
    rep["status"] = "no_listen";
  } else if (!compatible.ok()) {
    rep["status"] = "mismatch";
  } else {
    rep["status"] = "ok";
    rep["address"] = address;
  }
  RETURN_IF_ERROR(WriteMessage(fd, kReplyMagic, rep, deadline, what));
  if (want_listen != listen_id) {
    return absl::NotFoundError(absl::StrCat(what, ": dial for another comm"));
  }
  if (!compatible.ok()) return Annotate(compatible, what);
  RETURN_IF_ERROR(CheckCancelled(cancelled, what));
  transport::ConnectOptions o;
  o.connection_id = connection_id;
  o.initiator = false;
  o.peer_name = absl::StrCat("nccl peer ", out.peer.host, " of listen comm ", listen_id);
  o.traffic_class = traffic_class;
  o.timeout = std::max(deadline - absl::Now(), absl::Seconds(1));
  ASSIGN_OR_RETURN(out.connection, device->Connect(o));
  return out;
}

}  // namespace mixnet::nccl
