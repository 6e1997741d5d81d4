// Prediction accuracy measures and tracker (see accuracy.h).
#include "runtime/locality/accuracy.h"

#include <algorithm>
#include <cmath>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "runtime/common/log.h"
#include "runtime/common/status.h"

namespace mixnet {
namespace {

absl::Status SameShape(const TrafficMatrix& predicted, const TrafficMatrix& actual) {
  if (predicted.hosts() != actual.hosts()) {
    return absl::InvalidArgumentError(absl::StrCat(
        "accuracy: predicted matrix has ", predicted.hosts(), " hosts, actual ", actual.hosts()));
  }
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<double> NormalisedL1Error(const TrafficMatrix& predicted,
                                         const TrafficMatrix& actual) {
  RETURN_IF_ERROR(SameShape(predicted, actual));
  double diff = 0;
  double total = 0;
  double predicted_total = 0;
  for (int i = 0; i < actual.hosts(); ++i) {
    for (int j = 0; j < actual.hosts(); ++j) {
      if (i == j) continue;
      diff += std::fabs(predicted.at(i, j) - actual.at(i, j));
      total += actual.at(i, j);
      predicted_total += predicted.at(i, j);
    }
  }
  if (total <= 0) return predicted_total > 0 ? 1.0 : 0.0;
  return diff / total;
}

std::vector<int64_t> TopPairs(const TrafficMatrix& m, int k) {
  const int n = m.hosts();
  std::vector<int64_t> idx;
  idx.reserve(static_cast<size_t>(n) * n);
  for (int i = 0; i < n; ++i) {
    for (int j = 0; j < n; ++j) {
      if (i != j) idx.push_back(static_cast<int64_t>(i) * n + j);
    }
  }
  const auto& d = m.data();
  auto heavier = [&d](int64_t a, int64_t b) { return d[a] > d[b] || (d[a] == d[b] && a < b); };
  const size_t take = std::min(idx.size(), static_cast<size_t>(std::max(k, 0)));
  std::partial_sort(idx.begin(), idx.begin() + take, idx.end(), heavier);
  idx.resize(take);
  return idx;
}

absl::StatusOr<double> TopPairOverlap(const TrafficMatrix& predicted, const TrafficMatrix& actual,
                                      int k) {
  RETURN_IF_ERROR(SameShape(predicted, actual));
  if (k < 1) return absl::InvalidArgumentError(absl::StrCat("accuracy: top-k with k = ", k));
  int carrying = 0;
  for (int i = 0; i < actual.hosts(); ++i) {
    for (int j = 0; j < actual.hosts(); ++j) {
      if (i != j && actual.at(i, j) > 0) ++carrying;
    }
  }
  const int kk = std::min(k, carrying);
  if (kk == 0) return 1.0;
  std::vector<int64_t> a = TopPairs(actual, kk);
  std::vector<int64_t> p = TopPairs(predicted, kk);
  std::sort(a.begin(), a.end());
  std::sort(p.begin(), p.end());
  std::vector<int64_t> common;
  std::set_intersection(a.begin(), a.end(), p.begin(), p.end(), std::back_inserter(common));
  return static_cast<double>(common.size()) / kk;
}

void AccuracyTracker::Add(Sums& s, double l1, double overlap) {
  ++s.stats.samples;
  s.l1_sum += l1;
  s.overlap_sum += overlap;
  s.stats.max_l1 = std::max(s.stats.max_l1, l1);
  s.stats.last_l1 = l1;
  s.stats.last_overlap = overlap;
  s.stats.mean_l1 = s.l1_sum / s.stats.samples;
  s.stats.mean_overlap = s.overlap_sum / s.stats.samples;
}

absl::Status AccuracyTracker::Record(int layer, Direction direction, const TrafficMatrix& predicted,
                                     const TrafficMatrix& actual) {
  const std::string where = absl::StrCat("accuracy, ", LayerDirectionName(layer, direction));
  if (absl::Status s = predicted.Validate(); !s.ok()) return Annotate(s, where + ", predicted");
  if (absl::Status s = actual.Validate(); !s.ok()) return Annotate(s, where + ", actual");
  absl::StatusOr<double> l1 = NormalisedL1Error(predicted, actual);
  if (!l1.ok()) return Annotate(l1.status(), where);
  absl::StatusOr<double> overlap = TopPairOverlap(predicted, actual, top_k_);
  if (!overlap.ok()) return Annotate(overlap.status(), where);
  absl::MutexLock lock(&mu_);
  Add(per_key_[Key{layer, direction}], *l1, *overlap);
  Add(overall_, *l1, *overlap);
  return absl::OkStatus();
}

absl::Status AccuracyTracker::ObserveAndScore(Predictor& predictor, int layer, Direction direction,
                                              const TrafficMatrix& actual) {
  absl::StatusOr<TrafficMatrix> predicted = predictor.Predict(layer, direction);
  if (predicted.ok()) {
    RETURN_IF_ERROR(Record(layer, direction, *predicted, actual));
  } else if (!absl::IsNotFound(predicted.status())) {
    return predicted.status();
  }
  return predictor.Observe(layer, direction, actual);
}

absl::StatusOr<AccuracyStats> AccuracyTracker::Stats(int layer, Direction direction) const {
  absl::MutexLock lock(&mu_);
  auto it = per_key_.find(Key{layer, direction});
  if (it == per_key_.end()) {
    return absl::NotFoundError(
        absl::StrCat("accuracy: no samples for ", LayerDirectionName(layer, direction)));
  }
  return it->second.stats;
}

AccuracyStats AccuracyTracker::Overall() const {
  absl::MutexLock lock(&mu_);
  return overall_.stats;
}

std::string AccuracyTracker::Summary(std::string_view label) const {
  absl::MutexLock lock(&mu_);
  const AccuracyStats& o = overall_.stats;
  std::string line =
      absl::StrFormat("%s: %d samples, L1 mean %.3f max %.3f, top-%d overlap mean %.2f",
                      std::string(label), o.samples, o.mean_l1, o.max_l1, top_k_, o.mean_overlap);
  const Key* worst = nullptr;
  double worst_l1 = -1;
  for (const auto& [key, sums] : per_key_) {
    if (sums.stats.mean_l1 > worst_l1) {
      worst_l1 = sums.stats.mean_l1;
      worst = &key;
    }
  }
  if (worst != nullptr) {
    absl::StrAppendFormat(&line, "; worst %s (L1 mean %.3f)",
                          LayerDirectionName(worst->first, worst->second), worst_l1);
  }
  return line;
}

void AccuracyTracker::LogSummary(std::string_view label) const {
  log::Info("{}", Summary(label));
  absl::MutexLock lock(&mu_);
  for (const auto& [key, sums] : per_key_) {
    const AccuracyStats& s = sums.stats;
    log::Debug("{} {}: {} samples, L1 mean {:.3f} last {:.3f}, top-{} overlap mean {:.2f}",
               std::string(label), LayerDirectionName(key.first, key.second), s.samples, s.mean_l1,
               s.last_l1, top_k_, s.mean_overlap);
  }
}

}  // namespace mixnet
