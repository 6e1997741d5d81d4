// Relays of the NCCL plugin (router v2's two-hop paths in the plugin): the
// relay host's half. A piece of a comm's part that router v2 sends from host
// A to host C through host B travels on a relay connection A -> B; B's
// RelayForwarder moves it onto B's connection B -> C under the piece's own
// transport tag, so C receives it exactly as a piece A had sent it directly
// on that connection (C needs no relay logic: its end is one more data
// connection of the comm's lane).
//
// Wire form on the upstream connection A -> B, per piece: a 24-byte
// RelayHeader (magic, the piece's tag, its bytes) under kRelayHeaderTag,
// then the piece under kRelayDataTag (PostRelaySend). The forwarder needs
// no knowledge of the comm: it receives a header, receives the piece into a
// buffer of exactly its size, and sends it on downstream; pieces leave in
// the order they came. Nothing goes back upstream: the comm's
// acknowledgements run end to end between A and C (lane_recovery.h), so a
// piece the forwarder held when a hop failed is re-sent by A on its home
// lane like any piece lost with a circuit.
//
// Bounds: a header announcing more than max_piece_bytes fails the relay (it
// is not the plugin's); pieces received and not yet forwarded hold at most
// max_buffered_bytes (one piece alone may exceed it), so a slow downstream
// holds the upstream sender back instead of growing the relay host's memory.
//
// Ends: the upstream closing in order (A's lane teardown) once everything it
// sent was forwarded closes the downstream in order (kDrained). A failed
// receive or send, a bad header or a short piece fails the relay
// (kFailed): both connections are closed at once, so whichever end still
// has a piece posted on its connection sees it fail and fails its comm over.
//
// Threads: a RelayForwarder is advanced by one thread at a time (the
// RelayService's "mx-nccl-relay" thread); the service is thread-safe.
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <deque>
#include <functional>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "absl/status/status.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "runtime/transport/completion_group.h"
#include "runtime/transport/transport.h"

namespace mixnet::nccl {

inline constexpr uint64_t kRelayHeaderTag = (uint64_t{1} << 63) | 0x524C5948u;  // "RLYH"
inline constexpr uint64_t kRelayDataTag = (uint64_t{1} << 63) | 0x524C5944u;    // "RLYD"
inline constexpr uint32_t kRelayMagic = 0x4D58524Cu;                            // "MXRL"

// On the wire in host byte order (both ends run the same plugin build).
struct RelayHeader {
  uint32_t magic = kRelayMagic;
  uint32_t reserved = 0;
  uint64_t tag = 0;    // the transport tag the piece goes under downstream
  uint64_t bytes = 0;  // the piece's size
};
static_assert(sizeof(RelayHeader) == 24);

// The origin's side: posts `len` bytes at `buf` on a relay connection for
// the relay to forward under `tag` (the header, then the piece). One
// request for both: done once both sends are, with the first error; its
// bytes are the piece's. An error means nothing left; a piece that cannot
// follow its header makes the request fail (the relay then fails at the
// short stream, the connection being unusable anyway).
absl::StatusOr<std::unique_ptr<transport::Request>> PostRelaySend(transport::Connection& upstream,
                                                                  const void* buf, size_t len,
                                                                  uint64_t tag);

struct RelayForwarderOptions {
  size_t max_piece_bytes = size_t{64} << 20;
  size_t max_buffered_bytes = size_t{64} << 20;
  std::string name;  // for messages: "relay h0 -> h2 via h1"
};

struct RelayForwarderStats {
  uint64_t pieces = 0;  // forwarded (their sends done)
  uint64_t bytes = 0;
  size_t buffered_bytes = 0;  // received or being received, not yet forwarded
  size_t peak_buffered_bytes = 0;
};

class RelayForwarder {
 public:
  enum class State { kForwarding, kDrained, kFailed };

  RelayForwarder(std::unique_ptr<transport::Connection> upstream,
                 std::unique_ptr<transport::Connection> downstream, RelayForwarderOptions options);
  ~RelayForwarder();  // closes both connections (in order when healthy)
  RelayForwarder(const RelayForwarder&) = delete;
  RelayForwarder& operator=(const RelayForwarder&) = delete;

  // Non-blocking: takes what completed, posts what it can, and ends the
  // relay when the upstream ended. Returns the state afterwards.
  State Advance();
  State state() const { return state_; }
  // kFailed: why (naming the relay, the hop and the transport's error).
  absl::Status status() const { return status_; }
  const RelayForwarderStats& stats() const { return stats_; }
  const std::string& name() const { return options_.name; }
  // Every request posted from now on notifies `group` when it completes, so
  // a thread can sleep until there is something to advance.
  void set_wakeup(std::shared_ptr<transport::CompletionGroup> group) { wakeup_ = std::move(group); }

 private:
  struct Piece {
    RelayHeader header;
    std::unique_ptr<char[]> buf;
    std::unique_ptr<transport::Request> recv;
    std::unique_ptr<transport::Request> send;
  };
  void Watch(transport::Request& r);
  State Fail(absl::Status why);  // returns kFailed
  void CloseConnections();

  RelayForwarderOptions options_;
  // Declared before the connections: the transport may write into them
  // until the connections are gone.
  RelayHeader header_buf_;
  std::deque<Piece> pieces_;
  std::unique_ptr<transport::Request> header_recv_;
  bool header_pending_ = false;  // header_buf_ holds a header whose piece is not posted yet
  bool upstream_ended_ = false;  // the upstream closed in order
  std::unique_ptr<transport::Connection> upstream_;
  std::unique_ptr<transport::Connection> downstream_;
  State state_ = State::kForwarding;
  absl::Status status_;
  RelayForwarderStats stats_;
  std::shared_ptr<transport::CompletionGroup> wakeup_;
};

// Runs forwarders on one thread ("mx-nccl-relay") until each ends; each
// that ends (drained or failed) is handed to `on_end` (from that thread,
// before counts() counts it) and dropped.
class RelayService {
 public:
  using EndCallback = std::function<void(const RelayForwarder& ended)>;
  // `idle_poll`: how long the thread sleeps when nothing completed (requests
  // of transports that cannot notify are polled at this period).
  explicit RelayService(EndCallback on_end = nullptr,
                        absl::Duration idle_poll = absl::Milliseconds(1));
  ~RelayService();  // stops the thread, then closes every relay still running
  RelayService(const RelayService&) = delete;
  RelayService& operator=(const RelayService&) = delete;

  void Add(std::unique_ptr<RelayForwarder> forwarder);

  struct Counts {
    int running = 0;
    uint64_t drained = 0;
    uint64_t failed = 0;
    uint64_t pieces = 0;  // forwarded by relays that ended, and by those running
    uint64_t bytes = 0;
  };
  Counts counts() const;

 private:
  void Loop();

  const EndCallback on_end_;
  const absl::Duration idle_poll_;
  mutable absl::Mutex mu_;
  // Replaced when a request failed hard (a group stays woken after that).
  std::shared_ptr<transport::CompletionGroup> wakeup_ ABSL_GUARDED_BY(mu_);
  std::vector<std::unique_ptr<RelayForwarder>> running_ ABSL_GUARDED_BY(mu_);
  Counts ended_ ABSL_GUARDED_BY(mu_);
  std::atomic<bool> stop_{false};
  std::thread thread_;
};

}  // namespace mixnet::nccl
