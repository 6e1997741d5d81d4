// Communicator: one rank's view of a job. It learns where every rank lives
// (rendezvous store), builds the route table for its host (router v1), opens
// one transport Device per local NIC the routes use, and connects one
// Connection per (peer, path). Collectives are free functions over it
// (alltoall.h, sync.h).
//
// Threads: a Communicator is used by one caller thread at a time (like an
// NCCL communicator); its devices run their own progress threads. After a
// collective fails the communicator is aborted: every later call returns the
// first error.
#pragma once

#include <atomic>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "runtime/cluster/cluster_spec.h"
#include "runtime/rendezvous/store.h"
#include "runtime/router/route_table.h"
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
  transport::DeviceOptions device_options;  // ifname/bind_address are set per NIC
  absl::Duration timeout = absl::Seconds(30);
  absl::Duration connect_timeout = absl::Seconds(60);

  // Defaults from the MIXNET_* settings (transport, timeouts, TCP tuning, spec, host).
  static absl::StatusOr<CommunicatorOptions> FromSettings(int rank, int world_size,
                                                          rendezvous::Store* store);
};

// One usable way to a peer: the route and its open connection.
struct PeerPath {
  router::Path path;
  std::unique_ptr<transport::Connection> connection;
};

class Communicator {
 public:
  static absl::StatusOr<std::unique_ptr<Communicator>> Create(CommunicatorOptions options);
  ~Communicator();

  int rank() const { return rank_; }
  int size() const { return world_size_; }
  absl::Duration timeout() const { return timeout_; }
  const std::string& host_of(int rank) const { return hosts_[rank]; }
  const router::RouteTable& routes() const { return routes_; }
  // Paths to `peer` (empty for self), in route-table order; both ends list the
  // same physical paths in the same order.
  std::vector<PeerPath>& paths_to(int peer) { return peers_[peer]; }
  std::string PeerName(int peer) const;

  // Tag base for the next collective call; every rank calls collectives in the
  // same order, so the bases agree.
  uint64_t NextCollectiveTag() { return (++collective_seq_) << 8; }

  // The first data-plane failure seen (a lost peer), or the abort reason.
  absl::Status health() const;
  // Records `status` (first one wins) and closes every connection, so no
  // transport touches user buffers after the failing call returns.
  void Abort(const absl::Status& status);
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

  int rank_ = 0;
  int world_size_ = 1;
  absl::Duration timeout_;
  std::vector<std::string> hosts_;
  router::RouteTable routes_;
  std::vector<std::unique_ptr<transport::Device>> devices_;
  std::vector<std::vector<PeerPath>> peers_;
  uint64_t collective_seq_ = 0;

  mutable absl::Mutex mu_;
  absl::Status failure_ ABSL_GUARDED_BY(mu_);
  std::atomic<bool> failed_{false};
};

}  // namespace mixnet::collectives
