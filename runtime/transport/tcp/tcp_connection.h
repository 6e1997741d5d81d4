// One TCP Connection: several sockets between the same two NICs, messages
// announced on socket 0 and their payload striped in chunks across all
// sockets. Isend/Irecv run on caller threads; all socket I/O runs on the
// device's progress thread.
//
// Wire format: 32-byte frames {type, magic, seq, a, b}.
//   MSG   (socket 0): a = tag, b = total bytes. Announces message `seq`.
//   CHUNK (any)     : a = offset, b = length, followed by the payload.
//   CLOSE (each)    : orderly shutdown; no more frames follow on that socket.
// The sender queues MSG(seq) on socket 0 before any CHUNK(seq), so a receiver
// that reads a CHUNK of an unannounced message pauses that socket until
// socket 0 delivers the announcement (socket 0 never pauses).
#pragma once

#include <sys/uio.h>

#include <cstdint>
#include <deque>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/synchronization/mutex.h"
#include "runtime/transport/tcp/request_state.h"
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
enum FrameType : uint32_t { kFrameMsg = 1, kFrameChunk = 2, kFrameClose = 3 };

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
  void ArmWrite(Socket* s) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  std::string SocketName(const Socket* s) const;

  TcpDevice* const device_;
  const std::string peer_name_;
  const size_t chunk_bytes_;
  std::vector<std::unique_ptr<Socket>> sockets_;

  mutable absl::Mutex mu_;
  absl::Status failed_ ABSL_GUARDED_BY(mu_);
  bool peer_closed_ ABSL_GUARDED_BY(mu_) = false;
  bool closing_ ABSL_GUARDED_BY(mu_) = false;
  uint64_t next_send_seq_ ABSL_GUARDED_BY(mu_) = 0;
  // Announced messages, by sequence number, until received and consumed.
  absl::flat_hash_map<uint64_t, std::unique_ptr<Incoming>> incoming_ ABSL_GUARDED_BY(mu_);
  // Receives waiting for a message, FIFO per tag.
  absl::flat_hash_map<uint64_t, std::deque<PostedRecv>> posted_ ABSL_GUARDED_BY(mu_);
  // Announced messages with no receive yet, FIFO per tag.
  absl::flat_hash_map<uint64_t, std::deque<Incoming*>> unexpected_ ABSL_GUARDED_BY(mu_);
};

}  // namespace mixnet::transport::tcp
