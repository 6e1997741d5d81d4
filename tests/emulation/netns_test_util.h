// Helpers for the netns-labelled tests: the root / `ip netns` skip check, a
// unique prefix, and TCP probes run from inside a namespace (a socket created
// on a thread that entered the namespace stays there). Traffic only ever goes
// to addresses inside namespaces the test created. Header-only; the probes
// block the calling thread up to their timeout.
#pragma once

#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <poll.h>
#include <sched.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "gtest/gtest.h"
#include "ocs_driver/netns/netns.h"
#include "runtime/common/status.h"

namespace mixnet::testing {

// Stems of the prefixes the emulation tests use (UniquePrefix below).
inline constexpr const char* kTestPrefixStems[] = {
    "ef",    "dn",   "cr",  "ds",   "dup", "bad",  "half", "cli",   "ocst",  "mxprobe", "a2af",
    "ncclf", "ncce", "cut", "rcfg", "ctl", "demo", "rate", "split", "tcpbd", "rbench",  "ctlc"};

// Removes namespaces left by an earlier test process that crashed: names
// "<stem><pid>_<n>-..." of a known stem whose pid no longer runs.
inline void RemoveStaleTestNamespaces() {
  for (const std::string& name : netns::ListNamespaces().value_or(std::vector<std::string>{})) {
    for (const char* stem : kTestPrefixStems) {
      if (!absl::StartsWith(name, stem)) continue;
      const std::string rest = name.substr(std::string(stem).size());
      size_t digits = 0;
      while (digits < rest.size() && absl::ascii_isdigit(rest[digits])) ++digits;
      if (digits == 0 || digits >= rest.size() || (rest[digits] != '_' && rest[digits] != '-')) {
        continue;
      }
      const pid_t pid = static_cast<pid_t>(std::stol(rest.substr(0, digits)));
      if (kill(pid, 0) != 0 && errno == ESRCH) (void)netns::DeleteNamespace(name);
      break;
    }
  }
}

// Empty when namespaces can be created here, else why not.
inline std::string NetnsSkipReason() {
  static const std::string reason = [] {
    if (geteuid() != 0) return std::string("needs root (network namespaces); run as root");
    RemoveStaleTestNamespaces();
    const std::string probe = absl::StrCat("mxprobe", getpid(), "-x");
    absl::Status s = netns::CreateNamespace(probe);
    if (!s.ok()) return absl::StrCat("network namespaces unusable: ", s.ToString());
    (void)netns::DeleteNamespace(probe);
    return std::string();
  }();
  return reason;
}

#define MIXNET_SKIP_UNLESS_NETNS()                                          \
  do {                                                                      \
    if (std::string r = ::mixnet::testing::NetnsSkipReason(); !r.empty()) { \
      GTEST_SKIP() << r;                                                    \
    }                                                                       \
  } while (0)

// "<stem><pid>_<n>": unique per process and call; no '-'.
// Moves the calling thread into network namespace `ns` (setns affects only
// this thread; threads it starts later inherit the namespace).
inline absl::Status EnterNamespace(const std::string& ns) {
  ASSIGN_OR_RETURN(int fd, netns::OpenNamespaceFd(ns));
  const int rc = setns(fd, CLONE_NEWNET);
  const int err = errno;
  close(fd);
  if (rc != 0) return ErrnoStatus(ns, "setns", err);
  return absl::OkStatus();
}

inline std::string UniquePrefix(const std::string& stem) {
  static std::atomic<int> n{0};
  return absl::StrCat(stem, getpid(), "_", n.fetch_add(1));
}

// A TCP listener bound to `address` (port chosen by the kernel) inside `ns`.
class Listener {
 public:
  static absl::StatusOr<Listener> Open(const std::string& ns, const std::string& address) {
    Listener l;
    RETURN_IF_ERROR(netns::RunInNamespace(ns, [&]() -> absl::Status {
      l.fd_ = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
      if (l.fd_ < 0) return ErrnoStatus(ns, "socket");
      sockaddr_in sa{};
      sa.sin_family = AF_INET;
      inet_pton(AF_INET, address.c_str(), &sa.sin_addr);
      if (bind(l.fd_, reinterpret_cast<sockaddr*>(&sa), sizeof(sa)) != 0) {
        return ErrnoStatus(absl::StrCat(ns, " ", address), "bind");
      }
      if (listen(l.fd_, 64) != 0) return ErrnoStatus(ns, "listen");
      socklen_t len = sizeof(sa);
      getsockname(l.fd_, reinterpret_cast<sockaddr*>(&sa), &len);
      l.port_ = ntohs(sa.sin_port);
      return absl::OkStatus();
    }));
    return l;
  }
  Listener() = default;
  Listener(Listener&& o) noexcept : fd_(o.fd_), port_(o.port_) { o.fd_ = -1; }
  ~Listener() {
    if (fd_ >= 0) close(fd_);
  }
  int port() const { return port_; }
  int fd() const { return fd_; }

 private:
  int fd_ = -1;
  int port_ = 0;
};

// Connects from inside `ns` to address:port within `timeout`; on success
// optionally sends `bytes` zero bytes. OK when connected; Unavailable
// (e.g. EHOSTUNREACH) or DeadlineExceeded otherwise.
// With `bind_device`, the socket is bound to that interface (SO_BINDTODEVICE)
// so it leaves through it even when several NICs share a subnet.
inline absl::Status TcpConnect(const std::string& ns, const std::string& address, int port,
                               absl::Duration timeout = absl::Seconds(2), size_t bytes = 0,
                               const std::string& bind_device = "") {
  return netns::RunInNamespace(ns, [&]() -> absl::Status {
    int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
    if (fd < 0) return ErrnoStatus(ns, "socket");
    if (!bind_device.empty() &&
        setsockopt(fd, SOL_SOCKET, SO_BINDTODEVICE, bind_device.c_str(), bind_device.size()) != 0) {
      absl::Status s = ErrnoStatus(absl::StrCat(ns, " ", bind_device), "SO_BINDTODEVICE");
      close(fd);
      return s;
    }
    sockaddr_in sa{};
    sa.sin_family = AF_INET;
    sa.sin_port = htons(port);
    inet_pton(AF_INET, address.c_str(), &sa.sin_addr);
    const std::string what = absl::StrCat(ns, " -> ", address, ":", port);
    absl::Status status;
    if (connect(fd, reinterpret_cast<sockaddr*>(&sa), sizeof(sa)) != 0 && errno != EINPROGRESS) {
      status = ErrnoStatus(what, "connect");
    } else {
      pollfd p{fd, POLLOUT, 0};
      int n = poll(&p, 1, static_cast<int>(absl::ToInt64Milliseconds(timeout)));
      int err = 0;
      socklen_t len = sizeof(err);
      getsockopt(fd, SOL_SOCKET, SO_ERROR, &err, &len);
      if (n == 0) {
        status = absl::DeadlineExceededError(absl::StrCat(what, ": connect timed out"));
      } else if (err != 0) {
        status = ErrnoStatus(what, "connect", err);
      }
    }
    if (status.ok() && bytes > 0) {
      int flags = fcntl(fd, F_GETFL);
      fcntl(fd, F_SETFL, flags & ~O_NONBLOCK);
      timeval tv{10, 0};  // never block forever on a silent peer
      setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof(tv));
      std::string buf(64 * 1024, '\0');
      size_t left = bytes;
      while (left > 0 && status.ok()) {
        ssize_t w = send(fd, buf.data(), std::min(left, buf.size()), MSG_NOSIGNAL);
        if (w <= 0)
          status = ErrnoStatus(what, "send");
        else
          left -= w;
      }
    }
    close(fd);
    return status;
  });
}

// Drains and closes everything queued on `l` (so a sender's bytes are read).
inline void DrainAccepted(const Listener& l, absl::Duration timeout) {
  const absl::Time deadline = absl::Now() + timeout;
  int conn = -1;
  while (absl::Now() < deadline) {
    if (conn < 0) {
      pollfd p{l.fd(), POLLIN, 0};
      if (poll(&p, 1, 50) <= 0) continue;
      conn = accept4(l.fd(), nullptr, nullptr, SOCK_CLOEXEC);
      continue;
    }
    char buf[65536];
    pollfd p{conn, POLLIN, 0};
    if (poll(&p, 1, 50) <= 0) continue;
    ssize_t r = read(conn, buf, sizeof(buf));
    if (r <= 0) {
      close(conn);
      return;
    }
  }
  if (conn >= 0) close(conn);
}

// Connect retried until `deadline` (ARP may need a moment after a change).
inline absl::Status EventuallyConnects(const std::string& ns, const std::string& address, int port,
                                       absl::Duration within = absl::Seconds(5)) {
  const absl::Time deadline = absl::Now() + within;
  absl::Status last;
  do {
    last = TcpConnect(ns, address, port, absl::Seconds(1));
    if (last.ok()) return last;
    absl::SleepFor(absl::Milliseconds(100));
  } while (absl::Now() < deadline);
  return last;
}

}  // namespace mixnet::testing
