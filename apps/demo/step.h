// The demo's training step: what one iteration does, in order, on every
// rank. One description, used by the workers (which run it) and by the
// orchestrator and the tests (which count what it moves).
//
// Per iteration, forward: for each layer l = 0..L-1
//   attention (compute)  -- the window for the round planned for l
//   [await the plan for (it, l, forward)]
//   dispatch all-to-all  (matrix D_l: what each rank sends each rank)
//   expert (compute)
//   combine all-to-all   (D_l transposed)
//   [report D_l; plan request for (it, l+1, forward) from the prediction, or
//    after the last layer for (it, L-1, backward) from D_l itself (exact)]
// With `replan_combine`, the forward dispatch's plan (a forecast) does not
// bind its combine: right after the dispatch, report D_l with a request for
// the combine alone from D_l (exact), await it after the expert compute (the
// round's window), and after the combine report its row (D_l transposed)
// with the request above.
// then the head (loss; compute), then backward: for each layer l = L-1..0
//   [await the plan for (it, l, backward)]
//   combine-grad all-to-all   (D_l: the gradients of the combine's outputs
//                              go back along the dispatch's pairs)
//   expert backward (compute)
//   dispatch-grad all-to-all  (D_l transposed)
//   [report; plan request for (it, l-1, backward), exact from D_{l-1}; after
//    layer 0 for (it+1, 0, forward), predicted]
//   attention backward (compute) -- the window for that round
// Every all-to-all moves the same bytes as one of the forward pass's, so an
// iteration moves 4 x L all-to-alls of tokens x token_bytes per rank.
//
// Compute defaults are a Mixtral-like layer scaled to this emulation: expert
// compute about twice attention, backward about twice forward, and the
// attention windows (20-40 ms) of the order of the default OCS switching
// time (25 ms), so that a reconfiguration is neither free nor hidden in a
// long sleep. Pure value types; any thread.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "runtime/control/plan_key.h"
#include "runtime/locality/token_counts.h"

namespace mixnet::demo {

struct ComputeOptions {
  double attention_fwd_ms = 20;
  double expert_fwd_ms = 40;
  double head_ms = 20;
  double expert_bwd_ms = 80;
  double attention_bwd_ms = 40;
  // InvalidArgument naming the flag when a time is negative or not finite.
  absl::Status Validate() const;
  double PerIterationMs(int layers) const;
};

struct StepItem {
  enum class Kind { kCompute, kAlltoall, kReport, kAwaitPlan };
  Kind kind = Kind::kCompute;
  std::string name;  // "attention", "dispatch", "combine-grad", ...
  int layer = 0;
  int pass = control::kForwardPass;
  double compute_ms = 0;   // kCompute
  bool transpose = false;  // kAlltoall / kReport: D_l transposed (combine-shaped)
  // kReport: the row's key (layer, direction, pass) and its plan request,
  // whose window_ms is the compute from the report to the await of its plan
  // (the round's window; the controller's Decide charges a round only what
  // it does not hide); kAwaitPlan: the plan awaited.
  Direction direction = Direction::kDispatch;
  control::PlanTarget plan;
  bool has_plan = false;
};

// The items of iteration `iteration` of a run of `iterations`, in order.
std::vector<StepItem> IterationSteps(int64_t iteration, int64_t iterations, int layers,
                                     const ComputeOptions& c, bool replan_combine = false);

// The compute since the latest plan request, step by step: a kReport item
// starts it again, a kCompute item adds to it. Every kAwaitPlan item follows
// the report that requested its plan, so at an await (and at the all-to-all
// after it) this is the compute the plan's round could hide behind.
class PlanWindow {
 public:
  void Step(const StepItem& s) {
    if (s.kind == StepItem::Kind::kReport) ms_ = 0;
    if (s.kind == StepItem::Kind::kCompute) ms_ += s.compute_ms;
  }
  double ms() const { return ms_; }

 private:
  double ms_ = 0;
};

// The compute a round can hide behind: the compute between a plan request
// (kReport) and the all-to-all the plan is for (attention; the head; attention
// backward; attention backward and the next iteration's attention for the
// next iteration's first layer). The smallest of them over two iterations:
// the demo gives it to the controller (--overlap-ms, for a plan without a
// request's own window). 0 when no plan is awaited.
double ShortestPlanWindowMs(int layers, const ComputeOptions& c, bool replan_combine = false);

// The measured times of one iteration's all-to-alls, so that a report row
// carries the time of the all-to-all it describes (TrafficRow::observed_ms):
// the one of the same layer, pass and shape (D_l or its transpose) in this
// iteration, when it has already run. Forward rows follow their dispatch; the
// last backward row follows the dispatch-grad it describes; the other
// backward rows precede their all-to-all and carry no time (0).
class AlltoallTimes {
 public:
  explicit AlltoallTimes(int layers) : ms_(static_cast<size_t>(layers) * 4, 0.0) {}
  void Clear();                                      // a new iteration
  void Record(const StepItem& alltoall, double ms);  // a kAlltoall item's call
  double For(const StepItem& report) const;          // a kReport item; 0 when none

 private:
  size_t Index(const StepItem& s) const;  // ms_.size() when out of range
  std::vector<double> ms_;                // layer x pass x shape
};

}  // namespace mixnet::demo
