// Verbs connection life cycle and the caller-facing API: creation, Isend,
// Irecv, failure, orderly close (see verbs_connection.h for the protocol).
// Isend/Irecv/Close run on caller threads; OnBootstrapReadable and
// OnDeviceFailure on the poller thread.
#include "runtime/transport/verbs/verbs_connection.h"

#include <sys/socket.h>

#include <algorithm>
#include <cerrno>
#include <cstdlib>
#include <cstring>

#include "absl/strings/str_cat.h"
#include "runtime/common/log.h"
#include "runtime/common/status.h"
#include "runtime/transport/verbs/poller.h"

namespace mixnet::transport::verbs {

absl::StatusOr<std::unique_ptr<SlotBuffer>> SlotBuffer::Create(ibv_pd* pd, int slots,
                                                               size_t slot_bytes,
                                                               const std::string& what) {
  const size_t bytes = (static_cast<size_t>(slots) * slot_bytes + 4095) & ~size_t{4095};
  auto* mem = static_cast<uint8_t*>(std::aligned_alloc(4096, bytes));
  if (mem == nullptr) {
    return absl::ResourceExhaustedError(absl::StrCat(what, ": cannot allocate ", bytes, " bytes"));
  }
  std::memset(mem, 0, bytes);
  ibv_mr* mr = ibv_reg_mr(pd, mem, bytes, IBV_ACCESS_LOCAL_WRITE);
  if (mr == nullptr) {
    int err = errno;
    std::free(mem);
    return VerbsError(what, "ibv_reg_mr", err);
  }
  return std::unique_ptr<SlotBuffer>(new SlotBuffer(mem, slot_bytes, mr));
}

SlotBuffer::~SlotBuffer() {
  int rc = ibv_dereg_mr(mr_);
  if (rc != 0) log::Warn("verbs: ibv_dereg_mr of a slot buffer failed: {}", ErrnoText(rc));
  std::free(mem_);
}

VerbsConnection::VerbsConnection(std::shared_ptr<VerbsContext> ctx, std::shared_ptr<Poller> poller,
                                 ConnectionConfig cfg, std::string peer_name,
                                 FailureCallback on_failure)
    : ctx_(std::move(ctx)),
      poller_(std::move(poller)),
      cfg_(cfg),
      peer_name_(std::move(peer_name)),
      on_failure_(std::move(on_failure)) {}

absl::StatusOr<std::shared_ptr<VerbsConnection>> VerbsConnection::Create(
    std::shared_ptr<VerbsContext> ctx, std::shared_ptr<Poller> poller, ConnectionConfig cfg,
    std::string peer_name, FailureCallback on_failure) {
  if (cfg.slot_bytes <= kWireHeaderBytes + 8 || cfg.window == 0 || cfg.credit_batch == 0 ||
      cfg.credit_batch > cfg.window || cfg.send_slots <= 0 || cfg.send_depth < cfg.send_slots) {
    return absl::InvalidArgumentError("verbs: bad connection configuration");
  }
  std::shared_ptr<VerbsConnection> c(new VerbsConnection(
      std::move(ctx), std::move(poller), cfg, std::move(peer_name), std::move(on_failure)));
  const std::string what = absl::StrCat(c->ctx_->label(), " connection to ", c->peer_name_);
  ASSIGN_OR_RETURN(c->recv_buf_, SlotBuffer::Create(c->ctx_->pd(), cfg.recv_depth(), cfg.slot_bytes,
                                                    what + ": receive slots"));
  ASSIGN_OR_RETURN(c->send_buf_, SlotBuffer::Create(c->ctx_->pd(), cfg.send_slots, cfg.slot_bytes,
                                                    what + ": send slots"));
  ASSIGN_OR_RETURN(c->qp_, QueuePair::Create(c->ctx_, cfg.send_depth, cfg.recv_depth()));
  if (c->qp_->recv_depth() < cfg.recv_depth() || c->qp_->send_depth() < cfg.send_slots) {
    return absl::ResourceExhaustedError(
        absl::StrCat(what, ": the device allows only ", c->ctx_->max_qp_wr(),
                     " work requests per queue, need ", cfg.recv_depth()));
  }
  c->qpn_ = c->qp_->qpn();
  c->recv_eager_max_ = cfg.slot_bytes - kWireHeaderBytes;
  absl::MutexLock lock(&c->mu_);
  c->sq_free_ = c->qp_->send_depth();
  c->slot_op_.assign(cfg.send_slots, 0);
  for (int i = cfg.send_slots - 1; i >= 0; --i) c->free_slots_.push_back(i);
  for (int i = 0; i < cfg.recv_depth(); ++i) {
    if (!c->RepostRecvLocked(i)) return c->failed_;
  }
  return c;
}

VerbsConnection::~VerbsConnection() = default;

absl::Status VerbsConnection::ConnectQp(const QpInfo& remote) {
  if (remote.slot_bytes <= kWireHeaderBytes || remote.recv_window == 0) {
    return absl::DataLossError(absl::StrCat(ctx_->label(), ": ", peer_name_,
                                            " sent a bad receive window (", remote.recv_window,
                                            " slots of ", remote.slot_bytes, " bytes)"));
  }
  RETURN_IF_ERROR(qp_->Connect(remote, peer_name_, cfg_.traffic_class));
  send_eager_max_ = std::min<size_t>(cfg_.slot_bytes, remote.slot_bytes) - kWireHeaderBytes;
  // Its receives may be GPU memory: only zero-byte messages go eager.
  if (remote.device_receives) send_eager_max_ = 0;
  write_chunk_ = std::min<size_t>(ctx_->max_msg_bytes(), size_t{1} << 30);
  absl::MutexLock lock(&mu_);
  credits_ = remote.recv_window;
  return absl::OkStatus();
}

void VerbsConnection::Activate(Fd bootstrap) {
  bootstrap_ = std::move(bootstrap);
  active_ = true;
}

absl::Status VerbsConnection::health() const {
  absl::MutexLock lock(&mu_);
  return failed_;
}

absl::StatusOr<std::unique_ptr<Request>> VerbsConnection::Isend(const void* buf, size_t len,
                                                                uint64_t tag) {
  if (buf == nullptr && len > 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("Isend to ", peer_name_, ": null buffer of ", len, " bytes"));
  }
  auto op = std::make_shared<SendOp>();
  op->req = std::make_shared<RequestState>();
  op->buf = static_cast<const uint8_t*>(buf);
  op->len = len;
  op->tag = tag;
  op->eager = len <= send_eager_max_;
  if (len > 0) {
    // GPU memory: the NIC reads it (rendezvous), the CPU never copies it.
    MrRef dev = ctx_->registry().FindDevice(buf, len);
    if (dev.valid()) {
      op->eager = false;
      op->mr = std::move(dev);
    }
  }
  if (!op->eager && !op->mr.valid()) {
    absl::StatusOr<MrRef> mr = ctx_->registry().Acquire(buf, len, /*remote_write=*/false);
    if (!mr.ok()) return Annotate(mr.status(), absl::StrCat("Isend to ", peer_name_));
    op->mr = std::move(*mr);
  }
  {
    absl::MutexLock lock(&mu_);
    if (!failed_.ok()) return failed_;
    if (peer_closed_) {
      return PeerClosedError(absl::StrCat("send to ", peer_name_));
    }
    if (closing_) return absl::FailedPreconditionError("send on a closing verbs connection");
    op->id = next_send_id_++;
    sends_[op->id] = op;
    OutMsg m;
    m.kind = op->eager ? OutMsg::kEager : OutMsg::kRts;
    m.op = op;
    pending_.push_back(std::move(m));
    FlushLocked();
  }
  ReportFailure();
  return std::make_unique<StateRequest>(op->req);
}

absl::StatusOr<std::unique_ptr<Request>> VerbsConnection::Irecv(void* buf, size_t len,
                                                                uint64_t tag) {
  if (buf == nullptr && len > 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("Irecv from ", peer_name_, ": null buffer of ", len, " bytes"));
  }
  auto r = std::make_unique<RecvOp>();
  r->req = std::make_shared<RequestState>();
  r->buf = static_cast<uint8_t*>(buf);
  r->cap = len;
  r->tag = tag;
  std::shared_ptr<RequestState> req = r->req;
  if (MrRef dev = ctx_->registry().FindDevice(buf, len); dev.valid()) {
    r->mr = std::move(dev);
    r->device = true;
  } else if (len > recv_eager_max_ || (cfg_.device_receives && len > 0)) {
    // Registered now, on the caller's thread, so a rendezvous can answer at once.
    absl::StatusOr<MrRef> mr = ctx_->registry().Acquire(buf, len, /*remote_write=*/true);
    if (!mr.ok()) return Annotate(mr.status(), absl::StrCat("Irecv from ", peer_name_));
    r->mr = std::move(*mr);
  }
  {
    absl::MutexLock lock(&mu_);
    if (!failed_.ok()) return failed_;
    if (closing_) return absl::FailedPreconditionError("receive on a closing verbs connection");
    auto it = unexpected_.find(tag);
    if (it != unexpected_.end() && !it->second.empty()) {
      std::unique_ptr<Unexpected> u = std::move(it->second.front());
      it->second.pop_front();
      if (it->second.empty()) unexpected_.erase(it);
      MatchHeldLocked(std::move(r), std::move(u));
    } else if (peer_closed_) {
      return PeerClosedError(absl::StrCat("receive from ", peer_name_));
    } else {
      posted_[tag].push_back(std::move(r));
    }
  }
  ReportFailure();
  return std::make_unique<StateRequest>(req);
}

absl::StatusOr<std::shared_ptr<const void>> VerbsConnection::RegisterMemory(const void* buf,
                                                                            size_t len) {
  if (len == 0) return std::shared_ptr<const void>();
  if (buf == nullptr) {
    return absl::InvalidArgumentError(
        absl::StrCat("registering memory for ", peer_name_, ": null buffer of ", len, " bytes"));
  }
  absl::StatusOr<MrRef> mr = ctx_->registry().Acquire(buf, len, /*remote_write=*/true);
  if (!mr.ok()) return Annotate(mr.status(), absl::StrCat("registering memory for ", peer_name_));
  // The context (its registry and protection domain) outlives the reference.
  struct Pin {
    std::shared_ptr<VerbsContext> ctx;
    MrRef mr;
  };
  auto pin = std::make_shared<Pin>(Pin{ctx_, std::move(*mr)});
  return std::shared_ptr<const void>(pin, pin.get());
}

absl::StatusOr<std::shared_ptr<const void>> VerbsConnection::RegisterDeviceMemory(
    const void* buf, size_t len, int dmabuf_fd, uint64_t dmabuf_offset) {
  if (len == 0) return std::shared_ptr<const void>();
  if (buf == nullptr) {
    return absl::InvalidArgumentError(absl::StrCat("registering GPU memory for ", peer_name_,
                                                   ": null buffer of ", len, " bytes"));
  }
  absl::StatusOr<MrRef> mr = ctx_->registry().AcquireDevice(buf, len, dmabuf_fd, dmabuf_offset);
  if (!mr.ok()) {
    return Annotate(mr.status(), absl::StrCat("registering GPU memory for ", peer_name_));
  }
  struct Pin {
    std::shared_ptr<VerbsContext> ctx;
    MrRef mr;
  };
  auto pin = std::make_shared<Pin>(Pin{ctx_, std::move(*mr)});
  return std::shared_ptr<const void>(pin, pin.get());
}

absl::StatusOr<std::unique_ptr<Request>> VerbsConnection::ReadLocal(const void* buf) {
  MrRef dev = ctx_->registry().FindDevice(buf, 1);
  if (!dev.valid()) {
    return absl::InvalidArgumentError(absl::StrCat(
        ctx_->label(), ": flushing GPU writes at 0x", absl::Hex(reinterpret_cast<uintptr_t>(buf)),
        ": not registered GPU memory (regMr / regMrDmaBuf it first)"));
  }
  auto req = std::make_shared<RequestState>();
  {
    absl::MutexLock lock(&mu_);
    if (!failed_.ok()) return failed_;
    if (peer_closed_ || closing_) {
      return absl::FailedPreconditionError(
          absl::StrCat(ctx_->label(), ": flush on a closing loopback connection"));
    }
    OutMsg m;
    m.kind = OutMsg::kRead;
    m.addr = reinterpret_cast<uintptr_t>(buf);
    m.rkey = dev.rkey();
    m.read = req;
    pending_.push_back(std::move(m));
    FlushLocked();
  }
  ReportFailure();
  // The registration is the caller's (its regMr handle outlives the flush).
  return std::make_unique<StateRequest>(req);
}

void VerbsConnection::QpToErrorLocked() {
  if (qp_ == nullptr) return;
  absl::Status s = qp_->ToError();
  if (!s.ok()) log::Warn("{}", s.ToString());
}

void VerbsConnection::FailRequestsLocked(const absl::Status& st) {
  for (auto& [id, op] : sends_) op->req->Complete(st, 0);
  sends_.clear();
  for (auto& [tag, q] : posted_) {
    for (auto& r : q) r->req->Complete(st, 0);
  }
  posted_.clear();
  for (auto& [cookie, t] : rendezvous_) t.recv->req->Complete(st, 0);
  rendezvous_.clear();
  for (auto& [slot, r] : reads_) r->Complete(st, 0);
  reads_.clear();
  for (OutMsg& m : pending_) {
    if (m.read != nullptr) m.read->Complete(st, 0);
  }
  pending_.clear();
}

void VerbsConnection::FailLocked(absl::Status status, bool report) {
  if (!failed_.ok()) return;
  failed_ = status;
  // Stop the hardware first: after this no more data lands in user buffers.
  if (!peer_closed_) QpToErrorLocked();
  FailRequestsLocked(status);
  unexpected_.clear();
  unexpected_copied_ = 0;
  slots_held_ = 0;
  if (report && !peer_closed_) report_ = status;
}

void VerbsConnection::PeerClosedLocked() {
  if (!UsableLocked()) return;
  peer_closed_ = true;
  QpToErrorLocked();
  FailRequestsLocked(PeerClosedError(peer_name_));
  // Eager messages that arrived stay receivable (their slots are no longer
  // posted); announced rendezvous payloads never will arrive.
  for (auto it = unexpected_.begin(); it != unexpected_.end();) {
    auto& q = it->second;
    q.erase(std::remove_if(q.begin(), q.end(),
                           [](const std::unique_ptr<Unexpected>& u) { return u->rts; }),
            q.end());
    if (q.empty()) {
      unexpected_.erase(it++);
    } else {
      ++it;
    }
  }
}

void VerbsConnection::ReportFailure() {
  absl::Status st;
  {
    absl::MutexLock lock(&mu_);
    if (!report_.has_value()) return;
    st = std::move(*report_);
    report_.reset();
  }
  log::Warn("{}", st.ToString());
  if (on_failure_) on_failure_(st);
}

std::string VerbsConnection::ProtocolError(const std::string& what) const {
  return absl::StrCat(ctx_->label(), ": protocol error from ", peer_name_, ": ", what);
}

bool VerbsConnection::OnBootstrapReadable() {
  char buf[64];
  ssize_t n = recv(bootstrap_.get(), buf, sizeof(buf), MSG_DONTWAIT);
  int err = errno;
  {
    absl::MutexLock lock(&mu_);
    if (n > 0) {
      if (std::memchr(buf, kByeByte, static_cast<size_t>(n)) == nullptr) return true;
      PeerClosedLocked();
      return false;
    }
    if (n < 0 && (err == EAGAIN || err == EWOULDBLOCK || err == EINTR)) return true;
    if (UsableLocked()) {
      FailLocked(n == 0 ? absl::UnavailableError(absl::StrCat(
                              "lost connection to ", peer_name_, " via ", ctx_->label(),
                              ": its bootstrap socket closed without an orderly shutdown "
                              "(peer process died?)"))
                        : ErrnoStatus(absl::StrCat("lost connection to ", peer_name_, " via ",
                                                   ctx_->label(), ": bootstrap socket"),
                                      "recv", err),
                 /*report=*/true);
    }
  }
  ReportFailure();
  return false;
}

void VerbsConnection::OnDeviceFailure(const std::string& why, bool report) {
  {
    absl::MutexLock lock(&mu_);
    FailLocked(absl::UnavailableError(
                   absl::StrCat(ctx_->label(), ": ", why, "; connection to ", peer_name_, " lost")),
               report);
  }
  ReportFailure();
}

void VerbsConnection::Close() {
  const bool poller_runs = active_ && poller_->running() && !poller_->OnPollerThread();
  {
    absl::MutexLock lock(&mu_);
    closing_ = true;
    if (UsableLocked() && poller_runs) {
      // Let queued messages go out (bounded): what the peer already got stays
      // receivable there after the close.
      auto drained = [this]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
        return !UsableLocked() || (pending_.empty() && send_outstanding_ == 0);
      };
      mu_.AwaitWithTimeout(absl::Condition(&drained), absl::Seconds(2));
    }
    if (UsableLocked() && bootstrap_.get() >= 0) {
      char bye = kByeByte;
      absl::Status s =
          WriteFully(bootstrap_.get(), &bye, 1, absl::Now() + absl::Milliseconds(200), peer_name_);
      if (!s.ok()) log::Debug("verbs: close notice to {} not sent: {}", peer_name_, s.ToString());
    }
    FailLocked(absl::CancelledError(absl::StrCat("connection to ", peer_name_, " closed locally")),
               /*report=*/false);
    if (poller_runs) {
      // The QP is in ERR: wait for its work requests to flush out of the CQ.
      auto flushed = [this]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
        return recv_outstanding_ == 0 && send_outstanding_ == 0;
      };
      if (!mu_.AwaitWithTimeout(absl::Condition(&flushed), absl::Seconds(2))) {
        log::Warn("{}: connection to {}: {} receives and {} sends did not flush within 2 s",
                  ctx_->label(), peer_name_, recv_outstanding_, send_outstanding_);
      }
    }
  }
  // The poller drops its reference; the QP, buffers and socket go with the
  // last one.
  if (active_) poller_->Remove(qpn_);
}

}  // namespace mixnet::transport::verbs
