// Prediction accuracy: how far a predicted host-pair matrix is from the one
// that came, as normalised L1 error and as overlap of the heaviest host pairs
// (what the planner gives circuits to). Both look at off-diagonal entries
// only: the diagonal stays inside a host and never touches the fabric.
// AccuracyTracker keeps running figures per (layer, direction) and logs a
// summary. The free functions are pure; AccuracyTracker is thread-safe.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "runtime/locality/predictor.h"
#include "runtime/locality/token_counts.h"
#include "runtime/locality/traffic_matrix.h"

namespace mixnet {

// sum |pred - actual| / sum actual over off-diagonal entries. When the actual
// off-diagonal total is 0: 0 if the prediction's is 0 too, else 1.
// InvalidArgument when the host counts differ.
absl::StatusOr<double> NormalisedL1Error(const TrafficMatrix& predicted,
                                         const TrafficMatrix& actual);

// The heaviest `k` off-diagonal ordered pairs (ties broken by lower index),
// as src * hosts + dst indices.
std::vector<int64_t> TopPairs(const TrafficMatrix& m, int k);

// |top(pred) & top(actual)| / k', with k' = min(k, pairs carrying actual
// traffic): 1 means the prediction names the same heaviest pairs. 1 when
// the actual matrix has no off-diagonal traffic. InvalidArgument when the
// host counts differ or k < 1.
absl::StatusOr<double> TopPairOverlap(const TrafficMatrix& predicted, const TrafficMatrix& actual,
                                      int k);

struct AccuracyStats {
  int64_t samples = 0;
  double mean_l1 = 0;
  double max_l1 = 0;
  double last_l1 = 0;
  double mean_overlap = 0;
  double last_overlap = 0;
};

class AccuracyTracker {
 public:
  // `top_k`: pairs compared by TopPairOverlap (>= 1).
  explicit AccuracyTracker(int top_k = 8) : top_k_(top_k < 1 ? 1 : top_k) {}

  int top_k() const { return top_k_; }

  // Scores one prediction against what came.
  absl::Status Record(int layer, Direction direction, const TrafficMatrix& predicted,
                      const TrafficMatrix& actual);
  // The usual loop step: scores the predictor's forecast for (layer,
  // direction) against `actual` (when it has one), then feeds it `actual`.
  absl::Status ObserveAndScore(Predictor& predictor, int layer, Direction direction,
                               const TrafficMatrix& actual);

  // NotFound when nothing was recorded for (layer, direction).
  absl::StatusOr<AccuracyStats> Stats(int layer, Direction direction) const;
  // All (layer, direction) samples together.
  AccuracyStats Overall() const;
  // One line: "<label>: N samples, L1 mean 0.123 max 0.456, top-8 overlap mean 0.91;
  // worst layer 3 dispatch (L1 0.30)".
  std::string Summary(std::string_view label) const;
  // Logs Summary at info level and each (layer, direction) at debug level.
  void LogSummary(std::string_view label) const;

 private:
  using Key = std::pair<int, Direction>;
  struct Sums {
    AccuracyStats stats;
    double l1_sum = 0;
    double overlap_sum = 0;
  };
  static void Add(Sums& s, double l1, double overlap);

  const int top_k_;
  mutable absl::Mutex mu_;
  std::map<Key, Sums> per_key_ ABSL_GUARDED_BY(mu_);
  Sums overall_ ABSL_GUARDED_BY(mu_);
};

}  // namespace mixnet
