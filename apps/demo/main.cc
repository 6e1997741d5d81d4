// mixnet-demo: the end-to-end MixNet demo (thin main). Four modes:
//   mixnet-demo [flags]                       the orchestrator (orchestrator.h)
//   mixnet-demo worker --config F --rank R    one worker (worker.h), spawned by it
//   mixnet-demo simulate --run-dir D [--json] the simulator on a kept run (replay.h)
//   mixnet-demo binaries                      the programs the orchestrator starts
//                                             at its defaults, one path a line
//                                             (scripts/demo.sh --check runs each)
// Main thread only.
#include <iostream>
#include <string>

#include "CLI/CLI.hpp"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "apps/demo/orchestrator.h"
#include "apps/demo/replay.h"
#include "apps/demo/worker.h"
#include "runtime/rendezvous/launcher_env.h"

// MIXNET_DEMO_{OCSD,CONTROLLER,PRICES}_PATH (apps/demo/CMakeLists.txt).
#include "mixnet_build_paths.h"

int main(int argc, char** argv) {
  using namespace mixnet::demo;
  if (argc > 1 && std::string(argv[1]) == "worker") {
    CLI::App app{"mixnet-demo worker: one rank of a demo phase (started by mixnet-demo)"};
    std::string config;
    int rank = -1;
    app.add_option("--config", config, "run config JSON written by the orchestrator")->required();
    app.add_option("--rank", rank,
                   "this worker's rank (= host index); default: the launcher's (mpirun, srun, "
                   "torchrun: runtime/rendezvous/launcher_env.h)");
    try {
      app.parse(argc - 1, argv + 1);
    } catch (const CLI::ParseError& e) {
      return app.exit(e) == 0 ? 0 : 2;
    }
    if (rank < 0) {
      // The worker's rendezvous is the orchestrator's, not a store.
      absl::StatusOr<mixnet::rendezvous::LaunchInfo> li = mixnet::rendezvous::LaunchFromEnvironment(
          mixnet::rendezvous::ProcessEnvironment(), mixnet::GetSettings(),
          mixnet::rendezvous::StoreNeed::kOptional);
      if (!li.ok()) {
        std::cerr << "mixnet-demo worker: no --rank: " << li.status().message() << "\n";
        return 2;
      }
      rank = li->rank;
      return RunWorker(config, rank, li->world);
    }
    return RunWorker(config, rank);
  }
  if (argc > 1 && std::string(argv[1]) == "simulate") {
    CLI::App app{
        "mixnet-demo simulate: the fabric simulator's prediction of a kept demo run (mixnet-demo "
        "--keep-dir) beside what it measured, per fabric"};
    std::string run_dir;
    bool json = false;
    app.add_option("--run-dir", run_dir, "the run dir the demo printed")->required();
    app.add_flag("--json", json, "one JSON object per fabric, then a summary");
    try {
      app.parse(argc - 1, argv + 1);
    } catch (const CLI::ParseError& e) {
      return app.exit(e) == 0 ? 0 : 2;
    }
    return RunSimulateCommand(run_dir, json);
  }
  DemoOptions o;
  o.ocsd_path = MIXNET_DEMO_OCSD_PATH;
  o.controller_path = MIXNET_DEMO_CONTROLLER_PATH;
  o.prices_path = MIXNET_DEMO_PRICES_PATH;
  if (argc == 2 && std::string(argv[1]) == "binaries") {
    // Itself (its workers are "mixnet-demo worker"), then the daemons.
    std::cout << SelfExe() << "\n" << o.ocsd_path << "\n" << o.controller_path << "\n";
    return 0;
  }
  std::string fabrics = absl::StrJoin(o.fabrics, ",");
  bool sweep = false, no_progress = false, no_oracle = false;
  CLI::App app{
      "mixnet-demo: MoE training steps (forward and backward, every all-to-all byte-checked) on "
      "five fabrics\nof one emulated cluster (as root; loopback otherwise): EPS only, an "
      "oversubscribed EPS of MixNet's cost,\nMixNet's OCS with one static topology, MixNet "
      "(OCS re-wired by mixnet-controller), and a non-blocking EPS"};
  app.add_option("--iterations", o.iterations, "training iterations per fabric")
      ->capture_default_str();
  app.add_option("--hosts", o.workload.hosts, "hosts (one worker each)")->capture_default_str();
  app.add_option("--ocs-nics", o.shape.ocs_nics, "OCS NICs per host (1..4)")->capture_default_str();
  app.add_option("--gbps", o.shape.gbps, "rate of every NIC, Gbit/s")->capture_default_str();
  app.add_option("--switch-ms", o.shape.switch_ms, "OCS switching time, ms")->capture_default_str();
  app.add_option("--burst-ms", o.burst_ms, "tbf bucket of every link, ms of its rate")
      ->capture_default_str();
  app.add_option("--queue-frames", o.queue_frames, "tbf queue of every link, full-sized frames")
      ->capture_default_str();
  app.add_option("--rto-min-ms", o.rto_min_ms,
                 "hosts' minimum TCP retransmission timeout, ms (0: the kernel's 200 ms)")
      ->capture_default_str();
  app.add_option("--init-cwnd", o.init_cwnd,
                 "hosts' initial TCP congestion and receive windows, segments (0: the kernel's "
                 "10); every new connection, e.g. on each new circuit, starts from it")
      ->capture_default_str();
  app.add_option("--tcp-congestion", o.tcp_congestion,
                 "hosts' TCP congestion control (empty: inherit the machine's)")
      ->capture_default_str();
  app.add_option("--control-tc", o.control_tos,
                 "TOS byte of the control class: every link gets a strict-priority queue for it "
                 "and the workers' control sockets use it (MIXNET_CONTROL_TC); -1: one FIFO per "
                 "link")
      ->check(CLI::Range(-1, 255))
      ->capture_default_str();
  bool no_ssai = false;
  app.add_flag("--no-slow-start-after-idle", no_ssai,
               "hosts keep TCP windows across idle gaps (net.ipv4.tcp_slow_start_after_idle=0)");
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
  app.add_option("--seed", o.workload.seed, "workload seed")->capture_default_str();
  app.add_option("--trace", o.workload.trace,
                 "token-count trace (TrafficReport JSON lines) instead of the generator");
  app.add_option("--placement", o.workload.placement,
                 "experts on hosts: round_robin (e % hosts) or contiguous (blocks, as "
                 "examples/moe_pytorch and its traces number them)")
      ->capture_default_str();
  app.add_option("--attention-ms", o.compute.attention_fwd_ms, "forward attention per layer, ms")
      ->capture_default_str();
  app.add_option("--expert-ms", o.compute.expert_fwd_ms, "forward expert compute per layer, ms")
      ->capture_default_str();
  app.add_option("--head-ms", o.compute.head_ms, "loss and head between the passes, ms")
      ->capture_default_str();
  app.add_option("--expert-bwd-ms", o.compute.expert_bwd_ms, "backward expert compute, ms")
      ->capture_default_str();
  app.add_option("--attention-bwd-ms", o.compute.attention_bwd_ms, "backward attention, ms")
      ->capture_default_str();
  app.add_option("--fabrics", fabrics,
                 std::string("comma-separated, run in this order: ") + kFabricList)
      ->capture_default_str();
  app.add_option("--leaf-hosts", o.leaf_hosts, "oversub: hosts per leaf bridge")
      ->capture_default_str();
  app.add_option("--price-gbps", o.price_gbps,
                 "oversub: the link speed whose prices make it cost what MixNet costs")
      ->capture_default_str();
  app.add_flag(
      "--oversub-every-price", o.oversub_every_price,
      "also run oversub at the cost-equal ratio of every other price row (oversub-100G, ...)");
  app.add_option("--sim-model", o.sim_model,
                 "model whose paper-scale all-to-all (the simulator's) the switching time is "
                 "compared with")
      ->capture_default_str();
  app.add_option("--prices", o.prices_path, "price file (sim/prices.yaml)")->capture_default_str();
  app.add_option("--static-iterations", o.static_iterations,
                 "static: plan from the mean matrix of this many first iterations")
      ->capture_default_str();
  app.add_option("--plan-wait-ms", o.plan_wait_ms,
                 "mixnet: longest wait of a worker for the round planned for its next all-to-all")
      ->capture_default_str();
  app.add_option("--router", o.router,
                 "mixnet and static: v1 (a pair's bytes over its circuits if any, else EPS) or v2 "
                 "(split over circuits and EPS by the plan's demand; the controller plans for it)")
      ->check(CLI::IsMember({"v1", "v2"}))
      ->capture_default_str();
  std::string relay = "on";
  app.add_option("--relay", relay,
                 "mixnet and static, router v2: plans may relay a pair's bytes through a third "
                 "host (two circuits, or one circuit and one EPS hop; the relay forwards them: "
                 "bench/relay_cost/RESULTS.md says what that costs its CPU)")
      ->check(CLI::IsMember({"on", "off"}))
      ->capture_default_str();
  app.add_option("--route-solver", o.route_solver,
                 "mixnet and static, router v2: the workers' split of a plan (and the "
                 "simulation's): water-filling (the fluid model's heuristic) or lp (the faster "
                 "in the model of it and the LP over the data plane's paths); the controller "
                 "scores circuits with the water-filling either way")
      ->check(CLI::IsMember({"water-filling", "lp"}))
      ->capture_default_str();
  std::string replan_combine = o.replan_combine ? "on" : "off";
  app.add_option("--replan-combine", replan_combine,
                 "mixnet: after each forward dispatch, ask the controller for a plan for its "
                 "combine from the dispatch's observed matrix, and await it after the expert "
                 "compute (a forecast miss then costs the dispatch alone; the answer re-splits "
                 "the combine even when no round pays)")
      ->check(CLI::IsMember({"on", "off"}))
      ->capture_default_str();
  std::string plan_windows = o.plan_windows ? "on" : "off";
  app.add_option("--plan-windows", plan_windows,
                 "mixnet: each plan request carries its window, the compute between it and the "
                 "all-to-all it plans, which the controller takes off a round's cost; off: none, "
                 "so every round is charged the shortest window (the controller's --overlap-ms)")
      ->check(CLI::IsMember({"on", "off"}))
      ->capture_default_str();
  std::string warm_paths = o.warm_paths ? "on" : "off";
  app.add_option("--warm-paths", warm_paths,
                 "mixnet: before the timed iterations the controller lights every OCS NIC pair "
                 "once (its warm-up sweep) so each worker connects its paths then; off: the "
                 "steps connect each circuit pairing the first time it is lit")
      ->check(CLI::IsMember({"on", "off"}))
      ->capture_default_str();
  app.add_option("--routed-search", o.routed_search,
                 "mixnet and static, with relays: the planner's last step searches circuit sets "
                 "scored by the relay split itself, at most this many splits per plan (the "
                 "controller's --routed-search); 0: none")
      ->check(CLI::NonNegativeNumber)
      ->capture_default_str();
  app.add_flag("--json", o.json, "one JSON object per fabric, then a summary object");
  app.add_option("--plot-dir", o.plot_dir, "write iterations.png (gnuplot) there");
  app.add_flag("--sweep", sweep,
               "affine share {0.25,0.5,0.75,0.9} x switching {10,25,100} ms for mixnet, static "
               "and nonblocking; prints the ratio table");
  app.add_flag("--no-progress", no_progress, "no progress lines on stderr");
  app.add_flag("--no-oracle", no_oracle,
               "skip the oracle's floors per phase and the split of mixnet's gap by cause");
  app.add_flag("--keep", o.keep, "leave namespaces and the run dir (debugging)");
  app.add_flag("--keep-dir", o.keep_dir,
               "leave the run dir (configs, specs, results; mixnet-demo simulate --run-dir "
               "replays it)");
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
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    return app.exit(e) == 0 ? 0 : 2;
  }
  o.progress = !no_progress;
  o.oracle = !no_oracle;
  // Relays are router v2's: with v1 the default is off, and asking for them an error.
  if (o.router != "v2") {
    if (app.count("--relay") > 0 && relay == "on") {
      std::cerr << "mixnet-demo: --relay on needs --router v2\n";
      return 2;
    }
    relay = "off";
  }
  o.relay = relay == "on";
  o.replan_combine = replan_combine == "on";
  o.plan_windows = plan_windows == "on";
  o.warm_paths = warm_paths == "on";
  o.slow_start_after_idle = !no_ssai;
  o.fabrics.clear();
  for (absl::string_view f : absl::StrSplit(fabrics, ',', absl::SkipEmpty()))
    o.fabrics.emplace_back(f);
  return sweep ? RunSweep(std::move(o)) : RunDemo(std::move(o));
}
