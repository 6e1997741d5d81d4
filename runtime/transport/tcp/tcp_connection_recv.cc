// TCP connection, receive side: tag matching of posted receives against
// announced messages, the rendezvous (CTS, or a pull straight from a local
// sender's memory), and reading and parsing frames (see tcp_connection.h).
// Irecv runs on caller threads; Socket::OnEvents, ReadFrames, OnFrame and
// OnPayloadDone on the device's progress thread.
#include "runtime/transport/tcp/tcp_connection.h"

#include <sys/epoll.h>
#include <sys/socket.h>
#include <sys/uio.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>

#include "absl/strings/cord.h"
#include "absl/strings/str_cat.h"
#include "runtime/common/log.h"
#include "runtime/common/status.h"
#include "runtime/transport/tcp/tcp_connection_internal.h"

namespace mixnet::transport::tcp {

namespace {
// Reads that may hold frame headers go through a buffer this large: big
// enough for a run of control frames and small messages, small enough that
// the bytes of a large payload copied out of it are few (a chunk's payload
// is then received in place).
constexpr size_t kReadBufferBytes = 4 << 10;

absl::Status TooSmall(size_t total, const std::string& peer, uint64_t tag, size_t capacity) {
  return absl::InvalidArgumentError(absl::StrCat("message of ", total, " bytes from ", peer,
                                                 " (tag ", tag, ") exceeds the receive buffer of ",
                                                 capacity, " bytes"));
}
}  // namespace

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
          SocketName(sockets_[0].get()), peer_pid_, ErrnoText(err));
    }
    return false;  // ESRCH: the peer is gone; CTS makes the socket report it
  }
  OutFrame fin;
  fin.hdr = FrameHeader{kFrameFin, kFrameMagic, m->seq, 0, 0};
  Queue(sockets_[0].get(), std::move(fin));
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
  Queue(sockets_[0].get(), std::move(f));
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
    return PeerClosedError(absl::StrCat("receive from ", peer_name_));
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
              r.req->Complete(PeerClosedError(absl::StrCat("receive from ", peer_name_)), 0);
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

}  // namespace mixnet::transport::tcp
