// `mixnet-demo [flags]`: the orchestrator. For each fabric (eps, mixnet,
// nonblocking) it brings up the cluster (emulated in network namespaces as
// root; loopback otherwise), starts mixnet-ocsd and mixnet-controller for the
// mixnet phase, spawns one worker per host, collects their per-layer timings
// and byte checks, and prints the per-iteration table and the summary.
// Runs on the main thread; SIGINT/SIGTERM end the run with a clean-up.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "apps/demo/fabric_spec.h"
#include "apps/demo/workload.h"

namespace mixnet::demo {

struct DemoOptions {
  WorkloadOptions workload;
  FabricShape shape;  // shape.hosts is taken from workload.hosts
  int64_t iterations = 20;
  double compute_ms = 200;  // hides a reconfiguration round (~50-250 ms here)
  std::vector<std::string> fabrics = {"eps", "mixnet", "nonblocking"};
  bool json = false;
  bool keep = false;      // leave namespaces and the run dir
  bool loopback = false;  // force loopback mode even as root
  std::string prefix;     // namespace prefix stem (default "mxdemo<pid>")
  std::string ocsd_path;
  std::string controller_path;
  std::string planner = "improved";
  std::string predictor = "last";
  int prepare_deadline_ms = 2000;
  double timeout_s = 0;  // per phase; 0: from the run length
  // Fault injection (mixnet phase): SIGKILL the controller this long after the
  // workers start (0: never), leave it down for controller_down_s, then
  // restart it on the same state dir; the summary reports the epochs.
  double kill_controller_after_s = 0;
  double controller_down_s = 2;
};

// Exit code: 0 ok; 1 a phase failed or some byte was lost; 2 bad options.
int RunDemo(DemoOptions options);

}  // namespace mixnet::demo
