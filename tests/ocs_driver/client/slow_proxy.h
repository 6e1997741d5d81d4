// A TCP proxy on 127.0.0.1 for tests: forwards every connection to a target
// port, holding the target's first bytes back for a while, as a slow or
// distant server would (its handshake reply comes late). One accept thread;
// two forwarding threads per connection. Everything stops in the destructor.
#pragma once

#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <memory>
#include <thread>
#include <vector>

#include "absl/synchronization/mutex.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"

namespace mixnet::testing {

class SlowProxy {
 public:
  // Listens on an ephemeral port; port() is 0 when that failed.
  SlowProxy(int target_port, absl::Duration first_reply_delay)
      : target_port_(target_port), delay_(first_reply_delay) {
    listen_fd_ = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    sockaddr_in a = Loopback(0);
    socklen_t len = sizeof(a);
    if (listen_fd_ < 0 || bind(listen_fd_, reinterpret_cast<sockaddr*>(&a), sizeof(a)) != 0 ||
        listen(listen_fd_, 16) != 0 ||
        getsockname(listen_fd_, reinterpret_cast<sockaddr*>(&a), &len) != 0) {
      return;
    }
    port_ = ntohs(a.sin_port);
    accept_thread_ = std::thread([this] { AcceptLoop(); });
  }

  ~SlowProxy() {
    stop_ = true;
    if (accept_thread_.joinable()) accept_thread_.join();
    {
      absl::MutexLock lock(&mu_);
      for (int fd : fds_) shutdown(fd, SHUT_RDWR);
    }
    for (std::thread& t : threads_) t.join();
    for (int fd : fds_) close(fd);
    if (listen_fd_ >= 0) close(listen_fd_);
  }

  int port() const { return port_; }
  int connections() const { return connections_.load(); }

 private:
  static sockaddr_in Loopback(int port) {
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    a.sin_port = htons(static_cast<uint16_t>(port));
    return a;
  }

  void AcceptLoop() {
    while (!stop_) {
      pollfd p{listen_fd_, POLLIN, 0};
      if (poll(&p, 1, 20) <= 0) continue;
      int client = accept4(listen_fd_, nullptr, nullptr, SOCK_CLOEXEC);
      if (client < 0) continue;
      int server = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
      sockaddr_in t = Loopback(target_port_);
      if (server < 0 || connect(server, reinterpret_cast<sockaddr*>(&t), sizeof(t)) != 0) {
        close(client);
        if (server >= 0) close(server);
        continue;
      }
      ++connections_;
      absl::MutexLock lock(&mu_);
      fds_.push_back(client);
      fds_.push_back(server);
      threads_.emplace_back([this, client, server] { Forward(client, server, false); });
      threads_.emplace_back([this, client, server] { Forward(server, client, true); });
    }
  }

  // Copies `from` to `to` until either end closes; the first chunk from the
  // target waits `delay_`.
  void Forward(int from, int to, bool delay_first) {
    char buf[16384];
    bool first = true;
    while (true) {
      ssize_t n = recv(from, buf, sizeof(buf), 0);
      if (n <= 0) break;
      if (first && delay_first) absl::SleepFor(delay_);
      first = false;
      if (send(to, buf, static_cast<size_t>(n), MSG_NOSIGNAL) != n) break;
    }
    shutdown(to, SHUT_WR);
  }

  const int target_port_;
  const absl::Duration delay_;
  int listen_fd_ = -1;
  int port_ = 0;
  std::atomic<bool> stop_{false};
  std::atomic<int> connections_{0};
  std::thread accept_thread_;
  absl::Mutex mu_;
  std::vector<int> fds_;              // under mu_ while the accept thread runs
  std::vector<std::thread> threads_;  // likewise
};

}  // namespace mixnet::testing
