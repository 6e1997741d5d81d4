// ControllerMetrics: the Prometheus metrics of mixnet-controller (README
// "Metrics"), recorded by the Controller and served by ControllerServer's
// MetricsExposer when --metrics-listen is given (the registry exists either
// way). `region` labels are the spec's region names (bounded by the spec).
//
//   mixnet_controller_rounds_total{outcome}   reconfiguration rounds: "committed",
//                                             "aborted" (PREPARE failed or timed
//                                             out, a switch failed or fenced),
//                                             "not_started" (epoch not persisted)
//   mixnet_controller_round_seconds           histogram: committed rounds, epoch
//                                             persisted to COMMIT acked (or the
//                                             commit deadline), switching included
//   mixnet_controller_round_phase_seconds{phase}  histogram: each committed
//                                             round's phases (kRoundPhases: decide,
//                                             persist, prepare, apply, settle, commit)
//   mixnet_controller_planner_seconds         histogram: ClusterPlanner::Plan calls
//   mixnet_controller_decide_total{region,outcome}  Decide per planned region:
//                                             "reconfigure" or "keep"
//   mixnet_controller_predicted_completion_seconds{region}  the latest decision's
//                                             fluid-model all-to-all time on the
//                                             topology it runs on (GetStatus'
//                                             last_predicted_ms)
//   mixnet_controller_current_completion_seconds{region}  ... on the topology
//                                             installed before (last_current_ms)
//   mixnet_controller_observed_completion_seconds{region}  the latest completed
//                                             matrix with measured times: the
//                                             slowest worker's all-to-all call
//                                             (TrafficReport.observed_ms; GetStatus'
//                                             last_observed_ms)
//   mixnet_controller_workers{region}         registered workers (region "" for
//                                             hosts in no region)
//   mixnet_controller_epoch                   highest epoch issued (persisted)
//   mixnet_controller_committed_epoch         epoch of the committed topology
//   mixnet_controller_fenced                  1 once a switch refused the epoch
//
// Threading: any thread (prometheus-cpp metrics are thread-safe).
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "absl/time/time.h"
#include "prometheus/counter.h"
#include "prometheus/family.h"
#include "prometheus/gauge.h"
#include "prometheus/histogram.h"
#include "prometheus/registry.h"

namespace mixnet::control {

// A committed round's phases, in order (RegionStatus.round_phases): the
// completed matrix to the round's start (planning, the DECISION); the epoch
// persisted; PREPARE out to the last PREPARED; the switches' Apply calls;
// the settle to the spec's switch_ms; COMMIT out to the last COMMITTED.
inline constexpr const char* kRoundPhases[] = {"decide", "persist", "prepare",
                                               "apply",  "settle",  "commit"};
inline constexpr size_t kRoundPhaseCount = sizeof(kRoundPhases) / sizeof(kRoundPhases[0]);

class ControllerMetrics {
 public:
  explicit ControllerMetrics(const std::vector<std::string>& regions);

  std::shared_ptr<prometheus::Registry> registry() const { return registry_; }

  enum class RoundOutcome { kCommitted, kAborted, kNotStarted };
  void Round(RoundOutcome outcome);
  void RoundTime(absl::Duration d);  // a committed round
  // Phase `phase` (an index into kRoundPhases) of a committed round.
  void RoundPhase(size_t phase, absl::Duration d);
  void PlannerTime(absl::Duration d);
  // Region index `region` (spec order) was decided; the model's times in s.
  void Decided(int region, bool reconfigure, double predicted_s, double current_s);
  // A matrix of region `region` completed with measured times; the slowest, in s.
  void Observed(int region, double observed_s);
  // A worker joined (+1) or left (-1) region `region` (-1: in no region).
  void Workers(int region, int delta);
  void Epochs(uint64_t highest, uint64_t committed);
  void Fenced();

 private:
  struct Region {
    prometheus::Counter* reconfigure;
    prometheus::Counter* keep;
    prometheus::Gauge* predicted;
    prometheus::Gauge* current;
    prometheus::Gauge* observed;
    prometheus::Gauge* workers;
  };
  std::shared_ptr<prometheus::Registry> registry_;
  std::vector<Region> regions_;
  prometheus::Gauge* no_region_workers_;
  prometheus::Counter* committed_;
  prometheus::Counter* aborted_;
  prometheus::Counter* not_started_;
  prometheus::Histogram* round_time_;
  std::vector<prometheus::Histogram*> round_phase_;  // by kRoundPhases index
  prometheus::Histogram* planner_time_;
  prometheus::Gauge* epoch_;
  prometheus::Gauge* committed_epoch_;
  prometheus::Gauge* fenced_;
};

}  // namespace mixnet::control
