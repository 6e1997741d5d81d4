// Lanes: the transport connections an NCCL comm runs over, and the state of a
// comm moving from one lane to another at a topology epoch (the protocol is
// in path_mover.h). A comm has one current lane; while it moves it also has
// the lane it leaves and the one being made. One EPS lane is the comm's home
// (lane_recovery.h): the lane it falls back on when another dies. Every data part posted on a lane
// holds a reference to it, so a lane (and its connection) lives until the
// last request on it is done and tested.
// Threads: a Lane is guarded by its comm's mutex (comm.h).
#pragma once

#include <array>
#include <cstdint>
#include <deque>
#include <memory>
#include <string>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/time/time.h"
#include "plugins/nccl_net/background.h"
#include "runtime/cluster/cluster_spec.h"
#include "runtime/transport/transport.h"

namespace mixnet::nccl {

// Transport tag of control messages; NCCL tags are 32-bit, so no data part
// ever uses it.
inline constexpr uint64_t kControlTag = (uint64_t{1} << 63) | 0x4D4F5645u;
// Largest control message.
inline constexpr size_t kControlMaxBytes = 64 << 10;
// Transport tag of the split headers of multipath parts, on the home lane
// (multipath.h), and the bit that marks a part's second piece there.
inline constexpr uint64_t kSplitHeaderTag = (uint64_t{1} << 63) | 0x53504C54u;
inline constexpr uint64_t kSecondPieceBit = uint64_t{1} << 62;
inline constexpr size_t kSplitHeaderBytes = 32;

// A further circuit of a striped lane (multipath.h): a connection of its
// own between these NICs, carrying its share of the lane's large parts.
// Or a relay (router v2's two-hop path through a third host): the
// connection runs from local_nic to relay_host's relay_in_nic (hop 1), and
// that host's forwarder carries each piece on from its relay_out_nic to
// the peer's remote_nic (hop 2; relay_forwarder.h). Hop 1 is over
// `first_circuit` when first_direct, hop 2 over `circuit` when
// second_direct; the other hops are EPS.
struct StripePath {
  std::string local_nic;
  std::string remote_nic;
  cluster::CircuitSpec circuit;
  double gbps = 0;  // its weight in the cut: the circuit's rate (relays: see path_routing.cc)
  std::string relay_host;  // empty: a circuit of the pair
  std::string relay_in_nic;
  std::string relay_out_nic;
  bool first_direct = false;
  bool second_direct = true;
  cluster::CircuitSpec first_circuit;
  bool relay() const { return !relay_host.empty(); }
};

inline constexpr double kRelayShareSlack = 0.05;

// Where a lane runs: from a local NIC to a NIC of the peer (cluster-spec
// names; without a spec, the interface and empty).
struct LanePath {
  std::string local_nic;
  std::string remote_nic;
  bool direct = false;           // over an OCS circuit
  cluster::CircuitSpec circuit;  // when direct
  // Multipath (multipath.h): parts posted on this lane with a piece of at
  // least this many bytes on it have a split header on the home lane; 0:
  // parts on it are never split (router v1, or no routing).
  uint64_t split_min_bytes = 0;
  // Router v2 over a pair with several circuits: the lane's own circuit
  // (`circuit`, rate `gbps`) and these further ones, each with its own
  // connection (Lane::stripes); split parts cut their lane piece over all
  // of them by rate (multipath.h). Empty: one connection.
  double gbps = 0;
  std::vector<StripePath> stripes;
  // Same NICs, circuits and split rule; with relay stripes also about the
  // same weights (each connection's share of the cut within kRelayShareSlack).
  bool SameAs(const LanePath& o) const;
  // The same connections (NICs, circuits, stripes and relays), whatever the
  // split rule and weights: a kept lane serves any path it has them for.
  bool SameConnections(const LanePath& o) const;
  // "eps0 -> eps0 (EPS)" or "ocs1 -> ocs0 (circuit ocs0:3-7)", striped:
  // "ocs0 -> ocs0 (circuit ocs0:1-2, split from 65536 B) + ocs1 -> ocs1 (circuit ocs1:3-4)".
  std::string Describe() const;
};

// A control message being sent; the buffer lives until the send is done.
struct ControlSend {
  std::string bytes;
  std::unique_ptr<transport::Request> request;
  bool ack = false;  // an ACK (at most one in flight per comm)
};

struct Lane {
  LanePath path;
  uint64_t connection_id = 0;
  // Declared before the connection: the transport may write into it until
  // the connection is gone.
  std::array<char, kControlMaxBytes> control_buf{};
  std::array<char, kSplitHeaderBytes> split_buf{};  // multipath.h
  std::unique_ptr<transport::Connection> connection;
  // A striped lane's further connections, one per LanePath::stripes entry
  // (data pieces only; control runs on `connection`).
  std::vector<std::unique_ptr<transport::Connection>> stripes;
  // Data parts posted on this lane and not yet tested done.
  int outstanding = 0;
  std::unique_ptr<transport::Request> control_recv;  // posted while the lane is in use
  // The peer closed this lane in order while nothing was posted on it (its
  // comm's teardown, lane_recovery.h): no control receive is posted again,
  // and a later post on it fails the comm over.
  bool peer_closed = false;
  std::deque<ControlSend> control_sends;
  // Home lane of a receiver that has had split lanes: the split header
  // being received into `split_buf` (multipath.h).
  std::unique_ptr<transport::Request> split_recv;
};

using ConnectionTask = Background<std::unique_ptr<transport::Connection>>;

// Per-tag counts of data parts (NCCL tag -> parts posted so far).
using TagCounts = absl::flat_hash_map<uint32_t, uint64_t>;

// A move of a comm from `old` to a lane over `target`.
struct Move {
  uint64_t id = 0;  // also the new connection's id
  LanePath target;
  uint64_t epoch = 0;  // the routing epoch that asked for it (sender side)
  std::shared_ptr<Lane> old;
  // Parts of tag t numbered below switch_at[t] go on `old`, the rest on the
  // new lane. Known once both ends' counts are (after READY).
  bool switch_known = false;
  TagCounts switch_at;
  std::shared_ptr<ConnectionTask> dial;  // the new connection being made
  std::shared_ptr<Lane> next;            // made, not yet in use
  // A striped target's further connections being made, and those made.
  std::vector<std::shared_ptr<ConnectionTask>> stripe_dials;
  std::vector<std::unique_ptr<transport::Connection>> stripes_made;
  bool local_up = false;       // our end of the new lane is up (LANE_UP sent)
  bool peer_up = false;        // the peer said LANE_UP
  bool switched = false;       // new parts go on the new lane
  bool done_sent = false;      // receiver: DONE sent on `old`
  bool done_received = false;  // sender: the receiver said DONE
  absl::Time started;
  uint64_t posted_at_start = 0;  // this end's parts posted when the move began
  // Sender: a kept lane on the target's path, offered to the receiver
  // (MOVE's reuse id); both ends: `next` is a kept lane (no dial).
  std::shared_ptr<Lane> offered;
  bool reused = false;
  // The target is the comm's home lane (its own EPS connection): no dial,
  // `next` is home (both ends agreed: MOVE and READY say so). Parts from
  // the switch point on wait for DONE (LanesFor).
  bool onto_home = false;
  // Sender, relay stripes: per stripe, the id of the connection to the
  // relay host while its RELAY_READY is awaited (0: none awaited).
  std::vector<uint64_t> relay_waits;
};

}  // namespace mixnet::nccl
