// TCP device: listener, handshakes and the epoll progress thread (see tcp_device.h).
#include "runtime/transport/tcp/tcp_device.h"

#include <netinet/in.h>
#include <sched.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cstring>

#include "absl/strings/str_cat.h"
#include "absl/synchronization/notification.h"
#include "runtime/common/cpu_affinity.h"
#include "runtime/common/log.h"
#include "runtime/common/status.h"
#include "runtime/transport/tcp/tcp_connection.h"

namespace mixnet::transport::tcp {

class TcpDevice::Listener : public EpollHandler {
 public:
  explicit Listener(TcpDevice* d) : d_(d) {}
  void OnEvents(uint32_t) override { d_->AcceptAll(); }

 private:
  TcpDevice* d_;
};

// An accepted socket waiting for its Hello.
class TcpDevice::Handshake : public EpollHandler {
 public:
  Handshake(TcpDevice* d, int fd) : d_(d), fd(fd), started(absl::Now()) {}
  void OnEvents(uint32_t events) override {
    while (got < sizeof(hello)) {
      ssize_t n = recv(fd, reinterpret_cast<char*>(&hello) + got, sizeof(hello) - got, 0);
      if (n > 0) {
        got += static_cast<size_t>(n);
        continue;
      }
      if (n < 0 && (errno == EAGAIN || errno == EINTR)) return;
      d_->DropHandshake(this);  // EOF or error before the hello: a stray dial
      return;
    }
    d_->OnHello(this, hello);
  }
  TcpDevice* d_;
  int fd;
  absl::Time started;
  Hello hello{};
  size_t got = 0;
};

absl::StatusOr<std::unique_ptr<TcpDevice>> TcpDevice::Create(const DeviceOptions& in) {
  DeviceOptions options = in;
  std::string ip = options.bind_address;
  std::string ifname = options.ifname;
  if (ip.empty()) {
    if (ifname.empty()) ifname = "lo";
    ASSIGN_OR_RETURN(ip, InterfaceAddress(ifname));
  } else if (ifname.empty()) {
    absl::StatusOr<std::string> found = InterfaceOfAddress(ip);
    if (found.ok()) ifname = *found;
  }
  options.ifname = ifname;
  options.bind_address = ip;
  if (options.sockets_per_connection < 1) options.sockets_per_connection = 1;
  ASSIGN_OR_RETURN(int lfd, Listen(ip));
  absl::StatusOr<SocketAddress> local = LocalAddress(lfd);
  if (!local.ok()) {
    close(lfd);
    return local.status();
  }
  std::string name = absl::StrCat("tcp:", ifname.empty() ? "?" : ifname, "(", ip, ")");
  return Start(options, std::move(name), /*local=*/false, lfd, local->ToString());
}

absl::StatusOr<std::unique_ptr<TcpDevice>> TcpDevice::CreateLocal(const DeviceOptions& in) {
  DeviceOptions options = in;
  options.ifname = "local";
  options.bind_address.clear();
  options.sockets_per_connection = 1;  // no striping: large messages do not cross the socket
  options.stall_timeout = absl::ZeroDuration();
  ASSIGN_OR_RETURN(auto listening, ListenLocal());
  return Start(options, absl::StrCat("local(", listening.second, ")"), /*local=*/true,
               listening.first, listening.second);
}

absl::StatusOr<std::unique_ptr<TcpDevice>> TcpDevice::Start(DeviceOptions options, std::string name,
                                                            bool local, int lfd,
                                                            std::string listen_address) {
  int ep = epoll_create1(EPOLL_CLOEXEC);
  int ev = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
  if (ep < 0 || ev < 0) {
    absl::Status s = ErrnoStatus(name, ep < 0 ? "epoll_create1" : "eventfd");
    close(lfd);
    if (ep >= 0) close(ep);
    if (ev >= 0) close(ev);
    return s;
  }
  std::unique_ptr<TcpDevice> d(
      new TcpDevice(std::move(options), std::move(name), local, lfd, ep, ev, listen_address));
  epoll_event e{};
  e.events = EPOLLIN;
  e.data.ptr = nullptr;  // the eventfd
  epoll_ctl(ep, EPOLL_CTL_ADD, ev, &e);
  d->listener_ = std::make_unique<Listener>(d.get());
  RETURN_IF_ERROR(d->AddFd(lfd, EPOLLIN, d->listener_.get()));
  d->thread_ = std::thread([dev = d.get()] { dev->ProgressLoop(); });
  d->thread_id_ = d->thread_.get_id();
  return d;
}

TcpDevice::TcpDevice(DeviceOptions options, std::string name, bool local, int listen_fd,
                     int epoll_fd, int event_fd, std::string listen_address)
    : options_(std::move(options)),
      name_(std::move(name)),
      local_(local),
      listen_fd_(listen_fd),
      epoll_fd_(epoll_fd),
      event_fd_(event_fd),
      listen_address_(std::move(listen_address)) {}

TcpDevice::~TcpDevice() {
  stop_.store(true);
  uint64_t one = 1;
  (void)!write(event_fd_, &one, sizeof(one));
  if (thread_.joinable()) thread_.join();
  for (auto& [hs, owned] : handshakes_) close(hs->fd);
  {
    absl::MutexLock lock(&mu_);
    for (auto& [id, fds] : accepted_) {
      for (auto& [idx, fd] : fds) close(fd);
    }
  }
  close(listen_fd_);
  close(epoll_fd_);
  close(event_fd_);
}

absl::Status TcpDevice::AddFd(int fd, uint32_t events, EpollHandler* handler) {
  epoll_event e{};
  e.events = events;
  e.data.ptr = handler;
  if (epoll_ctl(epoll_fd_, EPOLL_CTL_ADD, fd, &e) != 0) {
    return ErrnoStatus(name_, "epoll_ctl(ADD)");
  }
  return absl::OkStatus();
}

void TcpDevice::ModifyFd(int fd, uint32_t events, EpollHandler* handler) {
  epoll_event e{};
  e.events = events;
  e.data.ptr = handler;
  if (epoll_ctl(epoll_fd_, EPOLL_CTL_MOD, fd, &e) != 0) {
    log::Warn("{}: epoll_ctl(MOD) fd {}: {}", name_, fd, ErrnoText(errno));
  }
}

void TcpDevice::RemoveFd(int fd) { epoll_ctl(epoll_fd_, EPOLL_CTL_DEL, fd, nullptr); }

absl::Status TcpDevice::PinProgressThread(int cpu) {
  return PinThread(thread_, cpu, absl::StrCat("the progress thread of ", name_));
}

absl::StatusOr<std::vector<int>> TcpDevice::ProgressThreadCpus() { return ThreadCpus(thread_); }

bool TcpDevice::OnProgressThread() const { return std::this_thread::get_id() == thread_id_; }

void TcpDevice::RunOnProgressThread(const std::function<void()>& fn) {
  if (OnProgressThread() || stop_.load()) {
    fn();
    return;
  }
  absl::Notification done;
  {
    absl::MutexLock lock(&mu_);
    commands_.push_back([&] {
      fn();
      done.Notify();
    });
  }
  uint64_t one = 1;
  (void)!write(event_fd_, &one, sizeof(one));
  done.WaitForNotification();
}

namespace {
// See ProgressLoop: a yield this long gave the CPU away for more than a
// scheduler time slice (1.5-4 ms here; a polite poller yields back within
// microseconds, a 1 MiB pull takes about 0.15 ms), and polling then stays off
// this long. Measured on 2 vCPUs with two compile jobs running, 4 ranks: the
// 64 KiB all-to-all took 1.9-2.2 ms instead of 6.6 ms, 1 MiB 4.5 ms instead
// of 7.8-8.5; idle, 1 MiB was unchanged (14 alternated pairs).
constexpr absl::Duration kContendedYield = absl::Milliseconds(3);
constexpr absl::Duration kPollingBackoff = absl::Milliseconds(50);
}  // namespace

void TcpDevice::ProgressLoop() {
  SetThreadName(local_ ? std::string("mx-local") : absl::StrCat("mx-tcp-", options_.ifname));
  constexpr int kMaxEvents = 64;
  epoll_event events[kMaxEvents];
  const absl::Duration spin = options_.progress_spin;
  absl::Time last_event = absl::InfinitePast();
  absl::Time no_polling_until = absl::InfinitePast();
  while (!stop_.load(std::memory_order_relaxed)) {
    // Poll while events came recently (see DeviceOptions::progress_spin),
    // unless the CPU was found contended.
    const absl::Time now = absl::Now();
    const bool polling =
        spin > absl::ZeroDuration() && now - last_event < spin && now >= no_polling_until;
    int n = epoll_wait(epoll_fd_, events, kMaxEvents, polling ? 0 : 1000);
    if (n == 0 && polling) {
      sched_yield();
      // A yield that gave the CPU away for a whole time slice means another
      // busy thread (not a polite poller) shares it. An event then waits,
      // this thread being runnable, for the other's slice to end
      // (milliseconds), where a sleeping thread would be woken and run at
      // once: sleep on events for a while, then poll again.
      const absl::Time after = absl::Now();
      if (after - now > kContendedYield) {
        no_polling_until = after + kPollingBackoff;
        polling_backoffs_.fetch_add(1, std::memory_order_relaxed);
        log::Debug("{}: CPU busy with another thread; polling off for {}", name_,
                   absl::FormatDuration(kPollingBackoff));
      }
      continue;
    }
    if (n > 0 && spin > absl::ZeroDuration()) last_event = absl::Now();
    if (n < 0) {
      if (errno == EINTR) continue;
      log::Error("{}: epoll_wait failed: {}", name_, ErrnoText(errno));
      break;
    }
    bool wake = false;
    for (int i = 0; i < n; ++i) {
      auto* h = static_cast<EpollHandler*>(events[i].data.ptr);
      if (h == nullptr) {
        wake = true;
        continue;
      }
      h->OnEvents(events[i].events);
    }
    // Commands (registration changes, teardown) run between batches so no
    // handler of the batch just processed can be freed under it.
    if (wake) {
      uint64_t v;
      (void)!read(event_fd_, &v, sizeof(v));
      std::vector<std::function<void()>> cmds;
      {
        absl::MutexLock lock(&mu_);
        cmds.swap(commands_);
      }
      for (auto& c : cmds) c();
    }
    // Expire handshakes that never sent a hello.
    const absl::Time expiry = absl::Now() - absl::Seconds(30);
    for (auto it = handshakes_.begin(); it != handshakes_.end();) {
      Handshake* hs = (it++)->first;
      if (hs->started < expiry) DropHandshake(hs);
    }
  }
  // Run whatever was queued so callers are not left waiting.
  std::vector<std::function<void()>> cmds;
  {
    absl::MutexLock lock(&mu_);
    cmds.swap(commands_);
  }
  for (auto& c : cmds) c();
}

void TcpDevice::AcceptAll() {
  while (true) {
    int fd = accept4(listen_fd_, nullptr, nullptr, SOCK_NONBLOCK | SOCK_CLOEXEC);
    if (fd < 0) {
      const int err = errno;  // before logging, which may change it
      if (err == EINTR || err == ECONNABORTED) continue;
      if (err != EAGAIN) log::Warn("{}: accept4 failed: {}", name_, ErrnoText(err));
      return;
    }
    auto hs = std::make_unique<Handshake>(this, fd);
    if (!AddFd(fd, EPOLLIN, hs.get()).ok()) {
      close(fd);
      continue;
    }
    handshakes_[hs.get()] = std::move(hs);
  }
}

void TcpDevice::DropHandshake(Handshake* hs) {
  RemoveFd(hs->fd);
  close(hs->fd);
  handshakes_.erase(hs);
}

void TcpDevice::OnHello(Handshake* hs, const Hello& hello_ref) {
  const Hello hello = hello_ref;  // hello_ref lives in *hs, freed below
  RemoveFd(hs->fd);
  int fd = hs->fd;
  handshakes_.erase(hs);
  if (hello.magic != kHelloMagic || hello.version != kHelloVersion || hello.count == 0 ||
      hello.count > 64 || hello.index >= hello.count) {
    log::Warn("{}: dropping a connection with a bad hello (magic {:#x} version {})", name_,
              hello.magic, hello.version);
    close(fd);
    return;
  }
  absl::MutexLock lock(&mu_);
  auto& slots = accepted_[hello.connection_id];
  if (slots.count(hello.index) != 0) {
    log::Warn("{}: duplicate socket {} for connection {:#x}", name_, hello.index,
              hello.connection_id);
    close(fd);
    return;
  }
  slots[hello.index] = fd;
  expected_count_[hello.connection_id] = hello.count;
}

absl::StatusOr<std::unique_ptr<Connection>> TcpDevice::Connect(const ConnectOptions& o) {
  const absl::Time deadline = absl::Now() + o.timeout;
  const std::string what =
      absl::StrCat("connecting to ", o.peer_name, " at ", o.remote_address, " via ", name_);
  std::vector<int> fds;
  auto close_all = [&fds] {
    for (int fd : fds) close(fd);
  };
  if (o.initiator) {
    SocketAddress remote;
    if (local_) {
      if (!IsLocalAddress(o.remote_address)) {
        return absl::InvalidArgumentError(
            absl::StrCat(what, ": not a local-transport address (the peer must be on this host)"));
      }
    } else {
      ASSIGN_OR_RETURN(remote, SocketAddress::Parse(o.remote_address));
    }
    const uint32_t k = static_cast<uint32_t>(options_.sockets_per_connection);
    for (uint32_t i = 0; i < k; ++i) {
      absl::StatusOr<int> fd = local_ ? ConnectLocal(o.remote_address, deadline - absl::Now())
                                      : ConnectTo(remote, options_.bind_address, options_.ifname,
                                                  deadline - absl::Now());
      if (!fd.ok()) {
        close_all();
        return Annotate(fd.status(), what);
      }
      fds.push_back(*fd);
      Hello hello{kHelloMagic, kHelloVersion, o.connection_id, i, k};
      absl::Status s = WriteFully(*fd, &hello, sizeof(hello), deadline, what);
      if (!s.ok()) {
        close_all();
        return s;
      }
    }
  } else {
    auto ready = [this, id = o.connection_id]() ABSL_SHARED_LOCKS_REQUIRED(mu_) {
      auto it = accepted_.find(id);
      auto want = expected_count_.find(id);
      return it != accepted_.end() && want != expected_count_.end() &&
             it->second.size() == want->second;
    };
    absl::MutexLock lock(&mu_);
    if (!mu_.AwaitWithDeadline(absl::Condition(&ready), deadline)) {
      size_t got = accepted_.count(o.connection_id) ? accepted_[o.connection_id].size() : 0;
      return absl::DeadlineExceededError(
          absl::StrCat(what, ": timed out after ", absl::FormatDuration(o.timeout),
                       " waiting for the peer to dial (", got, " sockets arrived)"));
    }
    for (auto& [idx, fd] : accepted_[o.connection_id]) fds.push_back(fd);
    accepted_.erase(o.connection_id);
    expected_count_.erase(o.connection_id);
  }
  for (size_t i = 0; i < fds.size(); ++i) {
    const int fd = fds[i];
    absl::Status s =
        local_ ? ConfigureLocalSocket(fd, options_.socket_buffer_bytes)
               : ConfigureDataSocket(fd, options_.socket_buffer_bytes, options_.stall_timeout);
    // A traffic class (NCCL's) marks the packets as on RDMA fabrics: the
    // IPv4 TOS byte carries it (DSCP << 2), so switches classify alike.
    // Socket 0 of a connection with bulk sockets carries only control
    // frames and small messages: the control class, when one is set.
    const int tos = i == 0 && fds.size() >= 2 && options_.control_tos >= 0 ? options_.control_tos
                                                                           : o.traffic_class;
    if (s.ok() && !local_ && tos >= 0) {
      if (tos > 255) {
        s = absl::InvalidArgumentError(absl::StrCat("traffic class ", tos, " outside 0..255"));
      } else if (setsockopt(fd, IPPROTO_IP, IP_TOS, &tos, sizeof(tos)) != 0) {
        s = ErrnoStatus(i == 0 ? "control socket" : "data socket", "setsockopt(IP_TOS)");
      }
    }
    if (!s.ok()) {
      close_all();
      return Annotate(s, what);
    }
  }
  return TcpConnection::Create(this, std::move(fds), o.peer_name);
}

}  // namespace mixnet::transport::tcp
