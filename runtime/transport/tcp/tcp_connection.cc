// TCP connection: framing, striping, tag matching (see tcp_connection.h).
#include "runtime/transport/tcp/tcp_connection.h"

#include <sys/epoll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cstring>

#include "absl/strings/str_cat.h"
#include "runtime/common/log.h"
#include "runtime/common/status.h"

namespace mixnet::transport::tcp {

struct TcpConnection::SendOp {
  std::shared_ptr<RequestState> req;
  size_t len = 0;
  size_t frames_left = 0;  // frames of this message not yet fully written
};

struct TcpConnection::OutFrame {
  FrameHeader hdr{};
  const char* data = nullptr;
  size_t len = 0;              // payload bytes after the header
  size_t sent = 0;             // header + payload bytes written so far
  std::shared_ptr<SendOp> op;  // null for CLOSE
  size_t total() const { return sizeof(FrameHeader) + len; }
};

struct TcpConnection::Incoming {
  uint64_t seq = 0;
  uint64_t tag = 0;
  size_t total = 0;
  size_t received = 0;
  char* dst = nullptr;                 // where payload lands
  std::unique_ptr<char[]> unexpected;  // storage when no receive was posted
  std::shared_ptr<RequestState> recv;  // the matched receive, if any
  char* user_buf = nullptr;            // matched late: copy here on completion
  bool discard = false;                // receive too small: drop the payload
  bool consumed = false;               // a receive took it (or it is discarded)
};

struct TcpConnection::PostedRecv {
  std::shared_ptr<RequestState> req;
  char* buf = nullptr;
  size_t capacity = 0;
};

// One socket of the connection: its send queue and its read state machine.
class TcpConnection::Socket : public EpollHandler {
 public:
  Socket(TcpConnection* conn, int fd, int index) : conn_(conn), fd(fd), index(index) {}
  void OnEvents(uint32_t events) override;

  TcpConnection* const conn_;
  const int fd;
  const int index;
  bool registered = false;
  // Guarded by conn_->mu_.
  std::deque<OutFrame> outq;
  bool write_armed = false;
  bool paused = false;
  uint64_t waiting_seq = 0;
  // Progress thread only.
  FrameHeader rhdr{};
  size_t rhdr_got = 0;
  bool in_payload = false;
  Incoming* rmsg = nullptr;
  char* rdst = nullptr;
  size_t rleft = 0;
  size_t rchunk = 0;
  bool closed_by_peer = false;
};

namespace {
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
  for (auto& s : conn->sockets_) {
    RETURN_IF_ERROR(device->AddFd(s->fd, EPOLLIN, s.get()));
    s->registered = true;
  }
  return conn;
}

TcpConnection::TcpConnection(TcpDevice* device, std::string peer_name)
    : device_(device),
      peer_name_(std::move(peer_name)),
      chunk_bytes_(std::max<size_t>(device->options().chunk_bytes, 4096)) {}

TcpConnection::~TcpConnection() {
  // Orderly close: queue CLOSE behind whatever is still queued, give it a
  // bounded time to drain, then tear the sockets down on the progress thread.
  bool healthy;
  {
    absl::MutexLock lock(&mu_);
    healthy = failed_.ok();
    closing_ = true;
    if (healthy) {
      // Every socket gets its own CLOSE, so an EOF is never mistaken for a death.
      for (auto& s : sockets_) {
        if (!s->registered) continue;  // the peer already shut this one down
        OutFrame f;
        f.hdr = FrameHeader{kFrameClose, kFrameMagic, 0, 0, 0};
        s->outq.push_back(f);
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
  for (auto& s : sockets_) close(s->fd);
}

absl::Status TcpConnection::health() const {
  absl::MutexLock lock(&mu_);
  return failed_;
}

std::string TcpConnection::SocketName(const Socket* s) const {
  return absl::StrCat(peer_name_, " (socket ", s->index + 1, "/", sockets_.size(), " on ",
                      device_->name(), ")");
}

void TcpConnection::ArmWrite(Socket* s) {
  if (s->write_armed || !s->registered) return;
  s->write_armed = true;
  device_->ModifyFd(s->fd, (s->paused ? 0 : EPOLLIN) | EPOLLOUT, s);
}

absl::StatusOr<std::unique_ptr<Request>> TcpConnection::Isend(const void* buf, size_t len,
                                                              uint64_t tag) {
  if (buf == nullptr && len > 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("Isend to ", peer_name_, ": null buffer of ", len, " bytes"));
  }
  auto op = std::make_shared<SendOp>();
  op->req = std::make_shared<RequestState>();
  op->len = len;
  absl::MutexLock lock(&mu_);
  if (!failed_.ok()) return failed_;
  if (peer_closed_ || closing_) {
    return absl::UnavailableError(absl::StrCat("send to ", peer_name_, ": connection closed"));
  }
  const uint64_t seq = next_send_seq_++;
  const size_t nchunks = len == 0 ? 0 : (len + chunk_bytes_ - 1) / chunk_bytes_;
  op->frames_left = 1 + nchunks;
  OutFrame announce;
  announce.hdr = FrameHeader{kFrameMsg, kFrameMagic, seq, tag, len};
  announce.op = op;
  sockets_[0]->outq.push_back(announce);
  ArmWrite(sockets_[0].get());
  const size_t k = sockets_.size();
  const char* p = static_cast<const char*>(buf);
  for (size_t i = 0; i < nchunks; ++i) {
    size_t off = i * chunk_bytes_;
    size_t n = std::min(chunk_bytes_, len - off);
    Socket* s = sockets_[(seq + i) % k].get();
    OutFrame f;
    f.hdr = FrameHeader{kFrameChunk, kFrameMagic, seq, off, n};
    f.data = p + off;
    f.len = n;
    f.op = op;
    s->outq.push_back(f);
    ArmWrite(s);
  }
  return std::make_unique<StateRequest>(op->req);
}

absl::StatusOr<std::unique_ptr<Request>> TcpConnection::Irecv(void* buf, size_t len, uint64_t tag) {
  if (buf == nullptr && len > 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("Irecv from ", peer_name_, ": null buffer of ", len, " bytes"));
  }
  auto req = std::make_shared<RequestState>();
  absl::MutexLock lock(&mu_);
  if (!failed_.ok()) return failed_;
  auto it = unexpected_.find(tag);
  if (it != unexpected_.end() && !it->second.empty()) {
    Incoming* m = it->second.front();
    it->second.pop_front();
    if (it->second.empty()) unexpected_.erase(it);
    if (m->total > len) {
      req->Complete(absl::InvalidArgumentError(
                        absl::StrCat("message of ", m->total, " bytes from ", peer_name_, " (tag ",
                                     tag, ") exceeds the receive buffer of ", len, " bytes")),
                    0);
      m->discard = true;
    } else {
      m->recv = req;
      m->user_buf = static_cast<char*>(buf);
    }
    m->consumed = true;
    if (m->received == m->total) CompleteIncoming(m);
    return std::make_unique<StateRequest>(req);
  }
  if (peer_closed_) {
    return absl::UnavailableError(
        absl::StrCat("receive from ", peer_name_, ": peer closed the connection"));
  }
  posted_[tag].push_back(PostedRecv{req, static_cast<char*>(buf), len});
  return std::make_unique<StateRequest>(req);
}

// Finishes a fully received message that has been matched (or discarded).
void TcpConnection::CompleteIncoming(Incoming* m) {
  if (!m->consumed) return;  // stays in unexpected_ until a receive takes it
  if (m->recv != nullptr) {
    if (m->user_buf != nullptr && m->total > 0) {
      std::memcpy(m->user_buf, m->unexpected.get(), m->total);
    }
    m->recv->Complete(absl::OkStatus(), m->total);
  }
  incoming_.erase(m->seq);
}

void TcpConnection::Socket::OnEvents(uint32_t events) {
  TcpConnection* c = conn_;
  if (events & EPOLLOUT) c->OnWritable(this);
  if (!(events & (EPOLLIN | EPOLLHUP | EPOLLERR))) return;
  static thread_local std::unique_ptr<char[]> scratch(new char[kScratchBytes]);
  while (true) {
    {
      absl::MutexLock lock(&c->mu_);
      if (paused || !c->failed_.ok() || !registered) return;
    }
    if (!in_payload && rhdr_got == sizeof(rhdr)) {
      // A header held back while this socket was paused.
      rhdr_got = 0;
      c->OnFrame(this, rhdr);
      continue;
    }
    if (!in_payload) {
      ssize_t n = recv(fd, reinterpret_cast<char*>(&rhdr) + rhdr_got, sizeof(rhdr) - rhdr_got, 0);
      if (n > 0) {
        rhdr_got += static_cast<size_t>(n);
        if (rhdr_got < sizeof(rhdr)) continue;
        rhdr_got = 0;
        c->OnFrame(this, rhdr);
        continue;
      }
      if (n == 0) {
        bool closing;
        {
          absl::MutexLock lock(&c->mu_);
          closing = c->closing_;
        }
        if (closed_by_peer || closing) {
          c->OnPeerShutdown(this);
          return;
        }
        c->Fail(absl::UnavailableError(absl::StrCat(
                    "lost connection to ", c->SocketName(this),
                    ": recv returned EOF without an orderly close (peer process died?)")),
                true);
        return;
      }
      if (errno == EAGAIN || errno == EWOULDBLOCK) return;
      if (errno == EINTR) continue;
      c->Fail(ErrnoStatus(absl::StrCat("lost connection to ", c->SocketName(this)), "recv"), true);
      return;
    }
    char* dst = rdst != nullptr ? rdst : scratch.get();
    size_t want = rdst != nullptr ? rleft : std::min(rleft, kScratchBytes);
    ssize_t n = want == 0 ? 0 : recv(fd, dst, want, 0);
    if (want > 0 && n <= 0) {
      if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) return;
      if (n < 0 && errno == EINTR) continue;
      c->Fail(n == 0
                  ? absl::UnavailableError(absl::StrCat("lost connection to ", c->SocketName(this),
                                                        ": EOF in the middle of a message"))
                  : ErrnoStatus(absl::StrCat("lost connection to ", c->SocketName(this)), "recv"),
              true);
      return;
    }
    rleft -= static_cast<size_t>(n);
    if (rdst != nullptr) rdst += n;
    if (rleft == 0) c->OnPayloadDone(this);
  }
}

void TcpConnection::OnFrame(Socket* s, const FrameHeader& h) {
  absl::MutexLock lock(&mu_);
  if (h.magic != kFrameMagic) {
    mu_.Unlock();
    Fail(absl::DataLossError(
             absl::StrCat("protocol error from ", SocketName(s), ": bad frame magic")),
         true);
    mu_.Lock();
    return;
  }
  switch (h.type) {
    case kFrameMsg: {
      auto m = std::make_unique<Incoming>();
      m->seq = h.seq;
      m->tag = h.a;
      m->total = h.b;
      auto pit = posted_.find(m->tag);
      if (pit != posted_.end() && !pit->second.empty()) {
        PostedRecv r = pit->second.front();
        pit->second.pop_front();
        if (pit->second.empty()) posted_.erase(pit);
        m->consumed = true;
        if (m->total > r.capacity) {
          r.req->Complete(absl::InvalidArgumentError(absl::StrCat(
                              "message of ", m->total, " bytes from ", peer_name_, " (tag ", m->tag,
                              ") exceeds the receive buffer of ", r.capacity, " bytes")),
                          0);
          m->discard = true;
        } else {
          m->recv = r.req;
          m->dst = r.buf;
        }
      } else {
        if (m->total > 0) {
          m->unexpected.reset(new (std::nothrow) char[m->total]);
          if (m->unexpected == nullptr) {
            mu_.Unlock();
            Fail(absl::ResourceExhaustedError(absl::StrCat("cannot buffer unexpected message of ",
                                                           h.b, " bytes from ", peer_name_)),
                 true);
            mu_.Lock();
            return;
          }
        }
        m->dst = m->unexpected.get();
        unexpected_[m->tag].push_back(m.get());
      }
      Incoming* raw = m.get();
      incoming_[h.seq] = std::move(m);
      if (raw->total == 0) CompleteIncoming(raw);
      // Wake sockets that were waiting for this announcement.
      for (auto& other : sockets_) {
        if (other->paused && other->waiting_seq == h.seq && other->registered) {
          other->paused = false;
          device_->ModifyFd(other->fd, EPOLLIN | (other->write_armed ? EPOLLOUT : 0), other.get());
        }
      }
      return;
    }
    case kFrameChunk: {
      auto it = incoming_.find(h.seq);
      if (it == incoming_.end()) {
        // Announcement not read yet: stop reading this socket until it is.
        s->paused = true;
        s->waiting_seq = h.seq;
        s->rhdr_got = sizeof(FrameHeader);  // keep the header; resume re-dispatches it
        device_->ModifyFd(s->fd, s->write_armed ? EPOLLOUT : 0, s);
        return;
      }
      Incoming* m = it->second.get();
      if (h.a + h.b > m->total || h.b == 0) {
        mu_.Unlock();
        Fail(absl::DataLossError(absl::StrCat("protocol error from ", SocketName(s), ": chunk [",
                                              h.a, ", +", h.b, ") outside message of ", m->total,
                                              " bytes")),
             true);
        mu_.Lock();
        return;
      }
      s->in_payload = true;
      s->rmsg = m;
      s->rchunk = h.b;
      s->rleft = h.b;
      s->rdst = m->discard ? nullptr : m->dst + h.a;
      return;
    }
    case kFrameClose: {
      peer_closed_ = true;
      s->closed_by_peer = true;
      for (auto& [tag, q] : posted_) {
        for (PostedRecv& r : q) {
          r.req->Complete(absl::UnavailableError(absl::StrCat("receive from ", peer_name_,
                                                              ": peer closed the connection")),
                          0);
        }
      }
      posted_.clear();
      return;
    }
    default:
      mu_.Unlock();
      Fail(absl::DataLossError(absl::StrCat("protocol error from ", SocketName(s),
                                            ": unknown frame type ", h.type)),
           true);
      mu_.Lock();
  }
}

void TcpConnection::OnPayloadDone(Socket* s) {
  absl::MutexLock lock(&mu_);
  Incoming* m = s->rmsg;
  s->in_payload = false;
  s->rmsg = nullptr;
  s->rdst = nullptr;
  m->received += s->rchunk;
  if (m->received == m->total) CompleteIncoming(m);
}

void TcpConnection::OnWritable(Socket* s) {
  iovec iov[kMaxIov];
  int n_iov = 0;
  {
    absl::MutexLock lock(&mu_);
    if (!failed_.ok()) return;
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
    if (n_iov == 0) {
      s->write_armed = false;
      device_->ModifyFd(s->fd, s->paused ? 0 : EPOLLIN, s);
      return;
    }
  }
  msghdr msg{};
  msg.msg_iov = iov;
  msg.msg_iovlen = static_cast<size_t>(n_iov);
  ssize_t n = sendmsg(s->fd, &msg, MSG_NOSIGNAL | MSG_DONTWAIT);
  if (n < 0) {
    if (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR) return;
    bool quiet;
    {
      absl::MutexLock lock(&mu_);
      quiet = peer_closed_ || closing_;
    }
    Fail(ErrnoStatus(absl::StrCat("lost connection to ", SocketName(s)), "sendmsg"), !quiet);
    return;
  }
  std::vector<std::pair<std::shared_ptr<RequestState>, size_t>> done;
  {
    absl::MutexLock lock(&mu_);
    size_t left = static_cast<size_t>(n);
    while (left > 0 && !s->outq.empty()) {
      OutFrame& f = s->outq.front();
      size_t take = std::min(left, f.total() - f.sent);
      f.sent += take;
      left -= take;
      if (f.sent < f.total()) break;
      if (f.op != nullptr && --f.op->frames_left == 0) done.emplace_back(f.op->req, f.op->len);
      bool is_close = f.hdr.type == kFrameClose;
      s->outq.pop_front();
      if (is_close) shutdown(s->fd, SHUT_WR);
    }
    if (s->outq.empty()) {
      s->write_armed = false;
      device_->ModifyFd(s->fd, s->paused ? 0 : EPOLLIN, s);
    }
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
    s->write_armed = false;
    if (s->registered) device_->RemoveFd(s->fd);
    s->registered = false;
  }
  for (auto& r : reqs) {
    r->Complete(absl::UnavailableError(
                    absl::StrCat("send to ", peer_name_, ": peer closed the connection")),
                0);
  }
}

void TcpConnection::Fail(absl::Status status, bool report) {
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
      if (s->registered && device_->OnProgressThread()) {
        device_->RemoveFd(s->fd);
        s->registered = false;
      }
    }
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
