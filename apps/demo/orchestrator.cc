// The demo orchestrator (see orchestrator.h). Phase by phase: spec file ->
// fabric up -> (mixnet: mixnet-ocsd, mixnet-controller) -> workers -> wait ->
// reconfiguration count (controller GetStatus) -> stop everything -> fabric
// down -> read the workers' result files. Then the report.
#include "apps/demo/orchestrator.h"

#include <signal.h>
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <memory>

#include "absl/strings/str_cat.h"
#include "apps/demo/baselines.h"
#include "apps/demo/children.h"
#include "apps/demo/oracle_phase.h"
#include "apps/demo/phase_result.h"
#include "apps/demo/report.h"
#include "apps/demo/run_config.h"
#include "apps/demo/simulation.h"
#include "apps/demo/step.h"
#include "emulation/emulated_fabric.h"
#include "grpcpp/grpcpp.h"
#include "mixnet/control/v1/controller.grpc.pb.h"
#include "nlohmann/json.hpp"
#include "runtime/common/log.h"
#include "runtime/common/settings.h"
#include "runtime/common/status.h"
#include "runtime/planner/cluster_planner.h"
#include "sim/config.h"
#include "sim/cost_model.h"

namespace mixnet::demo {
namespace {

void OnSignal(int) { g_interrupted = true; }

absl::Status WriteFile(const std::string& path, const std::string& text) {
  std::ofstream out(path);
  out << text;
  out.close();
  if (!out) return absl::InternalError(absl::StrCat("cannot write ", path));
  return absl::OkStatus();
}

// Controller GetStatus: rounds committed / aborted / skipped over all regions.
absl::Status ReadControllerStatus(const std::string& target, PhaseResult& r) {
  auto channel = grpc::CreateChannel(target, grpc::InsecureChannelCredentials());
  auto stub = control::v1::Controller::NewStub(channel);
  grpc::ClientContext ctx;
  ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(5));
  control::v1::GetStatusRequest req;
  control::v1::ControllerStatus st;
  grpc::Status s = stub->GetStatus(&ctx, req, &st);
  if (!s.ok()) {
    return absl::UnavailableError(
        absl::StrCat("mixnet-controller at ", target, ": GetStatus: ", s.error_message()));
  }
  r.reconfigurations = 0;
  r.rounds_aborted = 0;
  r.rounds_skipped = 0;
  r.highest_epoch = st.highest_epoch();
  r.round_ms = r.round_overhead_ms = 0;
  r.round_samples = 0;
  r.round_phases.clear();
  r.warm_rounds = 0;
  r.warm_ms = r.warm_round_overhead_ms = 0;
  for (const auto& region : st.regions()) {
    r.warm_rounds += static_cast<int64_t>(region.warm_rounds());
    r.warm_ms = std::max(r.warm_ms, region.warm_ms());
    r.warm_round_overhead_ms =
        std::max(r.warm_round_overhead_ms, region.warm_round_overhead_ms_p50());
    r.reconfigurations += static_cast<int64_t>(region.rounds_committed());
    r.rounds_aborted += static_cast<int64_t>(region.rounds_aborted());
    r.rounds_skipped += static_cast<int64_t>(region.rounds_skipped());
    // One region in the demo; with more, the slowest region's rounds.
    r.round_ms = std::max(r.round_ms, region.round_ms_p50());
    r.round_overhead_ms = std::max(r.round_overhead_ms, region.round_overhead_ms_p50());
    r.round_samples += static_cast<int64_t>(region.round_samples());
    // One region in the demo; with more, the first region's phases.
    if (r.round_phases.empty()) {
      for (const auto& ph : region.round_phases()) {
        r.round_phases.push_back({ph.name(), ph.p50_ms(), ph.p99_ms()});
      }
    }
  }
  return absl::OkStatus();
}

// The controller's round times beside the workers' results, for
// `mixnet-demo simulate` on the kept run dir (ReadResults reads it back).
absl::Status WriteControllerTimes(const RunConfig& c, const PhaseResult& r) {
  return WriteFile(c.results_dir + "/" + std::string(kControllerTimesFile),
                   nlohmann::json{{"round_ms", r.round_ms},
                                  {"round_overhead_ms", r.round_overhead_ms},
                                  {"round_samples", r.round_samples},
                                  {"warm_rounds", r.warm_rounds},
                                  {"warm_round_overhead_ms", r.warm_round_overhead_ms}}
                           .dump() +
                       "\n");
}

// Bytes every all-to-all of the run moves, summed (4 per layer per iteration).
uint64_t ExpectedBytes(const Workload& w, int64_t iterations) {
  uint64_t total = 0;
  for (int64_t it = 0; it < iterations; ++it) {
    for (int l = 0; l < w.layers(); ++l) {
      for (size_t b : w.DispatchBytes(it, l)) total += 4 * b;
    }
  }
  return total;
}

// The static fabric's circuits: the planner's topology for the mean of the
// first `first` iterations' matrices (every layer, both directions), planned
// once as if from a profiling run.
// The static fabric's one topology, and the mean matrix it was planned from
// (host order, row-major).
struct StaticPlan {
  std::vector<cluster::CircuitSpec> circuits;
  std::vector<double> demand;
};

absl::StatusOr<StaticPlan> StaticCircuits(const DemoOptions& o, const Workload& w) {
  ASSIGN_OR_RETURN(cluster::ClusterSpec spec,
                   cluster::ClusterSpec::Parse(FabricSpecYaml(FabricKind::kMixnet, o.shape),
                                               "static fabric spec"));
  ASSIGN_OR_RETURN(planner::ClusterPlanner cp,
                   planner::ClusterPlanner::Create(spec, o.shape.ocs_nics));
  const int n = w.hosts();
  TrafficMatrix mean(n);
  const int64_t first = std::max<int64_t>(1, std::min<int64_t>(o.static_iterations, o.iterations));
  const double scale = 1.0 / (2.0 * static_cast<double>(first) * w.layers());
  for (int64_t it = 0; it < first; ++it) {
    for (int l = 0; l < w.layers(); ++l) {
      const std::vector<size_t> d = w.DispatchBytes(it, l);
      for (int s = 0; s < n; ++s) {
        for (int t = 0; t < n; ++t) {
          if (s == t) continue;
          mean.Add(s, t, scale * static_cast<double>(d[s * n + t] + d[t * n + s]));
        }
      }
    }
  }
  planner::PlannerOptions po;
  po.algorithm =
      o.planner == "greedy" ? planner::Algorithm::kGreedy : planner::Algorithm::kImproved;
  po.circuit_only = o.router == "v1";  // score the routing the workers run
  po.relay = o.router == "v2" && o.relay;
  po.relay_chunk_bytes = static_cast<double>(GetSettings().relay_chunk_bytes);  // the workers'
  po.routed_search_evaluations = o.routed_search;
  planner::DecideOptions decide;
  decide.switch_s = 0;
  ASSIGN_OR_RETURN(planner::ClusterDecision d,
                   cp.Plan({mean}, std::vector<cluster::CircuitSpec>{}, po, decide));
  return StaticPlan{d.circuits, mean.data()};
}

class Demo {
 public:
  Demo(DemoOptions o, Workload w, std::string run_dir, OversubInfo oversub, StaticPlan static_plan)
      : o_(std::move(o)),
        w_(std::move(w)),
        run_dir_(std::move(run_dir)),
        oversub_(oversub),
        static_circuits_(std::move(static_plan.circuits)),
        static_demand_(std::move(static_plan.demand)),
        expected_(ExpectedBytes(w_, o_.iterations)) {}

  // `row`: an oversub phase at another price row's ratio (named after it).
  PhaseResult RunPhase(FabricKind kind, const OversubRow* row = nullptr) {
    PhaseResult r;
    r.fabric = row != nullptr ? OversubRowName(row->price_gbps) : std::string(FabricName(kind));
    r.ran = true;
    r.bytes_expected = expected_;
    Children children;
    std::unique_ptr<emulation::EmulatedFabric> fabric;
    r.status =
        Phase(kind, row != nullptr ? row->uplink_gbps : oversub_.uplink_gbps, children, fabric, r);
    children.KillAll();
    if (fabric != nullptr) {
      if (o_.keep) {
        fabric->Release();
        std::printf("# --keep: namespaces of the %s phase left under prefix %s\n", r.fabric.c_str(),
                    fabric->prefix().c_str());
      } else if (absl::Status s = fabric->Down(); !s.ok()) {
        log::Warn("{} fabric down: {}", r.fabric, s.ToString());
      }
    }
    return r;
  }

 private:
  absl::Status Phase(FabricKind kind, double oversub_uplink_gbps, Children& children,
                     std::unique_ptr<emulation::EmulatedFabric>& fabric, PhaseResult& r) {
    const std::string name(FabricName(kind));
    const std::string dir = absl::StrCat(run_dir_, "/", r.fabric);
    std::error_code ec;
    std::filesystem::create_directories(dir + "/results", ec);
    std::filesystem::create_directories(dir + "/store", ec);
    if (ec) return absl::InternalError(absl::StrCat("mkdir ", dir, ": ", ec.message()));
    FabricShape shape = o_.shape;
    shape.loopback = o_.loopback;
    RunConfig c;
    c.workload = w_.options();
    c.compute = o_.compute;
    c.fabric = name;
    c.iterations = o_.iterations;
    c.spec_path = dir + "/spec.yaml";
    c.store = "file:" + dir + "/store";
    c.results_dir = dir + "/results";
    c.plan_wait_ms = o_.plan_wait_ms;
    c.progress = o_.progress;
    c.counters = !o_.loopback;
    c.burst_ms = o_.burst_ms;
    c.router = o_.router;
    if (kind == FabricKind::kStatic && o_.router == "v2") c.static_demand = static_demand_;
    c.relay = o_.relay;
    c.route_solver = o_.route_solver;
    c.replan_combine = kind == FabricKind::kMixnet && o_.replan_combine;
    c.plan_windows = o_.plan_windows;
    c.warm_paths = o_.warm_paths;
    c.switch_ms = shape.switch_ms;
    c.leaf_hosts = kind == FabricKind::kOversub ? o_.leaf_hosts : 0;
    c.uplink_gbps = kind == FabricKind::kOversub ? oversub_uplink_gbps : 0;
    c.loopback = o_.loopback;
    RETURN_IF_ERROR(WriteFile(c.spec_path, FabricSpecYaml(kind, shape, static_circuits_)));
    ASSIGN_OR_RETURN(cluster::ClusterSpec spec, cluster::ClusterSpec::LoadFile(c.spec_path));
    double uplink_gbps = 0;
    if (!o_.loopback) {
      emulation::EmulationOptions eo;
      eo.burst_ms = o_.burst_ms;
      eo.queue_frames = o_.queue_frames;
      eo.rto_min_ms = static_cast<uint32_t>(o_.rto_min_ms);
      eo.init_cwnd = static_cast<uint32_t>(o_.init_cwnd);
      eo.slow_start_after_idle = o_.slow_start_after_idle;
      eo.tcp_congestion = o_.tcp_congestion;
      eo.control_tos = o_.control_tos;
      // The workers inherit it: their control sockets use the links' class.
      setenv("MIXNET_CONTROL_TC", std::to_string(o_.control_tos).c_str(), 1);
      if (kind == FabricKind::kOversub) {
        eo.leaf_hosts = o_.leaf_hosts;
        eo.uplink_gbps = uplink_gbps = oversub_uplink_gbps;
      }
      // Two letters per phase: "ov" for the primary oversub phase, "o1",
      // "o2", ... for the other price rows (their namespaces may be --kept).
      const std::string tag =
          r.fabric == name ? name.substr(0, 2) : absl::StrCat("o", ++oversub_rows_run_);
      const std::string prefix = absl::StrCat(prefix_stem(), tag);
      ASSIGN_OR_RETURN(fabric, emulation::EmulatedFabric::Up(spec, prefix, eo));
      if (kind == FabricKind::kOversub) {
        c.uplink_netns = fabric->EpsNamespace();
        c.uplinks = fabric->UplinkNames();
      }
    }
    const std::string ctl_target = absl::StrCat("unix:", dir, "/ctl.sock");
    if (kind == FabricKind::kMixnet) {
      RETURN_IF_ERROR(StartDaemons(children, fabric.get(), shape, dir, c.spec_path, ctl_target));
      c.controller = ctl_target;
    }
    const std::string config = dir + "/config.json";
    RETURN_IF_ERROR(WriteFile(config, c.ToJson()));
    std::vector<std::string> workers;
    for (int rank = 0; rank < w_.hosts(); ++rank) {
      const std::string host = Workload::HostName(rank);
      workers.push_back(absl::StrCat(r.fabric, " worker ", rank, " (", host, ")"));
      RETURN_IF_ERROR(children.Spawn(
          workers.back(), fabric ? fabric->HostNamespace(host) : "",
          {SelfExe(), "worker", "--config", config, "--rank", std::to_string(rank)}));
    }
    const double auto_timeout =
        90 + static_cast<double>(o_.iterations) *
                 (o_.compute.PerIterationMs(w_.layers()) / 1000 + 4.0 * w_.layers());
    const absl::Duration timeout = absl::Seconds(o_.timeout_s > 0 ? o_.timeout_s : auto_timeout);
    const absl::Time phase_deadline = absl::Now() + timeout;
    absl::Status waited;
    if (kind == FabricKind::kMixnet && o_.kill_controller_after_s > 0) {
      waited = KillAndRestartController(children, workers, ctl_target, dir, r);
    }
    if (waited.ok()) waited = children.WaitAll(phase_deadline - absl::Now(), workers);
    if (!waited.ok() && !absl::IsCancelled(waited)) {
      // One worker failed: the others follow (their peer is gone) or hang
      // until their own timeouts; give them a moment, then name the earliest
      // failure any of them recorded, which is the cause, not a victim.
      (void)children.WaitAll(absl::Seconds(5), workers);
      const std::string first = FirstFailure(c, w_.hosts());
      if (!first.empty())
        waited = absl::Status(waited.code(), absl::StrCat(first, " [", waited.message(), "]"));
    }
    if (kind == FabricKind::kMixnet) {
      if (absl::Status s = ReadControllerStatus(ctl_target, r); !s.ok()) {
        log::Warn("{}", s.ToString());
        if (waited.ok()) waited = s;
      } else if (absl::Status w = WriteControllerTimes(c, r); !w.ok()) {
        log::Warn("{}", w.ToString());
      }
      if (r.controller_killed) r.reconfigurations += r.rounds_before_kill;
      children.Stop("mixnet-controller");
      children.Stop("mixnet-controller (restarted)");
      children.Stop("mixnet-ocsd");
    }
    absl::Status read = ReadResults(c, spec, uplink_gbps, r);
    if (!waited.ok()) return Annotate(waited, absl::StrCat(r.fabric, " phase"));
    // The same prediction `mixnet-demo simulate` makes from the run dir.
    if (read.ok()) SimulatePhase(SimulationOf(kind, c), spec, w_, r);
    if (read.ok() && o_.oracle) OraclePhase(kind, c.loopback, spec, w_, oracle_cache_, r);
    return read;
  }

  absl::Status StartDaemons(Children& children, emulation::EmulatedFabric* fabric,
                            const FabricShape& shape, const std::string& dir,
                            const std::string& spec_path, const std::string& ctl_target) {
    if (o_.controller_path.empty() || o_.ocsd_path.empty()) {
      return absl::UnimplementedError(
          "mixnet phase not available: mixnet-controller / mixnet-ocsd not built (give "
          "--controller / --ocsd)");
    }
    const std::string ocsd_target = absl::StrCat("unix:", dir, "/ocsd.sock");
    std::vector<std::string> ocsd = {o_.ocsd_path,
                                     "--backend",
                                     fabric == nullptr ? "sim" : "netns",
                                     "--ports",
                                     std::to_string(shape.hosts * shape.ocs_nics),
                                     "--switch-ms",
                                     absl::StrCat(shape.switch_ms),
                                     "--listen",
                                     ocsd_target,
                                     "--state-dir",
                                     dir + "/ocsd-state",
                                     "--ready-file",
                                     dir + "/ocsd.ready"};
    if (fabric != nullptr) ocsd.insert(ocsd.end(), {"--netns", fabric->OcsNamespace()});
    RETURN_IF_ERROR(children.Spawn("mixnet-ocsd", "", ocsd));
    RETURN_IF_ERROR(WaitForFile(dir + "/ocsd.ready", absl::Seconds(20), children, "mixnet-ocsd"));
    ctl_argv_ = {o_.controller_path,
                 "--spec",
                 spec_path,
                 "--listen",
                 ctl_target,
                 "--ocs",
                 "ocs0=" + ocsd_target,
                 "--state-dir",
                 dir + "/ctl-state",
                 "--ready-file",
                 dir + "/ctl.ready",
                 "--planner",
                 o_.planner,
                 "--predictor",
                 o_.predictor,
                 "--router",
                 o_.router,
                 "--relay",
                 o_.relay ? "on" : "off",
                 "--prepare-deadline-ms",
                 std::to_string(o_.prepare_deadline_ms),
                 "--routed-search",
                 std::to_string(o_.routed_search),
                 "--warm-paths",
                 o_.warm_paths ? "on" : "off"};
    // The compute every round can hide behind (step.h).
    ctl_argv_.insert(ctl_argv_.end(),
                     {"--overlap-ms", absl::StrCat(ShortestPlanWindowMs(w_.layers(), o_.compute,
                                                                        o_.replan_combine))});
    RETURN_IF_ERROR(children.Spawn("mixnet-controller", "", ctl_argv_));
    return WaitForFile(dir + "/ctl.ready", absl::Seconds(20), children, "mixnet-controller");
  }

  // --kill-controller-after-s: SIGKILL the controller mid-run, keep it down,
  // restart it on the same state dir; the workers must run on meanwhile.
  absl::Status KillAndRestartController(Children& children, const std::vector<std::string>& workers,
                                        const std::string& ctl_target, const std::string& dir,
                                        PhaseResult& r) {
    absl::Status early = children.WaitAll(absl::Seconds(o_.kill_controller_after_s), workers);
    if (!absl::IsDeadlineExceeded(early)) {
      return early.ok() ? absl::FailedPreconditionError(
                              "--kill-controller-after-s: the workers finished before the kill; "
                              "give more --iterations or an earlier kill")
                        : early;
    }
    PhaseResult before;
    RETURN_IF_ERROR(ReadControllerStatus(ctl_target, before));
    r.epoch_before_kill = before.highest_epoch;
    r.rounds_before_kill = before.reconfigurations;
    children.Stop("mixnet-controller", absl::ZeroDuration());  // SIGTERM then SIGKILL at once
    r.controller_killed = true;
    r.outage_from_ms = absl::ToUnixMicros(absl::Now()) / 1000.0;
    log::Info("demo: killed mixnet-controller at epoch {}; down for {} s", r.epoch_before_kill,
              o_.controller_down_s);
    absl::Status during = children.WaitAll(absl::Seconds(o_.controller_down_s), workers);
    if (!absl::IsDeadlineExceeded(during)) {
      return during.ok() ? absl::FailedPreconditionError(
                               "--kill-controller-after-s: the workers finished while the "
                               "controller was down; give more --iterations")
                         : Annotate(during, "while the controller was down");
    }
    r.workers_ran_through_outage = true;
    r.outage_to_ms = absl::ToUnixMicros(absl::Now()) / 1000.0;
    std::filesystem::remove(dir + "/ctl.ready");  // SIGKILL left it behind
    std::filesystem::remove(dir + "/ctl.sock");
    RETURN_IF_ERROR(children.Spawn("mixnet-controller (restarted)", "", ctl_argv_));
    RETURN_IF_ERROR(WaitForFile(dir + "/ctl.ready", absl::Seconds(20), children,
                                "mixnet-controller (restarted)"));
    PhaseResult after;
    RETURN_IF_ERROR(ReadControllerStatus(ctl_target, after));
    r.epoch_after_restart = after.highest_epoch;
    log::Info("demo: mixnet-controller restarted at epoch {}", r.epoch_after_restart);
    return absl::OkStatus();
  }

  std::string prefix_stem() const {
    return o_.prefix.empty() ? absl::StrCat("mxdemo", getpid()) : o_.prefix;
  }

  const DemoOptions o_;
  const Workload w_;
  const std::string run_dir_;
  const OversubInfo oversub_;
  const std::vector<cluster::CircuitSpec> static_circuits_;
  const std::vector<double> static_demand_;
  const uint64_t expected_;
  OracleCache oracle_cache_;  // best-floor searches, shared by the phases
  int oversub_rows_run_ = 0;
  std::vector<std::string> ctl_argv_;
};

}  // namespace

absl::Status ValidateOptions(const DemoOptions& o) {
  auto bad = [](const std::string& m) { return absl::InvalidArgumentError(m); };
  if (o.iterations < 1) return bad(absl::StrCat("--iterations ", o.iterations, ": need >= 1"));
  if (o.shape.ocs_nics < 1 || o.shape.ocs_nics > 4) {
    return bad(absl::StrCat("--ocs-nics ", o.shape.ocs_nics, ": need 1..4"));
  }
  if (!(o.shape.gbps > 0) || !std::isfinite(o.shape.gbps)) {
    return bad(absl::StrCat("--gbps ", o.shape.gbps, ": need > 0"));
  }
  if (!(o.shape.switch_ms >= 0) || !std::isfinite(o.shape.switch_ms)) {
    return bad(absl::StrCat("--switch-ms ", o.shape.switch_ms, ": need >= 0"));
  }
  if (!(o.burst_ms > 0) || !std::isfinite(o.burst_ms)) {
    return bad(absl::StrCat("--burst-ms ", o.burst_ms, ": need > 0"));
  }
  if (o.queue_frames < 1 || o.queue_frames > 100000) {
    return bad(absl::StrCat("--queue-frames ", o.queue_frames, ": need 1..100000"));
  }
  if (o.rto_min_ms < 0 || o.rto_min_ms > 200) {
    return bad(absl::StrCat("--rto-min-ms ", o.rto_min_ms, ": need 0 (kernel default) .. 200"));
  }
  if (o.init_cwnd < 0 || o.init_cwnd > 1000) {
    return bad(absl::StrCat("--init-cwnd ", o.init_cwnd, ": need 0 (kernel default) .. 1000"));
  }
  if (o.workload.tokens < 1)
    return bad(absl::StrCat("--tokens ", o.workload.tokens, ": need >= 1"));
  const bool oversub = std::find(o.fabrics.begin(), o.fabrics.end(), "oversub") != o.fabrics.end();
  if (oversub && (o.leaf_hosts < 1 || o.leaf_hosts >= o.workload.hosts)) {
    return bad(absl::StrCat("--leaf-hosts ", o.leaf_hosts, ": need 1..", o.workload.hosts - 1,
                            " (at least two leaves)"));
  }
  if (o.static_iterations < 1) {
    return bad(absl::StrCat("--static-iterations ", o.static_iterations, ": need >= 1"));
  }
  if (o.plan_wait_ms < 0 || o.prepare_deadline_ms < 1 || o.timeout_s < 0 ||
      o.kill_controller_after_s < 0 || o.controller_down_s < 0) {
    return bad(
        "--plan-wait-ms, --prepare-deadline-ms, --timeout-s and the fault times must not "
        "be negative");
  }
  RETURN_IF_ERROR(o.compute.Validate());
  for (const std::string& f : o.fabrics) {
    if (!ParseFabric(f)) {
      return bad(absl::StrCat("unknown fabric '", f, "' (", kFabricList, ")"));
    }
  }
  if (o.fabrics.empty()) return bad(absl::StrCat("--fabrics: none given (", kFabricList, ")"));
  if (o.planner != "improved" && o.planner != "greedy") {
    return bad(absl::StrCat("--planner ", o.planner, ": improved or greedy"));
  }
  return absl::OkStatus();
}

namespace {

int RunPhases(const DemoOptions& o, const Workload& w, const OversubInfo& oversub,
              std::vector<PhaseResult>& phases) {
  std::vector<FabricKind> kinds;
  for (const std::string& f : o.fabrics) kinds.push_back(*ParseFabric(f));
  StaticPlan static_plan;
  if (std::find(kinds.begin(), kinds.end(), FabricKind::kStatic) != kinds.end()) {
    absl::StatusOr<StaticPlan> c = StaticCircuits(o, w);
    if (!c.ok()) {
      std::fprintf(stderr, "mixnet-demo: static topology: %s\n", c.status().ToString().c_str());
      return 1;
    }
    static_plan = *std::move(c);
  }
  char tmpl[] = "/tmp/mixnet-demo-XXXXXX";
  if (mkdtemp(tmpl) == nullptr) {
    std::fprintf(stderr, "mixnet-demo: mkdtemp /tmp/mixnet-demo-XXXXXX: %s\n",
                 ErrnoText(errno).c_str());
    return 1;
  }
  const std::string run_dir = tmpl;
  Demo demo(o, w, run_dir, oversub, std::move(static_plan));
  for (FabricKind k : kinds) {
    if (g_interrupted) break;
    std::fprintf(stderr, "# running the %s phase...\n", std::string(FabricName(k)).c_str());
    phases.push_back(demo.RunPhase(k));
    if (!phases.back().status.ok()) {
      std::fprintf(stderr, "mixnet-demo: %s\n", phases.back().status.ToString().c_str());
    }
    if (k != FabricKind::kOversub) continue;
    for (const OversubRow& row : oversub.other_rows) {
      if (g_interrupted) break;
      std::fprintf(stderr, "# running the %s phase...\n", OversubRowName(row.price_gbps).c_str());
      phases.push_back(demo.RunPhase(k, &row));
      if (!phases.back().status.ok()) {
        std::fprintf(stderr, "mixnet-demo: %s\n", phases.back().status.ToString().c_str());
      }
    }
  }
  if (o.keep || o.keep_dir) {
    std::printf("# %s: run dir %s left in place\n", o.keep ? "--keep" : "--keep-dir",
                run_dir.c_str());
  } else {
    std::error_code ec;
    std::filesystem::remove_all(run_dir, ec);
  }
  const size_t oversub_rows =
      std::count(kinds.begin(), kinds.end(), FabricKind::kOversub) * oversub.other_rows.size();
  bool ok = !g_interrupted && phases.size() == kinds.size() + oversub_rows;
  for (const PhaseResult& p : phases) {
    ok = ok && p.status.ok() && p.bytes_bad == 0 && p.bytes_verified == p.bytes_expected;
  }
  return ok ? 0 : 1;
}

// Common set-up of RunDemo and RunSweep: checks, mode notices, signals, the
// workload and the oversubscribed fabric's uplinks. Exit code 2 on bad options.
int Prepare(DemoOptions& o, std::optional<Workload>& w, OversubInfo& oversub) {
  o.shape.hosts = o.workload.hosts;
  if (absl::Status s = ValidateOptions(o); !s.ok()) {
    std::fprintf(stderr, "mixnet-demo: %s\n", std::string(s.message()).c_str());
    return 2;
  }
  absl::StatusOr<Workload> wl = Workload::Create(o.workload);
  if (!wl.ok()) {
    std::fprintf(stderr, "mixnet-demo: %s\n", wl.status().ToString().c_str());
    return 2;
  }
  absl::StatusOr<OversubInfo> ov = CostEqualUplinks(o);
  if (!ov.ok()) {
    std::fprintf(stderr, "mixnet-demo: cost-equal oversubscription: %s\n",
                 ov.status().ToString().c_str());
    return 2;
  }
  oversub = *ov;
  o.workload = wl->options();
  w.emplace(*std::move(wl));
  if (geteuid() != 0 && !o.loopback) {
    o.loopback = true;
    std::printf(
        "# NOTICE: not root, so no emulated cluster: every host runs on loopback (127.x "
        "addresses, no\n# rate limits) and mixnet-ocsd uses the sim backend. Times are NOT "
        "meaningful; correctness and\n# the control loop are exercised.\n");
  } else if (o.loopback) {
    std::printf(
        "# NOTICE: --loopback: hosts on 127.x addresses, sim OCS; times are NOT meaningful.\n");
  }
  struct sigaction sa {};
  sa.sa_handler = OnSignal;
  sigaction(SIGINT, &sa, nullptr);
  sigaction(SIGTERM, &sa, nullptr);
  return 0;
}

}  // namespace

std::string SelfExe() {
  char buf[4096];
  ssize_t n = readlink("/proc/self/exe", buf, sizeof(buf) - 1);
  return n > 0 ? std::string(buf, n) : std::string("mixnet-demo");
}

int RunDemo(DemoOptions o) {
  std::optional<Workload> w;
  OversubInfo oversub;
  if (int rc = Prepare(o, w, oversub); rc != 0) return rc;
  AddPaperScale(o, oversub);
  PrintHeader(o, *w, oversub);
  std::vector<PhaseResult> phases;
  const int rc = RunPhases(o, *w, oversub, phases);
  PrintReport(o, oversub, phases);
  if (!o.plot_dir.empty()) {
    if (absl::Status s = WritePlot(o, phases); !s.ok()) {
      std::fprintf(stderr, "mixnet-demo: --plot-dir: %s\n", s.ToString().c_str());
    }
  }
  return rc;
}

int RunSweep(DemoOptions o) {
  std::optional<Workload> w;
  OversubInfo oversub;
  if (int rc = Prepare(o, w, oversub); rc != 0) return rc;
  PrintHeader(o, *w, oversub);
  std::vector<SweepCell> cells;
  int rc = 0;
  for (double share : {0.25, 0.5, 0.75, 0.9}) {
    DemoOptions base = o;
    base.oracle = false;  // the sweep's tables have no oracle columns
    base.workload.affine_share = share;
    absl::StatusOr<Workload> ws = Workload::Create(base.workload);
    if (!ws.ok()) return 2;
    // The static and non-blocking fabrics do not switch: once per share.
    base.fabrics = {"static", "nonblocking"};
    std::vector<PhaseResult> fixed;
    rc = std::max(rc, RunPhases(base, *ws, oversub, fixed));
    for (double sw : {10.0, 25.0, 100.0}) {
      if (g_interrupted) break;
      DemoOptions m = base;
      m.fabrics = {"mixnet"};
      m.shape.switch_ms = sw;
      std::vector<PhaseResult> mix;
      rc = std::max(rc, RunPhases(m, *ws, oversub, mix));
      SweepCell cell{share, sw, {}};
      cell.phases = fixed;
      cell.phases.insert(cell.phases.end(), mix.begin(), mix.end());
      PrintSweepCell(o, cell);
      cells.push_back(std::move(cell));
    }
    if (g_interrupted) break;
  }
  PrintSweepTable(o, cells);
  return g_interrupted ? 1 : rc;
}

}  // namespace mixnet::demo
