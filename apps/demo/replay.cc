// The simulator on a kept demo run (see replay.h).
#include "apps/demo/replay.h"

#include <cstdio>
#include <filesystem>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "apps/demo/fabric_spec.h"
#include "apps/demo/phase_result.h"
#include "apps/demo/run_config.h"
#include "apps/demo/simulation.h"
#include "apps/demo/workload.h"
#include "nlohmann/json.hpp"
#include "runtime/cluster/cluster_spec.h"
#include "runtime/common/status.h"

namespace mixnet::demo {
namespace {

// One phase folder: its measurements and the simulator's prediction.
absl::Status Replay(const std::string& dir, FabricKind kind, PhaseResult& r) {
  ASSIGN_OR_RETURN(RunConfig c, RunConfig::Load(dir + "/config.json"));
  if (c.fabric != FabricName(kind)) {
    return absl::InvalidArgumentError(absl::StrCat(dir, "/config.json: fabric '", c.fabric,
                                                   "' in the folder of ", FabricName(kind)));
  }
  // The run dir may have moved since the orchestrator wrote its paths.
  c.spec_path = dir + "/spec.yaml";
  c.results_dir = dir + "/results";
  ASSIGN_OR_RETURN(cluster::ClusterSpec spec, cluster::ClusterSpec::LoadFile(c.spec_path));
  ASSIGN_OR_RETURN(Workload w, Workload::Create(c.workload));
  RETURN_IF_ERROR(ReadResults(c, spec, c.uplink_gbps, r));
  SimulatePhase(SimulationOf(kind, c), spec, w, r);
  if (!r.simulated) return absl::FailedPreconditionError(r.simulated_why);
  return absl::OkStatus();
}

double Error(double simulated, double measured) {
  return measured > 0 ? simulated / measured - 1 : 0;
}

}  // namespace

int RunSimulateCommand(const std::string& run_dir, bool json) {
  std::vector<PhaseResult> phases;
  std::vector<absl::Status> errors;
  for (absl::string_view name : absl::StrSplit(kFabricList, ',')) {
    const std::string dir = absl::StrCat(run_dir, "/", name);
    std::error_code ec;
    if (!std::filesystem::exists(dir + "/config.json", ec)) continue;
    PhaseResult r;
    r.fabric = std::string(name);
    errors.push_back(Replay(dir, *ParseFabric(name), r));
    phases.push_back(std::move(r));
  }
  if (phases.empty()) {
    std::fprintf(stderr,
                 "mixnet-demo simulate: %s holds no phase folder with a config.json (eps, "
                 "oversub, static, mixnet, nonblocking; keep one with mixnet-demo --keep-dir)\n",
                 run_dir.c_str());
    return 2;
  }
  bool ok = true;
  if (!json) {
    std::printf("# the simulator on the kept run %s (means per iteration, ms)\n", run_dir.c_str());
    std::printf("%-12s %10s %10s %7s %10s %10s %10s %6s\n", "fabric", "iteration", "simulated",
                "error", "alltoall", "sim_a2a", "floor", "util");
  }
  for (size_t i = 0; i < phases.size(); ++i) {
    const PhaseResult& p = phases[i];
    if (!errors[i].ok()) {
      ok = false;
      if (json) {
        std::printf(
            "%s\n",
            nlohmann::json({{"fabric", p.fabric}, {"ok", false}, {"error", errors[i].ToString()}})
                .dump()
                .c_str());
      } else {
        std::printf("%-12s not simulated: %s\n", p.fabric.c_str(), errors[i].ToString().c_str());
      }
      continue;
    }
    const double measured = p.Mean(&IterationStats::wall_ms);
    const double simulated = p.Mean(&IterationStats::simulated_ms);
    if (json) {
      nlohmann::ordered_json j = {{"fabric", p.fabric}, {"ok", true}};
      j["iterations"] = p.iterations.size();
      j["iteration_ms"] = measured;
      j["simulated_ms"] = simulated;
      j["error"] = Error(simulated, measured);
      j["alltoall_ms"] = p.Mean(&IterationStats::alltoall_ms);
      j["simulated_alltoall_ms"] = p.Mean(&IterationStats::simulated_alltoall_ms);
      j["simulated_reconfig_ms"] = p.Mean(&IterationStats::simulated_reconfig_ms);
      j["reconfig_loss_ms"] = p.Mean(&IterationStats::loss_ms);
      if (p.round_samples > 0) j["round_overhead_ms"] = p.round_overhead_ms;
      if (!p.simulated_rounds.empty()) {
        j["simulated_rounds"] = p.simulated_rounds;
        j["simulated_round_overhead_ms"] = p.simulated_round_overhead_ms;
      }
      j["floor_ms"] = p.Mean(&IterationStats::floor_ms);
      j["busiest_nic_utilisation"] = p.bound.utilisation();
      std::printf("%s\n", j.dump().c_str());
    } else {
      std::printf("%-12s %10.1f %10.1f %+6.1f%% %10.1f %10.1f %10.1f %5.0f%%\n", p.fabric.c_str(),
                  measured, simulated, 100 * Error(simulated, measured),
                  p.Mean(&IterationStats::alltoall_ms),
                  p.Mean(&IterationStats::simulated_alltoall_ms), p.Mean(&IterationStats::floor_ms),
                  100 * p.bound.utilisation());
      if (!p.simulated_rounds.empty()) {
        std::printf("%-12s rounds charged %.1f ms over the switching (%s)\n", "",
                    p.simulated_round_overhead_ms, p.simulated_rounds.c_str());
      }
    }
  }
  if (json) {
    std::printf(
        "%s\n",
        nlohmann::json({{"summary", true}, {"phases", phases.size()}, {"ok", ok}}).dump().c_str());
  }
  return ok ? 0 : 1;
}

}  // namespace mixnet::demo
