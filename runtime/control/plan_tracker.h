// PlanTracker: the worker agent's record of the controller's answers to its
// plan requests (DECISION events) and of how rounds ended (COMMIT installed,
// or ABORT), so that a training step can wait, with a deadline, until the
// topology planned for its next all-to-all is in place. Bounded: the last
// `keep` decisions and round outcomes are kept.
//
// Threads: OnDecision / OnRoundEnd come from the agent's event thread, Await
// from the training thread; every method may be called from any thread.
#pragma once

#include <cstddef>
#include <cstdint>
#include <deque>
#include <map>
#include <string>
#include <tuple>

#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "runtime/control/plan_key.h"

namespace mixnet::control {

struct PlanOutcome {
  bool decided = false;      // the controller answered the request
  bool reconfigure = false;  // ... with a round (epoch below)
  bool committed = false;    // that round committed and was installed here
  bool timed_out = false;    // Await's deadline passed first
  uint64_t epoch = 0;        // the round's epoch (reconfigure)
  std::string reason;        // why not (decided && !reconfigure), or how the round ended
  double predicted_ms = 0;   // the controller's fluid-model estimate (DECISION)
  double current_ms = 0;
  absl::Duration waited;  // time spent in Await
};

class PlanTracker {
 public:
  explicit PlanTracker(size_t keep = 256) : keep_(keep < 1 ? 1 : keep) {}

  void OnDecision(const PlanTarget& target, bool reconfigure, uint64_t epoch, std::string reason,
                  double predicted_ms, double current_ms);
  // The round of `epoch` ended: committed (and installed) or not. Rounds end
  // in epoch order, so an end also settles every lower epoch not seen.
  void OnRoundEnd(uint64_t epoch, bool committed);

  // Waits until the request for `target` (matched on iteration, layer, pass
  // and combine) is decided and, when it reconfigures, until its round has ended;
  // at most `timeout` (then timed_out is set and the rest says how far it got).
  PlanOutcome Await(const PlanTarget& target, absl::Duration timeout);

 private:
  using Key = std::tuple<int64_t, int, int, bool>;
  static Key KeyOf(const PlanTarget& t) { return {t.iteration, t.layer, t.pass, t.combine}; }
  // Fills the round part of `o` when its round has ended; true then.
  bool RoundEndedLocked(PlanOutcome& o) const ABSL_SHARED_LOCKS_REQUIRED(mu_);

  const size_t keep_;
  mutable absl::Mutex mu_;
  std::map<Key, PlanOutcome> decisions_ ABSL_GUARDED_BY(mu_);
  std::deque<Key> decision_order_ ABSL_GUARDED_BY(mu_);
  std::map<uint64_t, bool> ended_ ABSL_GUARDED_BY(mu_);  // epoch -> committed
  uint64_t highest_ended_ ABSL_GUARDED_BY(mu_) = 0;
};

}  // namespace mixnet::control
