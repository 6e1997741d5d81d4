// The demo's training step (see step.h).
#include "apps/demo/step.h"

#include <algorithm>
#include <cmath>

#include "absl/strings/str_cat.h"

namespace mixnet::demo {
namespace {

using control::kBackwardPass;
using control::kForwardPass;
using control::PlanTarget;

StepItem Compute(const char* name, int layer, int pass, double ms) {
  StepItem s;
  s.kind = StepItem::Kind::kCompute;
  s.name = name;
  s.layer = layer;
  s.pass = pass;
  s.compute_ms = ms;
  return s;
}

StepItem Alltoall(const char* name, int layer, int pass, bool transpose) {
  StepItem s;
  s.kind = StepItem::Kind::kAlltoall;
  s.name = name;
  s.layer = layer;
  s.pass = pass;
  s.transpose = transpose;
  return s;
}

StepItem Await(const PlanTarget& t) {
  StepItem s;
  s.kind = StepItem::Kind::kAwaitPlan;
  s.name = "await-plan";
  s.layer = t.layer;
  s.pass = t.pass;
  s.plan = t;
  s.has_plan = true;
  return s;
}

StepItem Report(int layer, int pass, Direction dir, bool transpose, const PlanTarget& t) {
  StepItem s;
  s.kind = StepItem::Kind::kReport;
  s.name = "report";
  s.layer = layer;
  s.pass = pass;
  s.direction = dir;
  s.transpose = transpose;
  s.plan = t;
  s.has_plan = true;
  return s;
}

}  // namespace

absl::Status ComputeOptions::Validate() const {
  for (const auto& [flag, v] : {std::pair{"--attention-ms", attention_fwd_ms},
                                {"--expert-ms", expert_fwd_ms},
                                {"--head-ms", head_ms},
                                {"--expert-bwd-ms", expert_bwd_ms},
                                {"--attention-bwd-ms", attention_bwd_ms}}) {
    if (!(v >= 0) || !std::isfinite(v)) {
      return absl::InvalidArgumentError(absl::StrCat(flag, " ", v, ": must be >= 0 and finite"));
    }
  }
  return absl::OkStatus();
}

double ComputeOptions::PerIterationMs(int layers) const {
  return layers * (attention_fwd_ms + expert_fwd_ms + expert_bwd_ms + attention_bwd_ms) + head_ms;
}

namespace {

// The items of one iteration without the plan requests' windows.
std::vector<StepItem> StepsInOrder(int64_t it, int64_t iterations, int layers,
                                   const ComputeOptions& c, bool replan_combine) {
  std::vector<StepItem> out;
  for (int l = 0; l < layers; ++l) {
    out.push_back(Compute("attention", l, kForwardPass, c.attention_fwd_ms));
    // Forward layer 0 of the first iteration has no request (nothing known).
    if (it > 0 || l > 0) {
      out.push_back(Await(PlanTarget{.iteration = it, .layer = l, .pass = kForwardPass}));
    }
    out.push_back(Alltoall("dispatch", l, kForwardPass, false));
    const PlanTarget combine{
        .iteration = it, .layer = l, .pass = kForwardPass, .exact = true, .combine = true};
    if (replan_combine)
      out.push_back(Report(l, kForwardPass, Direction::kDispatch, false, combine));
    out.push_back(Compute("expert", l, kForwardPass, c.expert_fwd_ms));
    if (replan_combine) out.push_back(Await(combine));
    out.push_back(Alltoall("combine", l, kForwardPass, true));
    const PlanTarget next =
        l + 1 < layers
            ? PlanTarget{.iteration = it, .layer = l + 1, .pass = kForwardPass, .exact = false}
            : PlanTarget{.iteration = it, .layer = l, .pass = kBackwardPass, .exact = true};
    // With the combine re-planned, D_l's row went already (its key is
    // complete): the combine's row (D_l transposed, which the same duplex
    // circuits serve) carries the next request.
    if (replan_combine) {
      out.push_back(Report(l, kForwardPass, Direction::kCombine, true, next));
    } else {
      out.push_back(Report(l, kForwardPass, Direction::kDispatch, false, next));
    }
  }
  out.push_back(Compute("head", layers - 1, kForwardPass, c.head_ms));
  for (int l = layers - 1; l >= 0; --l) {
    out.push_back(Await(PlanTarget{.iteration = it, .layer = l, .pass = kBackwardPass}));
    out.push_back(Alltoall("combine-grad", l, kBackwardPass, false));
    out.push_back(Compute("expert-bwd", l, kBackwardPass, c.expert_bwd_ms));
    out.push_back(Alltoall("dispatch-grad", l, kBackwardPass, true));
    if (l > 0) {
      // Row of D_{l-1} (the exact demand of the next backward layer).
      out.push_back(Report(
          l - 1, kBackwardPass, Direction::kDispatch, false,
          PlanTarget{.iteration = it, .layer = l - 1, .pass = kBackwardPass, .exact = true}));
    } else if (it + 1 < iterations) {
      // The dispatch-grad just done (D_0 transposed); asks for the next
      // iteration's first forward layer, predicted.
      out.push_back(Report(0, kBackwardPass, Direction::kCombine, true,
                           PlanTarget{.iteration = it + 1, .layer = 0, .pass = kForwardPass}));
    }
    out.push_back(Compute("attention-bwd", l, kBackwardPass, c.attention_bwd_ms));
  }
  return out;
}

bool SameAlltoalls(const PlanTarget& a, const PlanTarget& b) {
  return a.iteration == b.iteration && a.layer == b.layer && a.pass == b.pass &&
         a.combine == b.combine;
}

}  // namespace

std::vector<StepItem> IterationSteps(int64_t it, int64_t iterations, int layers,
                                     const ComputeOptions& c, bool replan_combine) {
  std::vector<StepItem> out = StepsInOrder(it, iterations, layers, c, replan_combine);
  // Each request's window: the compute from its report to the await of its
  // plan, into the next iteration for the next iteration's first layer.
  std::vector<StepItem> ahead = out;
  if (it + 1 < iterations) {
    std::vector<StepItem> next = StepsInOrder(it + 1, iterations, layers, c, replan_combine);
    ahead.insert(ahead.end(), next.begin(), next.end());
  }
  for (size_t i = 0; i < out.size(); ++i) {
    if (out[i].kind != StepItem::Kind::kReport || !out[i].has_plan) continue;
    double ms = 0;
    for (size_t j = i + 1; j < ahead.size(); ++j) {
      const StepItem& s = ahead[j];
      if (s.kind == StepItem::Kind::kCompute) ms += s.compute_ms;
      if (s.kind == StepItem::Kind::kAwaitPlan && SameAlltoalls(s.plan, out[i].plan)) {
        out[i].plan.window_ms = ms;
        break;
      }
    }
  }
  return out;
}

double ShortestPlanWindowMs(int layers, const ComputeOptions& c, bool replan_combine) {
  double shortest = -1;
  PlanWindow window;
  for (int64_t it = 0; it < 2; ++it) {
    for (const StepItem& s : IterationSteps(it, 2, layers, c, replan_combine)) {
      window.Step(s);
      if (s.kind == StepItem::Kind::kAwaitPlan) {
        shortest = shortest < 0 ? window.ms() : std::min(shortest, window.ms());
      }
    }
  }
  return std::max(0.0, shortest);
}

void AlltoallTimes::Clear() { std::fill(ms_.begin(), ms_.end(), 0.0); }

size_t AlltoallTimes::Index(const StepItem& s) const {
  if (s.layer < 0 || static_cast<size_t>(s.layer) * 4 >= ms_.size()) return ms_.size();
  return static_cast<size_t>(s.layer) * 4 + (s.pass == kBackwardPass ? 2 : 0) +
         (s.transpose ? 1 : 0);
}

void AlltoallTimes::Record(const StepItem& alltoall, double ms) {
  if (const size_t i = Index(alltoall); i < ms_.size()) ms_[i] = ms;
}

double AlltoallTimes::For(const StepItem& report) const {
  const size_t i = Index(report);
  return i < ms_.size() ? ms_[i] : 0.0;
}

}  // namespace mixnet::demo
