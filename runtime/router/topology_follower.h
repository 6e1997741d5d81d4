// TopologyFollower: something whose direct (OCS) paths follow the fabric's
// topology epochs: the collectives' Communicator, the NCCL net plugin. The
// WorkerAgent (runtime/control) drives it through the reconfiguration
// protocol of mixnet.control.v1 (proto/mixnet/control/v1/controller.proto).
//
// Threads: the agent's event thread calls these one at a time; an
// implementation keeps them safe against its own data path (collectives run
// on the caller's thread, transports on their progress threads).
//
// Contract:
//  - A transfer (one collective call, one plugin request) picks its direct
//    paths when it starts and keeps them to its end; both ends of a pair use
//    only paths both consider usable, so ends that are one phase apart still
//    agree. EPS and intra-host paths are always usable.
//  - Prepare(target): from now on new transfers use only direct paths over
//    circuits that are both installed and in `target`. Returns OK once no
//    transfer in flight uses any other direct path; DeadlineExceeded at
//    `deadline` otherwise (the restriction stays until Commit or Abort).
//  - Commit(target): makes usable the circuits of `target` that are not
//    installed (opening connections, or resuming ones it kept from an earlier
//    time the circuit was up; the peers do the same at the same epoch), stops
//    using those over circuits that are gone (closing or suspending their
//    connections), and installs `target` (route table of target.epoch); the
//    restriction is lifted. A new circuit whose connection cannot be made by
//    `deadline` (or, for the Communicator, within the stall time: a circuit
//    the switch did not light) stays unused (EPS carries its bytes) and the
//    error is returned, but the epoch is installed anyway.
//  - Abort(epoch): the round for `epoch` is off: lifts the restriction.
//  - Settle(deadline): returns once the installed topology's direct paths
//    are in use (or failed, with their reason logged). A follower that makes
//    them in the background after Commit (the NCCL plugin's lane moves)
//    waits here; one that makes them inside Commit (the Communicator)
//    returns at once. The agent calls it after each Commit of a warm-up
//    sweep round, so that round's paths exist before the next round darkens
//    their circuits. DeadlineExceeded naming what is still moving.
//  - SetRouting(plan) (router v2): re-weight the split of each peer's bytes
//    over its circuits and EPS from the controller's demand, on the
//    installed topology; a Commit without one falls back to v1's routing
//    (circuits if any, else EPS). Each sender splits by its own weights and
//    tells the receiver, so the ends of a pair need not agree on them.
//  - A direct path that dies without warning is dropped by the data plane on
//    its own (its bytes go over EPS) and is not used again until a Commit
//    brings a fresh connection over that circuit.
#pragma once

#include <cstdint>

#include "absl/status/status.h"
#include "absl/time/time.h"
#include "runtime/router/route_table.h"
#include "runtime/router/route_table_v2.h"

namespace mixnet::router {

class TopologyFollower {
 public:
  virtual ~TopologyFollower() = default;
  virtual absl::Status Prepare(const Topology& target, absl::Time deadline) = 0;
  virtual absl::Status Commit(const Topology& target, absl::Time deadline) = 0;
  virtual void Abort(uint64_t epoch) = 0;
  // Router v2 weights for the installed topology; a follower that does not
  // split (router v1) ignores them. InvalidArgument for a plan that does not
  // fit the cluster spec (the follower keeps its routing).
  virtual absl::Status SetRouting(const RoutingPlan& plan) {
    (void)plan;
    return absl::OkStatus();
  }
  // Commit, then SetRouting(*plan) for the new topology when the COMMIT
  // carried router v2 weights (`plan` non-null), as one step: a follower
  // whose paths move in the background starts none in between (else a comm
  // would move onto the circuit under v1's paths, then again onto its
  // split). Returns Commit's status; SetRouting's in *routing_status.
  virtual absl::Status CommitWithRouting(const Topology& target, const RoutingPlan* plan,
                                         absl::Time deadline, absl::Status* routing_status) {
    absl::Status st = Commit(target, deadline);
    *routing_status = plan != nullptr ? SetRouting(*plan) : absl::OkStatus();
    return st;
  }
  // See the contract above; the default makes its paths inside Commit.
  virtual absl::Status Settle(absl::Time deadline) {
    (void)deadline;
    return absl::OkStatus();
  }
  // The epoch of the topology installed now (the initial one, then each Commit).
  virtual uint64_t installed_epoch() const = 0;
};

}  // namespace mixnet::router
