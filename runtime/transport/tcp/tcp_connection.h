// One TCP Connection: several sockets between the same two NICs. Small
// messages travel eagerly on socket 0; large ones use a rendezvous so the
// receiver never buffers them: the sender announces the message (RTS), the
// receiver answers CTS once a receive matches it, and the payload then flows
// straight into the receive buffer in chunks striped across the bulk
// sockets: sockets 1..k-1 of a connection of k >= 2 sockets, socket 0 of a
// connection of one. Isend/Irecv run on caller threads; reads run on the
// device's progress thread, writes on whichever thread queued the frame when
// the socket is idle (else on the progress thread, once the socket drains).
// Reads are batched: one recv takes every frame that has arrived, up to
// 4 KiB, and large payloads are received in place.
//
// Wire format: 32-byte frames {type, magic, seq, a, b}.
//   EAGER (socket 0): a = tag, b = bytes; the payload follows inline.
//   RTS   (socket 0): a = tag, b = bytes. Announces large message `seq`.
//   CTS   (socket 0): receiver -> sender for `seq`; a = 1 when the matched
//                     receive is too small (nothing will be sent).
//   CHUNK (any)     : a = offset, b = length of message `seq`, payload follows.
//                     A receiver takes chunks on any socket; this sender puts
//                     them on the bulk sockets only.
//   CLOSE (each)    : orderly shutdown; no more frames follow on that socket.
//   PULL  (socket 0): local transport only, just before an RTS: a = the
//                     address of message `seq` in the sender's memory.
//   FIN   (socket 0): receiver -> sender: message `seq` was pulled; the send
//                     is complete.
//   ABORT (each)    : the sender is closing abruptly on purpose (its
//                     communicator failed because of another peer); the
//                     receiver fails the connection as "aborted, alive" so
//                     the root cause elsewhere is reported, not this peer.
//                     Written only at a frame boundary, best effort.
// Sequence numbers count the sender's messages; matching is FIFO per tag in
// sequence order because announcements all travel on socket 0.
//
// Control frames are never queued behind bulk payload. When two hosts send
// each other a large message at once, the CTS one of them owes the other
// must not wait behind its own payload, or the two directions of a
// full-duplex link run one after the other. With k >= 2 sockets socket 0
// carries no chunks at all, so a CTS waits only for the eager messages ahead
// of it and the link's queue; kernel bytes already written on a socket
// cannot be passed, and on socket 0 a CTS used to wait for the chunks the
// kernel held there (up to TCP_NOTSENT_LOWAT unsent plus the congestion
// window in flight, each draining at 1/k of the link): about 1.2 MB on a
// 2-socket connection, 0.38 s at 25 Mbit/s, as long as the all-to-alls of
// the route bench themselves. With one socket (or a frame on the bulk
// sockets) every frame but CHUNK and CLOSE still goes ahead of the chunks
// that have not started (see Queue), and socket 0 keeps at most chunk_bytes
// of unsent data in the kernel (TCP_NOTSENT_LOWAT), the rest waiting in our
// queue where a control frame can pass it. bench/tcp_bidir measures both.
// What the kernel and the link queue hold is passed only in the network:
// with DeviceOptions::control_tos socket 0 carries a traffic class of its
// own, which switches with a strict-priority queue for it (the emulated
// cluster's links, emulation/links.h) send ahead of the bulk sockets' data.
//
// Local transport (both ends on one host, a Unix socket): a matched RTS that
// came with a PULL address is copied by the receiver straight from the
// sender's memory (process_vm_readv, one copy, no socket) and answered with
// FIN. When that read is refused (EPERM: ptrace restrictions, seccomp) the
// receiver answers CTS instead and the payload streams over the socket, so
// correctness never depends on cross-memory attach; pulls stay off for the
// connection after the first refusal.
//
// The code: tcp_connection.cc (lifecycle, sends, writes, failures),
// tcp_connection_recv.cc (matching, rendezvous, reads), and the private
// types they share in tcp_connection_internal.h.
#pragma once

#include <sys/uio.h>

#include <atomic>
#include <cstdint>
#include <deque>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/synchronization/mutex.h"
#include "runtime/transport/request_state.h"
#include "runtime/transport/tcp/tcp_device.h"

namespace mixnet::transport::tcp {

struct FrameHeader {
  uint32_t type;
  uint32_t magic;
  uint64_t seq;
  uint64_t a;
  uint64_t b;
};
static_assert(sizeof(FrameHeader) == 32);
inline constexpr uint32_t kFrameMagic = 0x4D584652u;  // "MXFR"
enum FrameType : uint32_t {
  kFrameEager = 1,
  kFrameRts = 2,
  kFrameCts = 3,
  kFrameChunk = 4,
  kFrameClose = 5,
  kFramePull = 6,
  kFrameFin = 7,
  kFrameAbort = 8,
};

class TcpConnection : public Connection {
 public:
  // Takes ownership of `fds` (connected, configured sockets, index order).
  static absl::StatusOr<std::unique_ptr<TcpConnection>> Create(TcpDevice* device,
                                                               std::vector<int> fds,
                                                               std::string peer_name);
  ~TcpConnection() override;

  absl::StatusOr<std::unique_ptr<Request>> Isend(const void* buf, size_t len,
                                                 uint64_t tag) override;
  absl::StatusOr<std::unique_ptr<Request>> Irecv(void* buf, size_t len, uint64_t tag) override;
  std::string peer_name() const override { return peer_name_; }
  absl::Status health() const override;
  // Keepalive off while suspended (every socket of the connection), on again
  // when resumed; the local transport has no keepalive to turn off. A
  // connection destroyed while suspended closes abortively (a reset, no
  // CLOSE frame, no FIN that would be retried into a dark path).
  absl::Status SetSuspended(bool suspended) override;
  size_t UnacknowledgedBytes() const override;
  // Local transport: messages received by pulling from the sender's memory.
  uint64_t pulled_messages() const;

 private:
  struct SendOp;
  struct OutFrame;
  struct Incoming;
  struct PostedRecv;
  class Socket;

  TcpConnection(TcpDevice* device, std::string peer_name);
  // Progress thread.
  void OnFrame(Socket* s, const FrameHeader& h);
  void OnPayloadDone(Socket* s);
  void OnWritable(Socket* s);
  void OnPeerShutdown(Socket* s);
  void Fail(absl::Status status, bool report);
  void CompleteIncoming(Incoming* m) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Matches announced message `m` with a receive; false when it is too small.
  bool Match(Incoming* m, std::shared_ptr<RequestState> req, char* buf, size_t capacity)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void SendCts(uint64_t seq, bool refuse) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void StartPayload(uint64_t seq) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // A matched rendezvous message: pull it when it came with an address (then
  // it is complete and erased), else ask for the payload with CTS.
  void Rendezvous(Incoming* m) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  bool Pull(Incoming* m) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void ArmWrite(Socket* s) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Appends a bulk frame (CHUNK, CLOSE) to `s`'s queue; puts any other frame
  // ahead of the bulk frames not yet started, after the earlier control
  // frames (their order is kept). Does not write.
  void Queue(Socket* s, OutFrame f) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Writes `s`'s queue from the calling thread when the progress thread is
  // not writing it (saves a thread hand-off per message); what does not fit
  // is left to the progress thread.
  void Kick(Socket* s) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  using Completions = std::vector<std::pair<std::shared_ptr<RequestState>, size_t>>;
  int FillIov(Socket* s, iovec* iov) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // `n` bytes of `s`'s queue were written: drops finished frames.
  void Advance(Socket* s, size_t n, Completions* done) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  std::string SocketName(const Socket* s) const;

  TcpDevice* const device_;
  const std::string peer_name_;
  const size_t chunk_bytes_;
  const size_t eager_bytes_;
  std::vector<std::unique_ptr<Socket>> sockets_;
  std::atomic<bool> suspended_{false};  // SetSuspended (TCP only)
  // Local transport: the peer's pid (SO_PEERCRED), 0 otherwise.
  int peer_pid_ = 0;

  mutable absl::Mutex mu_;
  absl::Status failed_ ABSL_GUARDED_BY(mu_);
  bool peer_closed_ ABSL_GUARDED_BY(mu_) = false;
  bool closing_ ABSL_GUARDED_BY(mu_) = false;
  uint64_t next_send_seq_ ABSL_GUARDED_BY(mu_) = 0;
  // Local transport: whether we announce / accept pull addresses.
  bool offer_pull_ ABSL_GUARDED_BY(mu_) = false;
  bool accept_pull_ ABSL_GUARDED_BY(mu_) = false;
  // The PULL frame just read, for the RTS that follows it.
  uint64_t pull_seq_ ABSL_GUARDED_BY(mu_) = 0;
  uint64_t pull_addr_ ABSL_GUARDED_BY(mu_) = 0;
  uint64_t pulled_ ABSL_GUARDED_BY(mu_) = 0;
  // Large sends announced and waiting for the receiver's CTS, by sequence number.
  absl::flat_hash_map<uint64_t, std::shared_ptr<SendOp>> awaiting_cts_ ABSL_GUARDED_BY(mu_);
  // Announced messages, by sequence number, until received and consumed.
  absl::flat_hash_map<uint64_t, std::unique_ptr<Incoming>> incoming_ ABSL_GUARDED_BY(mu_);
  // Receives waiting for a message, FIFO per tag.
  absl::flat_hash_map<uint64_t, std::deque<PostedRecv>> posted_ ABSL_GUARDED_BY(mu_);
  // Announced messages with no receive yet, FIFO per tag.
  absl::flat_hash_map<uint64_t, std::deque<Incoming*>> unexpected_ ABSL_GUARDED_BY(mu_);
};

}  // namespace mixnet::transport::tcp
