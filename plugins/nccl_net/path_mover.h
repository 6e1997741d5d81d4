// PathMover: moves NCCL comms between lanes (EPS paths and direct OCS
// circuits) as the fabric's topology epochs change, without losing or
// reordering a byte. It is the plugin's router::TopologyFollower: the worker
// agent drives it with PREPARE / COMMIT / ABORT from mixnet-controller.
//
// Routing: a send comm to host P should run over the route table's path to P
// under the routing topology (installed circuits; during a PREPARE, only the
// circuits in both the installed and the target topology), the comm's `key`
// choosing among several circuits. A comm starts on the EPS lane its connect
// made; the mover thread moves every send comm whose lane is not its desired
// path. Receivers follow their senders: they need no topology of their own.
//
// The move protocol (messages in move_protocol.h), on the lane being left:
//  1. The sender stops posting, sends MOVE with its per-tag part counts.
//  2. The receiver answers READY with its counts and its address on the target
//     NIC, and waits for the new connection; both ends now know the switch
//     point M[t] = max of the two counts for each tag t. Parts numbered below
//     M[t] go on the old lane (the end that is behind keeps posting there),
//     the others wait for the new lane. Nothing is re-posted or cancelled, so
//     FIFO matching per tag holds across the switch.
//  3. Each end sends LANE_UP once its end of the new connection is up, and
//     switches when it has both its own and the peer's LANE_UP. An end whose
//     connection fails sends LANE_FAILED; then neither switches and the comm
//     stays where it was (an unreachable circuit costs nothing but the try).
//  4. Once every part below M arrived, the receiver sends DONE; both drop the
//     old lane (it closes when its last request is tested).
//
// PREPARE returns once no comm uses, or is moving onto, a circuit outside the
// restricted topology (bounded by the round's deadline). COMMIT installs the
// target; comms move onto new circuits in the background (Settle waits for
// them: the agent calls it in warm-up sweep rounds).
//
// Traffic reports: every `report_period` the bytes each send comm carried
// are summed per peer host and handed to `report` (the worker agent), one row
// per period (the period index is the row's iteration), so the controller
// sees the NCCL traffic matrix.
//
// Lanes that die without a PREPARE (a circuit cut) are failed over to the
// comm's home EPS lane: see lane_recovery.h.
//
// Multipath (router v2; multipath.h): SetRouting builds the v2 route table
// of the installed topology and keeps each peer host's EPS share. A send
// comm whose desired path is a circuit and whose peer's share lies strictly
// between 0 and 1 wants a split lane over that circuit (one with
// LanePath::split_min_bytes set), so it moves onto one, and its parts from
// split_min_bytes on are split over that lane and home by the share; a
// share of 1 sends the comm to EPS. A peer with several circuits gives every
// comm a striped lane over all of them (LanePath::stripes; the comm's key
// picks the lane's own circuit, the others follow), made by one move with a
// connection per circuit (READY carries the receiver's address on each). A Commit drops the shares
// (router v1's paths until the next SetRouting), except that a static plan (no controller;
// Options::static_plan) applies again to every topology. With Options::router "v1", SetRouting is
// ignored: one lane, as before.
//
// Kept lanes: a move that finishes keeps the lane it left open, suspended
// (keepalive off: its circuit may go dark), at both ends, up to
// Options::kept_lanes in all; a later move onto the same path offers it
// (MOVE's reuse id) and, when the receiver kept it too, both switch onto it
// without a new connection (else they dial, as before). A move back onto
// EPS takes the comm's home lane, kept by both ends anyway.
//
// Relays (path_mover_relay.cc): a plan that allows them adds relay stripes
// (through a third host, which forwards) to a comm's lane while a send comm
// of this mover reaches every relay host of the peer; the mover also sets
// up the relays this host forwards for others (relay_forwarder.h).
//
// Threads: a "mx-nccl-mover" thread advances moves and reports; the agent's
// event thread calls the TopologyFollower methods; NCCL's proxy threads call
// LanesFor and Advance with the comm's mutex held. Lock order: the mover's
// comm set, then a comm's mutex, then the routing state, then the relay state.
#pragma once

#include <atomic>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/container/flat_hash_set.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "plugins/nccl_net/comm.h"
#include "plugins/nccl_net/move_protocol.h"
#include "plugins/nccl_net/relay_forwarder.h"
#include "runtime/cluster/cluster_spec.h"
#include "runtime/router/route_table.h"
#include "runtime/router/route_table_v2.h"
#include "runtime/router/topology_follower.h"

namespace mixnet::nccl {

// How long a move may wait for its peer before this end is up; after it the
// move is abandoned (both ends stay on the old lane).
absl::Duration MoveTimeout(absl::Duration connect_timeout);

// The transport connection id of stripe `stripe` of the lane a move makes.
uint64_t StripeConnectionId(uint64_t move_id, size_t stripe);

// How a lane carries router v2's split of a peer's bytes when relays are
// part of it (pure): `circuit_gbps` are the rates of the lane's circuits
// (its own first; empty for a lane on EPS), `eps` the share of the EPS
// paths and `relays` each relay stripe's share. Returns the share split off
// onto home (PlanSplit's) and the cut weights of the lane's connections
// (StripeCut's rates: its own, its circuit stripes, then its relays). On a
// circuit lane the relays weigh share x (sum of circuit rates) / (circuit
// share), so the cut gives each its share; on an EPS lane home carries
// nothing and the lane's own connection weighs the EPS share.
// Whether `p` runs over a circuit `circuits` lacks: its own (direct), a
// circuit stripe's, or either hop of a relay stripe that is a circuit
// (ports in either order). Pure.
bool RunsOverMissingCircuit(const LanePath& p, const std::vector<cluster::CircuitSpec>& circuits);

struct LaneWeights {
  double home_share = 0;
  std::vector<double> weights;
};
LaneWeights RelayLaneWeights(const std::vector<double>& circuit_gbps, double eps,
                             const std::vector<double>& relays);

// "send comm to h1 (10.0.0.2:4711 via eps0)", for messages.
std::string CommName(const Comm& c);

// Which lane each part of a post goes on; false: not now (ask NCCL to retry).
// Without a move in progress every part goes on the comm's lane.
bool LanesFor(Comm& comm, const uint32_t* tags, int n, std::shared_ptr<Lane>* lanes)
    ABSL_EXCLUSIVE_LOCKS_REQUIRED(comm.mu);
// Counts the posted parts (after they were posted on `lanes`).
void CountPosted(Comm& comm, const uint32_t* tags, int n, const std::shared_ptr<Lane>* lanes)
    ABSL_EXCLUSIVE_LOCKS_REQUIRED(comm.mu);

class PathMover;
// Receiver (irecv): posts the parts of `r` (described, on the lanes
// LanesFor chose), counts them and makes `r` live; returns it. A part that
// a guarded lane cannot take is a lost circuit (lane_recovery.h): when it is
// the first, nothing is out, so `mover` fails over and nullptr asks NCCL to
// retry; a later one cannot be taken back with the parts before it (they
// are posted into NCCL's buffers), so it and the later parts on guarded
// lanes stand as failed there, `r` is live, and the failover re-posts them
// on home like parts the lane lost in flight. A part home cannot take fails
// the comm: the error, and `r` (its posted parts counted, so both ends still
// number alike) is kept in comm.failed_posts until the comm closes.
absl::StatusOr<std::unique_ptr<Request>> PostReceive(PathMover* mover, Comm& comm,
                                                     std::unique_ptr<Request> r)
    ABSL_EXCLUSIVE_LOCKS_REQUIRED(comm.mu);

// One traffic row: bytes sent to each peer host during period `period`.
struct TrafficSample {
  int64_t period = 0;
  std::vector<std::string> peer_hosts;
  std::vector<double> bytes;
};

class PathMover : public router::TopologyFollower {
 public:
  struct Options {
    cluster::ClusterSpec spec;
    std::string host;
    router::Topology initial;  // spec circuits at epoch 0 unless a controller says more
    // The transport device of a local NIC (cluster-spec name).
    std::function<absl::StatusOr<transport::Device*>(const std::string& nic)> device;
    absl::Duration connect_timeout = absl::Seconds(10);
    absl::Duration tick = absl::Milliseconds(1);
    absl::Duration report_period = absl::ZeroDuration();  // zero: no reports
    std::function<void(TrafficSample)> report;
    // Multipath (see above): "v2" follows SetRouting, "v1" ignores it
    // (MIXNET_ROUTER); parts of at least split_min_bytes are split
    // (MIXNET_NCCL_SPLIT_MIN_BYTES); a routing that applies to every
    // topology when there is no controller (MIXNET_NCCL_STATIC_DEMAND).
    std::string router = "v2";
    uint64_t split_min_bytes = 64 << 10;
    std::optional<router::RoutingPlan> static_plan;
    // Relays this host forwards for others: bytes each may hold
    // (relay_forwarder.h).
    size_t relay_buffer_bytes = size_t{64} << 20;
    // Kept lanes (above): at most this many in all (MIXNET_SUSPENDED_PATHS);
    // a lane left beyond it is closed.
    int64_t kept_lanes = 256;
  };
  static absl::StatusOr<std::unique_ptr<PathMover>> Create(Options options);
  ~PathMover() override;  // stops the thread; comms must be removed first

  // The lane a new send comm to `peer_host` should start on: the EPS path
  // between the NCCL device's NIC and the listener's NIC (`remote_nic`).
  LanePath InitialPath(const std::string& local_nic, const std::string& remote_nic) const;

  void Add(Comm* comm);
  void Remove(Comm* comm);  // after it, the mover never touches `comm`
  // Advances `comm`'s move (control messages, dials, switching, retiring)
  // and starts one when the comm is a send comm off its desired path.
  void Advance(Comm& comm) ABSL_EXCLUSIVE_LOCKS_REQUIRED(comm.mu);

  // Failover of guarded lanes (lane_recovery.cc; see lane_recovery.h).
  // Whether request `r` is complete as NCCL should see it: a send part on a
  // guarded lane needs the receiver's ACK; a guarded part whose lane died
  // starts a failover (the part is then re-posted on home, or, for a send,
  // waits for the receiver's RECOVER).
  bool Complete(Comm& comm, Request& r) ABSL_EXCLUSIVE_LOCKS_REQUIRED(comm.mu);
  // Receiver: the parts of completed request `r` arrived (for ACKs).
  void NoteDone(Comm& comm, const Request& r) ABSL_EXCLUSIVE_LOCKS_REQUIRED(comm.mu);
  // A guarded lane of `comm` died (`why`): fall back to its home lane.
  void Failover(Comm& comm, const std::string& why) ABSL_EXCLUSIVE_LOCKS_REQUIRED(comm.mu);

  // router::TopologyFollower (agent thread).
  absl::Status Prepare(const router::Topology& target, absl::Time deadline) override;
  absl::Status Commit(const router::Topology& target, absl::Time deadline) override;
  // Commit and SetRouting with no move started in between (the mover holds
  // new moves until the routing is in).
  absl::Status CommitWithRouting(const router::Topology& target, const router::RoutingPlan* plan,
                                 absl::Time deadline, absl::Status* routing_status) override;
  void Abort(uint64_t epoch) override;
  // Returns once no comm is moving and every send comm runs on its desired
  // path, or has failed a move and waits out a backoff that ends after
  // `deadline` (one ending before it is waited for, and the move retried);
  // DeadlineExceeded naming up to four comms still moving.
  absl::Status Settle(absl::Time deadline) override;
  // Router v2 weights for the installed topology (see above).
  absl::Status SetRouting(const router::RoutingPlan& plan) override;
  uint64_t installed_epoch() const override;

  // The share of `comm`'s bytes router v2 puts on EPS (0 without a routing),
  // that a part on a circuit lane splits off onto home; a lane on EPS (one
  // with relay stripes) splits nothing off.
  double EpsShare(const Comm& comm) const;
  double HomeShare(const Comm& comm, const LanePath& lane) const;

  struct Stats {
    uint64_t moves_started = 0, moves_done = 0, moves_abandoned = 0;
    uint64_t installed_epoch = 0;
    uint64_t failovers = 0;     // recoveries completed (either end)
    uint64_t parts_resent = 0;  // send parts re-sent over home lanes
    uint64_t lanes_reused = 0;  // moves onto a kept lane or home: no connection made
    int64_t lanes_kept = 0;     // kept now
    // Relays this host forwarded for others (relay_forwarder.h).
    RelayService::Counts relays;
  };
  Stats stats() const;

 private:
  explicit PathMover(Options options);
  void Run();
  // Routing state: the path a send comm should use now; nullopt when the
  // peer is not a host of the spec (the comm stays where it is).
  std::optional<LanePath> Desired(const Comm& comm) const;
  absl::Status InstallRouting(const router::Topology& topology, bool restricted);
  // True when `p` runs over a circuit the routing topology lacks (its own,
  // a stripe's, or a hop of a relay stripe).
  bool Vanishing(const LanePath& p) const;
  // Relays (path_mover_relay.cc). Origin: the relay routes to `peer` that
  // can be set up now (through hosts a send comm of ours reaches).
  std::vector<router::Path> UsableRelays(const std::string& peer) const;
  // Origin: the receiver's READY named its address for relay stripe j of
  // the move: ask the relay host (RELAY_OPEN, sent by the mover thread).
  void AskRelay(Comm& c, size_t j, const std::string& peer_address)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(c.mu);
  // Origin: dials the relay hosts that answered; false when the move was
  // abandoned.
  bool AdvanceRelayDials(Comm& c) ABSL_EXCLUSIVE_LOCKS_REQUIRED(c.mu);
  // Relay host: RELAY_OPEN on `on`, a lane of `c`; RELAY_READY anywhere.
  void HandleRelayControl(Comm& c, Lane& on, const ControlMessage& m)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(c.mu);
  // Mover thread, comms_mu_ held: sends the queued RELAY_OPENs, notes which
  // hosts can relay (`reachable`: peers of healthy send comms), starts the
  // relays whose connections are up. True while relays are being made.
  bool RunRelays(const absl::flat_hash_set<std::string>& reachable)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(comms_mu_);
  std::string DescribeBlocked() const;
  // Set while CommitWithRouting installs a topology and its routing: no
  // move starts (a comm's desired path is only right with both).
  std::atomic<bool> routing_pending_{false};
  // Comms not settled by `deadline` (Settle), as DescribeBlocked lists them.
  std::string DescribeUnsettled(absl::Time deadline) const;
  void Report();

  // Move steps (comm.mu held).
  void StartMove(Comm& c, const LanePath& target) ABSL_EXCLUSIVE_LOCKS_REQUIRED(c.mu);
  void HandleControl(Comm& c, Lane& on, const ControlMessage& m)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(c.mu);
  void PollControl(Comm& c, Lane& lane) ABSL_EXCLUSIVE_LOCKS_REQUIRED(c.mu);
  void Send(Comm& c, Lane& lane, const ControlMessage& m, bool ack = false)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(c.mu);
  void Abandon(Comm& c, const std::string& why, bool tell_peer) ABSL_EXCLUSIVE_LOCKS_REQUIRED(c.mu);
  void MaybeSwitch(Comm& c) ABSL_EXCLUSIVE_LOCKS_REQUIRED(c.mu);
  // One of a striped target's further connections (`co`: the lane's own
  // dial's options), waited for or dialled.
  absl::StatusOr<std::shared_ptr<ConnectionTask>> StartStripeDial(transport::Device& device,
                                                                  transport::ConnectOptions co,
                                                                  const StripePath& stripe,
                                                                  size_t j, bool initiator) const;
  void MaybeRetire(Comm& c) ABSL_EXCLUSIVE_LOCKS_REQUIRED(c.mu);
  // Kept lanes: keeps `lane` (left by a finished move) if it can be reused;
  // takes the kept lane with connection id `id` (or, id 0, on `path`) out
  // of the comm's and resumes it; nullptr when there is none usable.
  void Keep(Comm& c, std::shared_ptr<Lane> lane) ABSL_EXCLUSIVE_LOCKS_REQUIRED(c.mu);
  std::shared_ptr<Lane> TakeKept(Comm& c, uint64_t id, const LanePath* path)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(c.mu);

  // Failover steps (lane_recovery.cc; comm.mu held).
  void HandleRecovery(Comm& c, const ControlMessage& m) ABSL_EXCLUSIVE_LOCKS_REQUIRED(c.mu);
  void KillGuarded(Comm& c) ABSL_EXCLUSIVE_LOCKS_REQUIRED(c.mu);
  // The comm failed: closes every connection of it, home's too, so that
  // every piece still posted ends (failed) now and nothing lands in, or is
  // read from, a request's buffers after the request completes.
  void CloseFailed(Comm& c) ABSL_EXCLUSIVE_LOCKS_REQUIRED(c.mu);
  void RecoverReceiver(Comm& c, uint64_t generation, const std::string& why)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(c.mu);
  void ResendFromRecover(Comm& c, const ControlMessage& m) ABSL_EXCLUSIVE_LOCKS_REQUIRED(c.mu);
  // Receiver: the sender's RESENT after a failover of a comm with split lanes.
  void ApplyResent(Comm& c, const ControlMessage& m) ABSL_EXCLUSIVE_LOCKS_REQUIRED(c.mu);
  void MaybeSendAck(Comm& c) ABSL_EXCLUSIVE_LOCKS_REQUIRED(c.mu);
  // The failover a failed control send on a guarded lane asked for.
  void RunDueFailover(Comm& c) ABSL_EXCLUSIVE_LOCKS_REQUIRED(c.mu);
  // A guarded part of `r` (or one of its stripe pieces) failed: fails over
  // and returns true (unless the comm failed already).
  bool FailOverBroken(Comm& c, Request& r) ABSL_EXCLUSIVE_LOCKS_REQUIRED(c.mu);
  // A failure `st` on guarded lane `lane`: fail over unless the lane was
  // being retired anyway.
  void GuardedLaneEnded(Comm& c, Lane& lane, const absl::Status& st)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(c.mu);

  const Options options_;
  std::atomic<bool> stop_{false};
  std::thread thread_;

  mutable absl::Mutex comms_mu_;
  absl::flat_hash_set<Comm*> comms_ ABSL_GUARDED_BY(comms_mu_);

  mutable absl::Mutex routing_mu_;
  router::Topology installed_ ABSL_GUARDED_BY(routing_mu_);
  router::Topology routing_ ABSL_GUARDED_BY(routing_mu_);  // installed, or the restriction
  std::shared_ptr<const router::RouteTable> table_ ABSL_GUARDED_BY(routing_mu_);
  // Router v2's EPS share per peer host (SetRouting; empty: router v1).
  absl::flat_hash_map<std::string, double> eps_share_ ABSL_GUARDED_BY(routing_mu_);
  // A plan with relays: per peer host, the EPS share and the relay paths
  // (weights > 0) of the split with relays, used while every relay host of
  // the peer is reachable (UsableRelays); eps_share_ is the split without.
  struct RelaySplit {
    double eps_share = 0;
    std::vector<router::Path> paths;
  };
  absl::flat_hash_map<std::string, RelaySplit> relay_split_ ABSL_GUARDED_BY(routing_mu_);

  // Relays. Lock order: after any comm's mutex and routing_mu_; nothing is
  // taken under it but the relay service's.
  mutable absl::Mutex relays_mu_;
  absl::flat_hash_set<std::string> relay_reachable_ ABSL_GUARDED_BY(relays_mu_);
  struct RelayOpen {
    std::string relay_host;
    ControlMessage message;
  };
  std::vector<RelayOpen> relay_outbox_ ABSL_GUARDED_BY(relays_mu_);
  struct RelayAnswer {
    std::string address;
    std::string reason;  // refused
    absl::Time at;       // an answer nobody took (its move ended) goes after a while
  };
  absl::flat_hash_map<uint64_t, RelayAnswer> relay_answers_ ABSL_GUARDED_BY(relays_mu_);
  struct PendingRelay {
    std::string name;
    std::shared_ptr<ConnectionTask> up, down;
    std::unique_ptr<transport::Connection> up_made, down_made;
  };
  std::vector<PendingRelay> pending_relays_ ABSL_GUARDED_BY(relays_mu_);
  std::unique_ptr<RelayService> relay_service_ ABSL_GUARDED_BY(relays_mu_);  // at the first relay
  std::atomic<uint64_t> installed_epoch_{0};
  std::atomic<uint64_t> routing_generation_{1};  // bumped by every routing change

  std::atomic<uint64_t> moves_started_{0}, moves_done_{0}, moves_abandoned_{0};
  std::atomic<uint64_t> failovers_{0}, parts_resent_{0};
  std::atomic<uint64_t> lanes_reused_{0};
  std::atomic<int64_t> lanes_kept_{0};
  absl::Time next_report_;  // mover thread only
};

}  // namespace mixnet::nccl
