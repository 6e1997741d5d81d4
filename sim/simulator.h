// One simulated training iteration of an MoE model on one fabric at one link
// speed: pipeline of micro-batches (1F1B: (micro_batches + PP - 1) stage
// slots), per MoE layer attention compute, dispatch all-to-all, expert compute
// (roofline, the most loaded EP rank), combine all-to-all, the same backward
// at twice the compute, pipeline sends between stages, and the DP gradient
// all-reduce at the end. Every region runs the same stage-local layer at once,
// so each phase is one flow-solver run over the whole cluster. MixNet re-plans
// before each forward dispatch (predicted matrix, switching overlapping the
// attention forward when `forward_ahead`) and each backward combine (known
// matrix, overlapping the attention backward when `hide_backward`); the combine
// reuses the dispatch topology. Main thread only.
#pragma once

#include <functional>
#include <string>

#include "absl/status/statusor.h"
#include "sim/config.h"
#include "sim/fabric.h"

namespace mixnet::sim {

struct SimOptions {
  FabricOptions fabric;
  int gpus = 1024;
  int iterations = 1;  // measured iterations (averaged), after a warm-up one
  std::string predictor = "last";
  bool forward_ahead = true;
  bool hide_backward = true;
  // What backward switching hides under: false = the attention backward of the
  // layer before (the only time the circuits are idle), true = that layer's
  // whole backward compute (attention and experts; the paper's optimistic
  // assumption that the OCS switches while the previous layer computes).
  bool backward_window_layer = false;
  double decide_uses = 2;  // all-to-alls a new topology is credited with (planner::Decide)
  // Called with the fraction done (0..1) after each phase; may be empty.
  std::function<void(double)> progress;
};

struct SimResult {
  double iteration_s = 0;
  double a2a_s = 0;          // all-to-all time per iteration (switching included)
  double switch_s = 0;       // unhidden switching per iteration
  double compute_s = 0;      // compute per iteration
  double pp_s = 0;           // pipeline sends per iteration
  double dp_s = 0;           // gradient all-reduce
  int reconfigurations = 0;  // region reconfigurations per micro-batch (mixnet)
  int servers = 0;
  int regions = 0;
};

absl::StatusOr<SimResult> Simulate(const ModelConfig& model, const SimOptions& options);

}  // namespace mixnet::sim
