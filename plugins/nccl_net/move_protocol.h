// Control messages of the lane-move protocol (path_mover.h), exchanged on the
// lane being left under kControlTag, and their wire form (JSON: rare, small,
// and readable in a packet capture). Pure functions; any thread.
//
//   MOVE        sender -> receiver  move id, target NICs and circuit(s) (and
//                                   its split rule, multipath.h), the
//                                   sender's per-tag part counts, and
//                                   whether the target is the comm's home
//                                   lane (then no connection is made)
//   READY       receiver -> sender  the receiver's transport address on the
//                                   target NIC (and on each stripe's NIC of a
//                                   striped target) and its per-tag counts
//   REFUSE      receiver -> sender  the move cannot be made (reason); both stay
//   LANE_UP     either way          this end's new connection is up
//   LANE_FAILED either way          this end's new connection failed; both stay
//   DONE        receiver -> sender  every part numbered below the switch point
//                                   arrived; the old lane may close
//
// and of the failover of lanes that die without a PREPARE (lane_recovery.cc),
// on any lane of the comm (the receiver sends them on its home lane):
//   ACK         receiver -> sender  per tag, how many parts (from the first)
//                                   have all arrived; sends on guarded lanes
//                                   complete only once acknowledged
//   LOST        sender -> receiver  recovery `generation`: a guarded lane of
//                                   the comm died; recover
//   RECOVER     receiver -> sender  recovery `generation`: the receiver's
//                                   per-tag part counts and, per tag, the
//                                   parts it did not get and re-posted on its
//                                   home lane; the sender re-sends exactly those
//                                   and the ones the receiver has not posted
//   RESENT      sender -> receiver  recovery `generation`, comms that had split
//                                   lanes only (multipath.h): the sender's
//                                   per-tag counts and, per tag, the parts
//                                   from the receiver's counts on that it split
//
// and of relay set-up (relay stripes, lane.h), on the home lane of any send
// comm from the origin A to the relay host B, whatever NCCL comm it is:
//   RELAY_OPEN  A -> B              `move` is the id of the connection A
//                                   dials to B's relay_in_nic; B dials the
//                                   peer's `address` from its relay_out_nic
//                                   with id `downstream_id` (the peer waits
//                                   for it as for a stripe) and forwards
//   RELAY_READY B -> A              B's address on relay_in_nic, or `reason`
//                                   when it cannot relay
#pragma once

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/status/statusor.h"
#include "plugins/nccl_net/lane.h"

namespace mixnet::nccl {

enum class ControlType {
  kMove,
  kReady,
  kRefuse,
  kLaneUp,
  kLaneFailed,
  kDone,
  kAck,
  kLost,
  kRecover,
  kResent,
  kRelayOpen,
  kRelayReady
};
const char* ControlTypeName(ControlType t);

struct ControlMessage {
  ControlType type = ControlType::kMove;
  uint64_t move_id = 0;
  LanePath target;      // kMove: as seen from the sender (remote_nic is the receiver's NIC)
  uint64_t epoch = 0;   // kMove
  std::string address;  // kReady: the receiver's transport address on target.remote_nic;
                        // kRelayOpen: the peer's; kRelayReady: the relay's on relay_in_nic
  // kReady, striped targets: its address on each stripe's NIC, in order.
  std::vector<std::string> stripe_addresses;
  TagCounts counts;         // kMove, kReady, kAck, kRecover, kResent
  std::string reason;       // kRefuse, kLaneFailed, kLost, kRelayReady (refused)
  uint64_t generation = 0;  // kLost, kRecover, kResent: the recovery's number (1, 2, ...)
  // kRecover: per tag, the part numbers the receiver re-posted, ascending;
  // kResent: those the sender split, from the receiver's counts on.
  absl::flat_hash_map<uint32_t, std::vector<uint64_t>> missing;
  // kRelayOpen: the relay host's NICs and the peer's connection id; `name`
  // says whose relay it is, for messages ("h0 -> h2").
  std::string relay_in_nic, relay_out_nic, name;
  uint64_t downstream_id = 0;
  // kMove: the target is the comm's home lane, kept by both ends (no new
  // connection); kReady: the receiver agreed (else it waits for a dial).
  bool onto_home = false;
  // kMove: the connection id of a kept lane on the target's path the
  // sender offers to reuse; kReady: echoed when the receiver kept it too
  // (then no connection is made), 0 when it waits for a dial.
  uint64_t reuse_id = 0;
};

std::string EncodeControl(const ControlMessage& m);
// InvalidArgument describing what is wrong.
absl::StatusOr<ControlMessage> DecodeControl(const char* data, size_t size);

// A random non-zero 64-bit id (connections, listen comms, moves); seeded per
// process. Thread-safe.
uint64_t RandomId();

// The switch point: for every tag either end counted, the larger count.
TagCounts SwitchPoint(const TagCounts& a, const TagCounts& b);

}  // namespace mixnet::nccl
