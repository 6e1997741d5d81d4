// The route bench's launcher: builds every case's matrix and plans its
// circuits first (bad input fails before anything is created), brings up
// the emulated cluster once (the demo's 8-host, 3-OCS-NIC shape at its link
// rate by default; one EPS NIC and k OCS NICs per host, no circuits), then
// per case programs the case's circuits into the emulated OCS, spawns one
// worker per host in its namespace (route_worker.h), waits for them (with a
// deadline), reads their records and prints the case's rows; at the end the
// verdicts. The namespaces and the run folder are removed on every exit
// path (an error, a failed worker, SIGINT/SIGTERM). Main thread only.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "apps/demo/fabric_spec.h"

namespace mixnet::bench {

struct BenchOptions {
  std::vector<std::string> cases;
  demo::FabricShape shape;  // hosts, OCS NICs per host, link rate
  double bytes_per_host = 4 << 20;
  uint64_t seed = 1;
  std::string trace;  // for trace-l<k>
  int64_t trace_iteration = 0;
  int warmup = 1;
  int iters = 5;
  bool relay = true;                           // --relay (default on)
  std::string route_solver = "water-filling";  // --route-solver: router v2's split
  bool json = false;
  std::string prefix;  // namespace prefix; empty: "mxroute<pid>"
  double burst_ms = 1;
  int queue_frames = 400;
  std::string tcp_congestion = "cubic";
  // false: net.ipv4.tcp_slow_start_after_idle = 0 in every host namespace.
  bool slow_start_after_idle = true;
  int rto_min_ms = 0;  // hosts' minimum TCP RTO (0: the kernel's 200 ms)
  int init_cwnd = 0;   // hosts' initial TCP windows, segments (0: the kernel's 10)
  // TOS byte of the control class: the links' strict-priority queue and the
  // workers' MIXNET_CONTROL_TC (-1: neither).
  int control_tos = 0xb8;
  int case_timeout_s = 0;  // 0: from the model's prediction
  bool keep_dir = false;   // keep the run folder (worker configs and records)
  int link_ends_us = 0;    // workers sample their NICs this often for link end times (0: off)
};

// Exit code: 0 all cases ran, 1 a case failed (the cause on stderr), 2 bad
// input (nothing created).
int RunBench(const BenchOptions& options);

}  // namespace mixnet::bench
