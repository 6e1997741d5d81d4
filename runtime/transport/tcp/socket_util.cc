// Socket helpers for the TCP transport (see socket_util.h).
#include "runtime/transport/tcp/socket_util.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <ifaddrs.h>
#include <net/if.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <pthread.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <climits>
#include <cstddef>
#include <cstring>
#include <fstream>
#include <random>
#include <thread>

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"
#include "runtime/common/status.h"

namespace mixnet::transport::tcp {

std::string SocketAddress::ToString() const { return absl::StrCat(ip, ":", port); }

absl::StatusOr<SocketAddress> SocketAddress::Parse(const std::string& text) {
  size_t colon = text.rfind(':');
  SocketAddress a;
  if (colon == std::string::npos || !absl::SimpleAtoi(text.substr(colon + 1), &a.port) ||
      a.port <= 0 || a.port > 65535) {
    return absl::InvalidArgumentError(absl::StrCat("bad TCP address '", text, "' (want ip:port)"));
  }
  a.ip = text.substr(0, colon);
  in_addr tmp;
  if (inet_pton(AF_INET, a.ip.c_str(), &tmp) != 1) {
    return absl::InvalidArgumentError(absl::StrCat("bad IPv4 address in '", text, "'"));
  }
  return a;
}

namespace {

template <typename Fn>
absl::Status ForEachIpv4(Fn fn) {
  ifaddrs* list = nullptr;
  if (getifaddrs(&list) != 0) return ErrnoStatus("listing interfaces", "getifaddrs");
  for (ifaddrs* it = list; it != nullptr; it = it->ifa_next) {
    if (it->ifa_addr == nullptr || it->ifa_addr->sa_family != AF_INET) continue;
    char buf[INET_ADDRSTRLEN];
    inet_ntop(AF_INET, &reinterpret_cast<sockaddr_in*>(it->ifa_addr)->sin_addr, buf, sizeof(buf));
    if (fn(std::string(it->ifa_name), std::string(buf))) break;
  }
  freeifaddrs(list);
  return absl::OkStatus();
}

absl::StatusOr<sockaddr_in> ToSockaddr(const std::string& ip, int port) {
  sockaddr_in sa{};
  sa.sin_family = AF_INET;
  sa.sin_port = htons(static_cast<uint16_t>(port));
  if (inet_pton(AF_INET, ip.c_str(), &sa.sin_addr) != 1) {
    return absl::InvalidArgumentError(absl::StrCat("bad IPv4 address '", ip, "'"));
  }
  return sa;
}

}  // namespace

absl::StatusOr<std::string> InterfaceAddress(const std::string& ifname) {
  std::string found;
  RETURN_IF_ERROR(ForEachIpv4([&](const std::string& name, const std::string& ip) {
    if (name != ifname) return false;
    found = ip;
    return true;
  }));
  if (found.empty()) {
    return absl::NotFoundError(absl::StrCat("interface '", ifname, "' has no IPv4 address"));
  }
  return found;
}

absl::StatusOr<std::string> InterfaceOfAddress(const std::string& ip) {
  std::string found;
  RETURN_IF_ERROR(ForEachIpv4([&](const std::string& name, const std::string& addr) {
    if (addr != ip) return false;
    found = name;
    return true;
  }));
  if (found.empty()) {
    return absl::NotFoundError(absl::StrCat("no local interface holds address ", ip));
  }
  return found;
}

absl::StatusOr<std::vector<std::pair<std::string, std::string>>> MatchInterfaces(
    const std::string& filter_text) {
  const std::string filter_storage = filter_text.empty() ? std::string("lo") : filter_text;
  absl::string_view filter = filter_storage;
  bool exclude = absl::ConsumePrefix(&filter, "^");
  bool exact = absl::ConsumePrefix(&filter, "=");
  std::vector<std::string> items = absl::StrSplit(filter, ',', absl::SkipEmpty());
  std::vector<std::pair<std::string, std::string>> out;
  RETURN_IF_ERROR(ForEachIpv4([&](const std::string& name, const std::string& ip) {
    bool match = false;
    for (const std::string& item : items) {
      match |= exact ? name == item : absl::StartsWith(name, item);
    }
    if (match != exclude) out.emplace_back(name, ip);
    return false;
  }));
  if (out.empty()) {
    return absl::NotFoundError(
        absl::StrCat("no IPv4 interface matches MIXNET_SOCKET_IFNAME='", filter_text, "'"));
  }
  return out;
}

absl::Status SetNonBlocking(int fd, bool on) {
  int flags = fcntl(fd, F_GETFL, 0);
  if (flags < 0) return ErrnoStatus("socket", "fcntl(F_GETFL)");
  flags = on ? (flags | O_NONBLOCK) : (flags & ~O_NONBLOCK);
  if (fcntl(fd, F_SETFL, flags) != 0) return ErrnoStatus("socket", "fcntl(F_SETFL)");
  return absl::OkStatus();
}

namespace {
constexpr char kLocalPrefix[] = "unix:@";

// Abstract-namespace address: sun_path[0] is NUL, the name follows, no NUL end.
absl::StatusOr<std::pair<sockaddr_un, socklen_t>> ToUnixSockaddr(const std::string& name) {
  sockaddr_un sa{};
  sa.sun_family = AF_UNIX;
  if (name.empty() || name.size() + 1 > sizeof(sa.sun_path)) {
    return absl::InvalidArgumentError(absl::StrCat("bad local endpoint name '", name, "'"));
  }
  std::memcpy(sa.sun_path + 1, name.data(), name.size());
  return std::make_pair(sa,
                        static_cast<socklen_t>(offsetof(sockaddr_un, sun_path) + 1 + name.size()));
}
}  // namespace

bool IsLocalAddress(const std::string& address) { return absl::StartsWith(address, kLocalPrefix); }

absl::StatusOr<std::pair<int, std::string>> ListenLocal(int backlog) {
  static std::atomic<uint64_t> counter{0};
  std::random_device rd;
  const std::string name = absl::StrCat("mixnet-", getpid(), "-", counter.fetch_add(1), "-",
                                        absl::Hex(static_cast<uint64_t>(rd()) << 32 | rd()));
  ASSIGN_OR_RETURN(auto sa, ToUnixSockaddr(name));
  int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
  if (fd < 0) return ErrnoStatus("local listening socket", "socket(AF_UNIX)");
  if (bind(fd, reinterpret_cast<sockaddr*>(&sa.first), sa.second) != 0 ||
      listen(fd, backlog) != 0) {
    absl::Status s = ErrnoStatus(absl::StrCat("listening on @", name), "bind/listen");
    close(fd);
    return s;
  }
  return std::make_pair(fd, absl::StrCat(kLocalPrefix, name));
}

absl::StatusOr<int> ConnectLocal(const std::string& address, absl::Duration timeout) {
  if (!IsLocalAddress(address)) {
    return absl::InvalidArgumentError(
        absl::StrCat("bad local address '", address, "' (want ", kLocalPrefix, "<name>)"));
  }
  ASSIGN_OR_RETURN(auto sa, ToUnixSockaddr(address.substr(sizeof(kLocalPrefix) - 1)));
  const absl::Time deadline = absl::Now() + timeout;
  const std::string what = absl::StrCat("connecting to ", address);
  absl::Duration backoff = absl::Milliseconds(5);
  while (true) {
    // Blocking connect: a Unix stream connect completes or fails at once
    // (EAGAIN when the backlog is full, retried below).
    int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (fd < 0) return ErrnoStatus(what, "socket(AF_UNIX)");
    if (connect(fd, reinterpret_cast<sockaddr*>(&sa.first), sa.second) == 0) return fd;
    int err = errno;
    close(fd);
    bool retry = err == ECONNREFUSED || err == EAGAIN || err == ENOENT || err == EINTR;
    if (!retry || absl::Now() + backoff > deadline) return ErrnoStatus(what, "connect", err);
    absl::SleepFor(backoff);
    backoff = std::min(backoff * 2, absl::Milliseconds(200));
  }
}

absl::Status ConfigureLocalSocket(int fd, size_t buffer_bytes) {
  if (buffer_bytes > 0) {
    int b = static_cast<int>(buffer_bytes);
    setsockopt(fd, SOL_SOCKET, SO_SNDBUF, &b, sizeof(b));
    setsockopt(fd, SOL_SOCKET, SO_RCVBUF, &b, sizeof(b));
  }
  return SetNonBlocking(fd, true);
}

int UnixPeerPid(int fd) {
  int domain = 0;
  socklen_t len = sizeof(domain);
  if (getsockopt(fd, SOL_SOCKET, SO_DOMAIN, &domain, &len) != 0 || domain != AF_UNIX) return 0;
  ucred cred{};
  len = sizeof(cred);
  if (getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &cred, &len) != 0) return 0;
  return cred.pid;
}

bool ProcessAlive(int pid) {
  if (pid <= 0) return false;
  std::ifstream in(absl::StrCat("/proc/", pid, "/stat"));
  std::string stat;
  if (!std::getline(in, stat)) return false;
  // "pid (comm) state ppid pgrp session tty tpgid flags ...": comm may hold
  // anything, so fields are counted from its closing parenthesis.
  const size_t paren = stat.rfind(')');
  if (paren == std::string::npos) return false;
  std::vector<std::string> fields = absl::StrSplit(stat.substr(paren + 1), ' ', absl::SkipEmpty());
  if (fields.size() < 7 || fields[0] == "Z" || fields[0] == "X" || fields[0] == "x") return false;
  uint64_t flags = 0;
  constexpr uint64_t kPfExiting = 0x4;
  return absl::SimpleAtoi(fields[6], &flags) && (flags & kPfExiting) == 0;
}

absl::StatusOr<int> Listen(const std::string& ip, int backlog) {
  ASSIGN_OR_RETURN(sockaddr_in sa, ToSockaddr(ip, 0));
  int fd = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
  if (fd < 0) return ErrnoStatus("listening socket", "socket");
  int one = 1;
  setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
  if (bind(fd, reinterpret_cast<sockaddr*>(&sa), sizeof(sa)) != 0) {
    absl::Status s = ErrnoStatus(absl::StrCat("listening on ", ip), "bind");
    close(fd);
    return s;
  }
  if (listen(fd, backlog) != 0) {
    absl::Status s = ErrnoStatus(absl::StrCat("listening on ", ip), "listen");
    close(fd);
    return s;
  }
  return fd;
}

absl::StatusOr<SocketAddress> LocalAddress(int fd) {
  sockaddr_in sa{};
  socklen_t len = sizeof(sa);
  if (getsockname(fd, reinterpret_cast<sockaddr*>(&sa), &len) != 0) {
    return ErrnoStatus("socket", "getsockname");
  }
  char buf[INET_ADDRSTRLEN];
  inet_ntop(AF_INET, &sa.sin_addr, buf, sizeof(buf));
  return SocketAddress{buf, ntohs(sa.sin_port)};
}

absl::StatusOr<int> ConnectTo(const SocketAddress& remote, const std::string& bind_ip,
                              const std::string& ifname, absl::Duration timeout) {
  ASSIGN_OR_RETURN(sockaddr_in dst, ToSockaddr(remote.ip, remote.port));
  const absl::Time deadline = absl::Now() + timeout;
  const std::string what =
      absl::StrCat("connecting to ", remote.ToString(), ifname.empty() ? "" : " via " + ifname);
  absl::Duration backoff = absl::Milliseconds(5);
  while (true) {
    int fd = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    if (fd < 0) return ErrnoStatus(what, "socket");
    auto fail = [&](const char* call, int err) {
      absl::Status s = ErrnoStatus(what, call, err);
      close(fd);
      return s;
    };
    // SO_BINDTODEVICE pins the route lookup to the chosen NIC, so the traffic
    // leaves through it even when several NICs share a subnet.
    if (!ifname.empty() && ifname != "lo" &&
        setsockopt(fd, SOL_SOCKET, SO_BINDTODEVICE, ifname.c_str(), ifname.size()) != 0) {
      return fail("setsockopt(SO_BINDTODEVICE)", errno);
    }
    if (!bind_ip.empty()) {
      ASSIGN_OR_RETURN(sockaddr_in src, ToSockaddr(bind_ip, 0));
      if (bind(fd, reinterpret_cast<sockaddr*>(&src), sizeof(src)) != 0) {
        return fail("bind", errno);
      }
    }
    int rc = connect(fd, reinterpret_cast<sockaddr*>(&dst), sizeof(dst));
    int err = rc == 0 ? 0 : errno;
    if (err == EINPROGRESS) {
      pollfd p{fd, POLLOUT, 0};
      int64_t ms = std::max<int64_t>(0, absl::ToInt64Milliseconds(deadline - absl::Now()));
      int n = poll(&p, 1, static_cast<int>(ms));
      if (n == 0) return fail("connect", ETIMEDOUT);
      socklen_t len = sizeof(err);
      getsockopt(fd, SOL_SOCKET, SO_ERROR, &err, &len);
    }
    if (err == 0) return fd;
    close(fd);
    bool retry = err == ECONNREFUSED || err == ETIMEDOUT || err == EAGAIN;
    if (!retry || absl::Now() + backoff > deadline) return ErrnoStatus(what, "connect", err);
    absl::SleepFor(backoff);
    backoff = std::min(backoff * 2, absl::Milliseconds(200));
  }
}

absl::Status ConfigureDataSocket(int fd, size_t buffer_bytes, absl::Duration stall_timeout) {
  int one = 1;
  if (setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one)) != 0) {
    return ErrnoStatus("data socket", "setsockopt(TCP_NODELAY)");
  }
  setsockopt(fd, SOL_SOCKET, SO_KEEPALIVE, &one, sizeof(one));
  if (stall_timeout > absl::ZeroDuration()) {
    // Unacknowledged data (or unanswered keepalive probes) for longer than
    // the user timeout kills the connection (ETIMEDOUT). Keepalive is what
    // makes an idle receiver notice: probe after about a third of the stall
    // time, then every sixth (whole seconds, at least 1).
    const int64_t ms = std::max<int64_t>(1, absl::ToInt64Milliseconds(stall_timeout));
    const unsigned int user_ms = static_cast<unsigned int>(std::min<int64_t>(ms, INT32_MAX));
    if (setsockopt(fd, IPPROTO_TCP, TCP_USER_TIMEOUT, &user_ms, sizeof(user_ms)) != 0) {
      return ErrnoStatus("data socket", "setsockopt(TCP_USER_TIMEOUT)");
    }
    const int idle = static_cast<int>(std::max<int64_t>(1, ms / 3000));
    const int intvl = static_cast<int>(std::max<int64_t>(1, ms / 6000));
    const int cnt = static_cast<int>(std::max<int64_t>(1, (ms / 1000 - idle) / intvl));
    if (setsockopt(fd, IPPROTO_TCP, TCP_KEEPIDLE, &idle, sizeof(idle)) != 0 ||
        setsockopt(fd, IPPROTO_TCP, TCP_KEEPINTVL, &intvl, sizeof(intvl)) != 0 ||
        setsockopt(fd, IPPROTO_TCP, TCP_KEEPCNT, &cnt, sizeof(cnt)) != 0) {
      return ErrnoStatus("data socket", "setsockopt(TCP_KEEPIDLE/KEEPINTVL/KEEPCNT)");
    }
  }
  if (buffer_bytes > 0) {
    int b = static_cast<int>(buffer_bytes);
    setsockopt(fd, SOL_SOCKET, SO_SNDBUF, &b, sizeof(b));
    setsockopt(fd, SOL_SOCKET, SO_RCVBUF, &b, sizeof(b));
  }
  return SetNonBlocking(fd, true);
}

namespace {
absl::Status WaitFd(int fd, short events, absl::Time deadline, const std::string& what) {
  int64_t ms = absl::ToInt64Milliseconds(deadline - absl::Now());
  if (ms <= 0) return absl::DeadlineExceededError(absl::StrCat(what, ": timed out"));
  pollfd p{fd, events, 0};
  int n = poll(&p, 1, static_cast<int>(ms));
  if (n < 0 && errno != EINTR) return ErrnoStatus(what, "poll");
  return absl::OkStatus();
}
}  // namespace

absl::Status WriteFully(int fd, const void* buf, size_t len, absl::Time deadline,
                        const std::string& what) {
  const char* p = static_cast<const char*>(buf);
  while (len > 0) {
    ssize_t n = send(fd, p, len, MSG_NOSIGNAL);
    if (n > 0) {
      p += n;
      len -= static_cast<size_t>(n);
    } else if (n < 0 && (errno == EAGAIN || errno == EINTR)) {
      RETURN_IF_ERROR(WaitFd(fd, POLLOUT, deadline, what));
    } else {
      return ErrnoStatus(what, "send");
    }
  }
  return absl::OkStatus();
}

absl::Status ReadFully(int fd, void* buf, size_t len, absl::Time deadline,
                       const std::string& what) {
  char* p = static_cast<char*>(buf);
  while (len > 0) {
    ssize_t n = recv(fd, p, len, 0);
    if (n > 0) {
      p += n;
      len -= static_cast<size_t>(n);
    } else if (n == 0) {
      return absl::UnavailableError(absl::StrCat(what, ": peer closed the connection"));
    } else if (errno == EAGAIN || errno == EINTR) {
      RETURN_IF_ERROR(WaitFd(fd, POLLIN, deadline, what));
    } else {
      return ErrnoStatus(what, "recv");
    }
  }
  return absl::OkStatus();
}

void SetThreadName(const std::string& name) {
  pthread_setname_np(pthread_self(), name.substr(0, 15).c_str());
}

}  // namespace mixnet::transport::tcp
