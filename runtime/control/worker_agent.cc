// WorkerAgent implementation (see worker_agent.h).
//
// Threads:
//  - "mx-agent-events": Register -> WatchTopology stream -> one event at a
//    time into the follower (under follower_mu_) -> AckTopology; on any break,
//    backoff and start over. Never gives up until the agent is destroyed.
//  - "mx-agent-reports": drains the report queue into a ReportTraffic client
//    stream while registered; reopens it after a break.
// The destructor cancels the in-flight gRPC contexts and joins both threads.
#include "runtime/control/worker_agent.h"

#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <deque>
#include <optional>
#include <thread>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/synchronization/mutex.h"
#include "grpcpp/grpcpp.h"
#include "mixnet/control/v1/controller.grpc.pb.h"
#include "runtime/common/duration_window.h"
#include "runtime/common/log.h"
#include "runtime/common/status.h"
#include "runtime/control/controller_channel.h"
#include "runtime/control/topology_proto.h"

namespace mixnet::control {
namespace {

absl::Status FromGrpc(const grpc::Status& s, const std::string& what) {
  if (s.ok()) return absl::OkStatus();
  return absl::Status(static_cast<absl::StatusCode>(s.error_code()),
                      absl::StrCat(what, ": ", s.error_message()));
}

std::chrono::system_clock::time_point GrpcDeadline(absl::Duration d) {
  return absl::ToChronoTime(absl::Now() + d);
}

void NameThread(const char* name) { pthread_setname_np(pthread_self(), name); }

}  // namespace

class WorkerAgent::Impl {
 public:
  Impl(WorkerAgentOptions o, std::shared_ptr<grpc::Channel> channel)
      : o_(std::move(o)), channel_(std::move(channel)) {
    stub_ = v1::Controller::NewStub(channel_);
  }

  void StartThreads() {
    events_ = std::thread([this] { EventLoop(); });
    reports_ = std::thread([this] { ReportLoop(); });
  }

  ~Impl() {
    {
      absl::MutexLock l(&mu_);
      stop_ = true;
      if (watch_ctx_ != nullptr) watch_ctx_->TryCancel();
      if (report_ctx_ != nullptr) report_ctx_->TryCancel();
    }
    if (events_.joinable()) events_.join();
    if (reports_.joinable()) reports_.join();
  }

  absl::StatusOr<router::Topology> WaitRegistered(absl::Duration timeout) {
    absl::MutexLock l(&mu_);
    auto ready = [this]() ABSL_SHARED_LOCKS_REQUIRED(mu_) { return ever_registered_ || stop_; };
    if (!mu_.AwaitWithTimeout(absl::Condition(&ready), timeout) || !ever_registered_) {
      return absl::DeadlineExceededError(absl::StrCat(
          "worker ", o_.worker_id, " on host ", o_.host, ": not registered with controller ",
          o_.controller, " after ", absl::FormatDuration(timeout),
          last_error_.ok() ? "" : absl::StrCat(" (last error: ", last_error_.ToString(), ")")));
    }
    return committed_;
  }

  void Follow(router::TopologyFollower* follower) {
    absl::MutexLock fl(&follower_mu_);
    follower_ = follower;
    (void)InstalledEpochLocked();
    if (follower_ == nullptr) return;
    router::Topology committed;
    bool have = false;
    {
      absl::MutexLock l(&mu_);
      have = ever_registered_;
      committed = committed_;
    }
    if (have) InstallIfNewer(committed, "snapshot");
  }

  void Report(TrafficRow row) {
    absl::MutexLock l(&mu_);
    if (queue_.size() >= o_.max_queued_reports) {
      queue_.pop_front();
      ++stats_.reports_dropped;
    }
    queue_.push_back(std::move(row));
  }

  PlanOutcome AwaitPlan(const PlanTarget& target, absl::Duration timeout) {
    return plans_.Await(target, timeout);
  }

  WarmOutcome WarmPaths(absl::Duration timeout) {
    const absl::Time start = absl::Now();
    const absl::Time deadline = start + timeout;
    WarmOutcome out;
    auto done = [&](std::string reason) {
      out.reason = std::move(reason);
      out.waited = absl::Now() - start;
      return out;
    };
    struct Warming {  // rounds until WarmPaths returns are the sweep's
      Impl* self;
      ~Warming() {
        absl::MutexLock l(&self->mu_);
        self->warming_ = false;
      }
    } warming{this};
    {
      absl::MutexLock l(&mu_);
      warmed_ = false;
      warming_ = true;
      auto watching = [this]() ABSL_SHARED_LOCKS_REQUIRED(mu_) { return watching_ || stop_; };
      if (!mu_.AwaitWithDeadline(absl::Condition(&watching), deadline) || !watching_) {
        out.timed_out = true;
        return done(absl::StrCat("worker ", o_.worker_id, ": no topology watch on controller ",
                                 o_.controller, " within ", absl::FormatDuration(timeout)));
      }
    }
    v1::WarmPathsRequest req;
    req.set_worker_id(o_.worker_id);
    grpc::ClientContext ctx;
    ctx.set_deadline(absl::ToChronoTime(std::min(deadline, absl::Now() + o_.rpc_timeout)));
    v1::WarmPathsResponse resp;
    if (absl::Status st = FromGrpc(stub_->WarmPaths(&ctx, req, &resp),
                                   absl::StrCat("WarmPaths on controller ", o_.controller));
        !st.ok()) {
      return done(st.ToString());
    }
    out.enabled = resp.enabled();
    out.planned = resp.rounds();
    if (!resp.enabled()) {
      return done(
          absl::StrCat("controller ", o_.controller, " runs no warm-up sweep (--warm-paths off)"));
    }
    absl::MutexLock l(&mu_);
    auto warmed = [this]() ABSL_SHARED_LOCKS_REQUIRED(mu_) { return warmed_ || stop_; };
    if (!mu_.AwaitWithDeadline(absl::Condition(&warmed), deadline) || !warmed_) {
      out.timed_out = true;
      return done(absl::StrCat("worker ", o_.worker_id, ": no WARMED from controller ",
                               o_.controller, " within ", absl::FormatDuration(timeout),
                               " (a worker of the region that did not ask holds the sweep)"));
    }
    out.complete = warm_.complete;
    out.rounds = warm_.rounds;
    return done(warm_.reason);
  }

  WorkerAgentStats stats() const {
    absl::MutexLock l(&mu_);
    WorkerAgentStats s = stats_;
    s.installed_epoch = installed_epoch_.load();
    const DurationStats p = prepare_took_.Stats(), c = commit_took_.Stats();
    s.prepare_p50_ms = absl::ToDoubleMilliseconds(p.median);
    s.prepare_p99_ms = absl::ToDoubleMilliseconds(p.p99);
    s.commit_p50_ms = absl::ToDoubleMilliseconds(c.median);
    s.commit_p99_ms = absl::ToDoubleMilliseconds(c.p99);
    return s;
  }

 private:
  bool Stopped() const {
    absl::MutexLock l(&mu_);
    return stop_;
  }

  bool Warming() const {
    absl::MutexLock l(&mu_);
    return warming_;
  }

  // Sleeps up to `d`, returning early (true) when the agent stops.
  bool SleepOrStop(absl::Duration d) {
    absl::MutexLock l(&mu_);
    auto stopped = [this]() ABSL_SHARED_LOCKS_REQUIRED(mu_) { return stop_; };
    return mu_.AwaitWithTimeout(absl::Condition(&stopped), d);
  }

  uint64_t InstalledEpochLocked() const ABSL_EXCLUSIVE_LOCKS_REQUIRED(follower_mu_) {
    const uint64_t e = follower_ != nullptr ? follower_->installed_epoch() : installed_no_follower_;
    installed_epoch_.store(e);
    return e;
  }

  // Commits `t` when its epoch is newer than the installed one.
  void InstallIfNewer(const router::Topology& t, const char* what)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(follower_mu_) {
    const uint64_t installed = InstalledEpochLocked();
    if (t.epoch < installed) {
      log::Warn("worker {}: ignoring {} of epoch {} below the installed epoch {}", o_.worker_id,
                what, t.epoch, installed);
      absl::MutexLock l(&mu_);
      ++stats_.stale_events;
      return;
    }
    if (t.epoch == installed && installed != 0) return;
    if (follower_ == nullptr) {
      installed_no_follower_ = t.epoch;
      (void)InstalledEpochLocked();
      return;
    }
    absl::Status st = follower_->Commit(t, absl::Now() + o_.commit_timeout);
    (void)InstalledEpochLocked();
    absl::MutexLock l(&mu_);
    ++stats_.commits;
    if (!st.ok()) {
      ++stats_.commit_errors;
      log::Warn("worker {}: installing {} epoch {}: {}", o_.worker_id, what, t.epoch,
                st.ToString());
    }
  }

  // Router v2 weights carried by `ev`, to the follower (see SetRouting).
  void ApplyRoutingLocked(const v1::TopologyEvent& ev, const char* what)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(follower_mu_) {
    if (!HasRouting(ev) || follower_ == nullptr) return;
    CountRouting(ev, what, follower_->SetRouting(RoutingFromProto(ev.routing())));
  }

  static bool HasRouting(const v1::TopologyEvent& ev) {
    return ev.has_routing() && ev.routing().version() >= 2;
  }

  // Counts a routing handed to the follower (stats), warning when refused.
  void CountRouting(const v1::TopologyEvent& ev, const char* what, const absl::Status& st) {
    absl::MutexLock l(&mu_);
    ++stats_.routings;
    if (!st.ok()) {
      ++stats_.routing_errors;
      log::Warn("worker {}: routing of {} for epoch {}: {}", o_.worker_id, what,
                ev.topology().epoch(), st.ToString());
    }
  }

  bool Register() {
    v1::RegisterRequest req;
    req.set_worker_id(o_.worker_id);
    req.set_host(o_.host);
    for (int r : o_.ranks) req.add_ranks(r);
    for (const cluster::NicSpec& n : o_.nics) {
      v1::Nic* p = req.add_nics();
      p->set_name(n.name);
      p->set_role(std::string(cluster::NicRoleName(n.role)));
      p->set_address(n.address);
      p->set_gbps(n.gbps);
    }
    req.set_job(o_.job);
    {
      absl::MutexLock fl(&follower_mu_);
      req.set_installed_epoch(InstalledEpochLocked());
    }
    grpc::ClientContext ctx;
    ctx.set_deadline(GrpcDeadline(o_.rpc_timeout));
    v1::RegisterResponse resp;
    absl::Status st = FromGrpc(stub_->Register(&ctx, req, &resp),
                               absl::StrCat("Register with controller ", o_.controller));
    if (!st.ok()) {
      absl::MutexLock l(&mu_);
      if (last_error_.ToString() != st.ToString()) {
        // Refused (not a controller that is away): retrying will not help.
        if (absl::IsPermissionDenied(st) || absl::IsInvalidArgument(st)) {
          log::Warn("worker {}: {}", o_.worker_id, st.ToString());
        } else {
          log::Debug("worker {}: {}", o_.worker_id, st.ToString());
        }
      }
      last_error_ = st;
      return false;
    }
    router::Topology t = TopologyFromProto(resp.topology());
    {
      absl::MutexLock l(&mu_);
      if (ever_registered_) ++stats_.reconnects;
      ever_registered_ = true;
      registered_ = true;
      stats_.registered = true;
      committed_ = t;
      controller_id_ = resp.controller_id();
    }
    log::Info("worker {} registered with controller {} ({}), region '{}', epoch {}", o_.worker_id,
              o_.controller, resp.controller_id(), resp.region(), t.epoch);
    return true;
  }

  void Ack(uint64_t epoch, v1::AckTopologyRequest::Phase phase, const absl::Status& st) {
    v1::AckTopologyRequest req;
    req.set_worker_id(o_.worker_id);
    req.set_epoch(epoch);
    req.set_phase(phase);
    if (!st.ok()) {
      req.set_error_code(static_cast<int>(st.code()));
      req.set_error_message(std::string(st.message()));
    }
    grpc::ClientContext ctx;
    ctx.set_deadline(GrpcDeadline(o_.rpc_timeout));
    v1::AckTopologyResponse resp;
    grpc::Status gs = stub_->AckTopology(&ctx, req, &resp);
    if (!gs.ok()) {
      log::Warn("worker {}: acknowledging epoch {} to controller {}: {}", o_.worker_id, epoch,
                o_.controller, gs.error_message());
    }
  }

  void Handle(const v1::TopologyEvent& ev) {
    const absl::Time arrived = absl::Now();
    // A round's part on this worker, for stats() (not the warm-up sweep's).
    auto took = [&](bool commit) {
      absl::MutexLock l(&mu_);
      if (!warming_) (commit ? commit_took_ : prepare_took_).Add(absl::Now() - arrived);
    };
    const router::Topology target = TopologyFromProto(ev.topology());
    const absl::Duration deadline =
        ev.deadline_ms() > 0 ? absl::Milliseconds(ev.deadline_ms()) : o_.commit_timeout;
    switch (ev.kind()) {
      case v1::TopologyEvent::SNAPSHOT: {
        {
          absl::MutexLock l(&mu_);
          committed_ = target;
          watching_ = true;
        }
        absl::MutexLock fl(&follower_mu_);
        InstallIfNewer(target, "snapshot");
        return;
      }
      case v1::TopologyEvent::WARMED: {
        log::Info("worker {}: warm-up sweep {} after {} rounds{}", o_.worker_id,
                  ev.warm_complete() ? "done" : "incomplete", ev.warm_rounds(),
                  ev.reason().empty() ? "" : absl::StrCat(" (", ev.reason(), ")"));
        absl::MutexLock l(&mu_);
        warmed_ = true;
        warm_ = WarmOutcome{};
        warm_.enabled = true;
        warm_.complete = ev.warm_complete();
        warm_.rounds = ev.warm_rounds();
        warm_.reason = ev.reason();
        return;
      }
      case v1::TopologyEvent::PREPARE: {
        absl::Status st;
        {
          absl::MutexLock fl(&follower_mu_);
          if (target.epoch <= InstalledEpochLocked()) {
            absl::MutexLock l(&mu_);
            ++stats_.stale_events;
            log::Warn("worker {}: ignoring PREPARE of epoch {} (installed {})", o_.worker_id,
                      target.epoch, InstalledEpochLocked());
            return;
          }
          if (follower_ != nullptr) st = follower_->Prepare(target, absl::Now() + deadline);
        }
        {
          absl::MutexLock l(&mu_);
          ++stats_.prepares;
          if (absl::IsDeadlineExceeded(st)) ++stats_.prepare_timeouts;
        }
        took(false);
        Ack(target.epoch, v1::AckTopologyRequest::PREPARED, st);
        return;
      }
      case v1::TopologyEvent::COMMIT: {
        absl::Status st;
        {
          absl::MutexLock fl(&follower_mu_);
          const uint64_t installed = InstalledEpochLocked();
          if (target.epoch < installed) {
            absl::MutexLock l(&mu_);
            ++stats_.stale_events;
            plans_.OnRoundEnd(target.epoch, false);
            return;
          }
          if (target.epoch > installed) {
            if (follower_ != nullptr) {
              const absl::Time start = absl::Now();
              // The COMMIT's routing is installed with the topology.
              std::optional<router::RoutingPlan> plan;
              if (HasRouting(ev)) plan = RoutingFromProto(ev.routing());
              absl::Status routed;
              st = follower_->CommitWithRouting(target, plan ? &*plan : nullptr,
                                                absl::Now() + deadline, &routed);
              if (plan) CountRouting(ev, "COMMIT", routed);
              const absl::Duration took = absl::Now() - start;
              if (took > o_.slow_commit) {
                log::Info("worker {}: installing epoch {} took {} (connections over new circuits)",
                          o_.worker_id, target.epoch, absl::FormatDuration(took));
              }
            } else {
              installed_no_follower_ = target.epoch;
            }
            (void)InstalledEpochLocked();
            {
              absl::MutexLock l(&mu_);
              ++stats_.commits;
              if (!st.ok()) ++stats_.commit_errors;
            }
            if (follower_ != nullptr && Warming()) {
              // A sweep round: its paths are made before the next round
              // darkens their circuits (TopologyFollower::Settle).
              absl::Status settled = follower_->Settle(absl::Now() + deadline);
              if (!settled.ok()) {
                log::Warn("worker {}: warm-up sweep epoch {}: {}", o_.worker_id, target.epoch,
                          settled.ToString());
              }
            }
          }
        }
        log::Info("worker {}: epoch {} installed{}", o_.worker_id, target.epoch,
                  ev.predicted_ms() > 0
                      ? absl::StrFormat(" (router v%d; model: all-to-all %.2f ms, %.2f ms before)",
                                        ev.has_routing() ? ev.routing().version() : 1,
                                        ev.predicted_ms(), ev.current_ms())
                      : std::string());
        {
          absl::MutexLock l(&mu_);
          committed_ = target;
        }
        if (!st.ok()) {
          log::Warn("worker {}: COMMIT epoch {}: {}", o_.worker_id, target.epoch, st.ToString());
        }
        plans_.OnRoundEnd(target.epoch, st.ok());
        took(true);
        Ack(target.epoch, v1::AckTopologyRequest::COMMITTED, st);
        return;
      }
      case v1::TopologyEvent::ABORT: {
        {
          absl::MutexLock fl(&follower_mu_);
          {
            absl::MutexLock l(&mu_);
            ++stats_.aborts;
          }
          if (follower_ != nullptr) follower_->Abort(target.epoch);
        }
        log::Info("worker {}: round for epoch {} aborted: {}", o_.worker_id, target.epoch,
                  ev.reason());
        plans_.OnRoundEnd(target.epoch, false);
        return;
      }
      case v1::TopologyEvent::DECISION: {
        const PlanTarget t{.iteration = ev.plan().iteration(),
                           .layer = ev.plan().layer(),
                           .pass = ev.plan().pass() == v1::BACKWARD ? kBackwardPass : kForwardPass,
                           .combine = ev.plan().combine()};
        log::Debug("worker {}: DECISION for {}: {} (model {:.2f} ms, installed {:.2f} ms){}",
                   o_.worker_id, PlanTargetString(t),
                   ev.reconfigure() ? absl::StrCat("round ", target.epoch) : "keep",
                   ev.predicted_ms(), ev.current_ms(),
                   ev.reason().empty() ? "" : absl::StrCat(": ", ev.reason()));
        if (!ev.reconfigure()) {  // a switching plan's weights come with its COMMIT
          absl::MutexLock fl(&follower_mu_);
          ApplyRoutingLocked(ev, "DECISION");
        }
        plans_.OnDecision(t, ev.reconfigure(), target.epoch, ev.reason(), ev.predicted_ms(),
                          ev.current_ms());
        return;
      }
      default:
        log::Warn("worker {}: unknown topology event kind {}", o_.worker_id,
                  static_cast<int>(ev.kind()));
    }
  }

  void EventLoop() {
    NameThread("mx-agent-events");
    absl::Duration backoff = o_.reconnect_min;
    while (!Stopped()) {
      if (!Register()) {
        if (SleepOrStop(backoff)) break;
        backoff = std::min(backoff * 2, o_.reconnect_max);
        continue;
      }
      backoff = o_.reconnect_min;
      grpc::ClientContext ctx;
      {
        absl::MutexLock l(&mu_);
        if (stop_) break;
        watch_ctx_ = &ctx;
      }
      v1::WatchTopologyRequest req;
      req.set_worker_id(o_.worker_id);
      std::unique_ptr<grpc::ClientReader<v1::TopologyEvent>> reader =
          stub_->WatchTopology(&ctx, req);
      v1::TopologyEvent ev;
      while (reader->Read(&ev)) Handle(ev);
      grpc::Status gs = reader->Finish();
      {
        absl::MutexLock l(&mu_);
        watch_ctx_ = nullptr;
        registered_ = false;
        watching_ = false;
        stats_.registered = false;
        if (stop_) break;
        last_error_ = FromGrpc(gs, absl::StrCat("topology watch on controller ", o_.controller));
      }
      log::Warn("worker {}: lost the controller {} ({}); keeping epoch {} and reconnecting",
                o_.worker_id, o_.controller, gs.error_message(), stats().installed_epoch);
      if (SleepOrStop(o_.reconnect_min)) break;
    }
  }

  v1::TrafficReport ToProto(const TrafficRow& row) const {
    v1::TrafficReport r;
    r.set_worker_id(o_.worker_id);
    r.set_host(o_.host);
    r.set_iteration(row.iteration);
    r.set_layer(row.key.layer);
    r.set_micro_batch(row.key.micro_batch);
    r.set_direction(DirectionToProto(row.key.direction));
    r.set_pass(row.pass == kBackwardPass ? v1::BACKWARD : v1::FORWARD);
    if (row.plan) {
      v1::PlanRequest* p = r.mutable_plan();
      p->mutable_target()->set_iteration(row.plan->iteration);
      p->mutable_target()->set_layer(row.plan->layer);
      p->mutable_target()->set_pass(row.plan->pass == kBackwardPass ? v1::BACKWARD : v1::FORWARD);
      p->mutable_target()->set_combine(row.plan->combine);
      p->set_source(row.plan->exact ? v1::PlanRequest::THIS_MATRIX : v1::PlanRequest::PREDICTED);
      p->set_window_ms(row.plan->window_ms);
    }
    for (const std::string& h : row.peer_hosts) r.add_peer_hosts(h);
    for (double b : row.bytes) r.add_bytes(b);
    r.set_observed_ms(row.observed_ms);
    return r;
  }

  void ReportLoop() {
    NameThread("mx-agent-reports");
    while (true) {
      // Wait for a report and a registration.
      {
        absl::MutexLock l(&mu_);
        auto ready = [this]() ABSL_SHARED_LOCKS_REQUIRED(mu_) {
          return stop_ || (registered_ && !queue_.empty());
        };
        mu_.Await(absl::Condition(&ready));
        if (stop_) return;
      }
      grpc::ClientContext ctx;
      {
        absl::MutexLock l(&mu_);
        if (stop_) return;
        report_ctx_ = &ctx;
      }
      v1::ReportTrafficResponse resp;
      std::unique_ptr<grpc::ClientWriter<v1::TrafficReport>> writer =
          stub_->ReportTraffic(&ctx, &resp);
      bool broken = false;
      while (!broken) {
        TrafficRow row;
        {
          absl::MutexLock l(&mu_);
          auto ready = [this]() ABSL_SHARED_LOCKS_REQUIRED(mu_) {
            return stop_ || !registered_ || !queue_.empty();
          };
          mu_.Await(absl::Condition(&ready));
          if (stop_ || !registered_) break;
          row = queue_.front();
        }
        if (!writer->Write(ToProto(row))) {
          broken = true;
          break;
        }
        absl::MutexLock l(&mu_);
        // Pop only what was written (Report may have dropped the front meanwhile).
        if (!queue_.empty() && queue_.front().iteration == row.iteration &&
            queue_.front().key == row.key && queue_.front().pass == row.pass) {
          queue_.pop_front();
        }
        ++stats_.reports_sent;
      }
      if (!broken) writer->WritesDone();
      grpc::Status gs = writer->Finish();
      {
        absl::MutexLock l(&mu_);
        report_ctx_ = nullptr;
        if (stop_) return;
      }
      if (broken) {
        log::Debug("worker {}: report stream to {} broke: {}", o_.worker_id, o_.controller,
                   gs.error_message());
        if (SleepOrStop(o_.reconnect_min)) return;
      }
    }
  }

  const WorkerAgentOptions o_;
  std::shared_ptr<grpc::Channel> channel_;
  std::unique_ptr<v1::Controller::Stub> stub_;
  std::thread events_;
  std::thread reports_;

  mutable absl::Mutex follower_mu_;  // held while calling into the follower; before mu_
  router::TopologyFollower* follower_ ABSL_GUARDED_BY(follower_mu_) = nullptr;
  uint64_t installed_no_follower_ ABSL_GUARDED_BY(follower_mu_) = 0;
  // The installed epoch as last read under follower_mu_ (for stats()).
  mutable std::atomic<uint64_t> installed_epoch_{0};

  mutable absl::Mutex mu_;
  bool stop_ ABSL_GUARDED_BY(mu_) = false;
  bool ever_registered_ ABSL_GUARDED_BY(mu_) = false;
  bool registered_ ABSL_GUARDED_BY(mu_) = false;
  bool watching_ ABSL_GUARDED_BY(mu_) = false;  // a SNAPSHOT came on the current stream
  bool warmed_ ABSL_GUARDED_BY(mu_) = false;    // WARMED came since WarmPaths asked
  WarmOutcome warm_ ABSL_GUARDED_BY(mu_);
  bool warming_ ABSL_GUARDED_BY(mu_) = false;  // a WarmPaths call is waiting
  DurationWindow prepare_took_ ABSL_GUARDED_BY(mu_){256};
  DurationWindow commit_took_ ABSL_GUARDED_BY(mu_){256};
  router::Topology committed_ ABSL_GUARDED_BY(mu_);
  std::string controller_id_ ABSL_GUARDED_BY(mu_);
  absl::Status last_error_ ABSL_GUARDED_BY(mu_);
  grpc::ClientContext* watch_ctx_ ABSL_GUARDED_BY(mu_) = nullptr;
  grpc::ClientContext* report_ctx_ ABSL_GUARDED_BY(mu_) = nullptr;
  std::deque<TrafficRow> queue_ ABSL_GUARDED_BY(mu_);
  WorkerAgentStats stats_ ABSL_GUARDED_BY(mu_);
  PlanTracker plans_;  // locks itself
};

absl::StatusOr<std::unique_ptr<WorkerAgent>> WorkerAgent::Start(WorkerAgentOptions options) {
  if (options.controller.empty()) {
    return absl::InvalidArgumentError(
        "worker agent: no controller address (set MIXNET_CONTROLLER to host:port or unix:/path)");
  }
  if (options.host.empty()) {
    return absl::InvalidArgumentError("worker agent: no host name (set MIXNET_HOST)");
  }
  if (options.worker_id.empty()) {
    options.worker_id = absl::StrCat(options.host, "/", getpid());
  }
  if (options.reconnect_min <= absl::ZeroDuration()) options.reconnect_min = absl::Milliseconds(10);
  if (options.reconnect_max < options.reconnect_min) options.reconnect_max = options.reconnect_min;
  if (options.max_queued_reports == 0) options.max_queued_reports = 1;
  absl::StatusOr<std::shared_ptr<grpc::Channel>> channel =
      MakeControllerChannel(options.controller, options.tls);
  if (!channel.ok()) {
    return Annotate(channel.status(),
                    absl::StrCat("worker agent: controller ", options.controller));
  }
  auto impl = std::make_unique<Impl>(std::move(options), *std::move(channel));
  impl->StartThreads();
  return std::unique_ptr<WorkerAgent>(new WorkerAgent(std::move(impl)));
}

WorkerAgent::WorkerAgent(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
WorkerAgent::~WorkerAgent() = default;

absl::StatusOr<router::Topology> WorkerAgent::WaitRegistered(absl::Duration timeout) {
  return impl_->WaitRegistered(timeout);
}
void WorkerAgent::Follow(router::TopologyFollower* follower) { impl_->Follow(follower); }
void WorkerAgent::Report(TrafficRow row) { impl_->Report(std::move(row)); }
WorkerAgentStats WorkerAgent::stats() const { return impl_->stats(); }
WarmOutcome WorkerAgent::WarmPaths(absl::Duration timeout) { return impl_->WarmPaths(timeout); }
PlanOutcome WorkerAgent::AwaitPlan(const PlanTarget& target, absl::Duration timeout) {
  return impl_->AwaitPlan(target, timeout);
}

}  // namespace mixnet::control
