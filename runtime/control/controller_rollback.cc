// Controller (see controller.h), planner thread "mx-ctl-planner": the end of
// a round whose switch change failed part-way. The switches run in order, so
// when switch k fails, switches 1..k-1 already hold the round's circuits
// while the workers, restricted since PREPARE, are still on the committed
// topology. Before any worker is released:
//  1. every switch the round changed (and switch k itself, whose state is
//     unknown after a failed Apply) is put back to the committed circuits,
//     at the round's epoch with the next config version;
//  2. all of them back: ABORT, and the committed topology stands, on the
//     switches and on the workers alike;
//  3. a switch that cannot be put back (unreachable, failing): its circuits
//     leave the topology, so no worker sends over a circuit whose state is
//     unknown. The workers get a COMMIT of the committed topology without
//     them, at the round's epoch; the switch stays dirty and the next round
//     re-drives it (PlanAndRun), then commits its circuits again.
// A stale-epoch refusal (fenced: a newer controller claimed switch k, keeping
// the circuits it held) leaves switch k to that controller; 1..k-1 are put
// back the same way.
#include <algorithm>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "runtime/common/log.h"
#include "runtime/control/controller.h"
#include "runtime/control/switch_timing.h"

namespace mixnet::control {

void Controller::EndFailedApply(uint64_t epoch, const std::string& failed,
                                const absl::Status& error, const std::vector<std::string>& changed,
                                const std::map<std::string, std::vector<PortPair>>& had,
                                const std::set<std::string>& participants,
                                const std::set<int>& regions) {
  const bool fenced = absl::IsFailedPrecondition(error);
  const std::string target = opt_.switches.at(failed)->target();
  std::string reason;
  uint64_t committed_epoch = 0;
  {
    absl::MutexLock lock(&mu_);
    committed_epoch = committed_epoch_;
    if (fenced) {
      fenced_ =
          absl::StrCat("OCS switch ", failed, " at ", target, " refused epoch ", epoch,
                       " as stale (a controller with a higher epoch drives it): ", error.message());
      reason = fenced_;
      metrics_->Fenced();
      log::Error("controller {}: FENCED, planning stopped: {}", id_, fenced_);
      if (fenced_hook_) fenced_hook_(fenced_);
    } else {
      reason = absl::StrCat("OCS switch ", failed, " at ", target, " failed to apply epoch ", epoch,
                            ": ", error.ToString());
    }
  }
  // 1. Put back (no lock held: each Apply waits on its switch).
  std::vector<std::string> back = changed;
  if (!fenced) back.push_back(failed);
  std::vector<std::string> restored, uncertain;
  for (const std::string& name : back) {
    static const std::vector<PortPair> kNone;
    auto h = had.find(name);
    const std::vector<PortPair>& circuits = h == had.end() ? kNone : h->second;
    SwitchDriver& driver = *opt_.switches.at(name);
    absl::StatusOr<SwitchApplyResult> r =
        driver.Apply(epoch, epoch + 1, circuits,
                     absl::Now() + ApplyTimeout(opt_.switch_timeout, apply_timing_[name]));
    if (r.ok()) {
      restored.push_back(name);
      dirty_switches_.erase(name);
      log::Info("controller: epoch {}: switch {} put back to the {} circuits of epoch {}", epoch,
                name, circuits.size(), committed_epoch);
    } else {
      uncertain.push_back(name);
      dirty_switches_.insert(name);
      log::Error("controller: epoch {}: switch {} at {} not put back to epoch {}'s circuits: {}",
                 epoch, name, driver.target(), committed_epoch, r.status().ToString());
    }
  }
  absl::MutexLock lock(&mu_);
  if (!restored.empty()) {
    absl::StrAppend(&reason, "; put back to epoch ", committed_epoch,
                    "'s circuits: ", absl::StrJoin(restored, ", "));
  }
  if (uncertain.empty()) {
    // 2. The committed topology stands everywhere.
    AbortRoundLocked(epoch, participants, reason, regions);
    return;
  }
  // 3. The circuits of the switches left uncertain go out of use.
  absl::StrAppend(&reason, "; not put back: ", absl::StrJoin(uncertain, ", "),
                  " (their circuits are out of use until a round re-drives them)");
  std::vector<cluster::CircuitSpec> kept, dropped;
  for (const cluster::CircuitSpec& c : committed_) {
    const bool out = std::find(uncertain.begin(), uncertain.end(), c.ocs_switch) != uncertain.end();
    (out ? dropped : kept).push_back(c);
  }
  // Regions whose circuits leave are told too (a switch may serve several).
  std::set<int> told = regions;
  if (absl::StatusOr<std::vector<std::vector<planner::PlannedCircuit>>> split =
          planner_.SplitCircuits(dropped);
      split.ok()) {
    for (size_t r = 0; r < split->size(); ++r) {
      if (!(*split)[r].empty()) told.insert(static_cast<int>(r));
    }
  }
  committed_epoch_ = epoch;
  committed_ = std::move(kept);
  metrics_->Epochs(highest_epoch_, committed_epoch_);
  v1::TopologyEvent ev;
  ev.set_kind(v1::TopologyEvent::COMMIT);
  *ev.mutable_topology() = TopologyProto(epoch, committed_);
  ev.set_deadline_ms(static_cast<uint32_t>(absl::ToInt64Milliseconds(opt_.commit_deadline)));
  ev.set_reason(reason);
  std::set<std::string> to;
  for (const auto& [id, s] : sessions_) {
    if (told.count(s->region) != 0 && s->watch_gen != 0) to.insert(id);
  }
  for (const std::string& w : to) SendLocked(w, ev);
  for (int r : regions) regions_[r].aborted++;
  metrics_->Round(ControllerMetrics::RoundOutcome::kAborted);
  last_abort_ = reason;
  log::Warn("controller: epoch {} aborted, {} circuit(s) of switch(es) {} leave the topology: {}",
            epoch, dropped.size(), absl::StrJoin(uncertain, ", "), reason);
  round_ = Round{epoch, true, to, {}};
  auto acked = [this]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    return shutdown_ || round_->waiting.empty();
  };
  mu_.AwaitWithTimeout(absl::Condition(&acked), opt_.commit_deadline);
  if (!round_->waiting.empty() && !shutdown_) {
    log::Warn("controller: epoch {}: no COMMITTED within {} ms from worker(s) {}", epoch,
              absl::ToInt64Milliseconds(opt_.commit_deadline),
              absl::StrJoin(round_->waiting, ", "));
  }
  round_.reset();
}

}  // namespace mixnet::control
