// TCP connection: framing, eager/rendezvous protocol, striping, tag matching
// (see tcp_connection.h).
#include "runtime/transport/tcp/tcp_connection.h"

#include <sys/epoll.h>
#include <sys/socket.h>
#include <sys/uio.h>
#include <unistd.h>

#include <algorithm>
#include <cstring>

#include "absl/strings/cord.h"
#include "absl/strings/str_cat.h"
#include "runtime/common/log.h"
#include "runtime/common/status.h"

namespace mixnet::transport::tcp {

struct TcpConnection::SendOp {
  std::shared_ptr<RequestState> req;
  const char* data = nullptr;
  size_t len = 0;
  size_t frames_left = 0;  // frames of this message not yet fully written
};

struct TcpConnection::OutFrame {
  FrameHeader hdr{};
  const char* data = nullptr;
  size_t len = 0;              // payload bytes after the header
  size_t sent = 0;             // header + payload bytes written so far
  std::shared_ptr<SendOp> op;  // null for control frames
  size_t total() const { return sizeof(FrameHeader) + len; }
};

struct TcpConnection::Incoming {
  uint64_t seq = 0;
  uint64_t tag = 0;
  size_t total = 0;
  size_t received = 0;
  bool eager = false;
  uint64_t pull_addr = 0;              // local transport: where it is in the sender
  char* dst = nullptr;                 // where payload lands
  std::unique_ptr<char[]> unexpected;  // eager payload that arrived before its receive
  std::shared_ptr<RequestState> recv;  // the matched receive, if any
  char* user_buf = nullptr;            // eager, matched late: copy here on completion
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
  // Reads and handles every frame that has arrived (progress thread).
  void ReadFrames();
  // The stream may end here without a failure: the peer said CLOSE on this
  // socket, or we are closing the connection ourselves.
  bool OrderlyEnd() const {
    if (closed_by_peer) return true;
    absl::MutexLock lock(&conn_->mu_);
    return conn_->closing_;
  }

  TcpConnection* const conn_;
  const int fd;
  const int index;
  // Guarded by conn_->mu_.
  bool registered = false;
  std::deque<OutFrame> outq;
  bool write_armed = false;
  // Part of a frame is on the wire (nothing else may be written before its
  // remainder).
  bool mid_frame = false;
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
// Reads that may hold frame headers go through a buffer this large: big
// enough for a run of control frames and small messages, small enough that
// the bytes of a large payload copied out of it are few (a chunk's payload
// is then received in place).
constexpr size_t kReadBufferBytes = 4 << 10;
constexpr int kMaxIov = 64;

absl::Status TooSmall(size_t total, const std::string& peer, uint64_t tag, size_t capacity) {
  return absl::InvalidArgumentError(absl::StrCat("message of ", total, " bytes from ", peer,
                                                 " (tag ", tag, ") exceeds the receive buffer of ",
                                                 capacity, " bytes"));
}
}  // namespace

absl::StatusOr<std::unique_ptr<TcpConnection>> TcpConnection::Create(TcpDevice* device,
                                                                     std::vector<int> fds,
                                                                     std::string peer_name) {
  std::unique_ptr<TcpConnection> conn(new TcpConnection(device, std::move(peer_name)));
  for (size_t i = 0; i < fds.size(); ++i) {
    conn->sockets_.push_back(std::make_unique<Socket>(conn.get(), fds[i], static_cast<int>(i)));
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
  bool healthy;
  {
    absl::MutexLock lock(&mu_);
    // Sends still queued are being cancelled (a collective aborted): the peer
    // may be stuck, so close at once; it sees an abrupt loss.
    bool cancelling = !awaiting_cts_.empty();
    for (auto& s : sockets_) {
      for (const OutFrame& f : s->outq) cancelling |= f.op != nullptr;
    }
    healthy = failed_.ok() && !cancelling;
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
  // An abrupt close on purpose: say so, where the stream is at a frame
  // boundary, so the peer does not take it for this process dying.
  if (!healthy) {
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
    close(s->fd);
  }
}

absl::Status TcpConnection::health() const {
  absl::MutexLock lock(&mu_);
  return failed_;
}

uint64_t TcpConnection::pulled_messages() const {
  absl::MutexLock lock(&mu_);
  return pulled_;
}

std::string TcpConnection::SocketName(const Socket* s) const {
  return absl::StrCat(peer_name_, " (socket ", s->index + 1, "/", sockets_.size(), " on ",
                      device_->name(), ")");
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
      sockets_[0]->outq.push_back(std::move(pull));
    }
    f.hdr = FrameHeader{kFrameRts, kFrameMagic, seq, tag, len};
    awaiting_cts_[seq] = op;
  }
  sockets_[0]->outq.push_back(std::move(f));
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
    Socket* s = sockets_[(seq + i) % k].get();
    OutFrame f;
    f.hdr = FrameHeader{kFrameChunk, kFrameMagic, seq, off, n};
    f.data = op->data + off;
    f.len = n;
    f.op = op;
    s->outq.push_back(std::move(f));
  }
  for (auto& s : sockets_) {
    if (!s->outq.empty()) Kick(s.get());
  }
}

void TcpConnection::Rendezvous(Incoming* m) {
  if (m->pull_addr != 0 && accept_pull_ && Pull(m)) return;
  SendCts(m->seq, /*refuse=*/false);
}

// Copies the whole message out of the sender's memory. The sender's buffer
// stays valid and unmodified until its send completes, which is only after
// our FIN. Runs under mu_ (on the progress thread, or on the caller's thread
// when the receive was posted late), so nothing can fail the receive while
// its buffer is being written.
bool TcpConnection::Pull(Incoming* m) {
  size_t done = 0;
  while (done < m->total) {
    iovec local{m->dst + done, m->total - done};
    iovec remote{reinterpret_cast<void*>(m->pull_addr + done), m->total - done};
    ssize_t n = process_vm_readv(peer_pid_, &local, 1, &remote, 1, 0);
    if (n > 0) {
      done += static_cast<size_t>(n);
      continue;
    }
    if (n < 0 && errno == EINTR) continue;
    const int err = n < 0 ? errno : EIO;
    if (err != ESRCH) {
      // Not allowed here (ptrace scope, seccomp, a container without
      // CAP_SYS_PTRACE): stream this and every later message instead.
      accept_pull_ = false;
      log::Info(
          "{}: reading the sender's memory (pid {}) failed: {}; large messages on "
          "this connection stream over the socket instead",
          SocketName(sockets_[0].get()), peer_pid_, std::strerror(err));
    }
    return false;  // ESRCH: the peer is gone; CTS makes the socket report it
  }
  OutFrame fin;
  fin.hdr = FrameHeader{kFrameFin, kFrameMagic, m->seq, 0, 0};
  sockets_[0]->outq.push_back(std::move(fin));
  Kick(sockets_[0].get());
  ++pulled_;
  m->received = m->total;
  std::shared_ptr<RequestState> recv = std::move(m->recv);
  const size_t total = m->total;
  incoming_.erase(m->seq);
  recv->Complete(absl::OkStatus(), total);
  return true;
}

void TcpConnection::SendCts(uint64_t seq, bool refuse) {
  OutFrame f;
  f.hdr = FrameHeader{kFrameCts, kFrameMagic, seq, refuse ? 1u : 0u, 0};
  sockets_[0]->outq.push_back(std::move(f));
  Kick(sockets_[0].get());
}

bool TcpConnection::Match(Incoming* m, std::shared_ptr<RequestState> req, char* buf,
                          size_t capacity) {
  m->consumed = true;
  if (m->total > capacity) {
    req->Complete(TooSmall(m->total, peer_name_, m->tag, capacity), 0);
    m->discard = true;
    return false;
  }
  m->recv = std::move(req);
  if (m->eager && m->unexpected != nullptr) {
    m->user_buf = buf;  // copied out when the payload is complete
  } else {
    m->dst = buf;
  }
  return true;
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
    bool ok = Match(m, req, static_cast<char*>(buf), len);
    if (!m->eager) {
      if (ok) {
        Rendezvous(m);
      } else {
        SendCts(m->seq, /*refuse=*/true);
        incoming_.erase(m->seq);
      }
    } else if (m->received == m->total) {
      CompleteIncoming(m);
    }
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
  // Reads first: when the peer has gone, what it said last (ABORT, CLOSE)
  // names the cause better than the failed write would.
  if (events & (EPOLLIN | EPOLLHUP | EPOLLERR)) ReadFrames();
  if (events & EPOLLOUT) conn_->OnWritable(this);
}

// Reads in bulk: one recv fills a buffer with as many frames as have arrived
// (a PULL and its RTS, a run of small eager messages), which are then parsed
// from memory; only large payloads are received straight into their
// destination. A buffered read that returns less than it asked for means the
// socket is drained, so the loop stops without a recv that would say EAGAIN
// (epoll is level-triggered: later bytes raise a new event). Syscalls are
// what a small message costs, more so in a VM (about 1 us each here).
void TcpConnection::Socket::ReadFrames() {
  TcpConnection* c = conn_;
  // Everything read into it is consumed before this returns (the thread runs
  // one handler at a time), so one buffer per thread serves every socket.
  static thread_local std::unique_ptr<char[]> buffer(new char[kReadBufferBytes]);
  char* const buf = buffer.get();
  size_t have = 0;  // bytes in buf from `pos`
  size_t pos = 0;
  bool drained = false;  // the last recv came back short
  while (true) {
    {
      absl::MutexLock lock(&c->mu_);
      if (!c->failed_.ok() || !registered) return;
    }
    if (have > 0) {
      if (!in_payload) {
        size_t take = std::min(have, sizeof(rhdr) - rhdr_got);
        std::memcpy(reinterpret_cast<char*>(&rhdr) + rhdr_got, buf + pos, take);
        pos += take;
        have -= take;
        rhdr_got += take;
        if (rhdr_got == sizeof(rhdr)) {
          rhdr_got = 0;
          c->OnFrame(this, rhdr);
        }
      } else {
        size_t take = std::min(have, rleft);
        if (rdst != nullptr) {
          std::memcpy(rdst, buf + pos, take);
          rdst += take;
        }
        pos += take;
        have -= take;
        rleft -= take;
        if (rleft == 0) c->OnPayloadDone(this);
      }
      continue;
    }
    if (drained) return;
    // A large payload goes straight to its destination; anything else is
    // read into the buffer, with whatever frames follow it.
    const bool direct = in_payload && rdst != nullptr && rleft >= kReadBufferBytes;
    char* dst = direct ? rdst : buf;
    const size_t want = direct ? rleft : kReadBufferBytes;
    ssize_t n = recv(fd, dst, want, 0);
    if (n > 0) {
      // (A payload streaming in place reads on until EAGAIN: more of it is
      // usually there by the next call.)
      drained = !direct && static_cast<size_t>(n) < want;
      if (direct) {
        rdst += n;
        rleft -= static_cast<size_t>(n);
        if (rleft == 0) c->OnPayloadDone(this);
      } else {
        pos = 0;
        have = static_cast<size_t>(n);
      }
      continue;
    }
    if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) return;
    if (n < 0 && errno == EINTR) continue;
    if (n == 0 && !in_payload) {
      if (OrderlyEnd()) {
        c->OnPeerShutdown(this);
        return;
      }
      c->Fail(absl::UnavailableError(absl::StrCat(
                  "lost connection to ", c->SocketName(this),
                  ": recv returned EOF without an orderly close (peer process died?)")),
              true);
      return;
    }
    if (n == 0) {
      c->Fail(absl::UnavailableError(absl::StrCat("lost connection to ", c->SocketName(this),
                                                  ": EOF in the middle of a message")),
              true);
      return;
    }
    // After the peer's CLOSE (it then closed with bytes of ours unread) or
    // during our own close, a reset is still an orderly shutdown.
    if (errno == ECONNRESET && !in_payload && OrderlyEnd()) {
      c->OnPeerShutdown(this);
      return;
    }
    c->Fail(ErrnoStatus(absl::StrCat("lost connection to ", c->SocketName(this)), "recv"), true);
    return;
  }
}

void TcpConnection::OnFrame(Socket* s, const FrameHeader& h) {
  absl::Status error;
  {
    absl::MutexLock lock(&mu_);
    if (h.magic != kFrameMagic) {
      error = absl::DataLossError(
          absl::StrCat("protocol error from ", SocketName(s), ": bad frame magic"));
    } else {
      switch (h.type) {
        case kFrameEager:
        case kFrameRts: {
          auto m = std::make_unique<Incoming>();
          m->seq = h.seq;
          m->tag = h.a;
          m->total = h.b;
          m->eager = h.type == kFrameEager;
          if (!m->eager && pull_addr_ != 0 && pull_seq_ == h.seq) m->pull_addr = pull_addr_;
          pull_addr_ = 0;
          Incoming* raw = m.get();
          incoming_[h.seq] = std::move(m);
          auto pit = posted_.find(raw->tag);
          bool matched = pit != posted_.end() && !pit->second.empty();
          bool ok = true;
          if (matched) {
            PostedRecv r = pit->second.front();
            pit->second.pop_front();
            if (pit->second.empty()) posted_.erase(pit);
            ok = Match(raw, r.req, r.buf, r.capacity);
          } else {
            if (raw->eager && raw->total > 0) {
              raw->unexpected.reset(new (std::nothrow) char[raw->total]);
              if (raw->unexpected == nullptr) {
                error = absl::ResourceExhaustedError(absl::StrCat(
                    "cannot buffer unexpected message of ", h.b, " bytes from ", peer_name_));
                break;
              }
              raw->dst = raw->unexpected.get();
            }
            unexpected_[raw->tag].push_back(raw);
          }
          if (raw->eager) {
            if (raw->total == 0) {
              CompleteIncoming(raw);
            } else {
              s->in_payload = true;
              s->rmsg = raw;
              s->rchunk = raw->total;
              s->rleft = raw->total;
              s->rdst = raw->discard ? nullptr : raw->dst;
            }
          } else if (matched) {
            if (ok) {
              Rendezvous(raw);
            } else {
              SendCts(raw->seq, /*refuse=*/true);
              incoming_.erase(raw->seq);
            }
          }
          break;
        }
        case kFramePull: {
          pull_seq_ = h.seq;
          pull_addr_ = h.a;
          break;
        }
        case kFrameFin: {
          auto it = awaiting_cts_.find(h.seq);
          if (it == awaiting_cts_.end()) {
            error = absl::DataLossError(absl::StrCat("protocol error from ", SocketName(s),
                                                     ": FIN for message ", h.seq,
                                                     ", which is not waiting"));
            break;
          }
          it->second->req->Complete(absl::OkStatus(), it->second->len);
          awaiting_cts_.erase(it);
          break;
        }
        case kFrameCts: {
          if (h.a == 1) {
            auto it = awaiting_cts_.find(h.seq);
            if (it != awaiting_cts_.end()) {
              it->second->req->Complete(absl::InvalidArgumentError(absl::StrCat(
                                            "send of ", it->second->len, " bytes to ", peer_name_,
                                            ": the matching receive is smaller; nothing was sent")),
                                        0);
              awaiting_cts_.erase(it);
            }
          } else {
            StartPayload(h.seq);
          }
          break;
        }
        case kFrameChunk: {
          auto it = incoming_.find(h.seq);
          if (it == incoming_.end() || it->second->eager || h.b == 0 ||
              h.a + h.b > it->second->total) {
            error = absl::DataLossError(absl::StrCat("protocol error from ", SocketName(s),
                                                     ": unexpected chunk [", h.a, ", +", h.b,
                                                     ") of message ", h.seq));
            break;
          }
          Incoming* m = it->second.get();
          s->in_payload = true;
          s->rmsg = m;
          s->rchunk = h.b;
          s->rleft = h.b;
          s->rdst = m->discard ? nullptr : m->dst + h.a;
          break;
        }
        case kFrameAbort: {
          error = absl::UnavailableError(
              absl::StrCat("lost connection to ", SocketName(s),
                           ": the peer aborted (its communicator failed, likely because of "
                           "another peer)"));
          error.SetPayload(kPeerAlivePayload, absl::Cord("1"));
          break;
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
          break;
        }
        default:
          error = absl::DataLossError(
              absl::StrCat("protocol error from ", SocketName(s), ": unknown frame type ", h.type));
      }
    }
  }
  if (!error.ok()) Fail(error, true);
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
    if (is_close) shutdown(s->fd, SHUT_WR);
  }
  s->mid_frame = !s->outq.empty() && s->outq.front().sent > 0;
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
  int n_iov = 0;
  {
    absl::MutexLock lock(&mu_);
    if (!failed_.ok() || !s->write_armed) return;
    n_iov = FillIov(s, iov);
    if (n_iov == 0) {
      s->write_armed = false;
      if (s->registered) device_->ModifyFd(s->fd, EPOLLIN, s);
      return;
    }
  }
  msghdr msg{};
  msg.msg_iov = iov;
  msg.msg_iovlen = static_cast<size_t>(n_iov);
  ssize_t n = sendmsg(s->fd, &msg, MSG_NOSIGNAL | MSG_DONTWAIT);
  if (n < 0) {
    if (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR) return;
    const int err = errno;
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
  Completions done;
  {
    absl::MutexLock lock(&mu_);
    Advance(s, static_cast<size_t>(n), &done);
    if (s->outq.empty() && s->registered) {
      s->write_armed = false;
      device_->ModifyFd(s->fd, EPOLLIN, s);
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
    if (s->index == 0) {
      for (auto& [seq, op] : awaiting_cts_) reqs.push_back(op->req);
      awaiting_cts_.clear();
    }
  }
  for (auto& r : reqs) {
    r->Complete(absl::UnavailableError(
                    absl::StrCat("send to ", peer_name_, ": peer closed the connection")),
                0);
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
