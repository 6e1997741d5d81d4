// The moving parts of a verbs connection: handling work completions (poller
// thread), matching arrivals to receives, and posting SENDs, RDMA WRITEs and
// receives under credit flow control (poller thread and caller threads, always
// with the connection mutex held). Protocol in verbs_connection.h.
#include <arpa/inet.h>

#include <algorithm>
#include <cstring>

#include "absl/strings/str_cat.h"
#include "runtime/common/status.h"
#include "runtime/transport/verbs/verbs_connection.h"

namespace mixnet::transport::verbs {
namespace {

const char* WrName(uint64_t kind) {
  switch (kind) {
    case 1:
      return "receive";
    case 2:
      return "send";
    case 5:
      return "RDMA read";
    default:
      return "RDMA write";
  }
}

}  // namespace

void VerbsConnection::OnCompletion(const ibv_wc& wc) {
  absl::MutexLock lock(&mu_);
  const uint64_t kind = wc.wr_id >> kWrKindShift;
  const uint64_t low = wc.wr_id & kWrLowMask;
  if (kind == kWrRecv) {
    --recv_outstanding_;
  } else {
    --send_outstanding_;
    ++sq_free_;
  }
  if (kind == kWrRead) {
    const int slot = static_cast<int>(low);
    free_slots_.push_back(slot);
    auto it = reads_.find(slot);
    if (it != reads_.end() && wc.status == IBV_WC_SUCCESS) {
      // (A failed one is completed by FailLocked below, with the rest.)
      std::shared_ptr<RequestState> r = std::move(it->second);
      reads_.erase(it);
      r->Complete(absl::OkStatus(), 1);
    }
  }
  if (kind == kWrSend) {
    const int slot = static_cast<int>(low);
    const uint64_t id = slot_op_[slot];
    slot_op_[slot] = 0;
    free_slots_.push_back(slot);
    if (slot == keepalive_slot_) keepalive_slot_ = -1;
    if (wc.status == IBV_WC_SUCCESS && id != 0) {
      // An eager message is in the peer's receive slot: the send is done.
      auto it = sends_.find(id);
      if (it != sends_.end()) {
        std::shared_ptr<SendOp> op = std::move(it->second);
        sends_.erase(it);
        op->req->Complete(absl::OkStatus(), op->len);
      }
    }
  }
  if (wc.status != IBV_WC_SUCCESS) {
    if (UsableLocked()) {
      FailLocked(
          absl::UnavailableError(absl::StrCat(
              ctx_->label(), ": ", WrName(kind), " on the connection to ", peer_name_,
              " failed: ", ibv_wc_status_str(wc.status), " (status ", static_cast<int>(wc.status),
              ", vendor error 0x", absl::Hex(wc.vendor_err), ", QP ", qpn_, ")")),
          /*report=*/true);
    }
    return;
  }
  if (!UsableLocked()) return;
  switch (kind) {
    case kWrRecv:
      HandleRecvLocked(static_cast<int>(low), wc);
      break;
    case kWrSend:
    case kWrWrite:
    case kWrRead:
      break;
    case kWrWriteLast: {
      auto it = sends_.find(low);
      if (it == sends_.end()) break;
      std::shared_ptr<SendOp> op = std::move(it->second);
      sends_.erase(it);
      op->mr.Reset();
      op->req->Complete(absl::OkStatus(), op->len);
      break;
    }
    default:
      FailLocked(absl::InternalError(ProtocolError(absl::StrCat(
                     "completion with unknown work request id 0x", absl::Hex(wc.wr_id)))),
                 /*report=*/true);
  }
}

void VerbsConnection::AfterCompletions() {
  {
    absl::MutexLock lock(&mu_);
    FlushLocked();
  }
  ReportFailure();
}

void VerbsConnection::HandleRecvLocked(int slot, const ibv_wc& wc) {
  if (wc.opcode == IBV_WC_RECV_RDMA_WITH_IMM) {
    // A rendezvous write finished: its payload is in place.
    ++owed_;
    if (!RepostRecvLocked(slot)) return;
    WriteLandedLocked(ntohl(wc.imm_data));
    return;
  }
  const uint8_t* p = recv_buf_->slot(slot);
  absl::StatusOr<WireHeader> h =
      wc.opcode == IBV_WC_RECV
          ? DecodeHeader(p, wc.byte_len)
          : absl::DataLossError(absl::StrCat("receive completion with opcode ", wc.opcode));
  if (!h.ok()) {
    FailLocked(absl::DataLossError(ProtocolError(std::string(h.status().message()))),
               /*report=*/true);
    return;
  }
  credits_ += h->credits;
  // (posted_ holds no empty queues.)
  if (h->type == MsgType::kEager && !posted_.contains(h->tag)) {
    // Nobody waits for it yet: copied, or left in this very slot, which is
    // then neither re-posted nor credited until a receive takes it.
    if (HoldEagerLocked(*h, slot, p + kWireHeaderBytes)) return;
    ++owed_;
    RepostRecvLocked(slot);
    return;
  }
  if (ConsumesCredit(h->type)) ++owed_;
  // Copies out everything it keeps, so the slot can be re-posted right after.
  HandleMessageLocked(*h, p + kWireHeaderBytes);
  if (UsableLocked()) RepostRecvLocked(slot);
}

bool VerbsConnection::HoldEagerLocked(const WireHeader& h, int slot, const uint8_t* payload) {
  auto u = std::make_unique<Unexpected>();
  u->len = h.length;
  bool in_slot = false;
  if (h.length > 0) {
    if (unexpected_copied_ + h.length <= cfg_.unexpected_bytes) {
      u->data.reset(new uint8_t[h.length]);
      std::memcpy(u->data.get(), payload, h.length);
      unexpected_copied_ += h.length;
    } else {
      // The copies are at their bound: the message stays where it landed and
      // the sender gets this credit back only when a receive takes it.
      u->slot = slot;
      ++slots_held_;
      in_slot = true;
    }
  }
  unexpected_[h.tag].push_back(std::move(u));
  return in_slot;
}

void VerbsConnection::HandleMessageLocked(const WireHeader& h, const uint8_t* payload) {
  switch (h.type) {
    case MsgType::kEager:
    case MsgType::kRts:
      ArrivalLocked(h, payload);
      return;
    case MsgType::kCts: {
      auto it = sends_.find(h.id);
      if (it == sends_.end() || it->second->eager) {
        FailLocked(absl::DataLossError(ProtocolError(absl::StrCat("CTS for unknown send ", h.id))),
                   /*report=*/true);
        return;
      }
      OutMsg m;
      m.kind = OutMsg::kWrite;
      m.op = it->second;
      m.addr = h.addr;
      m.rkey = h.rkey;
      m.cookie = h.cookie;
      pending_.push_back(std::move(m));
      return;
    }
    case MsgType::kNack: {
      auto it = sends_.find(h.id);
      if (it == sends_.end()) {
        FailLocked(absl::DataLossError(ProtocolError(absl::StrCat("NACK for unknown send ", h.id))),
                   /*report=*/true);
        return;
      }
      std::shared_ptr<SendOp> op = std::move(it->second);
      sends_.erase(it);
      op->mr.Reset();
      if (h.reason == static_cast<uint8_t>(NackReason::kTooSmall)) {
        op->req->Complete(absl::InvalidArgumentError(absl::StrCat(
                              "message of ", op->len, " bytes to ", peer_name_, " (tag ", op->tag,
                              ") exceeds the receive buffer of ", h.length, " bytes")),
                          0);
      } else {
        op->req->Complete(
            absl::InternalError(absl::StrCat(peer_name_,
                                             " could not register its receive buffer for a message "
                                             "of ",
                                             op->len, " bytes (tag ", op->tag, "); see its log")),
            0);
      }
      return;
    }
    case MsgType::kCredit:
      return;
  }
}

void VerbsConnection::ArrivalLocked(const WireHeader& h, const uint8_t* payload) {
  auto it = posted_.find(h.tag);
  if (it != posted_.end() && !it->second.empty()) {
    std::unique_ptr<RecvOp> r = std::move(it->second.front());
    it->second.pop_front();
    if (it->second.empty()) posted_.erase(it);
    MatchArrivalLocked(std::move(r), h, payload);
    return;
  }
  // An RTS (eager messages nobody waits for are held by HandleRecvLocked).
  // Receiver-driven: only the announcement is kept; the CTS goes out when a
  // receive is posted (MatchHeldLocked), and the payload waits at the sender.
  auto u = std::make_unique<Unexpected>();
  u->len = h.length;
  u->rts = true;
  u->send_id = h.id;
  unexpected_[h.tag].push_back(std::move(u));
}

void VerbsConnection::MatchArrivalLocked(std::unique_ptr<RecvOp> r, const WireHeader& h,
                                         const uint8_t* payload) {
  const bool eager = h.type == MsgType::kEager;
  OutMsg nack;
  nack.kind = OutMsg::kNack;
  nack.id = h.id;
  nack.length = r->cap;
  if (h.length > r->cap) {
    r->req->Complete(absl::InvalidArgumentError(absl::StrCat(
                         "message of ", h.length, " bytes from ", peer_name_, " (tag ", r->tag,
                         ") exceeds the receive buffer of ", r->cap, " bytes")),
                     0);
    if (!eager) {  // the sender still waits for a CTS: fail it too
      nack.reason = static_cast<uint8_t>(NackReason::kTooSmall);
      pending_.push_back(std::move(nack));
    }
    return;
  }
  if (eager) {
    if (h.length > 0 && r->device) {
      FailEagerIntoDeviceLocked(*r, h.length);
      return;
    }
    if (h.length > 0) std::memcpy(r->buf, payload, h.length);
    r->req->Complete(absl::OkStatus(), h.length);
    return;
  }
  if (!r->mr.valid()) {
    // Only when the peer's eager limit is below ours; rare, so registered here.
    absl::StatusOr<MrRef> mr = ctx_->registry().Acquire(r->buf, r->cap, /*remote_write=*/true);
    if (!mr.ok()) {
      r->req->Complete(Annotate(mr.status(), absl::StrCat("Irecv from ", peer_name_)), 0);
      nack.reason = static_cast<uint8_t>(NackReason::kReceiverError);
      pending_.push_back(std::move(nack));
      return;
    }
    r->mr = std::move(*mr);
  }
  const uint64_t addr = reinterpret_cast<uintptr_t>(r->buf);
  const uint32_t rkey = r->mr.rkey();
  WriteTarget t;
  t.len = h.length;
  t.recv = std::move(r);
  QueueCtsLocked(h.id, addr, rkey, std::move(t));
}

void VerbsConnection::FailEagerIntoDeviceLocked(RecvOp& r, uint64_t len) {
  // The message is dropped: copying it would have the CPU write GPU memory.
  r.mr.Reset();
  r.req->Complete(
      absl::FailedPreconditionError(absl::StrCat(
          "an eager message of ", len, " bytes from ", peer_name_, " (tag ", r.tag,
          ") met a receive in GPU memory, which the CPU cannot copy into: the connection was "
          "not set up for GPU receives (ConnectOptions::device_receives), or the peer's build "
          "predates them")),
      0);
}

void VerbsConnection::QueueCtsLocked(uint64_t send_id, uint64_t addr, uint32_t rkey,
                                     WriteTarget t) {
  uint32_t cookie = next_cookie_++;
  while (cookie == 0 || rendezvous_.contains(cookie)) cookie = next_cookie_++;
  rendezvous_[cookie] = std::move(t);
  OutMsg cts;
  cts.kind = OutMsg::kCts;
  cts.id = send_id;
  cts.addr = addr;
  cts.rkey = rkey;
  cts.cookie = cookie;
  pending_.push_back(std::move(cts));
}

void VerbsConnection::WriteLandedLocked(uint32_t cookie) {
  auto it = rendezvous_.find(cookie);
  if (it == rendezvous_.end()) {
    FailLocked(
        absl::DataLossError(ProtocolError(absl::StrCat("RDMA write for unknown receive ", cookie))),
        /*report=*/true);
    return;
  }
  WriteTarget t = std::move(it->second);
  rendezvous_.erase(it);
  t.recv->mr.Reset();
  t.recv->req->Complete(absl::OkStatus(), t.len);
}

void VerbsConnection::MatchHeldLocked(std::unique_ptr<RecvOp> r, std::unique_ptr<Unexpected> u) {
  if (u->rts) {
    // The receive is here now: answer the sender's RTS (or NACK it).
    WireHeader h;
    h.type = MsgType::kRts;
    h.tag = r->tag;
    h.length = u->len;
    h.id = u->send_id;
    MatchArrivalLocked(std::move(r), h, nullptr);
    FlushLocked();
    return;
  }
  const uint8_t* payload =
      u->slot >= 0 ? recv_buf_->slot(u->slot) + kWireHeaderBytes : u->data.get();
  if (u->len > r->cap) {
    // The message is dropped.
    r->req->Complete(absl::InvalidArgumentError(absl::StrCat(
                         "message of ", u->len, " bytes from ", peer_name_, " (tag ", r->tag,
                         ") exceeds the receive buffer of ", r->cap, " bytes")),
                     0);
  } else if (u->len > 0 && r->device) {
    FailEagerIntoDeviceLocked(*r, u->len);
  } else {
    if (u->len > 0) std::memcpy(r->buf, payload, u->len);
    r->mr.Reset();
    r->req->Complete(absl::OkStatus(), u->len);
  }
  if (u->slot >= 0) {
    // Its slot is free again: re-post it and owe the sender its credit.
    --slots_held_;
    if (UsableLocked()) {
      ++owed_;
      if (RepostRecvLocked(u->slot)) FlushLocked();
    }
  } else {
    unexpected_copied_ -= u->data != nullptr ? u->len : 0;
  }
}

void VerbsConnection::FlushLocked() {
  if (!UsableLocked()) return;
  while (!pending_.empty() && UsableLocked()) {
    OutMsg& m = pending_.front();
    if (m.kind == OutMsg::kWrite) {
      if (!PostWriteLocked(m)) break;
      pending_.pop_front();
      continue;
    }
    if (m.kind == OutMsg::kRead) {
      if (!PostReadLocked(m)) break;
      pending_.pop_front();
      continue;
    }
    if (credits_ <= 0 || sq_free_ <= 0 || free_slots_.empty()) break;
    const int slot = free_slots_.back();
    free_slots_.pop_back();
    uint8_t* p = send_buf_->slot(slot);
    WireHeader h;
    size_t payload = 0;
    switch (m.kind) {
      case OutMsg::kEager:
        h.type = MsgType::kEager;
        h.tag = m.op->tag;
        h.length = m.op->len;
        h.id = m.op->id;
        payload = m.op->len;
        if (payload > 0) std::memcpy(p + kWireHeaderBytes, m.op->buf, payload);
        slot_op_[slot] = m.op->id;
        break;
      case OutMsg::kRts:
        h.type = MsgType::kRts;
        h.tag = m.op->tag;
        h.length = m.op->len;
        h.id = m.op->id;
        break;
      case OutMsg::kCts:
        h.type = MsgType::kCts;
        h.id = m.id;
        h.addr = m.addr;
        h.rkey = m.rkey;
        h.cookie = m.cookie;
        break;
      case OutMsg::kNack:
        h.type = MsgType::kNack;
        h.id = m.id;
        h.length = m.length;
        h.reason = m.reason;
        break;
      case OutMsg::kWrite:
      case OutMsg::kRead:
        break;
    }
    h.credits = owed_;
    EncodeHeader(h, p);
    if (!PostSendLocked(slot, kWireHeaderBytes + payload)) return;
    owed_ = 0;
    --credits_;
    pending_.pop_front();
  }
  // Return credits on their own once enough are owed; these need no credit.
  if (UsableLocked() && owed_ >= cfg_.credit_batch) PostCreditLocked();
}

int VerbsConnection::PostCreditLocked() {
  if (sq_free_ <= 0 || free_slots_.empty()) return -1;
  const int slot = free_slots_.back();
  free_slots_.pop_back();
  WireHeader h;
  h.type = MsgType::kCredit;
  h.credits = owed_;
  EncodeHeader(h, send_buf_->slot(slot));
  if (!PostSendLocked(slot, kWireHeaderBytes)) return -1;
  owed_ = 0;
  return slot;
}

bool VerbsConnection::PostSendLocked(int slot, size_t bytes) {
  ibv_sge sge{};
  sge.addr = reinterpret_cast<uintptr_t>(send_buf_->slot(slot));
  sge.length = static_cast<uint32_t>(bytes);
  sge.lkey = send_buf_->lkey();
  ibv_send_wr wr{};
  wr.wr_id = (kWrSend << kWrKindShift) | static_cast<uint64_t>(slot);
  wr.sg_list = &sge;
  wr.num_sge = 1;
  wr.opcode = IBV_WR_SEND;
  wr.send_flags = IBV_SEND_SIGNALED;
  ibv_send_wr* bad = nullptr;
  int rc = ibv_post_send(qp_->qp(), &wr, &bad);
  if (rc != 0) {
    slot_op_[slot] = 0;
    free_slots_.push_back(slot);
    FailLocked(VerbsError(absl::StrCat(ctx_->label(), " QP ", qpn_, " to ", peer_name_),
                          "ibv_post_send(SEND)", rc),
               /*report=*/true);
    return false;
  }
  PostedLocked();
  return true;
}

void VerbsConnection::KeepAlive() {
  {
    absl::MutexLock lock(&mu_);
    if (!UsableLocked() || closing_ || keepalive_slot_ >= 0) return;
    if (posts_ != posts_at_tick_) {
      // Traffic since the last call: its own retries would find a dark path.
      posts_at_tick_ = posts_;
      return;
    }
    keepalive_slot_ = PostCreditLocked();
    if (keepalive_slot_ >= 0) posts_at_tick_ = posts_;
  }
  ReportFailure();
}

bool VerbsConnection::PostWriteLocked(OutMsg& m) {
  SendOp& op = *m.op;
  while (m.offset < op.len) {
    const size_t n = std::min(write_chunk_, op.len - m.offset);
    const bool last = m.offset + n == op.len;
    if (sq_free_ <= 0 || (last && credits_ <= 0)) return false;
    ibv_sge sge{};
    sge.addr = reinterpret_cast<uintptr_t>(op.buf + m.offset);
    sge.length = static_cast<uint32_t>(n);
    sge.lkey = op.mr.lkey();
    ibv_send_wr wr{};
    wr.wr_id = ((last ? kWrWriteLast : kWrWrite) << kWrKindShift) | op.id;
    wr.sg_list = &sge;
    wr.num_sge = 1;
    wr.opcode = last ? IBV_WR_RDMA_WRITE_WITH_IMM : IBV_WR_RDMA_WRITE;
    wr.send_flags = IBV_SEND_SIGNALED;
    wr.wr.rdma.remote_addr = m.addr + m.offset;
    wr.wr.rdma.rkey = m.rkey;
    if (last) wr.imm_data = htonl(m.cookie);
    ibv_send_wr* bad = nullptr;
    int rc = ibv_post_send(qp_->qp(), &wr, &bad);
    if (rc != 0) {
      FailLocked(VerbsError(absl::StrCat(ctx_->label(), " QP ", qpn_, " to ", peer_name_),
                            "ibv_post_send(RDMA_WRITE)", rc),
                 /*report=*/true);
      return false;
    }
    PostedLocked();
    if (last) --credits_;
    m.offset += n;
  }
  return true;
}

bool VerbsConnection::PostReadLocked(OutMsg& m) {
  if (sq_free_ <= 0 || free_slots_.empty()) return false;
  const int slot = free_slots_.back();
  free_slots_.pop_back();
  ibv_sge sge{};
  sge.addr = reinterpret_cast<uintptr_t>(send_buf_->slot(slot));
  sge.length = 1;
  sge.lkey = send_buf_->lkey();
  ibv_send_wr wr{};
  wr.wr_id = (kWrRead << kWrKindShift) | static_cast<uint64_t>(slot);
  wr.sg_list = &sge;
  wr.num_sge = 1;
  wr.opcode = IBV_WR_RDMA_READ;
  wr.send_flags = IBV_SEND_SIGNALED;
  wr.wr.rdma.remote_addr = m.addr;
  wr.wr.rdma.rkey = m.rkey;
  ibv_send_wr* bad = nullptr;
  int rc = ibv_post_send(qp_->qp(), &wr, &bad);
  if (rc != 0) {
    free_slots_.push_back(slot);
    m.read->Complete(VerbsError(absl::StrCat(ctx_->label(), " QP ", qpn_, " (loopback)"),
                                "ibv_post_send(RDMA_READ)", rc),
                     0);
    return true;  // dropped from the queue; the connection stays usable
  }
  PostedLocked();
  reads_[slot] = std::move(m.read);
  return true;
}

bool VerbsConnection::RepostRecvLocked(int slot) {
  ibv_sge sge{};
  sge.addr = reinterpret_cast<uintptr_t>(recv_buf_->slot(slot));
  sge.length = cfg_.slot_bytes;
  sge.lkey = recv_buf_->lkey();
  ibv_recv_wr wr{};
  wr.wr_id = (kWrRecv << kWrKindShift) | static_cast<uint64_t>(slot);
  wr.sg_list = &sge;
  wr.num_sge = 1;
  ibv_recv_wr* bad = nullptr;
  int rc = ibv_post_recv(qp_->qp(), &wr, &bad);
  if (rc != 0) {
    FailLocked(VerbsError(absl::StrCat(ctx_->label(), " QP ", qpn_, " to ", peer_name_),
                          "ibv_post_recv", rc),
               /*report=*/true);
    return false;
  }
  ++recv_outstanding_;
  return true;
}

}  // namespace mixnet::transport::verbs
