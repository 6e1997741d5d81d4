// The private parts of TcpConnection shared by its two source files:
// tcp_connection.cc (lifecycle, the send path, writes, failure) and
// tcp_connection_recv.cc (matching, rendezvous, reading and parsing frames).
// Guarded by TcpConnection::mu_ unless a field says otherwise.
#pragma once

#include <cstddef>
#include <cstdint>
#include <deque>
#include <memory>

#include "absl/synchronization/mutex.h"
#include "runtime/transport/request_state.h"
#include "runtime/transport/tcp/tcp_connection.h"
#include "runtime/transport/tcp/tcp_device.h"

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
  // Frames in write order. Control frames and eager messages (everything
  // but CHUNK and CLOSE) go ahead of the bulk frames that have not started:
  // outq[0, lead) holds a started frame, if any, and the queued control
  // frames in their own order; a new one is inserted at `lead` (see Queue).
  std::deque<OutFrame> outq;
  size_t lead = 0;
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

}  // namespace mixnet::transport::tcp
