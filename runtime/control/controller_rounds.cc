// Controller (see controller.h): the planner thread "mx-ctl-planner" -
// report timeouts, predictors, planning and the reconfiguration rounds
// (PREPARE -> Apply -> settle -> COMMIT, or ABORT). One round at a time; the
// mutex is held only to read or change shared state and to wait for acks.
#include <pthread.h>

#include <algorithm>
#include <map>
#include <tuple>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "runtime/common/log.h"
#include "runtime/control/controller.h"

namespace mixnet::control {
namespace {

using CircuitKey = std::tuple<std::string, int, int>;

std::vector<CircuitKey> Normalized(const std::vector<cluster::CircuitSpec>& circuits) {
  std::vector<CircuitKey> out;
  for (const cluster::CircuitSpec& c : circuits) {
    out.emplace_back(c.ocs_switch, std::min(c.port_a, c.port_b), std::max(c.port_a, c.port_b));
  }
  std::sort(out.begin(), out.end());
  return out;
}

std::map<std::string, std::vector<PortPair>> BySwitch(const std::vector<CircuitKey>& circuits) {
  std::map<std::string, std::vector<PortPair>> out;
  for (const auto& [sw, a, b] : circuits) out[sw].emplace_back(a, b);
  return out;
}

void AddCircuit(google::protobuf::RepeatedPtrField<v1::Circuit>* to, const CircuitKey& c) {
  v1::Circuit* p = to->Add();
  p->set_ocs_switch(std::get<0>(c));
  p->set_port_a(static_cast<uint32_t>(std::get<1>(c)));
  p->set_port_b(static_cast<uint32_t>(std::get<2>(c)));
}

uint32_t Ms(absl::Duration d) { return static_cast<uint32_t>(absl::ToInt64Milliseconds(d)); }

}  // namespace

void Controller::PlannerLoop() {
  pthread_setname_np(pthread_self(), "mx-ctl-planner");
  const absl::Duration tick =
      std::clamp(opt_.report_timeout / 4, absl::Milliseconds(5), absl::Milliseconds(100));
  while (true) {
    std::vector<Completed> batch;
    std::deque<int> warm;
    {
      absl::MutexLock lock(&mu_);
      auto ready = [this]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
        return shutdown_ || !completed_.empty() || !warm_queue_.empty();
      };
      mu_.AwaitWithTimeout(absl::Condition(&ready), tick);
      if (shutdown_) break;
      warm.swap(warm_queue_);
      const absl::Time now = absl::Now();
      for (size_t r = 0; r < regions_.size(); ++r) {
        for (CompletedMatrix& m : regions_[r].reports.Expire(ExpectedLocked(static_cast<int>(r)),
                                                             now, opt_.report_timeout)) {
          CompleteLocked(static_cast<int>(r), std::move(m));
        }
      }
      batch.assign(std::make_move_iterator(completed_.begin()),
                   std::make_move_iterator(completed_.end()));
      completed_.clear();
    }
    // A sweep runs before the plans that waited for it (its workers ask
    // before their first step; plan requests that came meanwhile wait).
    for (int r : warm) RunWarmSweep(r);
    if (!batch.empty()) PlanAndRun(std::move(batch));
  }
  for (size_t r = 0; r < accuracy_.size(); ++r) {
    if (accuracy_[r]->Overall().samples == 0) continue;
    accuracy_[r]->LogSummary(absl::StrCat("controller: region ", regions_label(static_cast<int>(r)),
                                          " predictor ", std::string(predictors_[r]->name())));
  }
}

void Controller::PlanAndRun(std::vector<Completed> batch) {
  // Every completed forward matrix feeds its region's predictor. A matrix
  // that carries a plan request is decided for its target (the newest request
  // of each region; older ones in the batch are answered as superseded); in a
  // region without a request, the newest forward dispatch matrix is planned
  // for the learned next dispatch key (coalescing).
  std::map<int, const Completed*> newest;
  std::map<int, const Completed*> requested;
  std::vector<const Completed*> superseded;
  for (const Completed& c : batch) {
    const GateKey& k = c.m.key.key;
    if (c.m.key.pass == kForwardPass) {
      if (absl::Status s = accuracy_[c.region]->ObserveAndScore(*predictors_[c.region], k.layer,
                                                                k.direction, c.m.matrix);
          !s.ok()) {
        log::Warn("controller: region {}: predictor: {}", regions_label(c.region), s.ToString());
      }
      const AccuracyStats all = accuracy_[c.region]->Overall();
      if (all.samples > 0 && all.samples % 64 == 0) {
        accuracy_[c.region]->LogSummary(absl::StrCat("controller: region ", regions_label(c.region),
                                                     " predictor ",
                                                     std::string(predictors_[c.region]->name())));
      }
    }
    if (c.m.plan) {
      const Completed*& slot = requested[c.region];
      if (slot != nullptr) superseded.push_back(slot);
      slot = &c;
    } else if (k.direction == Direction::kDispatch && c.m.key.pass == kForwardPass) {
      newest[c.region] = &c;
    }
  }
  auto answer_no = [this](int region, const PlanAnswer& a, const std::string& reason) {
    absl::MutexLock lock(&mu_);
    SendDecisionLocked(region, a, false, 0, reason);
  };
  for (const Completed* c : superseded) {
    answer_no(c->region, PlanAnswer{*c->m.plan}, "superseded by a newer plan request");
  }
  for (const auto& [r, c] : requested) newest.erase(r);
  if (newest.empty() && requested.empty()) return;
  std::vector<cluster::CircuitSpec> current;
  {
    absl::MutexLock lock(&mu_);
    if (!fenced_.empty() || shutdown_) {
      for (const auto& [r, c] : requested) {
        SendDecisionLocked(r, PlanAnswer{*c->m.plan}, false, 0,
                           shutdown_ ? "controller shutting down" : fenced_);
      }
      return;
    }
    current = committed_;
  }
  const std::vector<planner::Region>& regions = planner_.regions();
  std::vector<TrafficMatrix> demands;
  for (const planner::Region& r : regions) demands.emplace_back(r.hosts());
  GateKey planned_for;
  for (const auto& [r, c] : newest) {
    const GateKey target = c->next.value_or(c->m.key.key);
    planned_for = target;
    absl::StatusOr<TrafficMatrix> forecast =
        predictors_[r]->Predict(target.layer, Direction::kDispatch);
    demands[r] = forecast.ok() && forecast->hosts() == regions[r].hosts() ? *forecast : c->m.matrix;
    log::Debug("controller: region {}: planning for {} ({})", regions_label(r), KeyString(target),
               forecast.ok() ? "forecast" : "last matrix");
  }
  std::map<int, PlanAnswer> answers;
  for (auto it = requested.begin(); it != requested.end();) {
    const auto& [r, c] = *it;
    const PlanTarget& t = *c->m.plan;
    planned_for = GateKey{.layer = t.layer,
                          .micro_batch = 0,
                          .direction = t.combine ? Direction::kCombine : Direction::kDispatch};
    if (t.exact) {
      demands[r] = c->m.matrix;
    } else {
      absl::StatusOr<TrafficMatrix> forecast =
          predictors_[r]->Predict(t.layer, Direction::kDispatch);
      if (!forecast.ok() || forecast->hosts() != regions[r].hosts()) {
        answer_no(r, PlanAnswer{t},
                  absl::StrCat("no forecast for layer ", t.layer, " yet (",
                               forecast.ok() ? "shape differs" : forecast.status().message(), ")"));
        it = requested.erase(it);
        continue;
      }
      demands[r] = *forecast;
    }
    answers[r] = PlanAnswer{t};
    ++it;
  }
  if (newest.empty() && requested.empty()) return;
  planner::PlannerOptions po;
  po.algorithm = opt_.algorithm;
  po.circuit_only = opt_.router == "v1";  // score the routing the workers run
  po.relay = opt_.router == "v2" && opt_.relay;
  po.relay_chunk_bytes = opt_.relay_chunk_bytes;
  po.routed_search_evaluations = opt_.routed_search_evaluations;
  planner::DecideOptions decide;
  decide.switch_s = switch_s_;
  // The compute a round hides behind: each request's own window (the
  // compute its workers run before the all-to-all it plans), the
  // controller's --overlap-ms for a request without one and for an
  // unrequested plan; a round that serves several waits for the shortest.
  decide.overlap_s = -1;
  auto hide = [&](double window_s) {
    decide.overlap_s = decide.overlap_s < 0 ? window_s : std::min(decide.overlap_s, window_s);
  };
  for (const auto& [r, a] : answers) {
    hide(a.target.window_ms > 0 ? a.target.window_ms / 1e3 : opt_.overlap_s);
  }
  if (!newest.empty()) hide(opt_.overlap_s);
  decide.overlap_s = std::max(0.0, decide.overlap_s);
  {
    // The protocol's measured time, the slowest of the regions being planned
    // (a round that spans them waits for all of their workers); none before
    // a region has kMinProtocolSamples rounds, so that one slow early round
    // cannot stop every later one (no round, no new sample).
    absl::MutexLock lock(&mu_);
    auto median_s = [&](int r) {
      const DurationStats st = regions_[r].protocol.Stats();
      return st.samples >= kMinProtocolSamples ? absl::ToDoubleSeconds(st.median) : 0.0;
    };
    double protocol_s = 0;
    for (const auto& [r, c] : newest) protocol_s = std::max(protocol_s, median_s(r));
    for (const auto& [r, c] : requested) protocol_s = std::max(protocol_s, median_s(r));
    decide.protocol_s = protocol_s;
  }
  // The combine (or the backward pass's second all-to-all) reuses the
  // topology; a combine planned alone (PlanTarget::combine) is its one use.
  decide.uses = 2;
  if (!requested.empty() && newest.empty() &&
      std::all_of(answers.begin(), answers.end(),
                  [](const auto& a) { return a.second.target.combine; })) {
    decide.uses = 1;
  }
  const absl::Time plan_start = absl::Now();
  absl::StatusOr<planner::ClusterDecision> d = planner_.Plan(demands, current, po, decide);
  metrics_->PlannerTime(absl::Now() - plan_start);
  if (!d.ok()) {
    log::Error("controller: planning failed: {}", d.status().ToString());
    for (const auto& [r, a] : answers) {
      answer_no(r, a, absl::StrCat("planning failed: ", d.status().message()));
    }
    return;
  }
  std::set<int> affected;
  std::set<int> planned;
  for (const auto& [r, c] : newest) planned.insert(r);
  for (const auto& [r, a] : answers) planned.insert(r);
  // Router v2: each planned region's demand, for the workers' split.
  std::map<int, v1::Routing> routing;
  if (opt_.router == "v2") {
    for (int r : planned) {
      v1::Routing& out = routing[r];
      out.set_version(2);
      out.set_relay(opt_.relay);
      for (const std::string& h : regions[r].input().hosts) out.add_hosts(h);
      for (double b : demands[r].data()) out.add_bytes(b);
    }
  }
  for (int r : planned) {
    const planner::RegionDecision& rd = d->regions[r];
    auto a = answers.find(r);
    const double current_ms = rd.plan.current_completion_s * 1e3;
    const double predicted_ms =
        (rd.decision.reconfigure ? rd.plan.completion_s : rd.plan.current_completion_s) * 1e3;
    if (a != answers.end()) {
      a->second.current_ms = current_ms;
      a->second.predicted_ms = predicted_ms;
    }
    {
      absl::MutexLock lock(&mu_);
      regions_[r].last_current_ms = current_ms;
      regions_[r].last_predicted_ms = predicted_ms;
    }
    metrics_->Decided(r, rd.decision.reconfigure, predicted_ms / 1e3, current_ms / 1e3);
    if (rd.decision.reconfigure) {
      affected.insert(r);
      continue;
    }
    const std::string why = absl::StrFormat(
        "no reconfiguration: gain %.3f ms <= cost %.3f ms (switching %.3f + protocol %.3f - "
        "overlap %.3f)",
        rd.decision.gain_s * 1e3, rd.decision.cost_s * 1e3, decide.switch_s * 1e3,
        decide.protocol_s * 1e3, decide.overlap_s * 1e3);
    log::Info("controller: region {}: {} for {}", regions_label(r), why,
              a != answers.end() ? PlanTargetString(a->second.target) : KeyString(planned_for));
    absl::MutexLock lock(&mu_);
    regions_[r].skipped++;
    if (a != answers.end() && dirty_switches_.empty()) {
      auto rt = routing.find(r);
      SendDecisionLocked(r, a->second, false, 0, why, rt == routing.end() ? nullptr : &rt->second);
    }
  }
  if (!dirty_switches_.empty()) {
    // A failed round left switches holding something uncertain: this round
    // re-asserts the whole topology on them even when nothing else changes.
    log::Warn("controller: re-applying switch(es) {} left uncertain by a failed round",
              absl::StrJoin(dirty_switches_, ", "));
    for (int r : planned) affected.insert(r);
  } else {
    if (affected.empty()) return;
    if (Normalized(d->circuits) == Normalized(current)) {
      absl::MutexLock lock(&mu_);
      for (int r : affected) {
        regions_[r].skipped++;
        auto a = answers.find(r);
        if (a != answers.end()) {
          auto rt = routing.find(r);
          SendDecisionLocked(r, a->second, false, 0, "the plan equals the installed circuits",
                             rt == routing.end() ? nullptr : &rt->second);
        }
      }
      return;
    }
  }
  std::map<int, PlanAnswer> round_answers;
  for (int r : affected) {
    if (auto a = answers.find(r); a != answers.end()) round_answers.insert(*a);
  }
  std::map<int, v1::Routing> round_routing;
  for (int r : affected) {
    if (auto rt = routing.find(r); rt != routing.end()) round_routing.insert(*rt);
  }
  // The round's clock starts when the earliest matrix it answers completed.
  absl::Time triggered = absl::InfiniteFuture();
  for (const auto& [r, c] : newest) triggered = std::min(triggered, c->at);
  for (const auto& [r, c] : requested) triggered = std::min(triggered, c->at);
  if (triggered == absl::InfiniteFuture()) triggered = absl::Now();
  RunRound(d->circuits, affected, planned_for, triggered, round_answers, round_routing);
}

void Controller::SendDecisionLocked(int region, const PlanAnswer& a, bool reconfigure,
                                    uint64_t epoch, const std::string& reason,
                                    const v1::Routing* routing) {
  v1::TopologyEvent ev;
  ev.set_kind(v1::TopologyEvent::DECISION);
  ev.mutable_topology()->set_epoch(epoch);
  v1::PlanKey* k = ev.mutable_plan();
  k->set_iteration(a.target.iteration);
  k->set_layer(a.target.layer);
  k->set_pass(a.target.pass == kBackwardPass ? v1::BACKWARD : v1::FORWARD);
  k->set_combine(a.target.combine);
  ev.set_reconfigure(reconfigure);
  ev.set_reason(reason);
  ev.set_layer(a.target.layer);
  ev.set_direction(a.target.combine ? v1::COMBINE : v1::DISPATCH);
  ev.set_predicted_ms(a.predicted_ms);
  ev.set_current_ms(a.current_ms);
  if (routing != nullptr) *ev.mutable_routing() = *routing;
  for (const auto& [id, s] : sessions_) {
    if (s->region == region && s->watch_gen != 0) SendLocked(id, ev);
  }
  log::Debug("controller: region {}: DECISION for {}: {}{}", regions_label(region),
             PlanTargetString(a.target),
             reconfigure ? absl::StrCat("epoch ", epoch) : std::string("keep"),
             reason.empty() ? "" : absl::StrCat(" (", reason, ")"));
}

std::string Controller::regions_label(int region) const {
  return planner_.regions()[region].input().name;
}

void Controller::AbortRoundLocked(uint64_t epoch, const std::set<std::string>& to,
                                  const std::string& reason, const std::set<int>& regions) {
  v1::TopologyEvent ev;
  ev.set_kind(v1::TopologyEvent::ABORT);
  ev.mutable_topology()->set_epoch(epoch);
  ev.set_reason(reason);
  for (const std::string& w : to) SendLocked(w, ev);
  for (int r : regions) regions_[r].aborted++;
  metrics_->Round(ControllerMetrics::RoundOutcome::kAborted);
  round_.reset();
  last_abort_ = reason;
  log::Warn("controller: epoch {} aborted: {}", epoch, reason);
}

bool Controller::RunRound(const std::vector<cluster::CircuitSpec>& target_specs,
                          const std::set<int>& regions, const GateKey& key, absl::Time triggered,
                          const std::map<int, PlanAnswer>& answers,
                          const std::map<int, v1::Routing>& routing, bool warm) {
  const std::vector<CircuitKey> target = Normalized(target_specs);
  uint64_t epoch = 0;
  std::vector<CircuitKey> current;
  {
    absl::MutexLock lock(&mu_);
    if (shutdown_) {
      for (const auto& [r, a] : answers) {
        SendDecisionLocked(r, a, false, 0, "controller shutting down");
      }
      return false;
    }
    epoch = highest_epoch_ + 1;
    current = Normalized(committed_);
  }
  // 1. The new epoch is durable before anyone hears of it: saved already
  // (within the block saved last), or saved now with the next block.
  const absl::Time round_start = absl::Now();
  // Phase boundaries (kRoundPhases): decide ends at round_start.
  absl::Time persisted, applied_at, settled;
  absl::Status saved = absl::OkStatus();
  if (epoch > kMaxFencingEpoch) {
    saved = absl::FailedPreconditionError(
        absl::StrCat("epoch ", epoch, " exceeds the maximum fencing epoch ", kMaxFencingEpoch));
  } else if (epoch > saved_epoch_) {
    const uint64_t end = EpochBlockEnd(epoch, opt_.epoch_block);
    saved = store_.Save(end, id_);
    if (saved.ok()) saved_epoch_ = end;
  }
  if (absl::Status s = saved; !s.ok()) {
    log::Error("controller: cannot persist epoch {}, no round: {}", epoch, s.ToString());
    metrics_->Round(ControllerMetrics::RoundOutcome::kNotStarted);
    absl::MutexLock lock(&mu_);
    for (const auto& [r, a] : answers) {
      SendDecisionLocked(r, a, false, 0, absl::StrCat("cannot persist epoch ", epoch));
    }
    return false;
  }
  persisted = absl::Now();
  std::string names;
  for (int r : regions) absl::StrAppend(&names, names.empty() ? "" : ",", regions_label(r));
  std::set<std::string> participants;
  {
    // 2. PREPARE to every watching worker of the affected regions.
    absl::MutexLock lock(&mu_);
    highest_epoch_ = epoch;
    metrics_->Epochs(highest_epoch_, committed_epoch_);
    v1::TopologyEvent ev;
    ev.set_kind(v1::TopologyEvent::PREPARE);
    ev.mutable_topology()->set_epoch(epoch);
    for (const CircuitKey& c : target) AddCircuit(ev.mutable_topology()->mutable_circuits(), c);
    std::vector<CircuitKey> removed, added;
    std::set_difference(current.begin(), current.end(), target.begin(), target.end(),
                        std::back_inserter(removed));
    std::set_difference(target.begin(), target.end(), current.begin(), current.end(),
                        std::back_inserter(added));
    for (const CircuitKey& c : removed) AddCircuit(ev.mutable_removed(), c);
    for (const CircuitKey& c : added) AddCircuit(ev.mutable_added(), c);
    ev.set_deadline_ms(Ms(opt_.prepare_deadline));
    ev.set_layer(key.layer);
    ev.set_direction(v1::DISPATCH);
    for (const auto& [r, a] : answers) SendDecisionLocked(r, a, true, epoch, "");
    for (const auto& [id, s] : sessions_) {
      if (regions.count(s->region) != 0 && s->watch_gen != 0) participants.insert(id);
    }
    for (const std::string& w : participants) SendLocked(w, ev);
    round_ = Round{epoch, false, participants, {}};
    log::Info(
        "controller: epoch {}: PREPARE region(s) {} for {} ({} removed, {} added, {} workers)",
        epoch, names, warm ? std::string("the warm-up sweep") : KeyString(key), removed.size(),
        added.size(), participants.size());
    // 3. Wait for every PREPARED (an error ack or the deadline aborts).
    auto done = [this]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
      return shutdown_ || round_->waiting.empty() || !round_->errors.empty();
    };
    mu_.AwaitWithTimeout(absl::Condition(&done), opt_.prepare_deadline);
    if (shutdown_ || !round_->errors.empty() || !round_->waiting.empty()) {
      std::string reason;
      if (shutdown_) {
        reason = "controller shutting down";
      } else if (!round_->errors.empty()) {
        reason = absl::StrCat("PREPARE failed on worker(s) ", absl::StrJoin(round_->errors, ", "));
      } else {
        reason = absl::StrCat("no PREPARED within ", Ms(opt_.prepare_deadline),
                              " ms from worker(s) ", absl::StrJoin(round_->waiting, ", "));
      }
      AbortRoundLocked(epoch, participants, reason, regions);
      return false;
    }
  }
  // 4. Drive the switches whose circuits change (the prepare phase ends).
  const absl::Time switching_start = absl::Now();
  const auto want = BySwitch(target);
  const auto have = BySwitch(current);
  absl::Duration settle = absl::ZeroDuration();
  double nominal_switch_ms = 0;  // the slowest changed switch's spec switch_ms
  std::vector<std::string> applied;
  for (const auto& [name, driver] : opt_.switches) {
    static const std::vector<PortPair> kNone;
    auto w = want.find(name);
    auto h = have.find(name);
    const std::vector<PortPair>& wanted = w == want.end() ? kNone : w->second;
    const std::vector<PortPair>& had = h == have.end() ? kNone : h->second;
    if (wanted == had && dirty_switches_.count(name) == 0) continue;
    absl::StatusOr<SwitchApplyResult> r = driver->Apply(
        epoch, epoch, wanted, absl::Now() + ApplyTimeout(opt_.switch_timeout, apply_timing_[name]));
    if (!r.ok()) {
      // Switches 1..k-1 go back before any worker is released
      // (controller_rollback.cc).
      EndFailedApply(epoch, name, r.status(), applied, have, participants, regions);
      return false;
    }
    applied.push_back(name);
    const cluster::OcsSwitchSpec* sw = opt_.spec.FindSwitch(name);
    nominal_switch_ms = std::max(nominal_switch_ms, sw->switch_ms);
    const absl::Duration left =
        absl::Microseconds(static_cast<int64_t>(sw->switch_ms * 1000)) - r->backend_time;
    settle = std::max(settle, left);
  }
  for (const std::string& a : applied) dirty_switches_.erase(a);
  applied_at = absl::Now();
  // 5. Settle: the switches' own waits normally cover the switching time.
  if (settle > absl::ZeroDuration()) absl::SleepFor(settle);
  settled = absl::Now();
  const absl::Duration switching = settled - switching_start;
  // 6. COMMIT and wait (bounded) for the acks.
  mu_.Lock();
  committed_epoch_ = epoch;
  committed_ = target_specs;
  metrics_->Epochs(highest_epoch_, committed_epoch_);
  v1::TopologyEvent ev;
  ev.set_kind(v1::TopologyEvent::COMMIT);
  *ev.mutable_topology() = TopologyProto(epoch, target_specs);
  ev.set_deadline_ms(Ms(opt_.commit_deadline));
  ev.set_layer(key.layer);
  ev.set_direction(v1::DISPATCH);
  double predicted_ms = 0, current_ms = 0;  // the slowest region's (for the workers' log)
  for (int r : regions) {
    predicted_ms = std::max(predicted_ms, regions_[r].last_predicted_ms);
    current_ms = std::max(current_ms, regions_[r].last_current_ms);
  }
  ev.set_predicted_ms(predicted_ms);
  ev.set_current_ms(current_ms);
  std::set<std::string> to;
  for (const auto& [id, s] : sessions_) {
    if (regions.count(s->region) != 0 && s->watch_gen != 0) to.insert(id);
  }
  for (const std::string& w : to) {
    auto rt = routing.find(sessions_.at(w)->region);
    if (rt == routing.end()) {
      SendLocked(w, ev);
      continue;
    }
    v1::TopologyEvent with = ev;
    *with.mutable_routing() = rt->second;
    SendLocked(w, std::move(with));
  }
  for (int r : regions) (warm ? regions_[r].warm_rounds : regions_[r].committed)++;
  metrics_->Round(ControllerMetrics::RoundOutcome::kCommitted);
  round_ = Round{epoch, true, to, {}};
  log::Info("controller: epoch {}: COMMIT region(s) {} ({} switches changed, {} workers)", epoch,
            names, applied.size(), to.size());
  auto acked = [this]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    return shutdown_ || round_->waiting.empty();
  };
  mu_.AwaitWithTimeout(absl::Condition(&acked), opt_.commit_deadline);
  const bool all_acked = round_->waiting.empty();
  if (!round_->waiting.empty() && !shutdown_) {
    log::Warn("controller: epoch {}: no COMMITTED within {} ms from worker(s) {}", epoch,
              Ms(opt_.commit_deadline), absl::StrJoin(round_->waiting, ", "));
  }
  round_.reset();
  const absl::Time end = absl::Now();
  const absl::Duration took = end - triggered;
  const absl::Duration protocol = std::max(absl::ZeroDuration(), end - round_start - switching);
  const absl::Duration phase[kRoundPhaseCount] = {
      round_start - triggered,      persisted - round_start, switching_start - persisted,
      applied_at - switching_start, settled - applied_at,    end - settled};
  // A sweep round's commit makes every connection over its circuits: not
  // what a planned round costs, so it stays out of the round times.
  for (size_t p = 0; p < kRoundPhaseCount && !warm; ++p) metrics_->RoundPhase(p, phase[p]);
  const absl::Duration overhead = took - absl::Microseconds(nominal_switch_ms * 1000);
  for (int r : regions) {
    if (warm) {
      // A calibration of the protocol, made before the job's steps.
      regions_[r].warm_round_overhead.Add(overhead);
      continue;
    }
    for (size_t p = 0; p < kRoundPhaseCount; ++p) regions_[r].phases[p].Add(phase[p]);
    regions_[r].round.Add(took);
    regions_[r].round_overhead.Add(overhead);
    // A missing ack says nothing of how long the protocol takes.
    if (all_acked) regions_[r].protocol.Add(protocol);
  }
  mu_.Unlock();
  log::Info(
      "controller: epoch {}: round {:.1f} ms after its matrix, {:.1f} ms of it switching, "
      "{:.1f} ms protocol",
      epoch, absl::ToDoubleMilliseconds(took), absl::ToDoubleMilliseconds(switching),
      absl::ToDoubleMilliseconds(protocol));
  if (!warm) metrics_->RoundTime(absl::Now() - round_start);
  // 7. Learn how long the switches just took (for the next Decide / Apply).
  RefreshApplyTiming(applied);
  return true;
}

}  // namespace mixnet::control
