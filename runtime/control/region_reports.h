// RegionReports: assembles one region's host-pair byte matrices from the
// traffic rows workers report (mixnet.control.v1.TrafficReport), one matrix
// per (iteration, layer, micro_batch, direction). Rows are additive: several
// processes on one host each report their own ranks' bytes, and a second row
// from the same worker for the same key replaces its first. A matrix is
// complete when every expected worker (the region's registered workers) has
// reported, or when its first row is older than the report timeout (then it
// is completed with the rows that came, and the missing workers are named).
// Rows for a key completed recently are dropped (late). At most
// `max_pending` keys are assembled at once; the oldest is dropped beyond.
// A row may carry its worker's measured time of the all-to-all (observed_ms);
// a matrix's observed completion is the slowest of its rows' times.
//
// Also learns the region's key order: the dispatch key that followed each
// dispatch key last time (layer order within an iteration, and from the last
// layer of one iteration to the first of the next).
//
// Threading: not thread-safe; the controller guards it with its mutex.
#pragma once

#include <cstdint>
#include <deque>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "runtime/control/plan_key.h"
#include "runtime/locality/token_counts.h"
#include "runtime/locality/traffic_matrix.h"

namespace mixnet::control {

// One all-to-all of one training step.
struct StepKey {
  int64_t iteration = 0;
  GateKey key;
  int pass = kForwardPass;
  friend auto operator<=>(const StepKey&, const StepKey&) = default;
  friend bool operator==(const StepKey&, const StepKey&) = default;
};

struct CompletedMatrix {
  StepKey key;
  TrafficMatrix matrix;              // region host order
  std::vector<std::string> missing;  // expected workers that did not report (timeout)
  std::optional<PlanTarget> plan;    // the first row's plan request, if any
  // The slowest measured time (ms) of the rows' all-to-all calls: when the
  // all-to-all completed; 0 when no row carried one.
  double observed_ms = 0;
};

class RegionReports {
 public:
  RegionReports(std::string region, std::vector<std::string> hosts, size_t max_pending = 64);

  const std::string& region() const { return region_; }
  const std::vector<std::string>& hosts() const { return hosts_; }
  // Index of `host` in the region, -1 when it is not in it.
  int HostIndex(const std::string& host) const;

  // Checks and stores one row (InvalidArgument naming the worker when the
  // source or a peer is not a host of the region, a peer repeats, the column
  // and byte counts differ, a byte count or `observed_ms` is negative or
  // not finite). Returns the matrix when this row completed it. The first
  // row's `plan` is the matrix's. `observed_ms`: the worker's measured time
  // of this all-to-all (0: not measured).
  absl::StatusOr<std::optional<CompletedMatrix>> Add(
      const std::string& worker_id, const std::string& host, const StepKey& key,
      const std::vector<std::string>& peer_hosts, const std::vector<double>& bytes,
      const std::set<std::string>& expected, absl::Time now,
      const std::optional<PlanTarget>& plan = std::nullopt, double observed_ms = 0);

  // Matrices now complete (a worker left) or timed out, oldest first.
  std::vector<CompletedMatrix> Expire(const std::set<std::string>& expected, absl::Time now,
                                      absl::Duration timeout);

  // Keys being assembled now.
  size_t pending() const { return pending_.size(); }

  // Records that dispatch key `k` completed (for the key order; forward
  // keys only).
  void LearnOrder(const StepKey& k);
  // The dispatch key expected after `k` (same iteration, or the first of
  // the next), nullopt before the order is known.
  std::optional<GateKey> NextDispatch(const GateKey& k) const;

 private:
  struct Row {
    int src = -1;
    std::vector<double> bytes;  // region host order
    double observed_ms = 0;     // 0: not measured
  };
  struct Pending {
    absl::Time first_row;
    std::map<std::string, Row> rows;  // by worker id
    std::optional<PlanTarget> plan;
  };
  CompletedMatrix Build(const StepKey& key, const Pending& p,
                        const std::set<std::string>& expected) const;
  void MarkDone(const StepKey& key);

  const std::string region_;
  const std::vector<std::string> hosts_;
  const size_t max_pending_;
  std::map<StepKey, Pending> pending_;
  std::deque<StepKey> done_;  // recently completed, for dropping late rows
  std::set<StepKey> done_set_;
  std::map<GateKey, GateKey> next_;  // learned dispatch order
  std::optional<StepKey> last_dispatch_;
};

}  // namespace mixnet::control
