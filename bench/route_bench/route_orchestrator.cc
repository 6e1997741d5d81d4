// The route bench's launcher (see route_orchestrator.h). Main thread only.
#include "bench/route_bench/route_orchestrator.h"

#include <signal.h>
#include <stdlib.h>
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <memory>

#include "absl/strings/str_cat.h"
#include "apps/demo/children.h"
#include "bench/peers/peer_common.h"
#include "bench/route_bench/route_cases.h"
#include "bench/route_bench/route_plan.h"
#include "bench/route_bench/route_report.h"
#include "bench/route_bench/route_results.h"
#include "bench/route_bench/route_worker.h"
#include "emulation/emulated_fabric.h"
#include "emulation/links.h"
#include "runtime/cluster/cluster_spec.h"
#include "runtime/common/status.h"

namespace mixnet::bench {
namespace {

constexpr char kProgram[] = "mixnet_route_bench";

void OnSignal(int) { demo::g_interrupted = true; }

absl::Status WriteText(const std::string& path, const std::string& text) {
  std::ofstream f(path);
  f << text;
  f.close();
  if (!f) return absl::InternalError(absl::StrCat("cannot write ", path));
  return absl::OkStatus();
}

// A case ready to run: its matrix and its circuits and predictions.
struct PlannedCase {
  BenchCase c;
  CasePlan plan;
};

absl::Status CheckOptions(const BenchOptions& o) {
  auto bad = [](const std::string& m) { return absl::InvalidArgumentError(m); };
  if (o.shape.hosts < 2 || o.shape.hosts > 64) {
    return bad(absl::StrCat("--hosts ", o.shape.hosts, ": need 2..64"));
  }
  if (o.shape.ocs_nics < 1 || o.shape.ocs_nics > 4) {
    return bad(absl::StrCat("--ocs-nics ", o.shape.ocs_nics, ": need 1..4"));
  }
  if (!(o.shape.gbps > 0) || o.shape.gbps > 10) {
    return bad(absl::StrCat("--gbps ", o.shape.gbps, ": need > 0 and <= 10"));
  }
  if (o.iters < 1 || o.warmup < 0) {
    return bad(absl::StrCat("--iters ", o.iters, " --warmup ", o.warmup, ": need >= 1, >= 0"));
  }
  if (!(o.burst_ms > 0) || o.queue_frames < 1) {
    return bad(absl::StrCat("--burst-ms ", o.burst_ms, " --queue-frames ", o.queue_frames,
                            ": need > 0, >= 1"));
  }
  if (o.rto_min_ms < 0 || o.rto_min_ms > 200) {
    return bad(absl::StrCat("--rto-min-ms ", o.rto_min_ms, ": need 0 (kernel default) .. 200"));
  }
  if (o.init_cwnd < 0 || o.init_cwnd > 1000) {
    return bad(absl::StrCat("--init-cwnd ", o.init_cwnd, ": need 0 (kernel default) .. 1000"));
  }
  return absl::OkStatus();
}

absl::StatusOr<std::vector<PlannedCase>> PlanAll(const BenchOptions& o,
                                                 const cluster::ClusterSpec& spec) {
  CaseOptions co;
  co.hosts = o.shape.hosts;
  co.bytes_per_host = o.bytes_per_host;
  co.seed = o.seed;
  co.trace = o.trace;
  co.trace_iteration = o.trace_iteration;
  std::vector<PlannedCase> out;
  for (const std::string& name : o.cases) {
    PlannedCase p;
    ASSIGN_OR_RETURN(p.c, MakeCase(name, co));
    absl::StatusOr<CasePlan> plan = PlanCase(spec, p.c.Matrix(), o.relay, o.route_solver);
    if (!plan.ok()) return Annotate(plan.status(), absl::StrCat("case ", name));
    p.plan = *std::move(plan);
    out.push_back(std::move(p));
  }
  return out;
}

class Launcher {
 public:
  Launcher(const BenchOptions& o, cluster::ClusterSpec spec, std::string dir)
      : o_(o), spec_(std::move(spec)), dir_(std::move(dir)) {
    for (const cluster::HostSpec& h : spec_.hosts) hosts_.push_back(h.name);
    info_ = RunInfo{.hosts = o.shape.hosts,
                    .ocs_nics = o.shape.ocs_nics,
                    .gbps = o.shape.gbps,
                    .bytes_per_host = o.bytes_per_host,
                    .warmup = o.warmup,
                    .iters = o.iters,
                    .relay = o.relay,
                    .route_solver = o.route_solver,
                    .control_tos = o.control_tos,
                    .init_cwnd = o.init_cwnd > 0 ? o.init_cwnd : int{emulation::kKernelInitCwnd}};
  }

  absl::Status Run(const std::vector<PlannedCase>& cases) {
    emulation::EmulationOptions eo;
    eo.burst_ms = o_.burst_ms;
    eo.queue_frames = o_.queue_frames;
    eo.tcp_congestion = o_.tcp_congestion;
    eo.slow_start_after_idle = o_.slow_start_after_idle;
    eo.rto_min_ms = static_cast<uint32_t>(o_.rto_min_ms);
    eo.init_cwnd = static_cast<uint32_t>(o_.init_cwnd);
    eo.control_tos = o_.control_tos;
    // The workers inherit it: their control sockets use the links' class.
    setenv("MIXNET_CONTROL_TC", std::to_string(o_.control_tos).c_str(), 1);
    const std::string prefix = o_.prefix.empty() ? absl::StrCat("mxroute", getpid()) : o_.prefix;
    ASSIGN_OR_RETURN(fabric_, emulation::EmulatedFabric::Up(spec_, prefix, eo));
    for (const cluster::HostSpec& h : spec_.hosts) {
      for (const cluster::NicSpec& nic : h.nics) {
        ASSIGN_OR_RETURN(const emulation::TbfParams t, emulation::TbfFor(nic.gbps, o_.burst_ms));
        rates_[absl::StrCat(h.name, "/", nic.name)] =
            LinkRate{static_cast<double>(t.rate_bytes_per_s), t.burst_bytes};
      }
    }
    PrintPreamble(info_, o_.json, std::cout);
    std::vector<CaseFigures> done;
    absl::Status status;
    for (size_t i = 0; i < cases.size() && status.ok(); ++i) {
      absl::StatusOr<CaseFigures> f = RunCase(i, cases[i]);
      if (!f.ok()) {
        status = Annotate(f.status(), absl::StrCat("case ", cases[i].c.name));
        break;
      }
      PrintCase(*f, info_, o_.json, std::cout);
      done.push_back(*std::move(f));
    }
    if (!done.empty()) PrintVerdicts(done, o_.json, std::cout);
    absl::Status down = fabric_->Down();
    fabric_.reset();
    if (status.ok()) status = down;
    return status;
  }

 private:
  absl::StatusOr<CaseFigures> RunCase(size_t index, const PlannedCase& p) {
    const std::string dir = absl::StrCat(dir_, "/case", index);
    WorkerConfig w;
    w.case_name = p.c.name;
    w.spec_path = dir + "/spec.yaml";
    w.store_dir = dir + "/store";
    w.results_dir = dir + "/results";
    w.hosts = hosts_;
    w.bytes = p.c.bytes;
    w.relay = o_.relay;
    w.route_solver = o_.route_solver;
    w.warmup = o_.warmup;
    w.iters = o_.iters;
    w.seed = o_.seed;
    w.link_ends_us = o_.link_ends_us;
    std::error_code ec;
    for (const std::string& d : {w.store_dir + "/v1", w.store_dir + "/v2", w.results_dir}) {
      std::filesystem::create_directories(d, ec);
      if (ec) return absl::InternalError(absl::StrCat("mkdir ", d, ": ", ec.message()));
    }
    // The case's circuits: in the emulated OCS and, as the initial
    // topology, in the spec the workers read.
    RETURN_IF_ERROR(fabric_->ApplyCircuits(p.plan.circuits));
    RETURN_IF_ERROR(WriteText(
        w.spec_path, demo::FabricSpecYaml(demo::FabricKind::kStatic, o_.shape, p.plan.circuits)));
    // Deadline: the slower router's prediction, generously, per all-to-all
    // (four per iteration: each router twice).
    const double per_a2a_s = 4 * std::max(p.plan.v1_model_s, p.plan.v2_model_s) + 2;
    const int timeout_s = o_.case_timeout_s > 0
                              ? o_.case_timeout_s
                              : static_cast<int>(60 + 4 * (o_.warmup + o_.iters) * per_a2a_s);
    w.timeout_ms = std::min<int64_t>(int64_t{1000} * timeout_s, 120000);
    const std::string config = dir + "/config.json";
    RETURN_IF_ERROR(WriteText(config, w.ToJson()));
    demo::Children children;
    for (int r = 0; r < static_cast<int>(hosts_.size()); ++r) {
      RETURN_IF_ERROR(children.Spawn(
          absl::StrCat(p.c.name, " worker ", r, " (", hosts_[r], ")"),
          fabric_->HostNamespace(hosts_[r]),
          {peers::SelfExePath(), "worker", "--config", config, "--rank", std::to_string(r)}));
    }
    RETURN_IF_ERROR(children.WaitAll(absl::Seconds(timeout_s)));
    return Collect(w, p);
  }

  absl::StatusOr<CaseFigures> Collect(const WorkerConfig& w, const PlannedCase& p) const {
    std::map<std::string, std::vector<RankRecord>> by_router;
    for (int r = 0; r < static_cast<int>(hosts_.size()); ++r) {
      std::ifstream in(w.ResultFile(r));
      if (!in) return absl::DataLossError(absl::StrCat("no result file ", w.ResultFile(r)));
      std::string line;
      while (std::getline(in, line)) {
        const nlohmann::json j = nlohmann::json::parse(line, nullptr, false);
        if (j.is_object() && j.contains("type")) continue;  // the final line
        ASSIGN_OR_RETURN(RankRecord rec, RecordFromJson(j, r));
        by_router[rec.router].push_back(std::move(rec));
      }
    }
    CaseFigures f;
    f.case_name = p.c.name;
    f.what = p.c.what;
    f.circuits = static_cast<int>(p.plan.circuits.size());
    f.lower_bound_ms = p.plan.lower_bound_s * 1e3;
    f.oracle_installed_ms = p.plan.oracle_installed_s * 1e3;
    f.oracle_best_ms = p.plan.oracle_best_s * 1e3;
    f.oracle_bound_ms = p.plan.oracle_bound_s * 1e3;
    f.oracle_dataplane_ms = p.plan.oracle_dataplane_s * 1e3;
    f.v2_split_ms = p.plan.v2_split_ms;
    const uint64_t payload = p.c.OffDiagonalBytes();
    ASSIGN_OR_RETURN(f.v1, Summarise(p.c.name, "v1", by_router["v1"], o_.warmup, hosts_, rates_,
                                     payload, p.plan.v1_model_s));
    // A relayed byte crosses two hops: the wire factor is per hop.
    const uint64_t v2_hops = payload + static_cast<uint64_t>(std::llround(p.plan.v2_relayed_bytes));
    ASSIGN_OR_RETURN(f.v2, Summarise(p.c.name, "v2", by_router["v2"], o_.warmup, hosts_, rates_,
                                     v2_hops, p.plan.v2_model_s));
    f.v1.simulated_ms = p.plan.v1_sim_s * 1e3;
    f.v2.simulated_ms = p.plan.v2_sim_s * 1e3;
    return f;
  }

  const BenchOptions& o_;
  const cluster::ClusterSpec spec_;
  const std::string dir_;
  std::vector<std::string> hosts_;
  RunInfo info_;
  std::map<std::string, LinkRate> rates_;
  std::unique_ptr<emulation::EmulatedFabric> fabric_;
};

}  // namespace

int RunBench(const BenchOptions& o) {
  auto fail = [](int code, const absl::Status& s) {
    std::cerr << kProgram << ": " << s << "\n";
    return code;
  };
  if (absl::Status s = CheckOptions(o); !s.ok()) return fail(2, s);
  absl::StatusOr<cluster::ClusterSpec> spec = cluster::ClusterSpec::Parse(
      demo::FabricSpecYaml(demo::FabricKind::kMixnet, o.shape), "route bench spec");
  if (!spec.ok()) return fail(2, spec.status());
  absl::StatusOr<std::vector<PlannedCase>> cases = PlanAll(o, *spec);
  if (!cases.ok()) return fail(2, cases.status());
  if (geteuid() != 0) {
    return fail(2, absl::PermissionDeniedError(
                       "the emulated cluster needs root (network namespaces): run with sudo"));
  }
  char tmpl[] = "/tmp/mixnet-route-XXXXXX";
  if (mkdtemp(tmpl) == nullptr) return fail(1, ErrnoStatus("run folder", "mkdtemp"));
  const std::string dir = tmpl;
  struct sigaction sa = {};
  sa.sa_handler = OnSignal;
  sigaction(SIGINT, &sa, nullptr);
  sigaction(SIGTERM, &sa, nullptr);
  absl::Status s = Launcher(o, *std::move(spec), dir).Run(*cases);
  if (o.keep_dir) {
    std::cerr << kProgram << ": run folder kept: " << dir << "\n";
  } else {
    std::filesystem::remove_all(dir);
  }
  return s.ok() ? 0 : fail(1, s);
}

}  // namespace mixnet::bench
