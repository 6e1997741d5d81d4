// Communicator: one rank's view of a job. It learns where every rank lives
// (rendezvous store), builds the route table for its host (router v1), opens
// one transport Device per local NIC (EPS and OCS, so later circuits can be
// connected), and connects one Connection per (peer, path). Collectives are
// free functions over it (alltoall.h, sync.h).
//
// Pairs of ranks come in two kinds:
//  - static pairs (same host, a host without OCS or EPS NIC, different
//    regions): their paths are the route table's, fixed for the communicator's
//    life; every failure is fatal.
//  - dynamic pairs (hosts that circuits may join): fixed EPS paths, plus a set
//    of DirectLinks (one per circuit, made the first time it appeared) that
//    follows the topology (Prepare/Commit/Abort, topology_follower.h). A link
//    whose circuit leaves is suspended, not closed, and resumed when the
//    circuit comes back (no connection made or closed per round). A direct
//    link that fails is dropped (its bytes go over EPS, see alltoall.h); it
//    never aborts the communicator.
//
// Threads: a Communicator is used by one caller thread at a time (like an
// NCCL communicator); its devices run their own progress threads; a
// WorkerAgent thread may call Prepare/Commit/Abort at any time. After a
// collective fails the communicator is aborted: every later call returns the
// first error.
#pragma once

#include <atomic>
#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "runtime/cluster/cluster_spec.h"
#include "runtime/planner/routing.h"
#include "runtime/rendezvous/store.h"
#include "runtime/router/route_table.h"
#include "runtime/router/topology_follower.h"
#include "runtime/transport/transport.h"

namespace mixnet::collectives {

struct CommunicatorOptions {
  int rank = 0;
  int world_size = 1;
  // Not owned; used only during Create. Keys are "mixnet/rank/<r>", so give
  // each communicator a fresh store or its own rendezvous::PrefixStore.
  rendezvous::Store* store = nullptr;
  // Where ranks live. When no spec is given, a one-host spec over the first
  // interface matching MIXNET_SOCKET_IFNAME (default lo) is used and `host`
  // defaults to "localhost".
  std::optional<cluster::ClusterSpec> spec;
  std::string host;
  // Live circuits; defaults to the spec's initial circuits at epoch 0.
  std::optional<router::Topology> topology;
  std::string transport = "tcp";
  // Ranks on one host: "local" (the intra-host transport, used when both ends
  // offer it) or "nic" (`transport` over the host's NIC).
  std::string intra_host = "local";
  // "v2": split each dynamic pair's bytes over its circuits and EPS by the
  // weights of the controller's plan (SetRouting); "v1": ignore plans
  // (circuits if any, else EPS). MIXNET_ROUTER.
  std::string router = "v2";
  // Router v2 relays (alltoall_relay.h): the unit a relay forwards, and the
  // most a rank holds for forwarding in one call (at least one chunk per
  // stream). MIXNET_RELAY_CHUNK_BYTES, MIXNET_RELAY_BUFFER_BYTES.
  size_t relay_chunk_bytes = 256 << 10;
  size_t relay_buffer_bytes = 16 << 20;
  // Router v2's split of a plan's demand (planner/lp_routing.h's
  // RoutingFunctionFor where the program links the LP); null: the
  // water-filling, planner::OptimiseRouting.
  planner::RoutingFunction route_function;
  // Receiver-paced pieces (alltoall_pull.cc): the piece a receiver asks one
  // of a dynamic pair's paths for; 0 (the default): each path carries its
  // planned share whole. MIXNET_PULL_CHUNK_BYTES.
  size_t pull_chunk_bytes = 0;
  // Direct links kept open, suspended, while their circuits are out of the
  // topology (see Communicator::Commit); the least recently suspended beyond
  // this many are closed. 0: close them at once. MIXNET_SUSPENDED_PATHS.
  size_t suspended_paths = 256;
  transport::DeviceOptions device_options;  // ifname/bind_address are set per NIC
  // CPUs for the devices' progress threads: "auto" (the process's allowed
  // CPUs), a list ("0,2,8-11") or "none" (left to the scheduler). Device k
  // (the intra-host device first, then NICs) of the i-th of L ranks on this
  // machine is pinned to entry (i + k*L) mod n, so ranks sharing cores spread
  // over them and each rank's threads stay together.
  std::string progress_cpus = "auto";
  absl::Duration timeout = absl::Seconds(30);
  absl::Duration connect_timeout = absl::Seconds(60);

  // Defaults from the MIXNET_* settings (transport, timeouts, TCP tuning, spec, host).
  static absl::StatusOr<CommunicatorOptions> FromSettings(int rank, int world_size,
                                                          rendezvous::Store* store);
};

// How a rank sends its bytes to one dynamic peer while circuits join them
// (router v2; all zero: v1): `eps_share` of the bytes over EPS, each relay's
// `share` through that rank (two hops over circuits, alltoall_relay.h), the
// rest over the pair's circuits.
struct RelayRoute {
  int rank = -1;
  double share = 0;
};
struct PeerRouting {
  double eps_share = 0;
  std::vector<RelayRoute> relays;
};

// One usable way to a peer: the route and its open connection.
struct PeerPath {
  router::Path path;
  std::unique_ptr<transport::Connection> connection;
};

// A direct (OCS) connection to one peer rank over one circuit, made at one
// epoch. Shared by the communicator's installed set and by the collectives
// that picked it when they started; the connection lives until Kill or until
// the last holder lets go. Thread-safe.
class DirectLink {
 public:
  DirectLink(router::Path path, int peer, uint64_t id, uint64_t epoch,
             std::unique_ptr<transport::Connection> connection);
  ~DirectLink();
  const router::Path& path() const { return path_; }
  int peer() const { return peer_; }
  // Unique per (rank pair, NIC pair, epoch made); both ends derive the same.
  uint64_t id() const { return id_; }
  uint64_t epoch() const { return epoch_; }
  // Not dead, and its connection reports no error.
  bool usable() const;
  // Suspends (the circuit goes dark on purpose) or resumes the connection's
  // idle-path probing (transport::Connection::SetSuspended).
  absl::Status SetSuspended(bool suspended);
  // Bytes sent and not yet acknowledged by the peer (0 when dead).
  size_t UnacknowledgedBytes() const;
  // Marks the link dead and destroys its connection (which waits for the
  // transport's progress thread), so nothing more lands in user buffers;
  // requests still pending on it fail. Idempotent.
  void Kill(const absl::Status& why);
  absl::StatusOr<std::unique_ptr<transport::Request>> Isend(const void* buf, size_t len,
                                                            uint64_t tag);
  absl::StatusOr<std::unique_ptr<transport::Request>> Irecv(void* buf, size_t len, uint64_t tag);

 private:
  const router::Path path_;
  const int peer_;
  const uint64_t id_;
  const uint64_t epoch_;
  mutable absl::Mutex mu_;
  std::unique_ptr<transport::Connection> connection_ ABSL_GUARDED_BY(mu_);
  absl::Status dead_ ABSL_GUARDED_BY(mu_);
};
using DirectLinks = std::vector<std::shared_ptr<DirectLink>>;

class Communicator : public router::TopologyFollower {
 public:
  static absl::StatusOr<std::unique_ptr<Communicator>> Create(CommunicatorOptions options);
  ~Communicator() override;

  // TopologyFollower (communicator_topology.cc); any thread.
  absl::Status Prepare(const router::Topology& target, absl::Time deadline) override;
  absl::Status Commit(const router::Topology& target, absl::Time deadline) override;
  void Abort(uint64_t epoch) override;
  uint64_t installed_epoch() const override;
  // Router v2: builds the route table of the installed topology from the
  // plan's demand and keeps, per dynamic peer, the shares of its bytes to
  // send over EPS and through relays while circuits join the pair
  // (route_table_v2.h, SharesTo; a relay host's rank: one of the ranks on
  // it, picked by this rank and the peer). A Commit resets the shares to
  // v1's (0) until the next plan. Ignored (OK) when the communicator runs
  // router v1. It also builds the routing of the plan's reverse (the
  // transposed demand: a MoE combine after its dispatch, which the same
  // circuits carry): a call whose counts look more like the reverse (see
  // BeginTransfer) routes by that one.
  absl::Status SetRouting(const router::RoutingPlan& plan) override;
  // The EPS share SetRouting gave `peer` (0: v1, circuits only).
  double eps_share(int peer) const;
  // The whole routing SetRouting gave `peer`, or the reverse plan's.
  PeerRouting routing(int peer, bool reverse = false) const;
  // Calls that routed by the plan's reverse.
  uint64_t reverse_routed_calls() const { return reverse_routed_calls_.load(); }
  // The installed topology, and the plan SetRouting took for it (none:
  // router v1, or no plan since the last Commit): what this rank routes by,
  // for reports (the demo replays its runs in the simulator with them).
  router::Topology installed_topology() const;
  std::optional<router::RoutingPlan> routing_plan() const;
  // The last plan SetRouting took allowed relays (the controller's --relay,
  // the same for every rank). Then an alltoallv that loses a member goes on
  // with the others until their bytes are delivered (a relay's pieces come
  // again from their origins over EPS), and only then fails naming the lost
  // member (alltoall_dynamic.cc, "loss of a member").
  bool relays_planned() const { return relays_planned_.load(); }
  size_t relay_chunk_bytes() const { return relay_chunk_bytes_; }
  size_t relay_buffer_bytes() const { return relay_buffer_bytes_; }
  size_t pull_chunk_bytes() const { return pull_chunk_bytes_; }
  const std::string& router() const { return router_; }

  int rank() const { return rank_; }
  // What carries bytes between ranks of one host: "local" when this rank
  // talks to a same-host peer over the intra-host transport, else transport.
  std::string intra_host_transport() const { return local_peers_ > 0 ? "local" : transport_; }
  int size() const { return world_size_; }
  // This rank's index among the ranks on its machine (same kernel boot), and
  // how many there are.
  int local_rank() const { return local_rank_; }
  int local_ranks() const { return local_ranks_; }
  // Each device's name and the CPUs its progress thread may run on (read
  // back from the thread), in placement order (see progress_cpus).
  std::vector<std::pair<std::string, std::vector<int>>> ProgressThreadCpus() const;
  absl::Duration timeout() const { return timeout_; }
  const std::string& host_of(int rank) const { return hosts_[rank]; }
  // The route table the communicator was created with (epoch of creation).
  const router::RouteTable& routes() const { return routes_; }
  // Fixed paths to `peer` (empty for self), in route-table order; both ends
  // list the same physical paths in the same order. Static pairs: the route
  // table's paths; dynamic pairs: the EPS paths.
  std::vector<PeerPath>& paths_to(int peer) { return peers_[peer]; }
  // Whether circuits may join this rank and `peer` (see the top of the file).
  bool dynamic(int peer) const { return dynamic_[peer]; }
  bool any_dynamic() const { return any_dynamic_; }

  // For a transfer starting now: per peer, the direct links this rank
  // considers usable (installed, alive, allowed by a pending Prepare), in id
  // order, at most `max_per_peer` each. Offering and registering happen under
  // one lock, so a Prepare either sees the transfer or restricts its offer.
  // EndTransfer lets go; Prepare waits for transfers that offered more.
  // `routing` (optional) gets each peer's routing (see SetRouting): the
  // plan's, or its reverse's when the call's counts (`send_counts`,
  // `recv_counts`, per peer rank) weigh more on the reverse's demand (the
  // plan's column as this rank's sends, its row as its receives) than on the
  // plan's. Each rank chooses for itself; relays and destinations learn the
  // choice from the headers.
  std::vector<DirectLinks> BeginTransfer(size_t max_per_peer,
                                         std::vector<PeerRouting>* routing = nullptr,
                                         absl::Span<const size_t> send_counts = {},
                                         absl::Span<const size_t> recv_counts = {});
  void EndTransfer();
  // What BeginTransfer would offer `peer` now, without registering.
  DirectLinks OfferDirect(int peer);
  // Whether a collective of this communicator is between Begin/EndTransfer.
  bool transfer_active() const;
  // Test hook: kills the first installed direct link to `peer` (as a failing
  // circuit would, seen from this end only). False when there is none.
  bool TestOnlyKillDirectLink(int peer);
  // Installed direct links to `peer` (alive or not), for tests and tools.
  DirectLinks InstalledDirect(int peer);
  // Direct links kept suspended (their circuits out of the topology).
  size_t suspended_direct() const;
  // Direct links connected (at creation and by Commits), resumed by a Commit
  // whose topology has their circuit again, and closed by a Commit (found
  // dead when their circuit left, evicted beyond suspended_paths, or not
  // answering their resume probe), over this communicator's life. A
  // topology seen before connects nothing.
  uint64_t direct_links_connected() const { return direct_connected_.load(); }
  uint64_t direct_links_resumed() const { return direct_resumed_.load(); }
  uint64_t direct_links_closed() const { return direct_closed_.load(); }
  // Counters (any thread): bytes this rank sent over direct links, and pieces
  // it re-sent over EPS because a direct path lost them.
  uint64_t direct_bytes_sent() const { return direct_bytes_sent_.load(); }
  uint64_t pieces_resent() const { return pieces_resent_.load(); }
  // Pieces this rank asked its peers for as a pacing receiver (alltoall_pull.cc).
  uint64_t pull_asks() const { return pull_asks_.load(); }
  // Bytes this rank sent to relays for other ranks, and bytes it forwarded
  // as a relay (both also count as direct bytes when on a direct link).
  uint64_t relay_bytes_sent() const { return relay_bytes_sent_.load(); }
  uint64_t relay_bytes_forwarded() const { return relay_bytes_forwarded_.load(); }
  void CountDirectBytes(uint64_t n) { direct_bytes_sent_.fetch_add(n); }
  void CountResent() { pieces_resent_.fetch_add(1); }
  void CountPullAsk() { pull_asks_.fetch_add(1); }
  void CountRelaySent(uint64_t n) { relay_bytes_sent_.fetch_add(n); }
  void CountRelayForwarded(uint64_t n);
  // Test hook: this process SIGKILLs itself once it has forwarded at least
  // `bytes` as a relay (0: never), to kill a relay at a known point.
  void TestOnlyDieAfterForwarding(uint64_t bytes) { die_after_forwarding_.store(bytes); }
  std::string PeerName(int peer) const;

  // Tag base for the next collective call; every rank calls collectives in the
  // same order, so the bases agree.
  uint64_t NextCollectiveTag() { return (++collective_seq_) << 16; }

  // The first data-plane failure seen (a lost peer), or the abort reason.
  absl::Status health() const;
  // For the start of a collective: OK while healthy; else the failure to
  // report, through Fail (a failure seen between calls may be a peer that
  // aborted, which gives way to the root cause like one seen inside a call).
  absl::Status CheckUsable();
  // Records `status` (first one wins) and closes every connection (the
  // installed direct links, and those a running collective holds that a
  // Commit dropped meanwhile), so no transport touches user buffers after
  // the failing call returns.
  void Abort(const absl::Status& status);
  // A direct link failed on a progress thread: reap dead links lazily.
  void OnDirectFailure(const absl::Status& status);
  // For a collective that hit `status`: when it is a peer's orderly close,
  // waits briefly for the root cause (a rank that died) to surface; then
  // aborts and returns the error to report.
  absl::Status Fail(absl::Status status);

  // Waits for all `requests` until `timeout`, giving up early when the
  // communicator fails. `owner[i]` is the peer rank of requests[i], used to
  // name who did not answer. On error the communicator is aborted.
  absl::Status WaitAll(std::vector<std::unique_ptr<transport::Request>>& requests,
                       const std::vector<int>& owner, const char* what);

 private:
  Communicator() = default;
  absl::Status Init(CommunicatorOptions& options);
  void OnTransportFailure(const absl::Status& status);
  // Connects a direct link over each circuit of `table` (to a dynamic peer)
  // whose CircuitKey is not in `skip`, dialling higher ranks first, then
  // accepting lower ones. Links that cannot be made are left out; the first
  // error is returned. `made` gets one list per peer. Each link's attempt
  // ends at `deadline` or after `attempt` (Commit: the stall time, so that a
  // circuit that stays dark costs that long, not every later link's turn).
  absl::Status ConnectDirect(const router::RouteTable& table, uint64_t epoch,
                             const std::set<std::string>& skip, std::vector<DirectLinks>* made,
                             absl::Time deadline,
                             const std::set<std::pair<int, std::string>>& skip_peer = {},
                             absl::Duration attempt = absl::InfiniteDuration());
  // Commit: takes the suspended links to circuits of `table` not in `have`
  // out of the suspended set and resumes those that answer a probe (one
  // byte each way on the link, both ends at once, by `deadline` and within
  // the stall time); kills the others. Returns the resumed ones per peer;
  // `dark` gets the (peer, CircuitKey) of the probes that went unanswered
  // (the circuit did not come back: not re-dialled in this Commit).
  std::vector<DirectLinks> ResumeDirect(const router::RouteTable& table,
                                        const std::set<std::string>& have, absl::Time deadline,
                                        std::set<std::pair<int, std::string>>* dark);
  // How long a Commit waits for one direct link (probe or connect): the
  // stall time (MIXNET_PATH_STALL_MS, the transports' verdict on a silent
  // path), or the connect timeout when there is none.
  absl::Duration CommitAttempt() const;
  // Closes the least recently suspended links beyond suspended_paths_.
  void EvictSuspendedLocked(DirectLinks* closing) ABSL_EXCLUSIVE_LOCKS_REQUIRED(topo_mu_);
  // Pins the devices' progress threads (see CommunicatorOptions::progress_cpus).
  absl::Status PlaceProgressThreads(const std::string& policy);
  // Devices in placement order: the intra-host device, then NIC devices.
  std::vector<transport::Device*> DevicesInPlacementOrder() const;
  // CircuitKeys of the direct paths of `table` to dynamic peers' hosts.
  std::set<std::string> DirectKeys(const router::RouteTable& table) const;
  bool Allowed(const DirectLink& link) const ABSL_SHARED_LOCKS_REQUIRED(topo_mu_);
  // Drops `peer`'s dead links into `dead`; returns the usable, allowed ones.
  DirectLinks ReapAndOffer(int peer, DirectLinks* dead) ABSL_EXCLUSIVE_LOCKS_REQUIRED(topo_mu_);

  int rank_ = 0;
  int world_size_ = 1;
  absl::Duration timeout_;
  absl::Duration connect_timeout_;
  absl::Duration path_stall_;  // the OCS devices' stall timeout (0: none)
  std::string transport_;
  std::string router_ = "v2";
  size_t relay_chunk_bytes_ = 256 << 10;
  planner::RoutingFunction route_function_;
  size_t relay_buffer_bytes_ = 16 << 20;
  size_t pull_chunk_bytes_ = 0;
  size_t suspended_paths_ = 256;
  cluster::ClusterSpec spec_;
  std::string host_;
  std::vector<std::string> hosts_;
  // Every rank's NIC name -> device address.
  std::vector<std::map<std::string, std::string>> nic_addresses_;
  // Every rank's intra-host device address (empty: it offers none).
  std::vector<std::string> local_addresses_;
  transport::Device* local_device_ = nullptr;
  int local_peers_ = 0;
  int local_rank_ = 0;
  int local_ranks_ = 1;
  router::RouteTable routes_;
  std::vector<std::unique_ptr<transport::Device>> devices_;
  std::map<std::string, transport::Device*> nic_device_;
  std::vector<std::vector<PeerPath>> peers_;
  std::vector<bool> dynamic_;
  bool any_dynamic_ = false;
  uint64_t collective_seq_ = 0;

  mutable absl::Mutex mu_;
  absl::Status failure_ ABSL_GUARDED_BY(mu_);
  std::atomic<bool> failed_{false};
  // Fail has waited for a root cause once (see Fail).
  std::atomic<bool> grace_given_{false};

  // Topology state (Prepare/Commit/Abort against OfferDirect/BeginTransfer).
  absl::Mutex commit_mu_;  // one Commit at a time
  mutable absl::Mutex topo_mu_ ABSL_ACQUIRED_AFTER(commit_mu_);
  uint64_t installed_epoch_ ABSL_GUARDED_BY(topo_mu_) = 0;
  router::Topology installed_topology_ ABSL_GUARDED_BY(topo_mu_);
  std::vector<PeerRouting> routing_ ABSL_GUARDED_BY(topo_mu_);  // per peer rank
  // The reverse plan's routing, and the plan's bytes from and to this rank's
  // host per peer rank (0 for same-host peers), to tell the two apart.
  std::vector<PeerRouting> routing_reverse_ ABSL_GUARDED_BY(topo_mu_);
  std::vector<double> plan_out_ ABSL_GUARDED_BY(topo_mu_);
  std::vector<double> plan_in_ ABSL_GUARDED_BY(topo_mu_);
  std::optional<router::RoutingPlan> routing_plan_ ABSL_GUARDED_BY(topo_mu_);
  std::vector<DirectLinks> links_ ABSL_GUARDED_BY(topo_mu_);  // per peer, id order
  // While a Prepare is pending: its epoch and the NIC pairs ("local>remote"
  // per peer host) of the target's circuits; only links over those are offered.
  std::set<std::string> installed_keys_ ABSL_GUARDED_BY(topo_mu_);  // CircuitKeys
  bool restricted_ ABSL_GUARDED_BY(topo_mu_) = false;
  uint64_t restrict_epoch_ ABSL_GUARDED_BY(topo_mu_) = 0;
  std::set<std::string> allowed_ ABSL_GUARDED_BY(topo_mu_);
  // Links whose circuits left the topology, kept open and suspended, by
  // (peer rank, CircuitKey), with the order they were suspended in.
  struct SuspendedLink {
    std::shared_ptr<DirectLink> link;
    uint64_t seq = 0;
  };
  std::map<std::pair<int, std::string>, SuspendedLink> suspended_ ABSL_GUARDED_BY(topo_mu_);
  uint64_t suspend_seq_ ABSL_GUARDED_BY(topo_mu_) = 0;
  std::atomic<uint64_t> direct_connected_{0};
  std::atomic<uint64_t> direct_resumed_{0};
  std::atomic<uint64_t> direct_closed_{0};
  bool transfer_active_ ABSL_GUARDED_BY(topo_mu_) = false;
  DirectLinks transfer_links_ ABSL_GUARDED_BY(topo_mu_);
  std::atomic<bool> links_dirty_{false};
  std::atomic<uint64_t> direct_bytes_sent_{0};
  std::atomic<uint64_t> pieces_resent_{0};
  std::atomic<uint64_t> pull_asks_{0};
  std::atomic<uint64_t> relay_bytes_sent_{0};
  std::atomic<uint64_t> relay_bytes_forwarded_{0};
  std::atomic<uint64_t> die_after_forwarding_{0};
  std::atomic<bool> relays_planned_{false};
  std::atomic<uint64_t> reverse_routed_calls_{0};
};

// "<peer host>|<local nic>><remote nic>": the circuit a direct path uses.
std::string CircuitKey(const router::Path& path, const std::string& peer_host);

}  // namespace mixnet::collectives
