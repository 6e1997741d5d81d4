// The objects behind the opaque pointers the plugin hands to NCCL (contexts,
// listen/send/recv comms, requests, memory handles) and the registry that
// tells live ones from NULL, freed or foreign pointers, so misuse is an error
// and never a crash. Comms are used by NCCL's proxy threads; the registry is
// thread-safe.
#pragma once

#include <array>
#include <cstdint>
#include <deque>
#include <map>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/container/flat_hash_set.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "plugins/nccl_net/background.h"
#include "plugins/nccl_net/handshake.h"
#include "plugins/nccl_net/lane.h"
#include "plugins/nccl_net/multipath.h"
#include "plugins/nccl_net/nic.h"
#include "plugins/nccl_net/plugin_config.h"
#include "runtime/transport/transport.h"

namespace mixnet::nccl {

// Per-communicator state of the v11 API.
struct Context {
  uint64_t comm_id = 0;
  int traffic_class = -1;
};

struct Request;

// A send or receive comm: one direction of one NCCL connection. Its bytes
// run over `lane`; at a topology epoch the comm may move to another lane
// without losing or reordering anything (path_mover.h). `home` is an EPS lane
// it keeps open; parts on any other lane are guarded: a send completes only
// once the receiver acknowledged it, and when such a lane dies unannounced
// what it did not deliver is re-sent over `home` (lane_recovery.h).
struct Comm {
  bool is_send = false;
  Nic* nic = nullptr;
  std::string peer_host;  // the listener's host (send comms; route lookups)
  uint64_t key = 0;       // spreads a host pair's comms over its circuits
  int max_requests = 256;
  int traffic_class = -1;  // NCCL's for this comm (-1: none); every lane's connection gets it
  absl::Mutex mu;
  std::shared_ptr<Lane> lane ABSL_GUARDED_BY(mu);
  std::shared_ptr<Lane> home ABSL_GUARDED_BY(mu);  // EPS; `lane` unless on a guarded one
  std::unique_ptr<Move> move ABSL_GUARDED_BY(mu);
  TagCounts posted ABSL_GUARDED_BY(mu);  // data parts posted, per NCCL tag
  uint64_t sent_bytes ABSL_GUARDED_BY(mu) = 0;
  uint64_t reported_bytes ABSL_GUARDED_BY(mu) = 0;  // sent_bytes at the last traffic report
  uint64_t moves ABSL_GUARDED_BY(mu) = 0;           // completed moves
  bool lane_failed ABSL_GUARDED_BY(mu) = false;     // control traffic on the lane failed
  // After a failed move, no new one before this (backoff doubles per failure).
  absl::Time retry_after ABSL_GUARDED_BY(mu);
  int failed_moves ABSL_GUARDED_BY(mu) = 0;
  // The mover's routing generation this comm's lane was last found right for.
  uint64_t routed_generation ABSL_GUARDED_BY(mu) = 0;
  absl::flat_hash_set<Request*> live ABSL_GUARDED_BY(mu);
  // Lanes left by finished moves, kept open and suspended for a later move
  // back onto their path (path_mover.h, "Kept lanes"); oldest first.
  std::vector<std::shared_ptr<Lane>> kept ABSL_GUARDED_BY(mu);
  uint64_t next_order ABSL_GUARDED_BY(mu) = 0;  // numbers requests in posting order

  // Failover (lane_recovery.h). Sender: per tag, parts the receiver
  // acknowledged (all parts numbered below arrived).
  TagCounts acked ABSL_GUARDED_BY(mu);
  // Receiver: per tag, parts from the first that are all done, the done ones
  // beyond (part number -> it was guarded), and whether the sender must hear.
  TagCounts final_prefix ABSL_GUARDED_BY(mu);
  absl::flat_hash_map<uint32_t, std::map<uint64_t, bool>> final_ahead ABSL_GUARDED_BY(mu);
  bool ack_due ABSL_GUARDED_BY(mu) = false;
  // Sender: a guarded lane died; posting waits for the receiver's RECOVER.
  bool recovering ABSL_GUARDED_BY(mu) = false;
  absl::Time recovering_since ABSL_GUARDED_BY(mu);
  uint64_t recoveries ABSL_GUARDED_BY(mu) = 0;   // completed (both ends count alike)
  std::string failover_due ABSL_GUARDED_BY(mu);  // why, when a control send asked for one

  // Multipath (multipath.h). A MOVE onto a split lane was sent (sender) or
  // received (receiver): split headers may come, and a failover ends with
  // RESENT.
  bool split_seen ABSL_GUARDED_BY(mu) = false;
  // Receiver: split headers that arrived before their part was posted, by
  // (tag, part number).
  absl::flat_hash_map<std::pair<uint32_t, uint64_t>, SplitHeader> split_headers ABSL_GUARDED_BY(mu);
  // Receiver, after a failover: posting waits for the sender's RESENT;
  // then the parts it names as split (posted later, on home) await headers.
  bool awaiting_resent ABSL_GUARDED_BY(mu) = false;
  absl::Time awaiting_since ABSL_GUARDED_BY(mu);
  absl::flat_hash_set<std::pair<uint32_t, uint64_t>> split_tail ABSL_GUARDED_BY(mu);
  // Parts split so far and their bytes on the primary lanes and on home.
  SplitCounters split ABSL_GUARDED_BY(mu);
  // Sends whose circuit piece left but whose header or second piece could
  // not follow on home (the comm failed); freed at close.
  std::vector<std::unique_ptr<Request>> failed_posts ABSL_GUARDED_BY(mu);
};

// One isend, or one grouped irecv of `n` buffers; each part keeps its lane
// and what a failover needs to post it again.
struct Request {
  Comm* comm = nullptr;
  int n = 0;
  uint64_t order = 0;    // posting order within the comm
  bool guarded = false;  // a part was posted on a guarded lane (set once, at posting)
  std::array<std::unique_ptr<transport::Request>, kMaxRecvsLimit> parts;
  std::array<std::shared_ptr<Lane>, kMaxRecvsLimit> lanes;
  std::array<void*, kMaxRecvsLimit> data{};
  std::array<size_t, kMaxRecvsLimit> sizes{};
  std::array<uint32_t, kMaxRecvsLimit> tags{};
  std::array<uint64_t, kMaxRecvsLimit> seqs{};  // the part's number within its tag
  // Sender, after a failover: the receiver had this part (its transport
  // request, on a closed lane, no longer tells).
  std::array<bool, kMaxRecvsLimit> delivered{};
  // Multipath (multipath.h): `parts`, `data` and `sizes` are the primary
  // piece (what a failover re-posts); this is the rest.
  std::array<SplitPart, kMaxRecvsLimit> split{};
};

// A connection set-up of connect or accept (handshake.h) in the background.
using DialTask = Background<PeerConnection>;

struct ListenComm {
  Nic* nic = nullptr;
  int traffic_class = -1;  // NCCL's (v11 context), for the comms it accepts
  uint64_t listen_id = 0;
  ControlListener control;
  // Connections being answered, oldest first (proxy service thread only).
  std::deque<std::shared_ptr<DialTask>> pending;
};

// A registration (regMr): the range, and its registrations with the
// connections the comm's parts go over (Connection::RegisterMemory: verbs
// registers it with each lane's adapter, TCP needs none), by lane: made at
// regMr for the comm's lanes then, at the first post on any other lane
// (after a move or a failover), and dropped at deregMr. So a registered
// buffer is registered once per lane's adapter, never per message. `pins` is
// guarded by `mu`, taken after the comm's mutex.
//
// GPU memory (type NCCL_PTR_CUDA) is registered as such with each lane
// (Connection::RegisterDeviceMemory): through `dmabuf_fd`, the handle's own
// duplicate of the fd regMrDmaBuf got (NCCL closes its own), at
// `dmabuf_offset`, or by peer memory when there is no fd (regMr).
struct MemHandle {
  MemHandle(void* c, void* d, size_t n, int t, int fd = -1, uint64_t offset = 0)
      : comm(c), data(d), size(n), type(t), dmabuf_fd(fd), dmabuf_offset(offset) {}
  ~MemHandle();
  MemHandle(const MemHandle&) = delete;
  MemHandle& operator=(const MemHandle&) = delete;
  void* const comm;
  void* const data;
  const size_t size;
  const int type;
  const int dmabuf_fd;  // owned; -1: none
  const uint64_t dmabuf_offset;
  struct Pin {
    std::weak_ptr<const Lane> lane;  // expired: the lane is gone (its address may be reused)
    std::shared_ptr<const void> registration;
  };
  absl::Mutex mu;
  absl::flat_hash_map<const Lane*, Pin> pins ABSL_GUARDED_BY(mu);
};
// Registers `m`'s range with `lane`'s connection unless it already is (the
// comm's mutex held). nullptr `m` or lane: nothing to do.
absl::Status PinOnLane(MemHandle* m, const std::shared_ptr<Lane>& lane);

enum class Kind : uint8_t { kContext, kListen, kSend, kRecv, kRequest, kMemory };
const char* KindName(Kind kind);

class Registry {
 public:
  void Add(const void* p, Kind kind);
  // False when `p` is not a live object of `kind`.
  bool Remove(const void* p, Kind kind);
  bool Contains(const void* p, Kind kind) const;

 private:
  mutable absl::Mutex mu_;
  absl::flat_hash_map<const void*, Kind> objects_ ABSL_GUARDED_BY(mu_);
};

}  // namespace mixnet::nccl
