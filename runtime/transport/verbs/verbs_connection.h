// One verbs Connection: an RC queue pair to one peer, its pre-posted receive
// buffers, credit flow control, tag matching and the eager / rendezvous
// protocol. Isend/Irecv run on caller threads; completions, bootstrap-socket
// events and most posting run on the device's poller thread. One mutex guards
// the state; verbs work requests are posted under it.
//
// Protocol (header layout in wire.h):
//  - Messages of at most `eager_max` bytes (8 KiB slots minus the header) go
//    EAGER: copied into a registered send slot and SENT into one of the
//    receiver's pre-posted receive slots. The send completes on its send
//    completion. The receiver copies the payload into the matching receive.
//    While none is posted it holds the message: a heap copy while the
//    connection's unexpected eager bytes stay within `unexpected_bytes`
//    (MIXNET_IB_UNEXPECTED_BYTES), beyond that in its receive slot, which is
//    then neither re-posted nor credited until a receive takes the message:
//    the sender runs out of credits and waits (back-pressure). So what a
//    receiver holds for absent receives is bounded by `unexpected_bytes`
//    plus its fixed, pre-registered receive slots.
//  - Larger messages rendezvous, driven by the receiver: the sender registers
//    its buffer and SENDs an RTS {tag, length, id}. If a receive is posted,
//    the receiver answers CTS {id, addr, rkey, cookie} naming the receive
//    buffer itself (zero copy; registered at Irecv time). If none is posted,
//    it keeps only the RTS (tag, length, id) and answers once a receive is
//    posted; until then the payload stays at the sender, whose send does not
//    complete. The sender RDMA-WRITEs the payload, the last (or only) chunk
//    WITH IMMEDIATE = cookie, and completes on that write's completion; the
//    receive completes when the immediate arrives (RC places the data
//    before it).
//    Caveat of the bound: a receiver that waits on one tag while its slots
//    are all held by unexpected eager messages of other tags waits until
//    those are received (as with any bounded unexpected-message queue).
//  - GPU memory (registered with RegisterDeviceMemory, memory_registry.h)
//    is never touched by the CPU: a send from it always rendezvous (its
//    device registration is the write's source), and a connection whose
//    receives may be GPU memory (ConnectionConfig::device_receives) says so
//    in its handshake, so the peer sends it every message with a payload by
//    rendezvous and the NIC writes the payload in place. An eager message
//    that still meets a GPU receive (a peer that ignored the flag) fails
//    that receive with FailedPrecondition instead of being copied.
//  - Matching happens only at the receiver, in arrival order (RC keeps a
//    connection's messages in order), against receives posted per tag in
//    posting order: FIFO per tag. Zero-byte messages are EAGER.
//  - A receive smaller than its message fails with InvalidArgument; when the
//    message is a rendezvous one, the receiver also NACKs and the send fails
//    the same way (its payload never left the sender).
//  - Credits: each side pre-posts window + window/credit_batch + 3 receive
//    slots and starts with `window` credits for the peer's slots. Every
//    message except CREDIT costs one credit (a WRITE WITH IMMEDIATE consumes a
//    receive slot too). A receiver returns credits in every header it sends,
//    and with a standalone CREDIT message once credit_batch are owed. CREDIT
//    messages need no credit (at most window/credit_batch + 1 can be
//    unprocessed at the receiver, plus one keepalive, hence the spare slots),
//    so flow control cannot deadlock and the receive queue never runs dry (no
//    RNR).
//  - Keepalives: on a device with stall detection (OCS NICs,
//    MIXNET_PATH_STALL_MS) the poller calls KeepAlive every stall/4; a
//    connection that posted nothing since the previous call sends a CREDIT
//    (at most one in flight). On a dark circuit its RC retries run out
//    within the stall time (queue_pair.h), so an idle connection fails, and
//    is reported, within about 1.5 x the stall time, as a busy one does.
//  - Failure: a work completion error, a protocol error, or EOF on the TCP
//    bootstrap socket fails every pending and future request with
//    Unavailable naming the peer (and calls on_failure once). An orderly
//    close ('B' on the bootstrap socket) fails pending requests the same way
//    but leaves fully arrived messages receivable, like the TCP transport.
#pragma once

#include <cstdint>
#include <deque>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include <infiniband/verbs.h>

#include "absl/container/flat_hash_map.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "runtime/transport/request_state.h"
#include "runtime/transport/transport.h"
#include "runtime/transport/verbs/address.h"
#include "runtime/transport/verbs/bootstrap.h"
#include "runtime/transport/verbs/memory_registry.h"
#include "runtime/transport/verbs/queue_pair.h"
#include "runtime/transport/verbs/verbs_context.h"
#include "runtime/transport/verbs/wire.h"

namespace mixnet::transport::verbs {

class Poller;

struct ConnectionConfig {
  uint32_t window = 64;       // credits granted to the peer
  uint32_t credit_batch = 8;  // owed credits that trigger a CREDIT message
  uint32_t slot_bytes = 8192;
  int send_slots = 80;
  int send_depth = 256;   // send work requests in flight (slots + writes)
  int traffic_class = 0;  // of the queue pair (ConnectOptions, else the device's)
  // Eager payload held in heap copies for receives not yet posted; beyond it
  // messages wait in their receive slots (DeviceOptions::ib_unexpected_bytes).
  size_t unexpected_bytes = size_t{4} << 20;
  // Our receives may be GPU memory (ConnectOptions::device_receives): the
  // peer is asked to send every message with a payload by rendezvous.
  bool device_receives = false;
  int recv_depth() const { return static_cast<int>(window + window / credit_batch + 3); }
};

// A registered, page-aligned buffer cut into fixed-size slots.
class SlotBuffer {
 public:
  static absl::StatusOr<std::unique_ptr<SlotBuffer>> Create(ibv_pd* pd, int slots,
                                                            size_t slot_bytes,
                                                            const std::string& what);
  ~SlotBuffer();
  uint8_t* slot(int i) const { return mem_ + static_cast<size_t>(i) * slot_bytes_; }
  uint32_t lkey() const { return mr_->lkey; }

 private:
  SlotBuffer(uint8_t* mem, size_t slot_bytes, ibv_mr* mr)
      : mem_(mem), slot_bytes_(slot_bytes), mr_(mr) {}
  uint8_t* const mem_;
  const size_t slot_bytes_;
  ibv_mr* const mr_;
};

class VerbsConnection {
 public:
  // Creates the QP (INIT) and buffers and posts the receive slots.
  static absl::StatusOr<std::shared_ptr<VerbsConnection>> Create(std::shared_ptr<VerbsContext> ctx,
                                                                 std::shared_ptr<Poller> poller,
                                                                 ConnectionConfig cfg,
                                                                 std::string peer_name,
                                                                 FailureCallback on_failure);
  ~VerbsConnection();

  QpInfo LocalInfo() const {
    QpInfo i = qp_->LocalInfo(cfg_.window, cfg_.slot_bytes);
    i.device_receives = cfg_.device_receives;
    return i;
  }
  // After the handshake: RTR/RTS towards `remote`.
  absl::Status ConnectQp(const QpInfo& remote);
  // After both sides are ready: watch `bootstrap` and join the poller.
  void Activate(Fd bootstrap);

  absl::StatusOr<std::unique_ptr<Request>> Isend(const void* buf, size_t len, uint64_t tag);
  absl::StatusOr<std::unique_ptr<Request>> Irecv(void* buf, size_t len, uint64_t tag);
  // Connection::RegisterMemory: an in-use entry of the device's registration
  // cache (memory_registry.h), which every request inside the range reuses.
  absl::StatusOr<std::shared_ptr<const void>> RegisterMemory(const void* buf, size_t len);
  // Connection::RegisterDeviceMemory: a device entry of the registry.
  absl::StatusOr<std::shared_ptr<const void>> RegisterDeviceMemory(const void* buf, size_t len,
                                                                   int dmabuf_fd,
                                                                   uint64_t dmabuf_offset);
  // RDMA-reads one byte of registered GPU memory at `buf` through this
  // connection's queue pair: on a loopback connection (both ends on this
  // adapter and protection domain) that orders after every earlier NIC
  // write into it (Connection::FlushDeviceWrites). Completes with the read.
  absl::StatusOr<std::unique_ptr<Request>> ReadLocal(const void* buf);
  const std::string& peer_name() const { return peer_name_; }
  absl::Status health() const;
  // Orderly close (the Connection handle's destructor); blocks up to ~4 s.
  void Close();

  // Poller thread.
  uint32_t qpn() const { return qpn_; }
  int bootstrap_fd() const { return bootstrap_.get(); }
  void OnCompletion(const ibv_wc& wc);
  // Once after a batch of completions: sends ACK/credits, reports failure.
  void AfterCompletions();
  // The bootstrap socket is readable; false: stop watching it.
  bool OnBootstrapReadable();
  // The device is going away (poller stopped) or its CQ broke.
  void OnDeviceFailure(const std::string& why, bool report);
  // Stall detection: sends a CREDIT when nothing was posted since the last
  // call and no keepalive is in flight (protocol above).
  void KeepAlive();

 private:
  struct SendOp {
    std::shared_ptr<RequestState> req;
    const uint8_t* buf = nullptr;
    size_t len = 0;
    uint64_t tag = 0;
    uint64_t id = 0;
    bool eager = false;
    MrRef mr;  // rendezvous: the registered send buffer
  };
  struct RecvOp {
    std::shared_ptr<RequestState> req;
    uint8_t* buf = nullptr;
    size_t cap = 0;
    uint64_t tag = 0;
    MrRef mr;             // registered when large enough to be a write target
    bool device = false;  // GPU memory (mr is its device registration)
  };
  // A message that arrived before its receive: an eager one's payload (a
  // heap copy, or in receive slot `slot`), or a rendezvous one's RTS.
  struct Unexpected {
    uint64_t len = 0;
    std::unique_ptr<uint8_t[]> data;  // eager, copied
    int slot = -1;                    // eager, held in its receive slot
    bool rts = false;                 // rendezvous: the payload is at the sender
    uint64_t send_id = 0;             // rts: the sender's id, for the CTS
  };
  // Where a rendezvous write lands: a posted receive.
  struct WriteTarget {
    std::unique_ptr<RecvOp> recv;
    size_t len = 0;
  };
  // Something waiting to be posted, in order.
  struct OutMsg {
    enum Kind { kEager, kRts, kCts, kNack, kWrite, kRead } kind = kEager;
    std::shared_ptr<SendOp> op;  // kEager, kRts, kWrite
    uint64_t id = 0;             // kCts, kNack: the sender's id
    uint64_t length = 0;         // kNack: receive capacity
    uint8_t reason = 0;          // kNack
    uint64_t addr = 0;           // kCts, kWrite: the target buffer
    uint32_t rkey = 0;
    uint32_t cookie = 0;
    size_t offset = 0;                   // kWrite: bytes already posted
    std::shared_ptr<RequestState> read;  // kRead: completes with the read
  };
  // Work request ids: kind in the top 4 bits, slot index or send id below.
  static constexpr uint64_t kWrRecv = 1, kWrSend = 2, kWrWrite = 3, kWrWriteLast = 4, kWrRead = 5;
  static constexpr int kWrKindShift = 60;
  static constexpr uint64_t kWrLowMask = (uint64_t{1} << kWrKindShift) - 1;

  VerbsConnection(std::shared_ptr<VerbsContext> ctx, std::shared_ptr<Poller> poller,
                  ConnectionConfig cfg, std::string peer_name, FailureCallback on_failure);

  // All *Locked methods run with mu_ held.
  void HandleRecvLocked(int slot, const ibv_wc& wc) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void HandleMessageLocked(const WireHeader& h, const uint8_t* payload)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void ArrivalLocked(const WireHeader& h, const uint8_t* payload)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // A posted receive meets an arriving message.
  void MatchArrivalLocked(std::unique_ptr<RecvOp> r, const WireHeader& h, const uint8_t* payload)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // An eager payload of `len` bytes cannot go into GPU receive `r`: fails it.
  void FailEagerIntoDeviceLocked(RecvOp& r, uint64_t len) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // A new receive meets a held message.
  void MatchHeldLocked(std::unique_ptr<RecvOp> r, std::unique_ptr<Unexpected> u)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // An eager message with no receive posted: copied, or left in `slot` (then
  // true: the caller must not re-post the slot).
  bool HoldEagerLocked(const WireHeader& h, int slot, const uint8_t* payload)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void QueueCtsLocked(uint64_t send_id, uint64_t addr, uint32_t rkey, WriteTarget t)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void WriteLandedLocked(uint32_t cookie) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Fails every pending request with `st` (the QP is already stopped).
  void FailRequestsLocked(const absl::Status& st) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Posts what credits and queue space allow, and returns credits on their
  // own when enough are owed.
  void FlushLocked() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Posts a CREDIT returning what is owed (it needs no credit); its send
  // slot, or -1 when no slot or queue entry is free or the post failed.
  int PostCreditLocked() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Posts one SEND from a slot; false (and fails the connection) on error.
  bool PostSendLocked(int slot, size_t bytes) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Posts a rendezvous write's chunks; true once all are posted.
  bool PostWriteLocked(OutMsg& m) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Posts a kRead into a free send slot; false when none is free yet.
  bool PostReadLocked(OutMsg& m) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  bool RepostRecvLocked(int slot) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Accounts for one send work request just posted.
  void PostedLocked() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    --sq_free_;
    ++send_outstanding_;
    ++posts_;
  }
  // Fails every request with `status` and moves the QP to ERR (flushing).
  void FailLocked(absl::Status status, bool report) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void PeerClosedLocked() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void QpToErrorLocked() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  bool UsableLocked() const ABSL_SHARED_LOCKS_REQUIRED(mu_) {
    return failed_.ok() && !peer_closed_;
  }
  // Calls on_failure (outside mu_) when a failure is waiting to be reported.
  void ReportFailure();
  std::string ProtocolError(const std::string& what) const;

  const std::shared_ptr<VerbsContext> ctx_;
  const std::shared_ptr<Poller> poller_;
  const ConnectionConfig cfg_;
  const std::string peer_name_;
  const FailureCallback on_failure_;
  std::unique_ptr<SlotBuffer> recv_buf_;
  std::unique_ptr<SlotBuffer> send_buf_;
  std::unique_ptr<QueuePair> qp_;  // declared after the buffers: destroyed first
  uint32_t qpn_ = 0;
  size_t recv_eager_max_ = 0;  // largest EAGER payload our slots take
  size_t send_eager_max_ = 0;  // largest EAGER payload we send (min with the peer's)
  size_t write_chunk_ = 1 << 30;
  Fd bootstrap_;
  bool active_ = false;  // joined the poller

  mutable absl::Mutex mu_;
  absl::Status failed_ ABSL_GUARDED_BY(mu_);
  bool peer_closed_ ABSL_GUARDED_BY(mu_) = false;
  bool closing_ ABSL_GUARDED_BY(mu_) = false;
  std::optional<absl::Status> report_ ABSL_GUARDED_BY(mu_);
  int64_t credits_ ABSL_GUARDED_BY(mu_) = 0;  // messages the peer can take
  uint32_t owed_ ABSL_GUARDED_BY(mu_) = 0;    // re-posted slots not yet told
  int sq_free_ ABSL_GUARDED_BY(mu_) = 0;      // send queue entries available
  int recv_outstanding_ ABSL_GUARDED_BY(mu_) = 0;
  int send_outstanding_ ABSL_GUARDED_BY(mu_) = 0;
  uint64_t posts_ ABSL_GUARDED_BY(mu_) = 0;             // send work requests posted
  uint64_t posts_at_tick_ ABSL_GUARDED_BY(mu_) = 0;     // posts_ at the last KeepAlive
  int keepalive_slot_ ABSL_GUARDED_BY(mu_) = -1;        // send slot of the keepalive in flight
  std::vector<int> free_slots_ ABSL_GUARDED_BY(mu_);    // send slots
  std::vector<uint64_t> slot_op_ ABSL_GUARDED_BY(mu_);  // EAGER send id per slot
  uint64_t next_send_id_ ABSL_GUARDED_BY(mu_) = 1;
  uint32_t next_cookie_ ABSL_GUARDED_BY(mu_) = 1;
  absl::flat_hash_map<uint64_t, std::shared_ptr<SendOp>> sends_ ABSL_GUARDED_BY(mu_);
  std::deque<OutMsg> pending_ ABSL_GUARDED_BY(mu_);
  absl::flat_hash_map<uint64_t, std::deque<std::unique_ptr<RecvOp>>> posted_ ABSL_GUARDED_BY(mu_);
  absl::flat_hash_map<uint64_t, std::deque<std::unique_ptr<Unexpected>>> unexpected_
      ABSL_GUARDED_BY(mu_);
  size_t unexpected_copied_ ABSL_GUARDED_BY(mu_) = 0;  // bytes in Unexpected::data
  int slots_held_ ABSL_GUARDED_BY(mu_) = 0;            // receive slots holding messages
  absl::flat_hash_map<uint32_t, WriteTarget> rendezvous_ ABSL_GUARDED_BY(mu_);  // by cookie
  // Reads in flight (ReadLocal), by send slot.
  absl::flat_hash_map<int, std::shared_ptr<RequestState>> reads_ ABSL_GUARDED_BY(mu_);
};

// The Connection handed to callers; closes the connection when destroyed.
class VerbsConnectionHandle : public Connection {
 public:
  // `flush`: FlushDeviceWrites through the device's loopback connection.
  using Flusher = std::function<absl::StatusOr<std::unique_ptr<Request>>(const void*, size_t)>;
  explicit VerbsConnectionHandle(std::shared_ptr<VerbsConnection> c, Flusher flush = nullptr)
      : c_(std::move(c)), flush_(std::move(flush)) {}
  ~VerbsConnectionHandle() override { c_->Close(); }
  absl::StatusOr<std::unique_ptr<Request>> Isend(const void* buf, size_t len,
                                                 uint64_t tag) override {
    return c_->Isend(buf, len, tag);
  }
  absl::StatusOr<std::unique_ptr<Request>> Irecv(void* buf, size_t len, uint64_t tag) override {
    return c_->Irecv(buf, len, tag);
  }
  std::string peer_name() const override { return c_->peer_name(); }
  absl::Status health() const override { return c_->health(); }
  absl::StatusOr<std::shared_ptr<const void>> RegisterMemory(const void* buf, size_t len) override {
    return c_->RegisterMemory(buf, len);
  }
  absl::StatusOr<std::shared_ptr<const void>> RegisterDeviceMemory(
      const void* buf, size_t len, int dmabuf_fd, uint64_t dmabuf_offset) override {
    return c_->RegisterDeviceMemory(buf, len, dmabuf_fd, dmabuf_offset);
  }
  absl::StatusOr<std::unique_ptr<Request>> FlushDeviceWrites(const void* buf, size_t len) override {
    if (flush_ == nullptr || len == 0) return std::unique_ptr<Request>();
    return flush_(buf, len);
  }

 private:
  std::shared_ptr<VerbsConnection> c_;
  Flusher flush_;
};

}  // namespace mixnet::transport::verbs
