// One simulated training iteration of an MoE model on one fabric at one link
// speed: pipeline of micro-batches (1F1B: (micro_batches + PP - 1) stage
// slots, each one micro-batch's forward and backward), per MoE layer attention
// compute, dispatch all-to-all, expert compute (roofline, the most loaded EP
// rank), combine all-to-all, the same backward at twice the compute, pipeline
// sends between stages, and the DP gradient all-reduce at the end. Every
// region runs the same stage-local layer at once, so each phase is one
// flow-solver run over the whole cluster.
//
// MixNet reconfigures where the emulated demo does (apps/demo/step.h): before
// each forward dispatch, planned from the prediction, the round running during
// that layer's attention forward (layer 0: also the attention backward before
// it); at each layer's backward start, planned from the matrix observed in its
// forward pass, the round running during the previous backward layer's
// attention backward (the last layer: its own, standing in for the head). The
// combine and dispatch-grad reuse the topology. Every switch is charged in the
// micro-batch slot and iteration where it happens: its switching time not
// hidden behind that compute. Iteration 0 is the only warm-up: the predictor's
// first observation, topoopt's plan and, for mixnet, one micro-batch whose
// backward re-plans from the observed matrices (forward has no forecast yet);
// neither its time nor its switches count. Main thread only.
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
  int iterations = 1;  // measured iterations (averaged), after the warm-up iteration 0
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
  double a2a_s = 0;                 // all-to-all time per iteration (switching included)
  double switch_s = 0;              // unhidden switching per iteration
  double compute_s = 0;             // compute per iteration
  double pp_s = 0;                  // pipeline sends per iteration
  double dp_s = 0;                  // gradient all-reduce
  double reconfigurations = 0;      // region reconfigurations per iteration (all slots)
  double switch_rounds = 0;         // phases per iteration in which any region switches
  int warmup_reconfigurations = 0;  // region reconfigurations of the warm-up (not charged)
  int passes = 0;                   // micro-batch passes simulated per iteration (mean, rounded)
  std::string routing;  // the circuit fabrics' routing ("v1", "v2", "v2+relay"), else "eps"
  int servers = 0;
  int regions = 0;
};

absl::StatusOr<SimResult> Simulate(const ModelConfig& model, const SimOptions& options);

}  // namespace mixnet::sim
