// TCP transport device: one local NIC, its listening socket, and the epoll
// progress thread ("mx-tcp-<nic>") that runs every socket of every connection
// made through this device. Connections must be destroyed before their device.
// After handling events the thread polls epoll (yielding between polls) for
// DeviceOptions::progress_spin before it sleeps again, so the messages of one
// collective do not each pay a wake-up. When a yield shows that another busy
// thread shares the CPU, polling stops for a while (see ProgressLoop).
//
// The same class is the intra-host "local" transport (CreateLocal, progress
// thread "mx-local"): it listens on an abstract Unix socket instead of a NIC,
// and its connections pull large messages straight out of the sender's
// memory (see tcp_connection.h), so peers on one host pay one copy instead of
// two copies plus the TCP stack.
#pragma once

#include <atomic>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "absl/synchronization/mutex.h"
#include "runtime/transport/tcp/socket_util.h"
#include "runtime/transport/transport.h"

namespace mixnet::transport::tcp {

// Something with a file descriptor in the device's epoll set. Runs on the
// progress thread only.
class EpollHandler {
 public:
  virtual ~EpollHandler() = default;
  virtual void OnEvents(uint32_t events) = 0;
};

// First bytes on every data socket, from the dialling side.
struct Hello {
  uint32_t magic;
  uint32_t version;
  uint64_t connection_id;
  uint32_t index;  // socket index within the connection
  uint32_t count;  // sockets in the connection
};
inline constexpr uint32_t kHelloMagic = 0x4D58544Eu;  // "MXTN"
inline constexpr uint32_t kHelloVersion = 1;

class TcpDevice : public Device {
 public:
  static absl::StatusOr<std::unique_ptr<TcpDevice>> Create(const DeviceOptions& options);
  // The intra-host device: Unix sockets, one per connection; ifname and
  // bind_address are ignored.
  static absl::StatusOr<std::unique_ptr<TcpDevice>> CreateLocal(const DeviceOptions& options);
  ~TcpDevice() override;

  std::string kind() const override { return local_ ? "local" : "tcp"; }
  std::string name() const override { return name_; }
  std::string address() const override { return listen_address_; }
  bool local() const { return local_; }
  absl::StatusOr<std::unique_ptr<Connection>> Connect(const ConnectOptions& options) override;
  absl::Status PinProgressThread(int cpu) override;
  absl::StatusOr<std::vector<int>> ProgressThreadCpus() override;

  // For connections: epoll registration (thread-safe) and running `fn` on the
  // progress thread, waiting for it (inline when already there).
  absl::Status AddFd(int fd, uint32_t events, EpollHandler* handler);
  void ModifyFd(int fd, uint32_t events, EpollHandler* handler);
  void RemoveFd(int fd);
  void RunOnProgressThread(const std::function<void()>& fn);
  bool OnProgressThread() const;

  const DeviceOptions& options() const { return options_; }
  // Times the progress thread stopped polling because its CPU was busy.
  uint64_t polling_backoffs() const { return polling_backoffs_.load(); }

 private:
  class Listener;
  class Handshake;
  TcpDevice(DeviceOptions options, std::string name, bool local, int listen_fd, int epoll_fd,
            int event_fd, std::string listen_address);
  static absl::StatusOr<std::unique_ptr<TcpDevice>> Start(DeviceOptions options, std::string name,
                                                          bool local, int listen_fd,
                                                          std::string listen_address);
  void ProgressLoop();
  void AcceptAll();
  void OnHello(Handshake* hs, const Hello& hello);  // takes the socket
  void DropHandshake(Handshake* hs);

  const DeviceOptions options_;
  const std::string name_;
  const bool local_;
  const int listen_fd_;
  const int epoll_fd_;
  const int event_fd_;
  const std::string listen_address_;
  std::unique_ptr<Listener> listener_;
  std::thread thread_;
  std::thread::id thread_id_;
  std::atomic<bool> stop_{false};
  std::atomic<uint64_t> polling_backoffs_{0};

  absl::Mutex mu_;
  std::vector<std::function<void()>> commands_ ABSL_GUARDED_BY(mu_);
  // Accepted sockets whose hello arrived, by connection id, then socket index.
  std::map<uint64_t, std::map<uint32_t, int>> accepted_ ABSL_GUARDED_BY(mu_);
  std::map<uint64_t, uint32_t> expected_count_ ABSL_GUARDED_BY(mu_);
  // Handshakes in progress (progress thread only).
  std::map<Handshake*, std::unique_ptr<Handshake>> handshakes_;
};

}  // namespace mixnet::transport::tcp
