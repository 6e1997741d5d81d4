// Socket helpers for the TCP transport: addresses, listening and connecting
// sockets bound to a local NIC, options, and deadline-bounded blocking I/O for
// handshakes. Stateless; callable from any thread.
#pragma once

#include <netinet/in.h>

#include <cstddef>
#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/time/time.h"

namespace mixnet::transport::tcp {

struct SocketAddress {
  std::string ip;  // dotted IPv4
  int port = 0;
  std::string ToString() const;
  static absl::StatusOr<SocketAddress> Parse(const std::string& text);  // "a.b.c.d:port"
};

// Resolves the IPv4 address of interface `ifname` (getifaddrs).
absl::StatusOr<std::string> InterfaceAddress(const std::string& ifname);
// Interface name that holds `ip`, or NotFound.
absl::StatusOr<std::string> InterfaceOfAddress(const std::string& ip);

// Interfaces (name, IPv4) matching a NCCL_SOCKET_IFNAME-style filter: a comma
// list of prefixes; "^" in front excludes, "=" in front matches exactly. An
// empty filter selects "lo".
absl::StatusOr<std::vector<std::pair<std::string, std::string>>> MatchInterfaces(
    const std::string& filter);

// Intra-host endpoints ("local" transport): a listening, non-blocking Unix
// stream socket in the abstract namespace (no file to clean up; scoped to the
// network namespace, like the host it stands for). Its address reads
// "unix:@<name>"; the name embeds the pid and a random suffix.
absl::StatusOr<std::pair<int, std::string>> ListenLocal(int backlog = 256);
bool IsLocalAddress(const std::string& address);
// Connects (blocking, bounded by `timeout`) to a ListenLocal address,
// retrying ECONNREFUSED until the deadline.
absl::StatusOr<int> ConnectLocal(const std::string& address, absl::Duration timeout);
// SO_SNDBUF/SO_RCVBUF and O_NONBLOCK for a Unix stream socket.
absl::Status ConfigureLocalSocket(int fd, size_t buffer_bytes);
// The pid of the process at the other end of a connected Unix socket
// (SO_PEERCRED), or 0 when `fd` is not one.
int UnixPeerPid(int fd);

// Whether process `pid` of this host is alive: it exists, is no zombie and is
// not exiting (the PF_EXITING flag in /proc/<pid>/stat, set before a dying
// process's sockets close).
bool ProcessAlive(int pid);

// A listening, non-blocking socket on ip:0 (ephemeral port).
absl::StatusOr<int> Listen(const std::string& ip, int backlog = 256);
absl::StatusOr<SocketAddress> LocalAddress(int fd);

// Connects (blocking, bounded by `timeout`) from local `bind_ip` / `ifname`
// (either may be empty) to `remote`, retrying ECONNREFUSED until the deadline.
absl::StatusOr<int> ConnectTo(const SocketAddress& remote, const std::string& bind_ip,
                              const std::string& ifname, absl::Duration timeout);

// TCP_NODELAY, SO_SNDBUF/SO_RCVBUF, keepalive, O_NONBLOCK. A non-zero
// `stall_timeout` also sets TCP_USER_TIMEOUT to it and keepalive probes
// (TCP_KEEPIDLE / TCP_KEEPINTVL / TCP_KEEPCNT) that fit inside it, so a dark
// path errors the socket within about `stall_timeout` whether or not data is
// in flight.
absl::Status ConfigureDataSocket(int fd, size_t buffer_bytes,
                                 absl::Duration stall_timeout = absl::ZeroDuration());
absl::Status SetNonBlocking(int fd, bool on);

// Blocking-with-deadline full write/read on a (possibly non-blocking) socket.
absl::Status WriteFully(int fd, const void* buf, size_t len, absl::Time deadline,
                        const std::string& what);
absl::Status ReadFully(int fd, void* buf, size_t len, absl::Time deadline, const std::string& what);

// Names the calling thread (truncated to 15 chars).
void SetThreadName(const std::string& name);

}  // namespace mixnet::transport::tcp
