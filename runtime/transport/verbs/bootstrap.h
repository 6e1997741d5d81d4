// Out-of-band TCP bootstrap of the verbs transport: the device's listening
// socket, dialing with a deadline, deadline-bounded blocking I/O, matching
// accepted sockets to connection ids, and picking the IPv4 address to
// advertise. Thread-safe; runs on the threads that call Device::Connect.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"

namespace mixnet::transport::verbs {

// Owns a file descriptor.
class Fd {
 public:
  Fd() = default;
  explicit Fd(int fd) : fd_(fd) {}
  Fd(Fd&& o) noexcept : fd_(o.release()) {}
  Fd& operator=(Fd&& o) noexcept;
  Fd(const Fd&) = delete;
  Fd& operator=(const Fd&) = delete;
  ~Fd() { reset(); }
  int get() const { return fd_; }
  int release() {
    int fd = fd_;
    fd_ = -1;
    return fd;
  }
  void reset();

 private:
  int fd_ = -1;
};

// IPv4 address of interface `ifname` (NotFound when it has none).
absl::StatusOr<std::string> InterfaceIpv4(const std::string& ifname);
// The interface that holds IPv4 address `ip` (NotFound when none does).
absl::StatusOr<std::string> InterfaceWithIpv4(const std::string& ip);
// First IPv4 address of an up, non-loopback interface; "127.0.0.1" if none.
std::string DefaultIpv4();

// Full write / read on a blocking or non-blocking socket, bounded by `deadline`.
// `what` names the peer for messages.
absl::Status WriteFully(int fd, const void* buf, size_t len, absl::Time deadline,
                        const std::string& what);
absl::Status ReadFully(int fd, void* buf, size_t len, absl::Time deadline, const std::string& what);

// Connects to ip:port from `bind_ip` (may be empty), retrying refusals until
// `deadline`. Returns a non-blocking socket with TCP_NODELAY and keepalive.
absl::StatusOr<Fd> Dial(const std::string& ip, uint16_t port, const std::string& bind_ip,
                        absl::Time deadline, const std::string& what);

// Keepalive probes so a silently dead host is noticed (about 20 s).
void ConfigureBootstrapSocket(int fd);

// The device's bootstrap listener. Accept() runs on Connect callers: one of
// them at a time accepts and reads the dialer's handshake, parks sockets meant
// for other connection ids, and hands each waiter its own.
class BootstrapListener {
 public:
  // Listens on bind_ip:0 (all addresses when empty).
  static absl::StatusOr<std::unique_ptr<BootstrapListener>> Create(const std::string& bind_ip);
  ~BootstrapListener();

  uint16_t port() const { return port_; }

  struct Accepted {
    Fd fd;
    std::string hello;  // the dialer's first kHandshakeBytes bytes
  };
  // Waits until a dial whose handshake names `connection_id` arrives.
  absl::StatusOr<Accepted> Accept(uint64_t connection_id, absl::Time deadline,
                                  const std::string& what);

 private:
  BootstrapListener(Fd fd, uint16_t port) : fd_(std::move(fd)), port_(port) {}
  // Accepts at most one socket and reads its handshake (bounded wait).
  void AcceptOne(absl::Time deadline);

  const Fd fd_;
  const uint16_t port_;
  absl::Mutex mu_;
  bool accepting_ ABSL_GUARDED_BY(mu_) = false;
  std::map<uint64_t, Accepted> parked_ ABSL_GUARDED_BY(mu_);
};

}  // namespace mixnet::transport::verbs
