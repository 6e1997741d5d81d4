// LineClient implementation: lazy non-blocking connect with a timeout, paced
// line writes, deadline-bounded line reads (see line_client.h). Runs on the
// calling (backend) thread.
#include "ocs_driver/polatis/line_client.h"

#include <fcntl.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <utility>

#include "absl/strings/escaping.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/strip.h"
#include "runtime/common/log.h"
#include "runtime/common/status.h"

namespace mixnet::ocs {
namespace {

// Milliseconds left until `deadline` for poll(), at least 0, capped.
int PollMs(absl::Time deadline) {
  absl::Duration left = deadline - absl::Now();
  if (left <= absl::ZeroDuration()) return 0;
  int64_t ms = absl::ToInt64Milliseconds(absl::Ceil(left, absl::Milliseconds(1)));
  return static_cast<int>(std::min<int64_t>(ms, 60'000));
}

std::string Shown(absl::string_view command) {
  std::string s(command.substr(0, 120));
  if (command.size() > 120) absl::StrAppend(&s, "...");
  return absl::CEscape(s);
}

}  // namespace

absl::Status ParseHostPort(absl::string_view device, int default_port, std::string& host,
                           int& port) {
  auto bad = [&](absl::string_view why) {
    return absl::InvalidArgumentError(
        absl::StrCat("device address '", device, "': ", why, " (expected HOST[:PORT])"));
  };
  absl::string_view port_text;
  if (absl::ConsumePrefix(&device, "[")) {
    size_t close = device.find(']');
    if (close == absl::string_view::npos) return bad("no closing ']'");
    host = std::string(device.substr(0, close));
    absl::string_view rest = device.substr(close + 1);
    if (!rest.empty() && !absl::ConsumePrefix(&rest, ":")) return bad("junk after ']'");
    port_text = rest;
  } else if (std::count(device.begin(), device.end(), ':') == 1) {
    size_t colon = device.find(':');
    host = std::string(device.substr(0, colon));
    port_text = device.substr(colon + 1);
    if (port_text.empty()) return bad("empty port");
  } else {
    host = std::string(device);  // a name, an IPv4 address or a bare IPv6 address
  }
  if (host.empty()) return bad("empty host");
  port = default_port;
  if (!port_text.empty() && (!absl::SimpleAtoi(port_text, &port) || port < 1 || port > 65535)) {
    return bad("bad port");
  }
  return absl::OkStatus();
}

LineClient::LineClient(LineClientOptions options)
    : options_(std::move(options)), peer_(absl::StrCat(options_.host, ":", options_.port)) {}

LineClient::~LineClient() { Close(); }

void LineClient::Close() {
  if (fd_ >= 0) {
    ::close(fd_);
    fd_ = -1;
  }
  buffer_.clear();
}

absl::Status LineClient::Fail(absl::Status s) {
  Close();
  return s;
}

absl::Status LineClient::EnsureConnected() {
  if (fd_ >= 0) return absl::OkStatus();
  if (!may_connect_) {
    return absl::UnavailableError(absl::StrCat(
        "switch ", peer_,
        ": connection lost during this operation (not reconnecting until the next call)"));
  }
  return Connect();
}

absl::Status LineClient::Connect() {
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  addrinfo* res = nullptr;
  std::string port = std::to_string(options_.port);
  int rc = ::getaddrinfo(options_.host.c_str(), port.c_str(), &hints, &res);
  if (rc != 0) {
    return absl::UnavailableError(
        absl::StrCat("switch ", peer_, ": cannot resolve host: ", ::gai_strerror(rc)));
  }
  absl::Time deadline = absl::Now() + options_.connect_timeout;
  absl::Status last = absl::UnavailableError(absl::StrCat("switch ", peer_, ": no address"));
  for (addrinfo* ai = res; ai != nullptr; ai = ai->ai_next) {
    int fd =
        ::socket(ai->ai_family, ai->ai_socktype | SOCK_NONBLOCK | SOCK_CLOEXEC, ai->ai_protocol);
    if (fd < 0) {
      last = ErrnoStatus(absl::StrCat("switch ", peer_), "socket");
      continue;
    }
    if (::connect(fd, ai->ai_addr, ai->ai_addrlen) != 0 && errno != EINPROGRESS) {
      last = ErrnoStatus(absl::StrCat("switch ", peer_), "connect");
      ::close(fd);
      continue;
    }
    pollfd p{fd, POLLOUT, 0};
    int n;
    do {
      n = ::poll(&p, 1, PollMs(deadline));
    } while (n < 0 && errno == EINTR);
    if (n == 0) {
      ::close(fd);
      last =
          absl::DeadlineExceededError(absl::StrCat("switch ", peer_, ": connect timed out after ",
                                                   absl::FormatDuration(options_.connect_timeout)));
      continue;
    }
    int err = 0;
    socklen_t len = sizeof(err);
    if (n < 0) {
      err = errno;
    } else if (::getsockopt(fd, SOL_SOCKET, SO_ERROR, &err, &len) != 0) {
      err = errno;
    }
    if (err != 0) {
      last = ErrnoStatus(absl::StrCat("switch ", peer_), "connect", err);
      ::close(fd);
      continue;
    }
    int one = 1;
    ::setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
    fd_ = fd;
    buffer_.clear();
    ++generation_;
    ::freeaddrinfo(res);
    log::Debug("switch {}: connected", peer_);
    return absl::OkStatus();
  }
  ::freeaddrinfo(res);
  return last;
}

void LineClient::DiscardUnsolicited() {
  if (fd_ < 0) return;
  char buf[4096];
  for (;;) {
    ssize_t n = ::recv(fd_, buf, sizeof(buf), MSG_DONTWAIT);
    if (n > 0) {
      buffer_.append(buf, static_cast<size_t>(n));
      continue;
    }
    if (n == 0) {
      // Peer closed while idle: the next write or read reports it; drop now so
      // the command goes to a fresh connection instead.
      log::Warn("switch {}: connection closed by the switch while idle; reconnecting", peer_);
      Close();
      return;
    }
    if (errno == EINTR) continue;
    if (errno != EAGAIN && errno != EWOULDBLOCK) {
      log::Warn("switch {}: connection lost while idle (errno {}); reconnecting", peer_, errno);
      Close();
      return;
    }
    break;
  }
  if (!buffer_.empty()) {
    log::Warn("switch {}: discarding {} unsolicited bytes: '{}'", peer_, buffer_.size(),
              Shown(buffer_));
    buffer_.clear();
  }
}

absl::Status LineClient::WriteAll(absl::string_view command, absl::string_view bytes) {
  absl::Time deadline = absl::Now() + options_.reply_timeout;
  size_t off = 0;
  while (off < bytes.size()) {
    ssize_t n = ::send(fd_, bytes.data() + off, bytes.size() - off, MSG_NOSIGNAL);
    if (n > 0) {
      off += static_cast<size_t>(n);
      continue;
    }
    if (n < 0 && errno == EINTR) continue;
    if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) {
      pollfd p{fd_, POLLOUT, 0};
      int r = ::poll(&p, 1, PollMs(deadline));
      if (r == 0) {
        return Fail(absl::DeadlineExceededError(
            absl::StrCat("switch ", peer_, ": sending '", Shown(command), "' timed out after ",
                         absl::FormatDuration(options_.reply_timeout))));
      }
      continue;
    }
    return Fail(
        ErrnoStatus(absl::StrCat("switch ", peer_, " command '", Shown(command), "'"), "send"));
  }
  return absl::OkStatus();
}

absl::Status LineClient::Send(absl::string_view command, absl::string_view shown) {
  if (fd_ >= 0) DiscardUnsolicited();  // may notice (and close) a dead connection
  RETURN_IF_ERROR(EnsureConnected());
  if (options_.command_pacing > absl::ZeroDuration() &&
      !(options_.pace_only_after_unanswered && last_answered_)) {
    absl::Time earliest = last_command_ + options_.command_pacing;
    absl::Time now = absl::Now();
    if (now < earliest) absl::SleepFor(earliest - now);
  }
  last_command_ = absl::Now();
  std::string line = absl::StrCat(command, options_.line_ending);
  last_answered_ = false;
  RETURN_IF_ERROR(WriteAll(shown.empty() ? command : shown, line));
  may_connect_ = false;
  ++commands_sent_;
  return absl::OkStatus();
}

absl::StatusOr<std::string> LineClient::ReadLine(absl::string_view command,
                                                 absl::Duration timeout) {
  if (fd_ < 0) {
    return absl::UnavailableError(
        absl::StrCat("switch ", peer_, ": not connected (reply to '", Shown(command), "')"));
  }
  absl::Time deadline = absl::Now() + timeout;
  for (;;) {
    size_t nl = buffer_.find('\n');
    if (nl != std::string::npos && nl <= options_.max_line_bytes) {
      std::string line = buffer_.substr(0, nl);
      buffer_.erase(0, nl + 1);
      while (!line.empty() && (line.back() == '\r' || line.back() == '\0')) line.pop_back();
      last_answered_ = true;
      return line;
    }
    if (nl != std::string::npos || buffer_.size() > options_.max_line_bytes) {
      return Fail(
          absl::InternalError(absl::StrCat("switch ", peer_, ": reply to '", Shown(command),
                                           "' exceeds ", options_.max_line_bytes, " bytes")));
    }
    pollfd p{fd_, POLLIN, 0};
    int r = ::poll(&p, 1, PollMs(deadline));
    if (r < 0) {
      if (errno == EINTR) continue;
      return Fail(
          ErrnoStatus(absl::StrCat("switch ", peer_, " reply to '", Shown(command), "'"), "poll"));
    }
    if (r == 0) {
      return Fail(absl::DeadlineExceededError(absl::StrCat(
          "switch ", peer_, ": no reply to '", Shown(command), "' within ",
          absl::FormatDuration(timeout), " (connection closed; next call reconnects)")));
    }
    char buf[4096];
    ssize_t n = ::recv(fd_, buf, sizeof(buf), 0);
    if (n > 0) {
      buffer_.append(buf, static_cast<size_t>(n));
      continue;
    }
    if (n == 0) {
      return Fail(absl::UnavailableError(absl::StrCat(
          "switch ", peer_, ": connection closed by the switch while waiting for the reply to '",
          Shown(command), "'")));
    }
    if (errno == EINTR || errno == EAGAIN) continue;
    return Fail(
        ErrnoStatus(absl::StrCat("switch ", peer_, " reply to '", Shown(command), "'"), "recv"));
  }
}

absl::StatusOr<std::string> LineClient::Query(absl::string_view command, absl::Duration timeout) {
  if (timeout <= absl::ZeroDuration() || timeout == absl::InfiniteDuration()) {
    timeout = options_.reply_timeout;
  }
  RETURN_IF_ERROR(Send(command));
  return ReadLine(command, timeout);
}

}  // namespace mixnet::ocs
