// Socket helpers for the TCP store (see tcp_socket.h). Any thread.
#include "runtime/rendezvous/tcp_socket.h"

#include <fcntl.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/socket.h>

#include <algorithm>
#include <cerrno>
#include <memory>

#include "absl/strings/str_cat.h"
#include "runtime/common/status.h"

namespace mixnet::rendezvous::internal {
namespace {

struct AddrInfoDeleter {
  void operator()(addrinfo* ai) const { freeaddrinfo(ai); }
};
using AddrInfoPtr = std::unique_ptr<addrinfo, AddrInfoDeleter>;

absl::StatusOr<AddrInfoPtr> Resolve(const std::string& host, int port, bool passive) {
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  hints.ai_flags = AI_NUMERICSERV | (passive ? AI_PASSIVE : 0);
  std::string service = std::to_string(port);
  const char* node = (host.empty() || host == "*") ? nullptr : host.c_str();
  addrinfo* res = nullptr;
  int rc = getaddrinfo(node, service.c_str(), &hints, &res);
  if (rc != 0) {
    std::string msg = absl::StrCat("cannot resolve ", HostPort(host, port),
                                   ": getaddrinfo failed: ", gai_strerror(rc));
    if (rc == EAI_SYSTEM) return ErrnoStatus(msg, "getaddrinfo");
    if (rc == EAI_AGAIN) return absl::UnavailableError(msg);
    return absl::InvalidArgumentError(msg);
  }
  return AddrInfoPtr(res);
}

// Waits until `fd` is ready for `events` or `deadline` (looking at least once).
// Returns DeadlineExceeded when the time passes.
absl::Status WaitFd(int fd, short events, absl::Time deadline, absl::string_view peer,
                    absl::string_view doing) {
  while (true) {
    int64_t ms = TimeoutToMillis(deadline - absl::Now());
    pollfd pfd{fd, events, 0};
    int rc = ::poll(&pfd, 1, ms < 0 ? -1 : static_cast<int>(std::min<int64_t>(ms, 1 << 30)));
    if (rc > 0) return absl::OkStatus();
    if (rc < 0 && errno != EINTR) return ErrnoStatus(absl::StrCat("tcp store ", peer), "poll");
    if (rc == 0 && absl::Now() >= deadline) {
      return absl::DeadlineExceededError(absl::StrCat("tcp store ", peer, ": timed out ", doing));
    }
  }
}

}  // namespace

std::string HostPort(absl::string_view host, int port) {
  if (host.find(':') != absl::string_view::npos) return absl::StrCat("[", host, "]:", port);
  return absl::StrCat(host, ":", port);
}

absl::StatusOr<UniqueFd> Listen(const std::string& bind_address, int port) {
  std::string where = absl::StrCat("tcp store server on ", HostPort(bind_address, port));
  if (port < 0 || port > 65535) {
    return absl::InvalidArgumentError(absl::StrCat(where, ": port out of range"));
  }
  ASSIGN_OR_RETURN(AddrInfoPtr addrs, Resolve(bind_address, port, /*passive=*/true));
  absl::Status last = absl::UnavailableError(absl::StrCat(where, ": no address to bind"));
  for (addrinfo* ai = addrs.get(); ai != nullptr; ai = ai->ai_next) {
    UniqueFd fd(
        ::socket(ai->ai_family, ai->ai_socktype | SOCK_NONBLOCK | SOCK_CLOEXEC, ai->ai_protocol));
    if (!fd.valid()) {
      last = ErrnoStatus(where, "socket");
      continue;
    }
    int one = 1;
    if (::setsockopt(fd.get(), SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one)) != 0) {
      return ErrnoStatus(where, "setsockopt(SO_REUSEADDR)");
    }
    if (::bind(fd.get(), ai->ai_addr, ai->ai_addrlen) != 0) {
      last = ErrnoStatus(where, "bind");
      continue;
    }
    if (::listen(fd.get(), SOMAXCONN) != 0) {
      last = ErrnoStatus(where, "listen");
      continue;
    }
    return fd;
  }
  return last;
}

absl::StatusOr<int> LocalPort(int fd, absl::string_view what) {
  sockaddr_storage ss{};
  socklen_t len = sizeof(ss);
  if (::getsockname(fd, reinterpret_cast<sockaddr*>(&ss), &len) != 0) {
    return ErrnoStatus(what, "getsockname");
  }
  if (ss.ss_family == AF_INET) return ntohs(reinterpret_cast<sockaddr_in*>(&ss)->sin_port);
  if (ss.ss_family == AF_INET6) return ntohs(reinterpret_cast<sockaddr_in6*>(&ss)->sin6_port);
  return absl::InternalError(absl::StrCat(what, ": unexpected address family ", ss.ss_family));
}

absl::StatusOr<UniqueFd> ConnectOnce(const std::string& host, int port, absl::Time deadline,
                                     bool* unresolvable) {
  std::string peer = HostPort(host, port);
  std::string where = absl::StrCat("tcp store ", peer);
  absl::StatusOr<AddrInfoPtr> resolved = Resolve(host, port, /*passive=*/false);
  if (unresolvable != nullptr) *unresolvable = absl::IsInvalidArgument(resolved.status());
  if (!resolved.ok()) return resolved.status();
  AddrInfoPtr addrs = std::move(*resolved);
  absl::Status last = absl::UnavailableError(absl::StrCat(where, ": no address"));
  for (addrinfo* ai = addrs.get(); ai != nullptr; ai = ai->ai_next) {
    UniqueFd fd(
        ::socket(ai->ai_family, ai->ai_socktype | SOCK_NONBLOCK | SOCK_CLOEXEC, ai->ai_protocol));
    if (!fd.valid()) {
      last = ErrnoStatus(where, "socket");
      continue;
    }
    int one = 1;
    (void)::setsockopt(fd.get(), IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
    (void)::setsockopt(fd.get(), SOL_SOCKET, SO_KEEPALIVE, &one, sizeof(one));
    if (::connect(fd.get(), ai->ai_addr, ai->ai_addrlen) != 0) {
      if (errno != EINPROGRESS) {
        last = ErrnoStatus(where, "connect");
        continue;
      }
      absl::Status waited = WaitFd(fd.get(), POLLOUT, deadline, peer, "connecting");
      if (!waited.ok()) {
        last = waited;
        continue;
      }
      int err = 0;
      socklen_t len = sizeof(err);
      if (::getsockopt(fd.get(), SOL_SOCKET, SO_ERROR, &err, &len) != 0) err = errno;
      if (err != 0) {
        last = ErrnoStatus(where, "connect", err);
        continue;
      }
    }
    return fd;
  }
  return last;
}

absl::Status SendAll(int fd, const char* data, size_t len, absl::Duration idle,
                     absl::string_view peer, bool more) {
  while (len > 0) {
    ssize_t n = ::send(fd, data, len, MSG_NOSIGNAL | (more ? MSG_MORE : 0));
    if (n > 0) {
      data += n;
      len -= static_cast<size_t>(n);
      continue;
    }
    if (n < 0 && errno == EINTR) continue;
    if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) {
      RETURN_IF_ERROR(
          WaitFd(fd, POLLOUT, absl::Now() + idle, peer,
                 absl::StrCat("sending (no progress for ", absl::FormatDuration(idle), ")")));
      continue;
    }
    return ErrnoStatus(absl::StrCat("tcp store ", peer), "send");
  }
  return absl::OkStatus();
}

absl::Status RecvAll(int fd, char* data, size_t len, absl::Time first_deadline, absl::Duration idle,
                     absl::string_view peer) {
  absl::Time deadline = first_deadline;
  while (len > 0) {
    ssize_t n = ::recv(fd, data, len, 0);
    if (n > 0) {
      data += n;
      len -= static_cast<size_t>(n);
      deadline = absl::Now() + idle;
      continue;
    }
    if (n == 0) {
      return absl::UnavailableError(
          absl::StrCat("tcp store ", peer, ": connection closed by the server"));
    }
    if (errno == EINTR) continue;
    if (errno == EAGAIN || errno == EWOULDBLOCK) {
      RETURN_IF_ERROR(WaitFd(fd, POLLIN, deadline, peer, "waiting for the server's reply"));
      continue;
    }
    return ErrnoStatus(absl::StrCat("tcp store ", peer), "recv");
  }
  return absl::OkStatus();
}

}  // namespace mixnet::rendezvous::internal
