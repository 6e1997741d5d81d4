// TCP connection: lifecycle (create, orderly and abrupt close), the send
// path (eager frames, rendezvous announcements, striped chunks), socket
// writes and failure handling (see tcp_connection.h). The receive side is in
// tcp_connection_recv.cc. Isend runs on caller threads; OnWritable,
// OnPeerShutdown and most Fail calls on the device's progress thread.
#include "runtime/transport/tcp/tcp_connection.h"

#include <linux/sockios.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/epoll.h>
#include <sys/ioctl.h>
#include <sys/socket.h>
#include <sys/uio.h>
#include <unistd.h>

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstring>

#include "absl/strings/cord.h"
#include "absl/strings/str_cat.h"
#include "runtime/common/log.h"
#include "runtime/common/status.h"
#include "runtime/transport/tcp/tcp_connection_internal.h"

namespace mixnet::transport::tcp {

namespace {
// The most bytes read and dropped per socket at close (see the destructor).
constexpr size_t kScratchBytes = 64 << 10;
constexpr int kMaxIov = 64;
}  // namespace

absl::StatusOr<std::unique_ptr<TcpConnection>> TcpConnection::Create(TcpDevice* device,
                                                                     std::vector<int> fds,
                                                                     std::string peer_name) {
  std::unique_ptr<TcpConnection> conn(new TcpConnection(device, std::move(peer_name)));
  for (size_t i = 0; i < fds.size(); ++i) {
    conn->sockets_.push_back(std::make_unique<Socket>(conn.get(), fds[i], static_cast<int>(i)));
  }
  if (!device->local() && !conn->sockets_.empty()) {
    // Socket 0 carries the control frames: keep the kernel's unsent bytes
    // there to one chunk, so a CTS or RTS queued behind payload (eager
    // messages, or chunks when it is the only socket; in our queue, which it
    // passes) waits for at most that much (see Queue).
    const int lowat = static_cast<int>(std::min<size_t>(conn->chunk_bytes_, INT32_MAX));
    if (setsockopt(conn->sockets_[0]->fd, IPPROTO_TCP, TCP_NOTSENT_LOWAT, &lowat, sizeof(lowat)) !=
        0) {
      return ErrnoStatus(conn->SocketName(conn->sockets_[0].get()),
                         "setsockopt(TCP_NOTSENT_LOWAT)");
    }
  }
  absl::MutexLock lock(&conn->mu_);
  if (device->local() && !conn->sockets_.empty()) {
    conn->peer_pid_ = UnixPeerPid(conn->sockets_[0]->fd);
    conn->offer_pull_ = conn->peer_pid_ > 0;
    conn->accept_pull_ = conn->peer_pid_ > 0 && device->options().local_pull;
  }
  for (auto& s : conn->sockets_) {
    RETURN_IF_ERROR(device->AddFd(s->fd, EPOLLIN, s.get()));
    s->registered = true;
  }
  return conn;
}

TcpConnection::TcpConnection(TcpDevice* device, std::string peer_name)
    : device_(device),
      peer_name_(std::move(peer_name)),
      chunk_bytes_(std::max<size_t>(device->options().chunk_bytes, 4096)),
      eager_bytes_(device->local() ? device->options().local_eager_bytes
                                   : device->options().eager_bytes) {}

TcpConnection::~TcpConnection() {
  // Orderly close: queue CLOSE behind whatever is still queued, give it a
  // bounded time to drain, then tear the sockets down on the progress thread.
  // A suspended connection's path may be dark: it resets instead (below).
  const bool dark = suspended_.load();
  bool healthy;
  {
    absl::MutexLock lock(&mu_);
    // Sends still queued are being cancelled (a collective aborted): the peer
    // may be stuck, so close at once; it sees an abrupt loss.
    bool cancelling = !awaiting_cts_.empty();
    for (auto& s : sockets_) {
      for (const OutFrame& f : s->outq) cancelling |= f.op != nullptr;
    }
    healthy = failed_.ok() && !cancelling && !dark;
    closing_ = true;
    if (healthy) {
      // Every socket gets its own CLOSE, so an EOF is never mistaken for a death.
      for (auto& s : sockets_) {
        if (!s->registered) continue;  // the peer already shut this one down
        OutFrame f;
        f.hdr = FrameHeader{kFrameClose, kFrameMagic, 0, 0, 0};
        Queue(s.get(), f);
        ArmWrite(s.get());
      }
    }
  }
  if (healthy) {
    auto drained = [this]() ABSL_SHARED_LOCKS_REQUIRED(mu_) {
      if (!failed_.ok()) return true;
      for (auto& s : sockets_) {
        if (s->registered && !s->outq.empty()) return false;
      }
      return true;
    };
    mu_.Lock();
    mu_.AwaitWithTimeout(absl::Condition(&drained), absl::Seconds(2));
    mu_.Unlock();
  }
  device_->RunOnProgressThread([this] {
    absl::MutexLock lock(&mu_);
    for (auto& s : sockets_) {
      if (s->registered) device_->RemoveFd(s->fd);
      s->registered = false;
    }
  });
  Fail(absl::CancelledError(absl::StrCat("connection to ", peer_name_, " closed locally")),
       /*report=*/false);
  // An abrupt close on purpose: say so, where the stream is at a frame
  // boundary, so the peer does not take it for this process dying.
  if (!healthy && !dark) {
    bool mid;
    for (auto& s : sockets_) {
      {
        absl::MutexLock lock(&mu_);
        mid = s->mid_frame;
      }
      if (mid) continue;
      const FrameHeader abort{kFrameAbort, kFrameMagic, 0, 0, 0};
      (void)!send(s->fd, &abort, sizeof(abort), MSG_DONTWAIT | MSG_NOSIGNAL);
    }
  }
  // Bytes left unread (typically the peer's own CLOSE) would make close()
  // send a reset instead of an orderly end of stream; read them first (a
  // bounded amount: a peer still streaming a large message gets its reset).
  static thread_local std::unique_ptr<char[]> sink(new char[kScratchBytes]);
  for (auto& s : sockets_) {
    for (int i = 0; i < 16 && recv(s->fd, sink.get(), kScratchBytes, MSG_DONTWAIT) > 0; ++i) {
    }
    if (dark) {
      const linger reset{1, 0};  // close() sends a reset and keeps nothing to retry
      (void)setsockopt(s->fd, SOL_SOCKET, SO_LINGER, &reset, sizeof(reset));
    }
    close(s->fd);
  }
}

absl::Status TcpConnection::health() const {
  absl::MutexLock lock(&mu_);
  return failed_;
}

absl::Status TcpConnection::SetSuspended(bool suspended) {
  if (device_->local()) return absl::OkStatus();  // unix sockets: no keepalive
  suspended_.store(suspended);
  const int on = suspended ? 0 : 1;
  const int quick = 1;
  for (const auto& s : sockets_) {
    if (setsockopt(s->fd, SOL_SOCKET, SO_KEEPALIVE, &on, sizeof(on)) != 0) {
      return ErrnoStatus(SocketName(s.get()),
                         suspended ? "setsockopt(SO_KEEPALIVE, 0)" : "setsockopt(SO_KEEPALIVE, 1)");
    }
    // Quick-ACK mode sends an ACK the kernel was delaying at once.
    if (suspended && setsockopt(s->fd, IPPROTO_TCP, TCP_QUICKACK, &quick, sizeof(quick)) != 0) {
      return ErrnoStatus(SocketName(s.get()), "setsockopt(TCP_QUICKACK)");
    }
  }
  return absl::OkStatus();
}

size_t TcpConnection::UnacknowledgedBytes() const {
  if (device_->local()) return 0;
  size_t total = 0;
  for (const auto& s : sockets_) {
    int queued = 0;
    if (ioctl(s->fd, SIOCOUTQ, &queued) == 0 && queued > 0) total += static_cast<size_t>(queued);
  }
  return total;
}

uint64_t TcpConnection::pulled_messages() const {
  absl::MutexLock lock(&mu_);
  return pulled_;
}

std::string TcpConnection::SocketName(const Socket* s) const {
  return absl::StrCat(peer_name_, " (socket ", s->index + 1, "/", sockets_.size(), " on ",
                      device_->name(), ")");
}

void TcpConnection::Queue(Socket* s, OutFrame f) {
  if (f.hdr.type == kFrameChunk || f.hdr.type == kFrameClose) {
    s->outq.push_back(std::move(f));
    return;
  }
  s->outq.insert(s->outq.begin() + static_cast<std::ptrdiff_t>(s->lead), std::move(f));
  ++s->lead;
}

void TcpConnection::ArmWrite(Socket* s) {
  if (s->write_armed || !s->registered) return;
  s->write_armed = true;
  device_->ModifyFd(s->fd, EPOLLIN | EPOLLOUT, s);
}

absl::StatusOr<std::unique_ptr<Request>> TcpConnection::Isend(const void* buf, size_t len,
                                                              uint64_t tag) {
  if (buf == nullptr && len > 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("Isend to ", peer_name_, ": null buffer of ", len, " bytes"));
  }
  auto op = std::make_shared<SendOp>();
  op->req = std::make_shared<RequestState>();
  op->data = static_cast<const char*>(buf);
  op->len = len;
  absl::MutexLock lock(&mu_);
  if (!failed_.ok()) return failed_;
  if (peer_closed_ || closing_) {
    return absl::UnavailableError(absl::StrCat("send to ", peer_name_, ": connection closed"));
  }
  const uint64_t seq = next_send_seq_++;
  OutFrame f;
  if (len <= eager_bytes_) {
    f.hdr = FrameHeader{kFrameEager, kFrameMagic, seq, tag, len};
    f.data = op->data;
    f.len = len;
    f.op = op;
    op->frames_left = 1;
  } else {
    if (offer_pull_) {
      OutFrame pull;
      pull.hdr = FrameHeader{kFramePull, kFrameMagic, seq, reinterpret_cast<uintptr_t>(buf), len};
      Queue(sockets_[0].get(), std::move(pull));
    }
    f.hdr = FrameHeader{kFrameRts, kFrameMagic, seq, tag, len};
    awaiting_cts_[seq] = op;
  }
  Queue(sockets_[0].get(), std::move(f));
  Kick(sockets_[0].get());
  return std::make_unique<StateRequest>(op->req);
}

// Queues the chunks of an announced message once the receiver is ready.
void TcpConnection::StartPayload(uint64_t seq) {
  auto it = awaiting_cts_.find(seq);
  if (it == awaiting_cts_.end()) return;
  std::shared_ptr<SendOp> op = std::move(it->second);
  awaiting_cts_.erase(it);
  const size_t nchunks = (op->len + chunk_bytes_ - 1) / chunk_bytes_;
  op->frames_left = nchunks;
  const size_t k = sockets_.size();
  for (size_t i = 0; i < nchunks; ++i) {
    size_t off = i * chunk_bytes_;
    size_t n = std::min(chunk_bytes_, op->len - off);
    // The bulk sockets only: socket 0 stays free for control frames (see
    // tcp_connection.h).
    Socket* s = k > 1 ? sockets_[1 + (seq + i) % (k - 1)].get() : sockets_[0].get();
    OutFrame f;
    f.hdr = FrameHeader{kFrameChunk, kFrameMagic, seq, off, n};
    f.data = op->data + off;
    f.len = n;
    f.op = op;
    Queue(s, std::move(f));
  }
  for (auto& s : sockets_) {
    if (!s->outq.empty()) Kick(s.get());
  }
}

int TcpConnection::FillIov(Socket* s, iovec* iov) {
  int n_iov = 0;
  for (auto it = s->outq.begin(); it != s->outq.end() && n_iov < kMaxIov; ++it) {
    OutFrame& f = *it;
    size_t hdr_left = f.sent < sizeof(FrameHeader) ? sizeof(FrameHeader) - f.sent : 0;
    if (hdr_left > 0) {
      iov[n_iov++] = {reinterpret_cast<char*>(&f.hdr) + f.sent, hdr_left};
    }
    if (f.len > 0 && n_iov < kMaxIov) {
      size_t done = f.sent > sizeof(FrameHeader) ? f.sent - sizeof(FrameHeader) : 0;
      iov[n_iov++] = {const_cast<char*>(f.data) + done, f.len - done};
    }
  }
  return n_iov;
}

void TcpConnection::Advance(Socket* s, size_t n, Completions* done) {
  while (n > 0 && !s->outq.empty()) {
    OutFrame& f = s->outq.front();
    size_t take = std::min(n, f.total() - f.sent);
    f.sent += take;
    n -= take;
    if (f.sent < f.total()) break;
    if (f.op != nullptr && --f.op->frames_left == 0) done->emplace_back(f.op->req, f.op->len);
    bool is_close = f.hdr.type == kFrameClose;
    s->outq.pop_front();
    if (s->lead > 0) --s->lead;
    if (is_close) shutdown(s->fd, SHUT_WR);
  }
  s->mid_frame = !s->outq.empty() && s->outq.front().sent > 0;
  // A bulk frame that started is part of the stream: nothing may pass it.
  if (s->mid_frame && s->lead == 0) s->lead = 1;
}

void TcpConnection::Kick(Socket* s) {
  // Unarmed means the progress thread is not writing this socket (only it
  // disarms, and only once the queue is empty), so the caller may write.
  if (s->outq.empty()) return;
  if (s->write_armed || !s->registered || !failed_.ok()) {
    ArmWrite(s);
    return;
  }
  iovec iov[kMaxIov];
  msghdr msg{};
  msg.msg_iov = iov;
  msg.msg_iovlen = static_cast<size_t>(FillIov(s, iov));
  ssize_t n = sendmsg(s->fd, &msg, MSG_NOSIGNAL | MSG_DONTWAIT);
  if (n > 0) {
    Completions done;
    Advance(s, static_cast<size_t>(n), &done);
    // Completing under mu_ is safe: request state locks are leaves.
    for (auto& [req, len] : done) req->Complete(absl::OkStatus(), len);
  }
  // A full socket or an error: the progress thread goes on (and reports).
  if (!s->outq.empty()) ArmWrite(s);
}

void TcpConnection::OnWritable(Socket* s) {
  iovec iov[kMaxIov];
  msghdr msg{};
  msg.msg_iov = iov;
  ssize_t n = 0;
  int err = 0;
  Completions done;
  // Finishes a write of `n` bytes (or its error) under mu_; false when the
  // write failed.
  auto advance = [&]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    if (n < 0) return false;
    Advance(s, static_cast<size_t>(n), &done);
    if (s->outq.empty() && s->registered) {
      s->write_armed = false;
      device_->ModifyFd(s->fd, EPOLLIN, s);
    }
    return true;
  };
  // Socket 0 takes control frames into the middle of its queue (Queue),
  // which moves the frames the iovecs point into: it is written under mu_,
  // as Kick writes (TCP_NOTSENT_LOWAT keeps each write to about a chunk).
  // The other sockets' queues only grow at the back, and they are written
  // outside the lock.
  const bool locked_write = s->index == 0;
  bool ok = true;
  {
    absl::MutexLock lock(&mu_);
    if (!failed_.ok() || !s->write_armed) return;
    msg.msg_iovlen = static_cast<size_t>(FillIov(s, iov));
    if (msg.msg_iovlen == 0) {
      s->write_armed = false;
      if (s->registered) device_->ModifyFd(s->fd, EPOLLIN, s);
      return;
    }
    if (locked_write) {
      n = sendmsg(s->fd, &msg, MSG_NOSIGNAL | MSG_DONTWAIT);
      err = errno;
      ok = advance();
    }
  }
  if (!locked_write) {
    n = sendmsg(s->fd, &msg, MSG_NOSIGNAL | MSG_DONTWAIT);
    err = errno;
    absl::MutexLock lock(&mu_);
    ok = advance();
  }
  if (!ok) {
    if (err == EAGAIN || err == EWOULDBLOCK || err == EINTR) return;
    // The peer is gone: an ABORT or CLOSE it sent before going is the
    // better report (it fails or closes the connection first, and the
    // failure below is then dropped).
    s->ReadFrames();
    bool quiet;
    {
      absl::MutexLock lock(&mu_);
      quiet = peer_closed_ || closing_;
    }
    Fail(ErrnoStatus(absl::StrCat("lost connection to ", SocketName(s)), "sendmsg", err), !quiet);
    return;
  }
  for (auto& [req, len] : done) req->Complete(absl::OkStatus(), len);
}

void TcpConnection::OnPeerShutdown(Socket* s) {
  std::vector<std::shared_ptr<RequestState>> reqs;
  {
    absl::MutexLock lock(&mu_);
    for (OutFrame& f : s->outq) {
      if (f.op != nullptr) reqs.push_back(f.op->req);
    }
    s->outq.clear();
    s->lead = 0;
    s->write_armed = false;
    if (s->registered) device_->RemoveFd(s->fd);
    s->registered = false;
    if (s->index == 0) {
      for (auto& [seq, op] : awaiting_cts_) reqs.push_back(op->req);
      awaiting_cts_.clear();
    }
  }
  for (auto& r : reqs) {
    r->Complete(PeerClosedError(absl::StrCat("send to ", peer_name_)), 0);
  }
}

void TcpConnection::Fail(absl::Status status, bool report) {
  // A local peer that dropped the connection while alive aborted on purpose
  // (another rank failed): say so, so the root cause is reported instead.
  if (report && peer_pid_ > 0 && peer_pid_ != getpid() &&
      status.code() == absl::StatusCode::kUnavailable && ProcessAlive(peer_pid_)) {
    status = absl::UnavailableError(absl::StrCat(
        status.message(), "; its process (pid ", peer_pid_,
        ") is alive, so it closed the connection itself (aborted, likely after another failure)"));
    status.SetPayload(kPeerAlivePayload, absl::Cord("1"));
  }
  std::vector<std::shared_ptr<RequestState>> reqs;
  {
    absl::MutexLock lock(&mu_);
    if (!failed_.ok()) return;
    failed_ = status;
    for (auto& s : sockets_) {
      for (OutFrame& f : s->outq) {
        if (f.op != nullptr) reqs.push_back(f.op->req);
      }
      s->outq.clear();
      s->lead = 0;
      if (s->registered && device_->OnProgressThread()) {
        device_->RemoveFd(s->fd);
        s->registered = false;
      }
    }
    for (auto& [seq, op] : awaiting_cts_) reqs.push_back(op->req);
    awaiting_cts_.clear();
    for (auto& [tag, q] : posted_) {
      for (PostedRecv& r : q) reqs.push_back(r.req);
    }
    posted_.clear();
    for (auto& [seq, m] : incoming_) {
      if (m->recv != nullptr) reqs.push_back(m->recv);
    }
    incoming_.clear();
    unexpected_.clear();
  }
  if (report) log::Warn("{}", status.ToString());
  for (auto& r : reqs) r->Complete(status, 0);
  if (report && device_->options().on_failure) device_->options().on_failure(status);
}

}  // namespace mixnet::transport::tcp
