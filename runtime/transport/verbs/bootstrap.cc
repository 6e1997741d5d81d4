// TCP bootstrap of the verbs transport (see bootstrap.h). Runs on the threads
// that call Device::Connect (and Device creation).
#include "runtime/transport/verbs/bootstrap.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <ifaddrs.h>
#include <net/if.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <functional>
#include <thread>

#include "absl/strings/str_cat.h"
#include "runtime/common/log.h"
#include "runtime/common/status.h"
#include "runtime/transport/verbs/address.h"

namespace mixnet::transport::verbs {
namespace {

int PollMs(absl::Time deadline, absl::Duration cap) {
  absl::Duration left = std::min(deadline - absl::Now(), cap);
  if (left <= absl::ZeroDuration()) return 0;
  return static_cast<int>(std::max<int64_t>(1, absl::ToInt64Milliseconds(left)));
}

// Waits for `events` on fd until the deadline. OK when ready.
absl::Status WaitFd(int fd, short events, absl::Time deadline, const std::string& what,
                    const char* doing) {
  while (true) {
    if (absl::Now() >= deadline) {
      return absl::DeadlineExceededError(absl::StrCat(what, ": timed out ", doing));
    }
    pollfd p{fd, events, 0};
    int n = poll(&p, 1, PollMs(deadline, absl::Seconds(1)));
    if (n > 0) return absl::OkStatus();
    if (n < 0 && errno != EINTR) return ErrnoStatus(what, "poll");
  }
}

absl::StatusOr<sockaddr_in> MakeAddr(const std::string& ip, uint16_t port) {
  sockaddr_in sa{};
  sa.sin_family = AF_INET;
  sa.sin_port = htons(port);
  if (ip.empty()) {
    sa.sin_addr.s_addr = htonl(INADDR_ANY);
  } else if (inet_pton(AF_INET, ip.c_str(), &sa.sin_addr) != 1) {
    return absl::InvalidArgumentError(absl::StrCat("'", ip, "' is not an IPv4 address"));
  }
  return sa;
}

}  // namespace

Fd& Fd::operator=(Fd&& o) noexcept {
  if (this != &o) {
    reset();
    fd_ = o.release();
  }
  return *this;
}

void Fd::reset() {
  if (fd_ >= 0) close(fd_);
  fd_ = -1;
}

namespace {

// The interfaces' IPv4 addresses in getifaddrs order: (name, flags,
// "a.b.c.d"); `pick` returns true to stop. Errors only when the list cannot
// be read.
absl::Status ForEachIpv4(
    const std::function<bool(const char* name, unsigned flags, const std::string& ip)>& pick) {
  ifaddrs* list = nullptr;
  if (getifaddrs(&list) != 0) return ErrnoStatus("listing interfaces", "getifaddrs");
  for (ifaddrs* i = list; i != nullptr; i = i->ifa_next) {
    if (i->ifa_addr == nullptr || i->ifa_addr->sa_family != AF_INET) continue;
    char buf[INET_ADDRSTRLEN];
    inet_ntop(AF_INET, &reinterpret_cast<sockaddr_in*>(i->ifa_addr)->sin_addr, buf, sizeof(buf));
    if (pick(i->ifa_name, i->ifa_flags, buf)) break;
  }
  freeifaddrs(list);
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<std::string> InterfaceIpv4(const std::string& ifname) {
  std::string found;
  RETURN_IF_ERROR(ForEachIpv4([&](const char* name, unsigned, const std::string& ip) {
    if (ifname != name) return false;
    found = ip;
    return true;
  }));
  if (found.empty()) {
    return absl::NotFoundError(absl::StrCat("interface '", ifname, "' has no IPv4 address"));
  }
  return found;
}

absl::StatusOr<std::string> InterfaceWithIpv4(const std::string& ip) {
  std::string found;
  RETURN_IF_ERROR(ForEachIpv4([&](const char* name, unsigned, const std::string& addr) {
    if (addr != ip) return false;
    found = name;
    return true;
  }));
  if (found.empty()) return absl::NotFoundError(absl::StrCat("no interface holds ", ip));
  return found;
}

std::string DefaultIpv4() {
  std::string found = "127.0.0.1";
  (void)ForEachIpv4([&](const char*, unsigned flags, const std::string& ip) {
    if ((flags & IFF_UP) == 0 || (flags & IFF_LOOPBACK) != 0) return false;
    found = ip;
    return true;
  });
  return found;
}

absl::Status WriteFully(int fd, const void* buf, size_t len, absl::Time deadline,
                        const std::string& what) {
  const char* p = static_cast<const char*>(buf);
  while (len > 0) {
    ssize_t n = send(fd, p, len, MSG_NOSIGNAL | MSG_DONTWAIT);
    if (n > 0) {
      p += n;
      len -= static_cast<size_t>(n);
      continue;
    }
    if (n < 0 && errno == EINTR) continue;
    if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) {
      RETURN_IF_ERROR(WaitFd(fd, POLLOUT, deadline, what, "writing to the bootstrap socket"));
      continue;
    }
    return ErrnoStatus(absl::StrCat(what, ": bootstrap socket"), "send");
  }
  return absl::OkStatus();
}

absl::Status ReadFully(int fd, void* buf, size_t len, absl::Time deadline,
                       const std::string& what) {
  char* p = static_cast<char*>(buf);
  while (len > 0) {
    ssize_t n = recv(fd, p, len, MSG_DONTWAIT);
    if (n > 0) {
      p += n;
      len -= static_cast<size_t>(n);
      continue;
    }
    if (n == 0) {
      return absl::UnavailableError(
          absl::StrCat(what, ": bootstrap socket closed by the peer during connection set-up"));
    }
    if (errno == EINTR) continue;
    if (errno == EAGAIN || errno == EWOULDBLOCK) {
      RETURN_IF_ERROR(WaitFd(fd, POLLIN, deadline, what, "waiting for the peer's handshake"));
      continue;
    }
    return ErrnoStatus(absl::StrCat(what, ": bootstrap socket"), "recv");
  }
  return absl::OkStatus();
}

void ConfigureBootstrapSocket(int fd) {
  int one = 1;
  setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
  setsockopt(fd, SOL_SOCKET, SO_KEEPALIVE, &one, sizeof(one));
  int idle = 10, interval = 2, count = 5;
  setsockopt(fd, IPPROTO_TCP, TCP_KEEPIDLE, &idle, sizeof(idle));
  setsockopt(fd, IPPROTO_TCP, TCP_KEEPINTVL, &interval, sizeof(interval));
  setsockopt(fd, IPPROTO_TCP, TCP_KEEPCNT, &count, sizeof(count));
}

absl::StatusOr<Fd> Dial(const std::string& ip, uint16_t port, const std::string& bind_ip,
                        absl::Time deadline, const std::string& what) {
  ASSIGN_OR_RETURN(sockaddr_in remote, MakeAddr(ip, port));
  const std::string target = absl::StrCat(what, ": dialing bootstrap ", ip, ":", port);
  while (true) {
    Fd fd(socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0));
    if (fd.get() < 0) return ErrnoStatus(target, "socket");
    if (!bind_ip.empty() && bind_ip != "0.0.0.0") {
      ASSIGN_OR_RETURN(sockaddr_in local, MakeAddr(bind_ip, 0));
      if (bind(fd.get(), reinterpret_cast<sockaddr*>(&local), sizeof(local)) != 0) {
        return ErrnoStatus(absl::StrCat(target, " from ", bind_ip), "bind");
      }
    }
    int err = 0;
    if (connect(fd.get(), reinterpret_cast<sockaddr*>(&remote), sizeof(remote)) != 0) {
      err = errno;
      if (err == EINPROGRESS) {
        RETURN_IF_ERROR(WaitFd(fd.get(), POLLOUT, deadline, target, "connecting"));
        socklen_t len = sizeof(err);
        getsockopt(fd.get(), SOL_SOCKET, SO_ERROR, &err, &len);
      }
    }
    if (err == 0) {
      ConfigureBootstrapSocket(fd.get());
      return fd;
    }
    if ((err == ECONNREFUSED || err == EAGAIN) && absl::Now() < deadline) {
      std::this_thread::sleep_for(std::chrono::milliseconds(50));
      continue;
    }
    return ErrnoStatus(target, "connect", err);
  }
}

absl::StatusOr<std::unique_ptr<BootstrapListener>> BootstrapListener::Create(
    const std::string& bind_ip) {
  ASSIGN_OR_RETURN(sockaddr_in sa, MakeAddr(bind_ip == "0.0.0.0" ? "" : bind_ip, 0));
  Fd fd(socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0));
  const std::string what =
      absl::StrCat("verbs bootstrap listener on ", bind_ip.empty() ? "0.0.0.0" : bind_ip);
  if (fd.get() < 0) return ErrnoStatus(what, "socket");
  int one = 1;
  setsockopt(fd.get(), SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
  if (bind(fd.get(), reinterpret_cast<sockaddr*>(&sa), sizeof(sa)) != 0) {
    return ErrnoStatus(what, "bind");
  }
  if (listen(fd.get(), 256) != 0) return ErrnoStatus(what, "listen");
  socklen_t len = sizeof(sa);
  if (getsockname(fd.get(), reinterpret_cast<sockaddr*>(&sa), &len) != 0) {
    return ErrnoStatus(what, "getsockname");
  }
  return std::unique_ptr<BootstrapListener>(
      new BootstrapListener(std::move(fd), ntohs(sa.sin_port)));
}

BootstrapListener::~BootstrapListener() = default;

void BootstrapListener::AcceptOne(absl::Time deadline) {
  pollfd p{fd_.get(), POLLIN, 0};
  if (poll(&p, 1, PollMs(deadline, absl::Milliseconds(200))) <= 0) return;
  Fd conn(accept4(fd_.get(), nullptr, nullptr, SOCK_NONBLOCK | SOCK_CLOEXEC));
  if (conn.get() < 0) {
    if (errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR) {
      log::Warn("verbs bootstrap (port {}): accept4 failed: {}", port_, ErrnoText(errno));
    }
    return;
  }
  ConfigureBootstrapSocket(conn.get());
  std::string hello(kHandshakeBytes, '\0');
  const std::string what = absl::StrCat("verbs bootstrap (port ", port_, ")");
  // A dialer writes its handshake right away; do not let a stuck one block
  // other connections for long.
  absl::Status s =
      ReadFully(conn.get(), hello.data(), hello.size(), absl::Now() + absl::Seconds(5), what);
  absl::StatusOr<Handshake> h = s.ok() ? Handshake::Decode(hello) : s;
  if (!h.ok()) {
    log::Warn("{}: dropping an incoming connection: {}", what, h.status().ToString());
    return;
  }
  absl::MutexLock lock(&mu_);
  parked_[h->connection_id] = Accepted{std::move(conn), std::move(hello)};
}

absl::StatusOr<BootstrapListener::Accepted> BootstrapListener::Accept(uint64_t connection_id,
                                                                      absl::Time deadline,
                                                                      const std::string& what) {
  absl::MutexLock lock(&mu_);
  while (true) {
    auto it = parked_.find(connection_id);
    if (it != parked_.end()) {
      Accepted a = std::move(it->second);
      parked_.erase(it);
      return a;
    }
    if (absl::Now() >= deadline) {
      return absl::DeadlineExceededError(absl::StrCat(what, ": no dial for connection id ",
                                                      connection_id, " arrived at bootstrap port ",
                                                      port_, " before the connect timeout"));
    }
    if (accepting_) {
      auto ready = [this, connection_id]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
        return !accepting_ || parked_.contains(connection_id);
      };
      mu_.AwaitWithDeadline(absl::Condition(&ready), deadline);
      continue;
    }
    accepting_ = true;
    mu_.Unlock();
    AcceptOne(deadline);
    mu_.Lock();
    accepting_ = false;
  }
}

}  // namespace mixnet::transport::verbs
