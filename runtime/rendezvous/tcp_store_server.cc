// TcpStoreServer: serves the rendezvous key/value store over TCP (wire format in
// tcp_wire.h). One background thread ("mixnet-rdv-srv") runs an epoll loop over
// the listening socket, every client connection and an eventfd used to stop it.
// A Get for a missing key is parked on the server until the key is Set/Added or
// its timeout passes; the loop's epoll timeout is the earliest parked deadline.
// All state below the constructor is touched by the server thread only.
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <pthread.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <sys/socket.h>

#include <algorithm>
#include <cerrno>
#include <cstdlib>
#include <memory>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/strings/str_cat.h"
#include "runtime/common/log.h"
#include "runtime/common/status.h"
#include "runtime/rendezvous/store.h"
#include "runtime/rendezvous/store_internal.h"
#include "runtime/rendezvous/tcp_socket.h"
#include "runtime/rendezvous/tcp_wire.h"

namespace mixnet::rendezvous {
namespace {

using internal::UniqueFd;

constexpr uint64_t kListenId = 0;
constexpr uint64_t kWakeId = 1;
constexpr size_t kReadChunk = 256 * 1024;
constexpr size_t kMaxReadChunk = 4 * 1024 * 1024;

struct Conn {
  uint64_t id = 0;
  UniqueFd fd;
  std::string peer;
  std::string in;   // received bytes not yet handled
  std::string out;  // encoded responses not yet sent
  size_t out_off = 0;
  bool parked = false;  // waiting in a Get for `parked_key`
  std::string parked_key;
  absl::Time deadline;   // of the parked Get
  bool closing = false;  // close once `out` is flushed (after a protocol error)
  uint32_t events = 0;   // current epoll interest
};

class TcpStoreServerImpl final : public TcpStoreServer {
 public:
  TcpStoreServerImpl(UniqueFd listen_fd, UniqueFd epoll_fd, UniqueFd wake_fd, int port,
                     std::string where)
      : listen_fd_(std::move(listen_fd)),
        epoll_fd_(std::move(epoll_fd)),
        wake_fd_(std::move(wake_fd)),
        port_(port),
        where_(std::move(where)) {}

  ~TcpStoreServerImpl() override {
    uint64_t one = 1;
    ssize_t n;
    do {
      n = ::write(wake_fd_.get(), &one, sizeof(one));
    } while (n < 0 && errno == EINTR);
    if (thread_.joinable()) thread_.join();
  }

  int port() const override { return port_; }

  void StartThread() {
    thread_ = std::thread([this] { Run(); });
  }

 private:
  void Run();
  void Accept();
  void OnConnEvent(Conn* c, uint32_t ev);
  void ReadSome(Conn* c);
  // Sends pending output and handles complete requests; false if `c` was closed.
  bool Pump(Conn* c);
  void Handle(Conn* c, const internal::RequestHeader& h, std::string key, std::string value);
  void Respond(Conn* c, absl::StatusCode code, absl::string_view payload, int64_t arg = 0);
  void Wake(const std::string& key, const std::string& value);
  void ExpireWaiters(absl::Time now);
  int EpollTimeoutMs(absl::Time now) const;
  // Re-arms epoll for what `c` waits for; false if that failed and `c` was closed.
  bool UpdateInterest(Conn* c);
  void Close(Conn* c);
  void PumpDirty();

  UniqueFd listen_fd_, epoll_fd_, wake_fd_;
  const int port_;
  const std::string where_;
  std::thread thread_;

  // Server-thread state.
  absl::flat_hash_map<std::string, std::string> data_;
  absl::flat_hash_map<std::string, std::vector<uint64_t>> waiters_;
  absl::flat_hash_map<uint64_t, std::unique_ptr<Conn>> conns_;
  std::vector<uint64_t> dirty_;  // connections with new output to pump
  uint64_t next_id_ = 2;
};

void TcpStoreServerImpl::Run() {
  pthread_setname_np(pthread_self(), "mixnet-rdv-srv");
  std::vector<epoll_event> events(64);
  while (true) {
    int timeout_ms = EpollTimeoutMs(absl::Now());
    int n =
        ::epoll_wait(epoll_fd_.get(), events.data(), static_cast<int>(events.size()), timeout_ms);
    if (n < 0) {
      if (errno == EINTR) continue;
      log::Error("{}: {}", where_, ErrnoStatus(where_, "epoll_wait").ToString());
      absl::SleepFor(absl::Milliseconds(10));
      continue;
    }
    for (int i = 0; i < n; ++i) {
      uint64_t id = events[i].data.u64;
      if (id == kWakeId) return;  // destructor asked to stop
      if (id == kListenId) {
        Accept();
        continue;
      }
      auto it = conns_.find(id);
      if (it == conns_.end()) continue;  // closed earlier in this batch
      OnConnEvent(it->second.get(), events[i].events);
    }
    ExpireWaiters(absl::Now());
    PumpDirty();
  }
}

void TcpStoreServerImpl::Accept() {
  while (true) {
    int fd = ::accept4(listen_fd_.get(), nullptr, nullptr, SOCK_NONBLOCK | SOCK_CLOEXEC);
    if (fd < 0) {
      if (errno == EINTR || errno == ECONNABORTED) continue;
      if (errno == EAGAIN || errno == EWOULDBLOCK) return;
      log::Warn("{}", ErrnoStatus(where_, "accept4").ToString());
      // Out of descriptors: back off instead of spinning on the level-triggered fd.
      if (errno == EMFILE || errno == ENFILE) absl::SleepFor(absl::Milliseconds(10));
      return;
    }
    auto c = std::make_unique<Conn>();
    c->id = next_id_++;
    c->fd.Reset(fd);
    int one = 1;
    (void)::setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
    sockaddr_storage ss{};
    socklen_t len = sizeof(ss);
    char host[NI_MAXHOST] = "?", serv[NI_MAXSERV] = "?";
    if (::getpeername(fd, reinterpret_cast<sockaddr*>(&ss), &len) == 0) {
      (void)::getnameinfo(reinterpret_cast<sockaddr*>(&ss), len, host, sizeof(host), serv,
                          sizeof(serv), NI_NUMERICHOST | NI_NUMERICSERV);
    }
    c->peer = internal::HostPort(host, std::atoi(serv));
    c->events = EPOLLIN | EPOLLRDHUP;
    epoll_event ev{};
    ev.events = c->events;
    ev.data.u64 = c->id;
    if (::epoll_ctl(epoll_fd_.get(), EPOLL_CTL_ADD, fd, &ev) != 0) {
      log::Warn("{}", ErrnoStatus(where_, "epoll_ctl(ADD)").ToString());
      continue;  // `c` closes the socket
    }
    log::Debug("{}: client {} connected", where_, c->peer);
    conns_.emplace(c->id, std::move(c));
  }
}

void TcpStoreServerImpl::OnConnEvent(Conn* c, uint32_t ev) {
  if (ev & (EPOLLERR | EPOLLHUP)) return Close(c);
  if (ev & EPOLLIN) {
    ReadSome(c);  // may close `c`
    return;
  }
  // Peer shut down its side while we were not reading (parked or flushing).
  if (ev & EPOLLRDHUP) return Close(c);
  if (ev & EPOLLOUT) (void)Pump(c);
}

void TcpStoreServerImpl::ReadSome(Conn* c) {
  // Read what the current frame still needs (bounded), at least a chunk.
  size_t want = kReadChunk;
  if (c->in.size() >= internal::kWireHeaderBytes) {
    internal::RequestHeader h;
    if (internal::DecodeRequestHeader(c->in.data(), &h).ok()) {
      size_t total = internal::kWireHeaderBytes + h.key_len + h.value_len;
      if (total > c->in.size()) want = std::clamp(total - c->in.size(), kReadChunk, kMaxReadChunk);
    }
  }
  size_t old = c->in.size();
  c->in.resize(old + want);
  ssize_t n;
  do {
    n = ::recv(c->fd.get(), c->in.data() + old, want, 0);
  } while (n < 0 && errno == EINTR);
  c->in.resize(old + (n > 0 ? static_cast<size_t>(n) : 0));
  if (n == 0) {
    log::Debug("{}: client {} disconnected", where_, c->peer);
    return Close(c);
  }
  if (n < 0) {
    if (errno == EAGAIN || errno == EWOULDBLOCK) return;
    log::Debug("{}", ErrnoStatus(absl::StrCat(where_, ": client ", c->peer), "recv").ToString());
    return Close(c);
  }
  (void)Pump(c);
}

bool TcpStoreServerImpl::Pump(Conn* c) {
  while (true) {
    if (c->out_off < c->out.size()) {
      ssize_t n =
          ::send(c->fd.get(), c->out.data() + c->out_off, c->out.size() - c->out_off, MSG_NOSIGNAL);
      if (n > 0) {
        c->out_off += static_cast<size_t>(n);
        continue;
      }
      if (n < 0 && errno == EINTR) continue;
      if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) break;
      log::Debug("{}", ErrnoStatus(absl::StrCat(where_, ": client ", c->peer), "send").ToString());
      Close(c);
      return false;
    }
    c->out.clear();
    c->out_off = 0;
    if (c->closing) {
      Close(c);
      return false;
    }
    if (c->parked || c->in.size() < internal::kWireHeaderBytes) break;
    internal::RequestHeader h;
    if (absl::Status s = internal::DecodeRequestHeader(c->in.data(), &h); !s.ok()) {
      log::Warn("{}: client {}: {}; closing the connection", where_, c->peer,
                std::string(s.message()));
      Respond(c, s.code(), absl::StrCat(where_, ": ", s.message()));
      c->closing = true;
      c->in.clear();
      continue;
    }
    size_t total = internal::kWireHeaderBytes + h.key_len + h.value_len;
    if (c->in.size() < total) break;
    std::string key = c->in.substr(internal::kWireHeaderBytes, h.key_len);
    std::string value = c->in.substr(internal::kWireHeaderBytes + h.key_len, h.value_len);
    c->in.erase(0, total);
    Handle(c, h, std::move(key), std::move(value));
  }
  return UpdateInterest(c);
}

void TcpStoreServerImpl::Handle(Conn* c, const internal::RequestHeader& h, std::string key,
                                std::string value) {
  switch (h.op) {
    case internal::WireOp::kSet: {
      auto [it, inserted] = data_.insert_or_assign(std::move(key), std::move(value));
      Respond(c, absl::StatusCode::kOk, "");
      Wake(it->first, it->second);
      return;
    }
    case internal::WireOp::kGet: {
      if (auto it = data_.find(key); it != data_.end()) {
        return Respond(c, absl::StatusCode::kOk, it->second);
      }
      if (h.arg == 0) {
        return Respond(c, absl::StatusCode::kDeadlineExceeded,
                       absl::StrCat("key ", internal::QuoteKey(key), " not set within 0ms"));
      }
      c->parked = true;
      c->deadline = h.arg < 0 ? absl::InfiniteFuture() : absl::Now() + absl::Milliseconds(h.arg);
      c->parked_key = key;
      waiters_[std::move(key)].push_back(c->id);
      return;
    }
    case internal::WireOp::kAdd: {
      auto it = data_.find(key);
      absl::StatusOr<int64_t> sum =
          internal::AddToCounter(key, it == data_.end() ? nullptr : &it->second, h.arg);
      if (!sum.ok()) return Respond(c, sum.status().code(), sum.status().message());
      if (it == data_.end()) it = data_.emplace(std::move(key), "").first;
      it->second = absl::StrCat(*sum);
      Respond(c, absl::StatusCode::kOk, "", *sum);
      Wake(it->first, it->second);
      return;
    }
  }
}

void TcpStoreServerImpl::Respond(Conn* c, absl::StatusCode code, absl::string_view payload,
                                 int64_t arg) {
  c->out.append(internal::EncodeResponse(code, payload, arg));
}

void TcpStoreServerImpl::Wake(const std::string& key, const std::string& value) {
  auto node = waiters_.extract(key);
  if (node.empty()) return;
  for (uint64_t id : node.mapped()) {
    auto it = conns_.find(id);
    if (it == conns_.end()) continue;
    Conn* w = it->second.get();
    w->parked = false;
    w->parked_key.clear();
    Respond(w, absl::StatusCode::kOk, value);
    dirty_.push_back(id);
  }
}

void TcpStoreServerImpl::ExpireWaiters(absl::Time now) {
  for (auto& [id, c] : conns_) {
    if (!c->parked || c->deadline > now) continue;
    auto wit = waiters_.find(c->parked_key);
    if (wit != waiters_.end()) {
      std::erase(wit->second, id);
      if (wit->second.empty()) waiters_.erase(wit);
    }
    c->parked = false;
    Respond(
        c.get(), absl::StatusCode::kDeadlineExceeded,
        absl::StrCat("key ", internal::QuoteKey(c->parked_key), " not set before the deadline"));
    c->parked_key.clear();
    dirty_.push_back(id);
  }
}

int TcpStoreServerImpl::EpollTimeoutMs(absl::Time now) const {
  absl::Time earliest = absl::InfiniteFuture();
  for (const auto& [id, c] : conns_) {
    if (c->parked) earliest = std::min(earliest, c->deadline);
  }
  if (earliest == absl::InfiniteFuture()) return -1;
  int64_t ms = internal::TimeoutToMillis(earliest - now);
  return static_cast<int>(std::min<int64_t>(ms, 60 * 60 * 1000));
}

void TcpStoreServerImpl::PumpDirty() {
  while (!dirty_.empty()) {
    std::vector<uint64_t> ids;
    ids.swap(dirty_);
    for (uint64_t id : ids) {
      auto it = conns_.find(id);
      if (it != conns_.end()) (void)Pump(it->second.get());
    }
  }
}

bool TcpStoreServerImpl::UpdateInterest(Conn* c) {
  bool pending_out = c->out_off < c->out.size();
  uint32_t want = EPOLLRDHUP;
  if (pending_out) want |= EPOLLOUT;
  if (!pending_out && !c->parked && !c->closing) want |= EPOLLIN;
  if (want == c->events) return true;
  epoll_event ev{};
  ev.events = want;
  ev.data.u64 = c->id;
  if (::epoll_ctl(epoll_fd_.get(), EPOLL_CTL_MOD, c->fd.get(), &ev) != 0) {
    log::Warn("{}",
              ErrnoStatus(absl::StrCat(where_, ": client ", c->peer), "epoll_ctl(MOD)").ToString());
    Close(c);
    return false;
  }
  c->events = want;
  return true;
}

void TcpStoreServerImpl::Close(Conn* c) {
  if (c->parked) {
    auto wit = waiters_.find(c->parked_key);
    if (wit != waiters_.end()) {
      std::erase(wit->second, c->id);
      if (wit->second.empty()) waiters_.erase(wit);
    }
  }
  (void)::epoll_ctl(epoll_fd_.get(), EPOLL_CTL_DEL, c->fd.get(), nullptr);
  conns_.erase(c->id);  // closes the socket
}

}  // namespace

absl::StatusOr<std::unique_ptr<TcpStoreServer>> TcpStoreServer::Start(
    const std::string& bind_address, int port) {
  ASSIGN_OR_RETURN(UniqueFd listen_fd, internal::Listen(bind_address, port));
  std::string where = absl::StrCat("tcp store server on ", internal::HostPort(bind_address, port));
  ASSIGN_OR_RETURN(int actual_port, internal::LocalPort(listen_fd.get(), where));
  where = absl::StrCat("tcp store server on ", internal::HostPort(bind_address, actual_port));
  UniqueFd epoll_fd(::epoll_create1(EPOLL_CLOEXEC));
  if (!epoll_fd.valid()) return ErrnoStatus(where, "epoll_create1");
  UniqueFd wake_fd(::eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC));
  if (!wake_fd.valid()) return ErrnoStatus(where, "eventfd");
  epoll_event ev{};
  ev.events = EPOLLIN;
  ev.data.u64 = kListenId;
  if (::epoll_ctl(epoll_fd.get(), EPOLL_CTL_ADD, listen_fd.get(), &ev) != 0) {
    return ErrnoStatus(where, "epoll_ctl(ADD listen)");
  }
  ev.data.u64 = kWakeId;
  if (::epoll_ctl(epoll_fd.get(), EPOLL_CTL_ADD, wake_fd.get(), &ev) != 0) {
    return ErrnoStatus(where, "epoll_ctl(ADD eventfd)");
  }
  auto server = std::make_unique<TcpStoreServerImpl>(std::move(listen_fd), std::move(epoll_fd),
                                                     std::move(wake_fd), actual_port, where);
  server->StartThread();
  log::Debug("{}: serving", where);
  return std::unique_ptr<TcpStoreServer>(std::move(server));
}

}  // namespace mixnet::rendezvous
