// RunConfig JSON (see run_config.h).
#include "apps/demo/run_config.h"

#include <fstream>
#include <sstream>

#include "absl/strings/str_cat.h"
#include "nlohmann/json.hpp"

namespace mixnet::demo {

std::string RunConfig::ToJson() const {
  const WorkloadOptions& w = workload;
  const ComputeOptions& k = compute;
  nlohmann::json j = {{"workload",
                       {{"hosts", w.hosts},
                        {"layers", w.layers},
                        {"experts_per_host", w.experts_per_host},
                        {"tokens", w.tokens},
                        {"token_bytes", w.token_bytes},
                        {"seed", w.seed},
                        {"affine_share", w.affine_share},
                        {"zipf_s", w.zipf_s},
                        {"drift_every", w.drift_every},
                        {"jitter", w.jitter},
                        {"trace", w.trace},
                        {"placement", w.placement}}},
                      {"compute",
                       {{"attention_fwd_ms", k.attention_fwd_ms},
                        {"expert_fwd_ms", k.expert_fwd_ms},
                        {"head_ms", k.head_ms},
                        {"expert_bwd_ms", k.expert_bwd_ms},
                        {"attention_bwd_ms", k.attention_bwd_ms}}},
                      {"fabric", fabric},
                      {"iterations", iterations},
                      {"spec_path", spec_path},
                      {"store", store},
                      {"controller", controller},
                      {"results_dir", results_dir},
                      {"timeout_ms", timeout_ms},
                      {"plan_wait_ms", plan_wait_ms},
                      {"uplink_netns", uplink_netns},
                      {"uplinks", uplinks},
                      {"progress", progress},
                      {"counters", counters},
                      {"burst_ms", burst_ms},
                      {"router", router},
                      {"static_demand", static_demand},
                      {"relay", relay},
                      {"route_solver", route_solver},
                      {"replan_combine", replan_combine},
                      {"plan_windows", plan_windows},
                      {"warm_paths", warm_paths},
                      {"switch_ms", switch_ms},
                      {"leaf_hosts", leaf_hosts},
                      {"uplink_gbps", uplink_gbps},
                      {"loopback", loopback}};
  return j.dump(2);
}

absl::StatusOr<RunConfig> RunConfig::FromJson(const std::string& text) {
  nlohmann::json j = nlohmann::json::parse(text, nullptr, false);
  if (!j.is_object()) return absl::InvalidArgumentError("run config: not a JSON object");
  try {
    RunConfig c;
    const nlohmann::json& w = j.at("workload");
    c.workload.hosts = w.at("hosts");
    c.workload.layers = w.at("layers");
    c.workload.experts_per_host = w.at("experts_per_host");
    c.workload.tokens = w.at("tokens");
    c.workload.token_bytes = w.at("token_bytes");
    c.workload.seed = w.at("seed");
    c.workload.affine_share = w.at("affine_share");
    c.workload.zipf_s = w.at("zipf_s");
    c.workload.drift_every = w.at("drift_every");
    c.workload.jitter = w.at("jitter");
    c.workload.trace = w.at("trace");
    c.workload.placement = w.at("placement");
    const nlohmann::json& k = j.at("compute");
    c.compute.attention_fwd_ms = k.at("attention_fwd_ms");
    c.compute.expert_fwd_ms = k.at("expert_fwd_ms");
    c.compute.head_ms = k.at("head_ms");
    c.compute.expert_bwd_ms = k.at("expert_bwd_ms");
    c.compute.attention_bwd_ms = k.at("attention_bwd_ms");
    c.fabric = j.at("fabric");
    c.iterations = j.at("iterations");
    c.spec_path = j.at("spec_path");
    c.store = j.at("store");
    c.controller = j.at("controller");
    c.results_dir = j.at("results_dir");
    c.timeout_ms = j.at("timeout_ms");
    c.plan_wait_ms = j.at("plan_wait_ms");
    c.uplink_netns = j.at("uplink_netns");
    c.uplinks = j.at("uplinks").get<std::vector<std::string>>();
    c.progress = j.at("progress");
    c.counters = j.at("counters");
    c.burst_ms = j.at("burst_ms");
    c.router = j.at("router");
    c.static_demand = j.at("static_demand").get<std::vector<double>>();
    c.relay = j.at("relay").get<bool>();
    c.route_solver = j.value("route_solver", c.route_solver);
    c.replan_combine = j.value("replan_combine", c.replan_combine);
    c.plan_windows = j.value("plan_windows", c.plan_windows);
    c.warm_paths = j.value("warm_paths", c.warm_paths);
    // Optional: configs written before the simulator's replay read them.
    c.switch_ms = j.value("switch_ms", c.switch_ms);
    c.leaf_hosts = j.value("leaf_hosts", c.leaf_hosts);
    c.uplink_gbps = j.value("uplink_gbps", c.uplink_gbps);
    c.loopback = j.value("loopback", c.loopback);
    return c;
  } catch (const nlohmann::json::exception& e) {
    return absl::InvalidArgumentError(absl::StrCat("run config: ", e.what()));
  }
}

absl::StatusOr<RunConfig> RunConfig::Load(const std::string& path) {
  std::ifstream in(path);
  if (!in) return absl::NotFoundError(absl::StrCat("run config ", path, ": cannot open"));
  std::stringstream ss;
  ss << in.rdbuf();
  absl::StatusOr<RunConfig> c = FromJson(ss.str());
  if (!c.ok()) return absl::InvalidArgumentError(absl::StrCat(path, ": ", c.status().message()));
  return c;
}

std::string RunConfig::ResultFile(int rank) const {
  return absl::StrCat(results_dir, "/rank", rank, ".jsonl");
}

}  // namespace mixnet::demo
