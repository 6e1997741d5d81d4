// mixnet-demo: the end-to-end MixNet demo (thin main). Two modes:
//   mixnet-demo [flags]                       the orchestrator (orchestrator.h)
//   mixnet-demo worker --config F --rank R    one worker (worker.h), spawned by it
// Main thread only.
#include <iostream>
#include <string>

#include "CLI/CLI.hpp"
#include "absl/strings/str_split.h"
#include "apps/demo/orchestrator.h"
#include "apps/demo/worker.h"

#ifndef MIXNET_DEMO_OCSD_PATH
#define MIXNET_DEMO_OCSD_PATH ""
#endif
#ifndef MIXNET_DEMO_CONTROLLER_PATH
#define MIXNET_DEMO_CONTROLLER_PATH ""
#endif

int main(int argc, char** argv) {
  using namespace mixnet::demo;
  if (argc > 1 && std::string(argv[1]) == "worker") {
    CLI::App app{"mixnet-demo worker: one rank of a demo phase (started by mixnet-demo)"};
    std::string config;
    int rank = -1;
    app.add_option("--config", config, "run config JSON written by the orchestrator")->required();
    app.add_option("--rank", rank, "this worker's rank (= host index)")->required();
    try {
      app.parse(argc - 1, argv + 1);
    } catch (const CLI::ParseError& e) {
      return app.exit(e) == 0 ? 0 : 2;
    }
    return RunWorker(config, rank);
  }
  DemoOptions o;
  o.ocsd_path = MIXNET_DEMO_OCSD_PATH;
  o.controller_path = MIXNET_DEMO_CONTROLLER_PATH;
  std::string fabrics = "eps,mixnet,nonblocking";
  CLI::App app{
      "mixnet-demo: MoE all-to-all on three fabrics of one emulated cluster (as root; loopback "
      "otherwise):\n"
      "EPS only, MixNet (OCS reconfigured by mixnet-controller), and a non-blocking EPS reference"};
  app.add_option("--iterations", o.iterations, "training iterations per fabric")
      ->capture_default_str();
  app.add_option("--hosts", o.workload.hosts, "hosts (one worker each)")->capture_default_str();
  app.add_option("--ocs-nics", o.shape.ocs_nics, "OCS NICs per host (1..4)")->capture_default_str();
  app.add_option("--gbps", o.shape.gbps, "rate of every NIC, Gbit/s")->capture_default_str();
  app.add_option("--switch-ms", o.shape.switch_ms, "OCS switching time, ms")->capture_default_str();
  app.add_option("--layers", o.workload.layers, "MoE layers")->capture_default_str();
  app.add_option("--experts-per-host", o.workload.experts_per_host, "experts per host")
      ->capture_default_str();
  app.add_option("--tokens", o.workload.tokens, "tokens per rank per layer (top-1)")
      ->capture_default_str();
  app.add_option("--token-bytes", o.workload.token_bytes, "bytes per token")->capture_default_str();
  app.add_option("--affine-share", o.workload.affine_share,
                 "share of a host's tokens for its affine host")
      ->capture_default_str();
  app.add_option("--drift-every", o.workload.drift_every, "iterations between popularity drifts")
      ->capture_default_str();
  app.add_option("--compute-ms", o.compute_ms, "simulated compute per layer, ms")
      ->capture_default_str();
  app.add_option("--seed", o.workload.seed, "workload seed")->capture_default_str();
  app.add_option("--trace", o.workload.trace,
                 "token-count trace (TrafficReport JSON lines) instead of the generator");
  app.add_option("--fabrics", fabrics, "comma-separated: eps,mixnet,nonblocking")
      ->capture_default_str();
  app.add_flag("--json", o.json, "last line: one JSON object with the summary");
  app.add_flag("--keep", o.keep, "leave namespaces and the run dir (debugging)");
  app.add_flag("--loopback", o.loopback, "loopback mode even as root (times not meaningful)");
  app.add_option("--prefix", o.prefix, "namespace prefix stem ([a-z0-9_], default mxdemo<pid>)");
  app.add_option("--ocsd", o.ocsd_path, "mixnet-ocsd binary")->capture_default_str();
  app.add_option("--controller", o.controller_path, "mixnet-controller binary")
      ->capture_default_str();
  app.add_option("--planner", o.planner, "controller planner: improved | greedy")
      ->capture_default_str();
  app.add_option("--predictor", o.predictor, "controller predictor: last | ewma | share_trend")
      ->capture_default_str();
  app.add_option("--prepare-deadline-ms", o.prepare_deadline_ms, "controller PREPARE deadline")
      ->capture_default_str();
  app.add_option("--kill-controller-after-s", o.kill_controller_after_s,
                 "fault injection: SIGKILL mixnet-controller this long into the mixnet phase, "
                 "restart it after --controller-down-s")
      ->capture_default_str();
  app.add_option("--controller-down-s", o.controller_down_s,
                 "how long the killed controller stays down")
      ->capture_default_str();
  app.add_option("--timeout-s", o.timeout_s, "per-phase limit (0: from the run length)")
      ->capture_default_str();
  CLI11_PARSE(app, argc, argv);
  o.fabrics.clear();
  for (absl::string_view f : absl::StrSplit(fabrics, ',', absl::SkipEmpty()))
    o.fabrics.emplace_back(f);
  return RunDemo(std::move(o));
}
