// ControllerMetrics (see controller_metrics.h). Any thread.
#include "runtime/control/controller_metrics.h"

namespace mixnet::control {
namespace {

prometheus::Gauge* OneGauge(prometheus::Registry& r, const char* name, const char* help) {
  return &prometheus::BuildGauge().Name(name).Help(help).Register(r).Add({});
}

}  // namespace

ControllerMetrics::ControllerMetrics(const std::vector<std::string>& regions)
    : registry_(std::make_shared<prometheus::Registry>()) {
  prometheus::Registry& r = *registry_;
  auto& rounds = prometheus::BuildCounter()
                     .Name("mixnet_controller_rounds_total")
                     .Help("Reconfiguration rounds by outcome")
                     .Register(r);
  committed_ = &rounds.Add({{"outcome", "committed"}});
  aborted_ = &rounds.Add({{"outcome", "aborted"}});
  not_started_ = &rounds.Add({{"outcome", "not_started"}});
  // A round: PREPARE acks (ms), the switches' Apply (10 ms .. seconds), COMMIT acks.
  round_time_ = &prometheus::BuildHistogram()
                     .Name("mixnet_controller_round_seconds")
                     .Help("Committed rounds: epoch persisted to COMMIT acknowledged")
                     .Register(r)
                     .Add({}, prometheus::Histogram::BucketBoundaries{
                                  0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30});
  // A phase: tens of microseconds (persisting to tmpfs) to seconds (a slow
  // switch, a late worker).
  auto& phases = prometheus::BuildHistogram()
                     .Name("mixnet_controller_round_phase_seconds")
                     .Help(
                         "Committed rounds, phase by phase (decide, persist, prepare, apply, "
                         "settle, commit)")
                     .Register(r);
  for (const char* phase : kRoundPhases) {
    round_phase_.push_back(&phases.Add(
        {{"phase", phase}},
        prometheus::Histogram::BucketBoundaries{0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01,
                                                0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5}));
  }
  // Planning: microseconds for a few hosts, up to seconds for thousands.
  planner_time_ = &prometheus::BuildHistogram()
                       .Name("mixnet_controller_planner_seconds")
                       .Help("Time of one planning pass (ClusterPlanner::Plan)")
                       .Register(r)
                       .Add({}, prometheus::Histogram::BucketBoundaries{
                                    0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025,
                                    0.05, 0.1, 0.25, 0.5, 1, 2.5, 5});
  auto& decide = prometheus::BuildCounter()
                     .Name("mixnet_controller_decide_total")
                     .Help("Reconfiguration decisions per planned region by outcome")
                     .Register(r);
  auto& predicted = prometheus::BuildGauge()
                        .Name("mixnet_controller_predicted_completion_seconds")
                        .Help("Latest decision: model all-to-all time on the topology it runs on")
                        .Register(r);
  auto& current = prometheus::BuildGauge()
                      .Name("mixnet_controller_current_completion_seconds")
                      .Help("Latest decision: model all-to-all time on the installed topology")
                      .Register(r);
  auto& observed =
      prometheus::BuildGauge()
          .Name("mixnet_controller_observed_completion_seconds")
          .Help("Latest matrix with measured times: the slowest worker's all-to-all call")
          .Register(r);
  auto& workers = prometheus::BuildGauge()
                      .Name("mixnet_controller_workers")
                      .Help("Registered workers by region")
                      .Register(r);
  for (const std::string& name : regions) {
    regions_.push_back(Region{&decide.Add({{"region", name}, {"outcome", "reconfigure"}}),
                              &decide.Add({{"region", name}, {"outcome", "keep"}}),
                              &predicted.Add({{"region", name}}), &current.Add({{"region", name}}),
                              &observed.Add({{"region", name}}), &workers.Add({{"region", name}})});
  }
  no_region_workers_ = &workers.Add({{"region", ""}});
  epoch_ = OneGauge(r, "mixnet_controller_epoch", "Highest fencing epoch issued (persisted)");
  committed_epoch_ =
      OneGauge(r, "mixnet_controller_committed_epoch", "Epoch of the committed topology");
  fenced_ = OneGauge(r, "mixnet_controller_fenced",
                     "1 once a switch refused this controller's epoch (planning stopped)");
}

void ControllerMetrics::Round(RoundOutcome outcome) {
  switch (outcome) {
    case RoundOutcome::kCommitted:
      committed_->Increment();
      break;
    case RoundOutcome::kAborted:
      aborted_->Increment();
      break;
    case RoundOutcome::kNotStarted:
      not_started_->Increment();
      break;
  }
}

void ControllerMetrics::RoundTime(absl::Duration d) {
  round_time_->Observe(absl::ToDoubleSeconds(d));
}

void ControllerMetrics::RoundPhase(size_t phase, absl::Duration d) {
  if (phase < round_phase_.size()) round_phase_[phase]->Observe(absl::ToDoubleSeconds(d));
}

void ControllerMetrics::PlannerTime(absl::Duration d) {
  planner_time_->Observe(absl::ToDoubleSeconds(d));
}

void ControllerMetrics::Decided(int region, bool reconfigure, double predicted_s,
                                double current_s) {
  if (region < 0 || region >= static_cast<int>(regions_.size())) return;
  Region& g = regions_[region];
  (reconfigure ? g.reconfigure : g.keep)->Increment();
  g.predicted->Set(predicted_s);
  g.current->Set(current_s);
}

void ControllerMetrics::Observed(int region, double observed_s) {
  if (region < 0 || region >= static_cast<int>(regions_.size())) return;
  regions_[region].observed->Set(observed_s);
}

void ControllerMetrics::Workers(int region, int delta) {
  prometheus::Gauge* g = region >= 0 && region < static_cast<int>(regions_.size())
                             ? regions_[region].workers
                             : no_region_workers_;
  g->Increment(delta);
}

void ControllerMetrics::Epochs(uint64_t highest, uint64_t committed) {
  epoch_->Set(static_cast<double>(highest));  // exact: fencing epochs are below 2^53
  committed_epoch_->Set(static_cast<double>(committed));
}

void ControllerMetrics::Fenced() { fenced_->Set(1); }

}  // namespace mixnet::control
