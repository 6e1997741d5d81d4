// PlanTarget: which all-to-alls of a training step a plan request is for
// (mixnet.control.v1.PlanKey + PlanRequest.source), shared by the
// controller (region_reports.h) and the worker agent (worker_agent.h).
// Pure value type; any thread.
#pragma once

#include <cstdint>
#include <string>

#include "absl/strings/str_cat.h"

namespace mixnet::control {

// Passes of a training step (mixnet.control.v1.Pass without UNSPECIFIED).
inline constexpr int kForwardPass = 0;
inline constexpr int kBackwardPass = 1;

// Decide on a topology for the all-to-alls of (iteration, layer, pass), from
// the region predictor's forecast or, when `exact`, from the reported matrix
// itself. `combine`: for the combine of (iteration, layer, pass) alone, from
// its dispatch's observed matrix (exact); a separate plan from the one for
// both. `window_ms`: the compute between the request and the all-to-all it
// plans, which hides a round (0: not known; answers are matched to their
// requests without it, see PlanTracker).
struct PlanTarget {
  int64_t iteration = 0;
  int layer = 0;
  int pass = kForwardPass;
  bool exact = false;
  bool combine = false;
  double window_ms = 0;
  friend bool operator==(const PlanTarget&, const PlanTarget&) = default;
};

// "iteration 3 layer 1 backward (exact)", "iteration 3 layer 0 forward combine (exact)"
inline std::string PlanTargetString(const PlanTarget& t) {
  return absl::StrCat("iteration ", t.iteration, " layer ", t.layer,
                      t.pass == kBackwardPass ? " backward" : " forward",
                      t.combine ? " combine" : "", t.exact ? " (exact)" : " (predicted)");
}

}  // namespace mixnet::control
