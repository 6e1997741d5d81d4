// Controller (see controller.h): start-up, registration, reports, watch
// streams, acks and status. gRPC threads; state under mu_.
#include "runtime/control/controller.h"
#include "runtime/control/warm_sweep.h"

#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "runtime/common/log.h"
#include "runtime/common/status.h"

namespace mixnet::control {

class Controller::Watch {
 public:
  std::shared_ptr<Session> session;
  uint64_t gen = 0;
};

namespace {

std::string DefaultId() {
  char host[256] = {};
  if (gethostname(host, sizeof(host) - 1) != 0) host[0] = '\0';
  return absl::StrCat("ctl-", host[0] != '\0' ? host : "unknown", "-", getpid(), "-",
                      absl::ToUnixMillis(absl::Now()));
}

int Alpha(const cluster::ClusterSpec& spec) {
  int alpha = 1;
  for (const cluster::HostSpec& h : spec.hosts) {
    int n = 0;
    for (const cluster::NicSpec& nic : h.nics) n += nic.role == cluster::NicRole::kOcs ? 1 : 0;
    alpha = std::max(alpha, n);
  }
  return alpha;
}

std::vector<std::string> RegionNames(const planner::ClusterPlanner& planner) {
  std::vector<std::string> names;
  for (const planner::Region& r : planner.regions()) names.push_back(r.input().name);
  return names;
}

}  // namespace

absl::StatusOr<std::unique_ptr<Controller>> Controller::Start(ControllerOptions options) {
  if (options.controller_id.empty()) options.controller_id = DefaultId();
  for (const cluster::OcsSwitchSpec& sw : options.spec.ocs_switches) {
    auto it = options.switches.find(sw.name);
    if (it == options.switches.end() || it->second == nullptr) {
      return absl::InvalidArgumentError(absl::StrCat("OCS switch ", sw.name,
                                                     " of the cluster spec has no driver (--ocs ",
                                                     sw.name, "=TARGET)"));
    }
  }
  for (const auto& [name, driver] : options.switches) {
    if (options.spec.FindSwitch(name) == nullptr) {
      return absl::InvalidArgumentError(
          absl::StrCat("OCS switch ", name, " is not in the cluster spec"));
    }
  }
  if (options.prepare_deadline <= absl::ZeroDuration() ||
      options.commit_deadline <= absl::ZeroDuration() ||
      options.report_timeout <= absl::ZeroDuration()) {
    return absl::InvalidArgumentError("controller deadlines and report timeout must be > 0");
  }
  if (options.router != "v1" && options.router != "v2") {
    return absl::InvalidArgumentError(
        absl::StrCat("controller: router '", options.router, "' must be v1 or v2"));
  }
  ASSIGN_OR_RETURN(planner::ClusterPlanner planner,
                   planner::ClusterPlanner::Create(options.spec, Alpha(options.spec)));
  ASSIGN_OR_RETURN(EpochStore store, EpochStore::Open(options.state_dir));
  ASSIGN_OR_RETURN(const uint64_t persisted, store.Load());
  // The next epoch must stay within what the switches accept (no wrap to 0).
  auto too_high = [](uint64_t epoch, const std::string& where, const std::string& fix) {
    return absl::FailedPreconditionError(absl::StrCat(
        where, " holds epoch ", epoch, ": the next epoch would exceed the maximum fencing epoch ",
        kMaxFencingEpoch, " (2^53-1), so this controller cannot fence it; ", fix));
  };
  if (persisted >= kMaxFencingEpoch) {
    return too_high(persisted, absl::StrCat("the controller state dir ", options.state_dir),
                    "remove its controller_epoch.json once no switch holds such an epoch");
  }

  // What the switches hold now is the committed topology.
  uint64_t highest = persisted;
  std::vector<cluster::CircuitSpec> circuits;
  std::map<std::string, SwitchApplyTiming> apply_timing;
  std::map<std::string, std::vector<PortPair>> held;  // per switch, for the claim below
  for (const auto& [name, driver] : options.switches) {
    absl::StatusOr<SwitchCircuits> sw = driver->GetCircuits(absl::Now() + options.switch_timeout);
    if (!sw.ok()) {
      return Annotate(sw.status(), absl::StrCat("OCS switch ", name, " at ", driver->target()));
    }
    if (sw->highest_epoch >= kMaxFencingEpoch) {
      return too_high(sw->highest_epoch,
                      absl::StrCat("OCS switch ", name, " at ", driver->target()),
                      "reset that mixnet-ocsd's state (remove state.json in its --state-dir; the "
                      "circuits stay on the switch)");
    }
    highest = std::max(highest, sw->highest_epoch);
    apply_timing[name] = sw->apply_timing;
    held[name] = sw->circuits;
    for (const PortPair& p : sw->circuits) {
      circuits.push_back({name, std::min(p.first, p.second), std::max(p.first, p.second)});
    }
    log::Info("controller: switch {} at {}: {} circuits, highest epoch {}", name, driver->target(),
              sw->circuits.size(), sw->highest_epoch);
  }
  if (absl::Status s = cluster::ValidateCircuits(options.spec, circuits); !s.ok()) {
    return Annotate(s, "the circuits the switches hold now do not fit the cluster spec");
  }
  if (absl::StatusOr<std::vector<std::vector<planner::PlannedCircuit>>> split =
          planner.SplitCircuits(circuits);
      !split.ok()) {
    return Annotate(split.status(), "the circuits the switches hold now");
  }
  const uint64_t epoch = highest + 1;
  if (options.epoch_block < 1) {
    return absl::InvalidArgumentError("controller: epoch block must be at least 1");
  }
  const uint64_t saved = EpochBlockEnd(epoch, options.epoch_block);
  RETURN_IF_ERROR(store.Save(saved, options.controller_id));
  // Claim the epoch on every switch before serving (arbitration): the
  // circuits each holds, applied again under this controller's epoch, change
  // nothing on the switch, and from now on an older controller's Apply is
  // refused as stale, and one at this same epoch as another controller's.
  for (const auto& [name, driver] : options.switches) {
    absl::StatusOr<SwitchApplyResult> r =
        driver->Apply(epoch, epoch, held[name], absl::Now() + options.switch_timeout);
    if (!r.ok()) {
      return Annotate(r.status(), absl::StrCat("claiming epoch ", epoch, " on OCS switch ", name,
                                               " at ", driver->target(),
                                               absl::IsFailedPrecondition(r.status())
                                                   ? " (another controller claimed a newer one "
                                                     "since this one read the switch)"
                                                   : ""));
    }
    log::Info("controller {}: claimed epoch {} on switch {} ({} circuits kept)",
              options.controller_id, epoch, name, held[name].size());
  }
  log::Info("controller {}: epoch {} (persisted {}, switches' highest {}), {} circuits, {} regions",
            options.controller_id, epoch, persisted, highest, circuits.size(),
            planner.regions().size());

  std::unique_ptr<Controller> c(
      new Controller(std::move(options), std::move(planner), std::move(store)));
  c->apply_timing_ = std::move(apply_timing);
  c->saved_epoch_ = saved;
  c->switch_s_ = c->SlowestSwitchSeconds();
  log::Info(
      "controller: planning with a switching time of {:.1f} ms (spec switch_ms, or the "
      "median Apply time the switches measured when slower)",
      c->switch_s_ * 1e3);
  for (size_t r = 0; r < c->planner_.regions().size(); ++r) {
    ASSIGN_OR_RETURN(std::unique_ptr<Predictor> p, MakePredictor(c->opt_.predictor));
    c->predictors_.push_back(std::move(p));
    c->accuracy_.push_back(std::make_unique<AccuracyTracker>());
  }
  {
    absl::MutexLock lock(&c->mu_);
    c->highest_epoch_ = epoch;
    c->committed_epoch_ = epoch;
    c->committed_ = std::move(circuits);
    c->metrics_->Epochs(epoch, epoch);
  }
  c->planner_thread_ = std::thread([p = c.get()] { p->PlannerLoop(); });
  return c;
}

uint64_t EpochBlockEnd(uint64_t epoch, uint64_t block) {
  if (block < 1) block = 1;
  return epoch >= kMaxFencingEpoch - (block - 1) ? kMaxFencingEpoch : epoch + (block - 1);
}

Controller::Controller(ControllerOptions options, planner::ClusterPlanner planner, EpochStore store)
    : opt_(std::move(options)),
      id_(opt_.controller_id),
      planner_(std::move(planner)),
      store_(std::move(store)),
      metrics_(std::make_unique<ControllerMetrics>(RegionNames(planner_))) {
  for (const planner::Region& r : planner_.regions()) {
    regions_.push_back(RegionState{.reports = RegionReports(r.input().name, r.input().hosts)});
    // A region of the spec: WarmSweep cannot refuse it.
    warm_sweeps_.push_back(WarmSweep(opt_.spec, r.input().name).value_or(WarmRounds{}));
  }
}

Controller::~Controller() { Shutdown(); }

double Controller::SlowestSwitchSeconds() const {
  double slowest = 0;
  for (const cluster::OcsSwitchSpec& sw : opt_.spec.ocs_switches) {
    auto it = apply_timing_.find(sw.name);
    slowest = std::max(
        slowest,
        SwitchSeconds(sw.switch_ms, it == apply_timing_.end() ? SwitchApplyTiming() : it->second));
  }
  return slowest;
}

void Controller::RefreshApplyTiming(const std::vector<std::string>& switches) {
  {
    absl::MutexLock lock(&mu_);
    if (shutdown_) return;
  }
  for (const std::string& name : switches) {
    auto driver = opt_.switches.find(name);
    if (driver == opt_.switches.end()) continue;
    absl::StatusOr<SwitchApplyTiming> t = driver->second->GetApplyTiming(
        absl::Now() + std::min(opt_.switch_timeout, absl::Seconds(2)));
    if (!t.ok()) {
      log::Warn("controller: switch {}: Apply time not read (keeping the last): {}", name,
                t.status().ToString());
      continue;
    }
    apply_timing_[name] = *t;
    log::Debug("controller: switch {}: Apply time median {} p90 {} max {} ({} samples)", name,
               absl::FormatDuration(t->median), absl::FormatDuration(t->p90),
               absl::FormatDuration(t->max), t->samples);
  }
  const double before = switch_s_;
  switch_s_ = SlowestSwitchSeconds();
  if (switch_s_ != before) {
    log::Info("controller: switching time for planning {:.1f} ms (was {:.1f} ms)", switch_s_ * 1e3,
              before * 1e3);
  }
}

void Controller::Shutdown() {
  {
    absl::MutexLock lock(&mu_);
    if (shutdown_ && !planner_thread_.joinable()) return;
    shutdown_ = true;
    for (const auto& [id, s] : sessions_) {
      absl::MutexLock box(&s->mailbox.mu);
      s->mailbox.closed = true;
    }
  }
  if (planner_thread_.joinable()) planner_thread_.join();
}

std::string Controller::fenced() const {
  absl::MutexLock lock(&mu_);
  return fenced_;
}

void Controller::OnFenced(std::function<void(const std::string&)> hook) {
  absl::MutexLock lock(&mu_);
  fenced_hook_ = std::move(hook);
  if (!fenced_.empty() && fenced_hook_) fenced_hook_(fenced_);
}

v1::Topology Controller::TopologyProto(uint64_t epoch,
                                       const std::vector<cluster::CircuitSpec>& circuits) const {
  v1::Topology t;
  t.set_epoch(epoch);
  for (const cluster::CircuitSpec& c : circuits) {
    v1::Circuit* p = t.add_circuits();
    p->set_ocs_switch(c.ocs_switch);
    p->set_port_a(static_cast<uint32_t>(c.port_a));
    p->set_port_b(static_cast<uint32_t>(c.port_b));
  }
  return t;
}

std::optional<std::string> Controller::HostOf(const std::string& worker_id) const {
  absl::MutexLock lock(&mu_);
  auto it = sessions_.find(worker_id);
  if (it == sessions_.end()) return std::nullopt;
  return it->second->host;
}

absl::StatusOr<v1::RegisterResponse> Controller::Register(const v1::RegisterRequest& request) {
  if (request.worker_id().empty()) {
    return absl::InvalidArgumentError(
        absl::StrCat("Register from host '", request.host(), "': empty worker_id"));
  }
  const cluster::HostSpec* host = opt_.spec.FindHost(request.host());
  if (host == nullptr) {
    return absl::InvalidArgumentError(absl::StrCat("Register from worker ", request.worker_id(),
                                                   ": host '", request.host(),
                                                   "' is not in the cluster spec"));
  }
  for (const v1::Nic& nic : request.nics()) {
    const cluster::NicSpec* spec_nic = host->FindNic(nic.name());
    if (spec_nic == nullptr) {
      return absl::InvalidArgumentError(absl::StrCat("Register from worker ", request.worker_id(),
                                                     ": host ", request.host(), " has no NIC '",
                                                     nic.name(), "' in the cluster spec"));
    }
    if (!nic.role().empty() && nic.role() != cluster::NicRoleName(spec_nic->role)) {
      return absl::InvalidArgumentError(
          absl::StrCat("Register from worker ", request.worker_id(), ": NIC ", request.host(), "/",
                       nic.name(), " is '", nic.role(), "', the spec says '",
                       std::string(cluster::NicRoleName(spec_nic->role)), "'"));
    }
    if (!nic.address().empty() && nic.address() != spec_nic->address) {
      log::Warn("controller: worker {}: NIC {}/{} has address {}, the spec says {}",
                request.worker_id(), request.host(), nic.name(), nic.address(), spec_nic->address);
    }
  }
  int region = -1;
  for (size_t r = 0; r < regions_.size(); ++r) {
    if (regions_[r].reports.HostIndex(request.host()) >= 0) region = static_cast<int>(r);
  }
  auto session = std::make_shared<Session>();
  session->worker_id = request.worker_id();
  session->host = request.host();
  session->region = region;
  v1::RegisterResponse response;
  absl::MutexLock lock(&mu_);
  if (shutdown_) return absl::UnavailableError("controller is shutting down");
  // A second registration with the same id replaces the first (its watch
  // stream ends).
  if (auto old = sessions_.find(request.worker_id()); old != sessions_.end()) {
    SetWatchGenLocked(*old->second, 0);
    metrics_->Workers(old->second->region, -1);
  }
  sessions_[request.worker_id()] = session;
  metrics_->Workers(region, +1);
  response.set_region(region >= 0 ? regions_[region].reports.region() : "");
  response.set_controller_id(id_);
  *response.mutable_topology() = TopologyProto(committed_epoch_, committed_);
  log::Info("controller: worker {} registered (host {}, region '{}', {} ranks, installed epoch {})",
            request.worker_id(), request.host(), response.region(), request.ranks_size(),
            request.installed_epoch());
  return response;
}

std::set<std::string> Controller::ExpectedLocked(int region) const {
  std::set<std::string> out;
  for (const auto& [id, s] : sessions_) {
    if (s->region == region) out.insert(id);
  }
  return out;
}

void Controller::CompleteLocked(int region, CompletedMatrix m) {
  RegionReports& reports = regions_[region].reports;
  if (!m.missing.empty()) {
    log::Warn("controller: region {}: {} iteration {} planned without rows from {}",
              reports.region(), KeyString(m.key.key), m.key.iteration,
              absl::StrJoin(m.missing, ", "));
  }
  reports.LearnOrder(m.key);
  if (m.observed_ms > 0) {
    regions_[region].last_observed_ms = m.observed_ms;
    metrics_->Observed(region, m.observed_ms / 1e3);
  }
  Completed c{region, std::move(m), std::nullopt, absl::Now()};
  c.next = reports.NextDispatch(c.m.key.key);
  completed_.push_back(std::move(c));
}

absl::Status Controller::Report(const v1::TrafficReport& report) {
  StepKey key;
  key.iteration = report.iteration();
  key.key.layer = report.layer();
  key.key.micro_batch = report.micro_batch();
  switch (report.direction()) {
    case v1::DISPATCH:
      key.key.direction = Direction::kDispatch;
      break;
    case v1::COMBINE:
      key.key.direction = Direction::kCombine;
      break;
    default:
      return absl::InvalidArgumentError(absl::StrCat("report from worker ", report.worker_id(),
                                                     ": direction must be DISPATCH or COMBINE"));
  }
  if (report.layer() < 0 || report.micro_batch() < 0 || report.iteration() < 0) {
    return absl::InvalidArgumentError(absl::StrCat("report from worker ", report.worker_id(),
                                                   ": negative iteration, layer or micro_batch"));
  }
  key.pass = report.pass() == v1::BACKWARD ? kBackwardPass : kForwardPass;
  std::optional<PlanTarget> plan;
  if (report.has_plan()) {
    const v1::PlanRequest& p = report.plan();
    if (p.source() != v1::PlanRequest::PREDICTED && p.source() != v1::PlanRequest::THIS_MATRIX) {
      return absl::InvalidArgumentError(
          absl::StrCat("report from worker ", report.worker_id(),
                       ": plan request without a source (PREDICTED or THIS_MATRIX)"));
    }
    if (p.target().iteration() < 0 || p.target().layer() < 0) {
      return absl::InvalidArgumentError(absl::StrCat("report from worker ", report.worker_id(),
                                                     ": plan target has a negative iteration or "
                                                     "layer"));
    }
    plan = PlanTarget{.iteration = p.target().iteration(),
                      .layer = p.target().layer(),
                      .pass = p.target().pass() == v1::BACKWARD ? kBackwardPass : kForwardPass,
                      .exact = p.source() == v1::PlanRequest::THIS_MATRIX,
                      .combine = p.target().combine(),
                      .window_ms = p.window_ms()};
    if (!(p.window_ms() >= 0) || !std::isfinite(p.window_ms())) {
      return absl::InvalidArgumentError(absl::StrCat("report from worker ", report.worker_id(),
                                                     ": plan request's window_ms ", p.window_ms(),
                                                     " must be >= 0 and finite"));
    }
    // A combine's re-plan is from its dispatch's observed matrix: this row's
    // (a combine-shaped row would plan its transpose's transpose).
    if (plan->combine && (!plan->exact || report.direction() != v1::DISPATCH)) {
      return absl::InvalidArgumentError(absl::StrCat(
          "report from worker ", report.worker_id(), ": a plan for ", PlanTargetString(*plan),
          " alone must come with its dispatch's row (direction DISPATCH, source THIS_MATRIX)"));
    }
  }
  const std::vector<std::string> peers(report.peer_hosts().begin(), report.peer_hosts().end());
  const std::vector<double> bytes(report.bytes().begin(), report.bytes().end());
  absl::MutexLock lock(&mu_);
  auto it = sessions_.find(report.worker_id());
  if (it == sessions_.end()) {
    return absl::NotFoundError(
        absl::StrCat("report from worker ", report.worker_id(), ": not registered"));
  }
  const Session& s = *it->second;
  if (report.host() != s.host) {
    return absl::InvalidArgumentError(absl::StrCat("report from worker ", report.worker_id(),
                                                   ": host '", report.host(),
                                                   "', but it registered as host ", s.host));
  }
  if (s.region < 0) {
    return absl::InvalidArgumentError(absl::StrCat("report from worker ", report.worker_id(),
                                                   ": host ", s.host, " is in no region"));
  }
  ASSIGN_OR_RETURN(std::optional<CompletedMatrix> done,
                   regions_[s.region].reports.Add(s.worker_id, s.host, key, peers, bytes,
                                                  ExpectedLocked(s.region), absl::Now(), plan,
                                                  report.observed_ms()));
  if (done) CompleteLocked(s.region, std::move(*done));
  return absl::OkStatus();
}

absl::Status Controller::Ack(const v1::AckTopologyRequest& request) {
  if (request.phase() != v1::AckTopologyRequest::PREPARED &&
      request.phase() != v1::AckTopologyRequest::COMMITTED) {
    return absl::InvalidArgumentError(absl::StrCat("ack from worker ", request.worker_id(),
                                                   ": phase must be PREPARED or COMMITTED"));
  }
  absl::MutexLock lock(&mu_);
  if (sessions_.count(request.worker_id()) == 0) {
    return absl::NotFoundError(
        absl::StrCat("ack from worker ", request.worker_id(), ": not registered"));
  }
  const bool commit = request.phase() == v1::AckTopologyRequest::COMMITTED;
  if (!round_ || round_->epoch != request.epoch() || round_->commit_phase != commit) {
    log::Debug("controller: ack {} epoch {} from worker {} is for no round in progress",
               commit ? "COMMITTED" : "PREPARED", request.epoch(), request.worker_id());
    return absl::OkStatus();
  }
  if (request.error_code() != 0) {
    const std::string e =
        absl::StrCat(request.worker_id(), " (",
                     absl::StatusCodeToString(static_cast<absl::StatusCode>(request.error_code())),
                     ": ", request.error_message(), ")");
    if (commit) {
      log::Warn("controller: epoch {}: worker {} committed with an error", request.epoch(), e);
    } else {
      round_->errors.push_back(e);
    }
  }
  round_->waiting.erase(request.worker_id());
  return absl::OkStatus();
}

absl::StatusOr<std::shared_ptr<Controller::Watch>> Controller::StartWatch(
    const std::string& worker_id) {
  absl::MutexLock lock(&mu_);
  if (shutdown_) return absl::UnavailableError("controller is shutting down");
  auto it = sessions_.find(worker_id);
  if (it == sessions_.end()) {
    return absl::NotFoundError(absl::StrCat("WatchTopology from worker ", worker_id,
                                            ": not registered (call Register first)"));
  }
  auto w = std::make_shared<Watch>();
  w->session = it->second;
  w->gen = next_watch_gen_++;
  SetWatchGenLocked(*it->second, w->gen);  // a previous stream of this worker ends
  v1::TopologyEvent snapshot;
  snapshot.set_kind(v1::TopologyEvent::SNAPSHOT);
  *snapshot.mutable_topology() = TopologyProto(committed_epoch_, committed_);
  Mailbox& box = it->second->mailbox;
  absl::MutexLock box_lock(&box.mu);
  box.events.clear();
  box.events.push_back(std::move(snapshot));
  return w;
}

void Controller::SetWatchGenLocked(Session& s, uint64_t gen) {
  s.watch_gen = gen;
  absl::MutexLock box(&s.mailbox.mu);
  s.mailbox.gen = gen;
}

Controller::WatchResult Controller::NextEvent(Watch& watch, v1::TopologyEvent* event,
                                              absl::Duration wait) {
  Mailbox& box = watch.session->mailbox;
  auto ready = [&]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(box.mu) {
    return box.closed || box.gen != watch.gen || !box.events.empty();
  };
  absl::MutexLock lock(&box.mu);
  box.mu.AwaitWithTimeout(absl::Condition(&ready), wait);
  if (box.gen != watch.gen) return WatchResult::kEnd;
  if (!box.events.empty()) {
    *event = std::move(box.events.front());
    box.events.pop_front();
    return WatchResult::kEvent;
  }
  return box.closed ? WatchResult::kEnd : WatchResult::kNone;
}

void Controller::EndWatch(Watch& watch) {
  absl::MutexLock lock(&mu_);
  Session* s = watch.session.get();
  if (s->watch_gen != watch.gen) return;  // replaced by a newer stream
  SetWatchGenLocked(*s, 0);
  auto it = sessions_.find(s->worker_id);
  if (it != sessions_.end() && it->second.get() == s) {
    sessions_.erase(it);
    metrics_->Workers(s->region, -1);
    log::Info("controller: worker {} left (watch stream ended)", s->worker_id);
  }
  if (round_ && round_->waiting.erase(s->worker_id) != 0 && !round_->commit_phase) {
    round_->errors.push_back(absl::StrCat(s->worker_id, " (left: watch stream ended)"));
  }
}

void Controller::SendLocked(const std::string& worker_id, v1::TopologyEvent event) {
  auto it = sessions_.find(worker_id);
  if (it == sessions_.end() || it->second->watch_gen == 0) return;
  Mailbox& box = it->second->mailbox;
  absl::MutexLock box_lock(&box.mu);
  box.events.push_back(std::move(event));
}

v1::ControllerStatus Controller::GetStatus() const {
  v1::ControllerStatus st;
  absl::MutexLock lock(&mu_);
  st.set_controller_id(id_);
  *st.mutable_topology() = TopologyProto(committed_epoch_, committed_);
  st.set_highest_epoch(highest_epoch_);
  st.set_fenced(fenced_);
  st.set_router(opt_.router);
  for (size_t r = 0; r < regions_.size(); ++r) {
    v1::RegionStatus* rs = st.add_regions();
    rs->set_name(regions_[r].reports.region());
    for (const std::string& h : regions_[r].reports.hosts()) rs->add_hosts(h);
    for (const std::string& w : ExpectedLocked(static_cast<int>(r))) rs->add_registered_workers(w);
    rs->set_rounds_committed(regions_[r].committed);
    rs->set_rounds_aborted(regions_[r].aborted);
    rs->set_rounds_skipped(regions_[r].skipped);
    rs->set_last_predicted_ms(regions_[r].last_predicted_ms);
    rs->set_last_current_ms(regions_[r].last_current_ms);
    rs->set_last_observed_ms(regions_[r].last_observed_ms);
    const DurationStats round = regions_[r].round.Stats();
    rs->set_round_ms_p50(absl::ToDoubleMilliseconds(round.median));
    rs->set_round_overhead_ms_p50(
        absl::ToDoubleMilliseconds(regions_[r].round_overhead.Stats().median));
    rs->set_round_samples(round.samples);
    for (size_t p = 0; p < kRoundPhaseCount && round.samples > 0; ++p) {
      const DurationStats st = regions_[r].phases[p].Stats();
      v1::RoundPhase* ph = rs->add_round_phases();
      ph->set_name(kRoundPhases[p]);
      ph->set_p50_ms(absl::ToDoubleMilliseconds(st.median));
      ph->set_p99_ms(absl::ToDoubleMilliseconds(st.p99));
      ph->set_samples(st.samples);
    }
    rs->set_warm_rounds(regions_[r].warm_rounds);
    rs->set_warm_ms(regions_[r].warm_ms);
    rs->set_warm_round_overhead_ms_p50(
        absl::ToDoubleMilliseconds(regions_[r].warm_round_overhead.Stats().median));
  }
  return st;
}

}  // namespace mixnet::control
