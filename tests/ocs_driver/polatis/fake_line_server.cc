// FakeLineServer implementation (see fake_line_server.h): accept loop,
// per-connection line loop, transport fault injection.
#include "tests/ocs_driver/polatis/fake_line_server.h"

#include <netinet/in.h>
#include <poll.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <utility>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/strip.h"

namespace mixnet::ocs::testing {

FakeLineServer::FakeLineServer(Handler handler) : handler_(std::move(handler)) {}

FakeLineServer::~FakeLineServer() { Stop(); }

absl::Status FakeLineServer::Start() {
  listen_fd_ = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (listen_fd_ < 0) return absl::InternalError(absl::StrCat("socket: ", std::strerror(errno)));
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  addr.sin_port = 0;
  socklen_t len = sizeof(addr);
  if (::bind(listen_fd_, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) != 0 ||
      ::listen(listen_fd_, 8) != 0 ||
      ::getsockname(listen_fd_, reinterpret_cast<sockaddr*>(&addr), &len) != 0) {
    return absl::InternalError(absl::StrCat("bind/listen: ", std::strerror(errno)));
  }
  port_ = ntohs(addr.sin_port);
  wake_fd_ = ::eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
  if (wake_fd_ < 0) return absl::InternalError(absl::StrCat("eventfd: ", std::strerror(errno)));
  thread_ = std::thread([this] { Run(); });
  return absl::OkStatus();
}

void FakeLineServer::Stop() {
  {
    absl::MutexLock l(&mu_);
    stop_ = true;
  }
  if (wake_fd_ >= 0) {
    uint64_t one = 1;
    [[maybe_unused]] ssize_t n = ::write(wake_fd_, &one, sizeof(one));
  }
  if (thread_.joinable()) thread_.join();
  if (listen_fd_ >= 0) ::close(listen_fd_);
  if (wake_fd_ >= 0) ::close(wake_fd_);
  listen_fd_ = wake_fd_ = -1;
}

void FakeLineServer::Run() {
  std::vector<std::thread> connections;
  for (;;) {
    pollfd fds[2] = {{wake_fd_, POLLIN, 0}, {listen_fd_, POLLIN, 0}};
    int n = ::poll(fds, 2, 1000);
    {
      absl::MutexLock l(&mu_);
      if (stop_) break;
    }
    if (n <= 0 || !(fds[1].revents & POLLIN)) continue;
    int fd = ::accept4(listen_fd_, nullptr, nullptr, SOCK_CLOEXEC);
    if (fd < 0) continue;
    int number;
    {
      absl::MutexLock l(&mu_);
      number = ++accepted_;
    }
    connections.emplace_back([this, fd, number] { Serve(fd, number); });
  }
  for (auto& t : connections) t.join();
}

void FakeLineServer::Serve(int fd, int connection) {
  std::string buffer;
  bool keep = true;
  while (keep) {
    // wake_fd_ is never read, so once Stop() signals it every poll returns.
    pollfd fds[2] = {{wake_fd_, POLLIN, 0}, {fd, POLLIN, 0}};
    int n = ::poll(fds, 2, 1000);
    if (fds[0].revents & POLLIN) break;
    if (n <= 0) continue;
    char buf[4096];
    ssize_t r = ::recv(fd, buf, sizeof(buf), 0);
    if (r <= 0) break;
    buffer.append(buf, static_cast<size_t>(r));
    size_t nl;
    while (keep && (nl = buffer.find('\n')) != std::string::npos) {
      std::string line = buffer.substr(0, nl);
      buffer.erase(0, nl + 1);
      line = std::string(absl::StripAsciiWhitespace(line));
      std::string lower = absl::AsciiStrToLower(line);
      bool drop = false;
      bool garbage = false;
      Reply reply;
      absl::Duration delay;
      {
        absl::MutexLock l(&mu_);
        received_.push_back({line, absl::Now()});
        if (drop_after_ > 0 && --drop_after_ == 0) drop = true;
        if (reply_delay_prefix_.empty() || absl::StartsWith(lower, reply_delay_prefix_)) {
          delay = reply_delay_;
        }
        if (!garbage_prefix_.empty() && absl::StartsWith(lower, garbage_prefix_) &&
            garbage_skip_-- <= 0) {
          garbage = true;
          reply = {true, garbage_reply_ + "\n"};
        }
      }
      if (!garbage) reply = handler_(connection, line);
      if (drop) {
        keep = false;  // handled; the connection goes away before the reply
        break;
      }
      if (reply.answer) {
        SleepUnlessStopped(delay);
        [[maybe_unused]] ssize_t w = ::send(fd, reply.text.data(), reply.text.size(), MSG_NOSIGNAL);
      }
    }
  }
  ::close(fd);
}

void FakeLineServer::SleepUnlessStopped(absl::Duration d) {
  if (d <= absl::ZeroDuration()) return;
  absl::MutexLock l(&mu_);
  mu_.AwaitWithTimeout(absl::Condition(&stop_), d);
}

void FakeLineServer::SetReplyDelay(absl::Duration delay, std::string only_prefix) {
  absl::MutexLock l(&mu_);
  reply_delay_ = delay;
  reply_delay_prefix_ = absl::AsciiStrToLower(only_prefix);
}

void FakeLineServer::SetGarbageReply(std::string prefix, std::string reply, int skip) {
  absl::MutexLock l(&mu_);
  garbage_skip_ = skip;
  garbage_prefix_ = absl::AsciiStrToLower(prefix);
  garbage_reply_ = std::move(reply);
}

void FakeLineServer::DropAfterLines(int k) {
  absl::MutexLock l(&mu_);
  drop_after_ = k;
}

std::vector<FakeLineServer::Received> FakeLineServer::received() const {
  absl::MutexLock l(&mu_);
  return received_;
}

int FakeLineServer::accepted() const {
  absl::MutexLock l(&mu_);
  return accepted_;
}

}  // namespace mixnet::ocs::testing
