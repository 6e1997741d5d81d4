// mixnet_route_bench: router v1 against router v2 on the emulated cluster,
// per traffic matrix (uniform, Zipf, expert8, hot experts, partner shares,
// a recorded trace): the same circuits (planned for the matrix) under both
// routers, run back to back, each with its measured time, the fluid model's
// prediction and the floor of its links. Needs root. The launcher
// (route_orchestrator.h) runs on the main thread; `worker` (hidden) is one
// rank of one case, spawned by it in a host's namespace (route_worker.h).
#include <iostream>

#include "CLI/CLI.hpp"
#include "absl/strings/str_cat.h"
#include "bench/route_bench/route_cases.h"
#include "bench/route_bench/route_orchestrator.h"
#include "bench/route_bench/route_worker.h"
#include "mixnet_build_paths.h"  // MIXNET_ROUTE_BENCH_TRACE

int main(int argc, char** argv) {
  using namespace mixnet::bench;
  BenchOptions o;
  std::string cases = kDefaultCases;
  std::string relay = "on";
  o.trace = MIXNET_ROUTE_BENCH_TRACE;
  CLI::App app{
      "mixnet_route_bench: router v1 vs v2 on the emulated cluster (root): per traffic matrix "
      "the measured\nall-to-all time, the fluid model's prediction and the links' floor, "
      "both routers on the circuits\nthe planner picks for the matrix"};
  app.add_option("--cases", cases,
                 "comma list: uniform, zipf, expert8, hot-experts, "
                 "partner-<share>, trace-l<layer>")
      ->capture_default_str();
  app.add_option("--hosts", o.shape.hosts, "hosts (one worker each)")->capture_default_str();
  app.add_option("--ocs-nics", o.shape.ocs_nics, "OCS NICs per host (1..4)")->capture_default_str();
  app.add_option("--gbps", o.shape.gbps, "rate of every NIC, Gbit/s")->capture_default_str();
  app.add_option("--bytes-per-host", o.bytes_per_host,
                 "bytes one host sends per all-to-all (mean over hosts)")
      ->capture_default_str();
  app.add_option("--iters", o.iters,
                 "timed iterations per case (each: every router twice, cold then warm)")
      ->capture_default_str();
  app.add_option("--warmup", o.warmup, "untimed iterations per case first")->capture_default_str();
  app.add_option("--relay", relay,
                 "router v2 may relay through a third host (the plan's relay flag and the "
                 "model's)")
      ->check(CLI::IsMember({"on", "off"}))
      ->capture_default_str();
  app.add_option("--route-solver", o.route_solver,
                 "router v2's split in the workers and the model: water-filling or lp (the "
                 "faster in the model of it and the LP over the data plane's paths)")
      ->check(CLI::IsMember({"water-filling", "lp"}))
      ->capture_default_str();
  app.add_option("--seed", o.seed, "seed of the generated matrices and the payload")
      ->capture_default_str();
  app.add_option("--trace", o.trace, "token-count trace for the trace-l<k> cases")
      ->capture_default_str();
  app.add_option("--trace-iteration", o.trace_iteration, "iteration of the trace to take")
      ->capture_default_str();
  app.add_option("--burst-ms", o.burst_ms, "tbf bucket of every link, ms of its rate")
      ->capture_default_str();
  app.add_option("--queue-frames", o.queue_frames, "tbf queue of every link, full-sized frames")
      ->capture_default_str();
  app.add_option("--tcp-congestion", o.tcp_congestion,
                 "hosts' TCP congestion control (empty: inherit the machine's)")
      ->capture_default_str();
  app.add_option("--rto-min-ms", o.rto_min_ms,
                 "hosts' minimum TCP retransmission timeout, ms (0: the kernel's 200 ms)")
      ->capture_default_str();
  app.add_option("--init-cwnd", o.init_cwnd,
                 "hosts' initial TCP congestion and receive windows, segments (0: the kernel's "
                 "10)")
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
  app.add_option("--prefix", o.prefix, "namespace prefix (default mxroute<pid>)");
  app.add_option("--case-timeout-s", o.case_timeout_s,
                 "deadline of one case's workers (0: from the model's prediction)")
      ->capture_default_str();
  app.add_flag("--json", o.json, "one JSON object per line instead of the table");
  app.add_option("--link-ends-us", o.link_ends_us,
                 "workers sample their NICs' counters this often (us) and record when each link "
                 "moved 99% of its bytes (0: off; figures in the records, with --keep-dir)")
      ->capture_default_str();
  app.add_flag("--keep-dir", o.keep_dir, "keep the run folder (configs, records)");

  std::string config;
  int rank = -1;
  CLI::App* worker = app.add_subcommand("worker", "")->group("");
  worker->add_option("--config", config)->required();
  worker->add_option("--rank", rank)->required();
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    const int rc = app.exit(e);
    return rc == 0 ? 0 : 2;
  }
  if (worker->parsed()) return RunRouteWorker(config, rank);
  o.slow_start_after_idle = !no_ssai;
  absl::StatusOr<std::vector<std::string>> list = ParseCaseList(cases);
  if (!list.ok()) {
    std::cerr << "mixnet_route_bench: " << list.status() << "\n";
    return 2;
  }
  o.cases = *std::move(list);
  o.relay = relay == "on";
  return RunBench(o);
}
