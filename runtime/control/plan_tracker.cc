// PlanTracker (see plan_tracker.h). Any thread; state under mu_.
#include "runtime/control/plan_tracker.h"

#include <utility>

#include "absl/strings/str_cat.h"

namespace mixnet::control {

void PlanTracker::OnDecision(const PlanTarget& target, bool reconfigure, uint64_t epoch,
                             std::string reason, double predicted_ms, double current_ms) {
  absl::MutexLock l(&mu_);
  const Key k = KeyOf(target);
  PlanOutcome o;
  o.decided = true;
  o.reconfigure = reconfigure;
  o.epoch = reconfigure ? epoch : 0;
  o.reason = std::move(reason);
  o.predicted_ms = predicted_ms;
  o.current_ms = current_ms;
  if (decisions_.insert_or_assign(k, std::move(o)).second) decision_order_.push_back(k);
  while (decision_order_.size() > keep_) {
    decisions_.erase(decision_order_.front());
    decision_order_.pop_front();
  }
}

void PlanTracker::OnRoundEnd(uint64_t epoch, bool committed) {
  absl::MutexLock l(&mu_);
  ended_[epoch] = committed;
  if (epoch > highest_ended_) highest_ended_ = epoch;
  while (ended_.size() > keep_) ended_.erase(ended_.begin());
}

bool PlanTracker::RoundEndedLocked(PlanOutcome& o) const {
  if (!o.reconfigure) return true;
  if (o.epoch > highest_ended_) return false;
  auto it = ended_.find(o.epoch);
  o.committed = it != ended_.end() && it->second;
  if (it == ended_.end()) {
    o.reason = absl::StrCat("the end of round ", o.epoch, " was not seen (a later round ended)");
  } else if (!it->second) {
    o.reason = absl::StrCat("round ", o.epoch, " aborted or not installed");
  }
  return true;
}

PlanOutcome PlanTracker::Await(const PlanTarget& target, absl::Duration timeout) {
  const absl::Time start = absl::Now();
  const Key k = KeyOf(target);
  absl::MutexLock l(&mu_);
  PlanOutcome out;
  auto done = [&]() ABSL_SHARED_LOCKS_REQUIRED(mu_) {
    auto it = decisions_.find(k);
    if (it == decisions_.end()) return false;
    out = it->second;
    return RoundEndedLocked(out);
  };
  const bool ok = mu_.AwaitWithTimeout(absl::Condition(&done), timeout);
  if (!ok) {
    out.timed_out = true;
    if (!out.decided) {
      out.reason = absl::StrCat("no DECISION for ", PlanTargetString(target), " within ",
                                absl::FormatDuration(timeout));
    } else if (out.reconfigure) {
      out.reason = absl::StrCat("round ", out.epoch, " for ", PlanTargetString(target),
                                " not ended within ", absl::FormatDuration(timeout));
    }
  }
  out.waited = absl::Now() - start;
  return out;
}

}  // namespace mixnet::control
