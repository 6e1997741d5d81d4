// Session: what one Python process holds after mixnet.init(): the rendezvous
// store, the Communicator, and, when a controller is configured, the
// WorkerAgent that drives the communicator through reconfiguration rounds and
// the LocalityCollector that turns reported gate outputs into traffic rows.
// Plain C++ (no Python, no torch): the pybind11 layer (module.cc) converts
// arguments and turns absl::Status errors into Python exceptions.
//
// Threads: every method is called from the Python thread that owns the
// session (the GIL serialises them; collectives run with the GIL released).
// The agent's own threads call the TopologyRecorder at any time; its
// accessors are thread-safe.
#pragma once

#include <cstddef>
#include <cstdint>
#include <fstream>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "runtime/cluster/cluster_spec.h"
#include "runtime/collectives/communicator.h"
#include "runtime/control/worker_agent.h"
#include "runtime/locality/locality_collector.h"
#include "runtime/rendezvous/store.h"
#include "runtime/router/topology_follower.h"

namespace mixnet::python {

struct SessionOptions {
  int rank = 0;
  int world_size = 1;
  std::string store;       // "file:DIR" or "tcp://HOST:PORT" (rank 0 serves)
  std::string spec_path;   // empty: MIXNET_CLUSTER_SPEC, else one host on loopback
  std::string host;        // empty: MIXNET_HOST ("localhost" without a spec)
  std::string controller;  // empty: MIXNET_CONTROLLER; still empty: no agent
  std::string job = "mixnet-python";
  int64_t timeout_ms = 0;          // 0: MIXNET_TIMEOUT_MS
  int64_t connect_timeout_ms = 0;  // 0: MIXNET_CONNECT_TIMEOUT_MS
};

// Forwards the agent's rounds to the communicator and remembers the topology
// it installed, for mixnet.topology(). Thread-safe.
class TopologyRecorder : public router::TopologyFollower {
 public:
  TopologyRecorder(collectives::Communicator* comm, router::Topology initial)
      : comm_(comm), current_(std::move(initial)) {}
  absl::Status Prepare(const router::Topology& target, absl::Time deadline) override;
  absl::Status Commit(const router::Topology& target, absl::Time deadline) override;
  void Abort(uint64_t epoch) override;
  uint64_t installed_epoch() const override { return comm_->installed_epoch(); }

  router::Topology current() const;
  uint64_t commits() const;

 private:
  collectives::Communicator* const comm_;
  mutable absl::Mutex mu_;
  router::Topology current_ ABSL_GUARDED_BY(mu_);
  uint64_t commits_ ABSL_GUARDED_BY(mu_) = 0;
};

// One live circuit, with the hosts and NICs at its ends (from the spec).
struct CircuitView {
  std::string ocs_switch;
  int port_a = 0, port_b = 0;
  std::string host_a, nic_a, host_b, nic_b;
};

struct TopologyView {
  uint64_t epoch = 0;
  std::vector<CircuitView> circuits;
};

// One gate output, as the Python layer hands it over: a contiguous CPU
// int32/int64 buffer of tokens x k expert ids, or (counts) int64 tokens per
// expert (num_experts entries, what a routing map's column sums give).
struct GateReport {
  int layer = 0;
  int micro_batch = 0;
  int64_t iteration = 0;
  const void* ids = nullptr;
  bool is_int64 = true;
  bool counts = false;  // ids holds num_experts int64 counts; k is ignored
  int64_t numel = 0;
  int k = 1;
  int num_experts = 0;
  int64_t hidden = 0;
  int element_bytes = 2;
  std::vector<int> expert_ranks;  // expert -> global rank; empty: contiguous blocks
};

// What a report turned into: this host's bytes to each host of its region
// for the key (accumulated over the reports of the same iteration), and
// whether it went to a controller.
struct GateRow {
  std::vector<std::string> peer_hosts;
  std::vector<double> bytes;
  bool sent = false;
};

struct SessionStats {
  uint64_t epoch = 0;
  uint64_t direct_bytes_sent = 0;
  uint64_t pieces_resent = 0;
  bool has_agent = false;
  control::WorkerAgentStats agent;
  uint64_t recorded_commits = 0;
};

class Session {
 public:
  // Opens the store, creates the communicator (waits for every rank), and
  // starts the agent (waits for its registration). Blocks up to the connect
  // timeout.
  static absl::StatusOr<std::unique_ptr<Session>> Create(SessionOptions options);
  ~Session();  // detaches and stops the agent before the communicator goes

  int rank() const { return comm_->rank(); }
  int size() const { return comm_->size(); }
  // This rank's index among the ranks on its machine (found at rendezvous).
  int local_rank() const { return comm_->local_rank(); }
  const std::string& host() const { return host_; }
  const std::string& host_of(int rank) const { return comm_->host_of(rank); }
  const std::string& controller() const { return controller_; }
  bool has_agent() const { return agent_ != nullptr; }

  // Byte counts per peer (displacements are the prefix sums). The buffers
  // must stay valid and untouched until it returns.
  absl::Status Alltoallv(const void* send, size_t send_bytes,
                         const std::vector<size_t>& send_counts, void* recv, size_t recv_bytes,
                         const std::vector<size_t>& recv_counts);
  absl::Status Barrier();
  // The controller's warm-up sweep (WorkerAgent::WarmPaths): every rank
  // calls it once after init, before its first step. FailedPrecondition
  // without a controller.
  absl::StatusOr<control::WarmOutcome> WarmPaths(absl::Duration timeout);

  absl::StatusOr<GateRow> ReportGate(const GateReport& report);

  // From now on, the token counts the locality collector gathered for each
  // iteration (this rank's row of every layer reported) are appended to
  // `path` as one TrafficReport JSON line when the next iteration's first
  // report arrives, and at FlushTrace / destruction. Files of all ranks
  // concatenated are a trace `mixnet-demo --trace` replays.
  absl::Status RecordTrace(const std::string& path);
  absl::Status FlushTrace();

  uint64_t epoch() const { return comm_->installed_epoch(); }
  TopologyView Topology() const;
  SessionStats Stats() const;

 private:
  Session() = default;
  absl::Status Init(SessionOptions& options);
  absl::Status EnsureCollector(const GateReport& report);

  std::unique_ptr<rendezvous::Store> store_;
  cluster::ClusterSpec spec_;
  std::string host_;
  std::string controller_;
  std::unique_ptr<collectives::Communicator> comm_;
  std::unique_ptr<TopologyRecorder> recorder_;
  std::unique_ptr<control::WorkerAgent> agent_;

  // Locality state (the owning Python thread only).
  std::unique_ptr<LocalityCollector> collector_;
  int collector_experts_ = 0;
  int64_t collector_hidden_ = 0;
  int collector_element_bytes_ = 0;
  std::vector<int> collector_expert_ranks_;
  int64_t collector_iteration_ = -1;
  std::unique_ptr<std::ofstream> trace_;
  std::string trace_path_;
};

// Reads a controller's status (GetStatus): rounds per region and the committed
// topology; Unavailable naming the target when it does not answer in time.
struct ControllerRegionView {
  std::string name;
  std::vector<std::string> hosts, registered_workers;
  uint64_t rounds_committed = 0, rounds_aborted = 0, rounds_skipped = 0;
};
struct ControllerStatusView {
  std::string controller_id;
  uint64_t highest_epoch = 0;
  uint64_t topology_epoch = 0;
  std::vector<cluster::CircuitSpec> circuits;
  std::vector<ControllerRegionView> regions;
  std::string fenced;
};
absl::StatusOr<ControllerStatusView> ReadControllerStatus(const std::string& target,
                                                          absl::Duration timeout);

}  // namespace mixnet::python
