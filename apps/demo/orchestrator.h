// `mixnet-demo [flags]`: the orchestrator. For each fabric (eps, oversub,
// static, mixnet, nonblocking) it brings up the cluster (emulated in network
// namespaces as root; loopback otherwise), starts mixnet-ocsd and
// mixnet-controller for the mixnet phase, spawns one worker per host running
// the training step of step.h, collects what they measured (phase_result.h)
// and prints the per-iteration table and the summary (report.h).
// Runs on the main thread; SIGINT/SIGTERM end the run with a clean-up.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "apps/demo/fabric_spec.h"
#include "apps/demo/step.h"
#include "apps/demo/workload.h"

namespace mixnet::demo {

struct DemoOptions {
  WorkloadOptions workload;
  ComputeOptions compute;
  FabricShape shape;  // shape.hosts is taken from workload.hosts
  int64_t iterations = 8;
  std::vector<std::string> fabrics = {"eps", "oversub", "static", "mixnet", "nonblocking"};
  double burst_ms = 1;     // tbf bucket of every link, ms of its rate
  int queue_frames = 400;  // tbf queue of every link, full frames (emulation/links.h)
  int rto_min_ms = 0;      // hosts' minimum TCP RTO (0: the kernel's 200 ms)
  int init_cwnd = 0;       // hosts' initial TCP windows, segments (0: the kernel's 10)
  bool slow_start_after_idle = true;
  std::string tcp_congestion = "cubic";  // hosts' TCP congestion control ("": the machine's)
  // TOS byte of the control class: every link's strict-priority queue and
  // the workers' MIXNET_CONTROL_TC (-1: neither; emulation/links.h).
  int control_tos = 0xb8;
  // oversub: hosts per leaf; its uplinks cost-equal to MixNet at price_gbps
  // under the price file (sim/prices.yaml).
  int leaf_hosts = 4;
  double price_gbps = 400;
  // oversub: also one phase per other price row of the price file, each at
  // its own cost-equal ratio ("oversub-100G", ...; baselines.h).
  bool oversub_every_price = false;
  // The model whose paper-scale all-to-all the summary compares the
  // switching time with (sim/models beside the price file).
  std::string sim_model = "mixtral-8x22b";
  std::string prices_path;
  int static_iterations = 3;  // static: planned from the mean of these first iterations
  bool json = false;
  bool keep = false;      // leave namespaces and the run dir
  bool keep_dir = false;  // leave the run dir (configs, specs, results: replay.h)
  bool loopback = false;  // force loopback mode even as root
  bool progress = true;   // a line per iteration on stderr
  std::string plot_dir;   // gnuplot PNG of per-iteration times
  std::string prefix;     // namespace prefix stem (default "mxdemo<pid>")
  std::string ocsd_path;
  std::string controller_path;
  std::string planner = "improved";
  std::string predictor = "last";
  int prepare_deadline_ms = 2000;
  int plan_wait_ms = 5000;  // longest wait of a worker for a planned round
  // Routing of mixnet and static (controller --router, workers'
  // MIXNET_ROUTER): v1 (circuits if any, else EPS) or v2 (split by the plan's
  // demand; static splits by the mean matrix it was planned from).
  std::string router = "v2";
  // Router v2: plans (and static's split) may relay through a third host
  // (controller --relay; the workers forward inside their collectives).
  bool relay = true;
  // Router v2's split in the workers and the simulation: "water-filling" or
  // "lp" (planner/lp_routing.h). The controller scores circuits with the
  // water-filling either way.
  std::string route_solver = "water-filling";
  // mixnet: after each forward dispatch, re-plan its combine from the
  // observed matrix (step.h, replan_combine; the controller's answer re-splits
  // the combine even when no round pays).
  bool replan_combine = true;
  // mixnet: each plan request carries its window (the compute before its
  // all-to-all, PlanRequest.window_ms); off: none, so the controller charges
  // every round the shortest window (--overlap-ms).
  bool plan_windows = true;
  // mixnet: the warm-up sweep before the timed iterations (controller
  // --warm-paths, WorkerAgent::WarmPaths); off: the steps connect each
  // circuit pairing the first time it is lit.
  bool warm_paths = true;
  // The planner's routed search with relays (controller --routed-search, and
  // static's plan): at most this many relay splits per plan; 0: none.
  int routed_search = 0;
  // The oracle's floors of every phase's all-to-alls and the split of mixnet's
  // gap by cause (oracle_phase.h); --sweep turns it off.
  bool oracle = true;
  double timeout_s = 0;  // per phase; 0: from the run length
  // Fault injection (mixnet phase): SIGKILL the controller this long after the
  // workers start (0: never), leave it down for controller_down_s, then
  // restart it on the same state dir; the summary reports the epochs.
  double kill_controller_after_s = 0;
  double controller_down_s = 2;
};

// InvalidArgument naming the flag for bad options (before anything starts).
absl::Status ValidateOptions(const DemoOptions& o);

// This program's own path (/proc/self/exe; "mixnet-demo" if unreadable): the
// orchestrator starts its workers as "<it> worker ...".
std::string SelfExe();

// Exit code: 0 ok; 1 a phase failed or some byte was lost; 2 bad options.
int RunDemo(DemoOptions options);

// --sweep: affine share {0.25, 0.5, 0.75, 0.9} x switching {10, 25, 100} ms
// for mixnet, static and nonblocking; prints the ratio table (and, with
// --json, one object per cell). Exit code as RunDemo.
int RunSweep(DemoOptions options);

}  // namespace mixnet::demo
