// Reads the plugin's settings (see plugin_config.h). Runs on NCCL's init thread.
#include "plugins/nccl_net/plugin_config.h"

#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <stdexcept>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "nlohmann/json.hpp"
#include "runtime/common/settings.h"

namespace mixnet::nccl {
namespace {

// A plugin setting from the table, bounded to [lo, hi].
absl::Status Bounded(const char* name, int64_t value, int lo, int hi, int* out) {
  if (value < lo || value > hi) {
    return absl::InvalidArgumentError(
        absl::StrCat(name, "=", value, ": expected an integer in [", lo, ", ", hi, "]"));
  }
  *out = static_cast<int>(value);
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<PluginConfig> LoadPluginConfig() {
  const Settings& s = GetSettings();
  PluginConfig c;
  c.transport = s.transport;
  c.ifname_filter = s.socket_ifname;
  c.connect_timeout = absl::Milliseconds(s.connect_timeout_ms);
  c.host = s.host;
  c.cluster_spec = s.cluster_spec;
  c.controller = s.controller;
  if (s.nccl_report_ms < 0) {
    return absl::InvalidArgumentError(absl::StrCat("MIXNET_NCCL_REPORT_MS=", s.nccl_report_ms,
                                                   ": expected 0 (off) or a period in ms"));
  }
  c.report_period = absl::Milliseconds(s.nccl_report_ms);
  if (s.nccl_warm_paths_ms < 0 || s.nccl_warm_paths_ms > 3'600'000) {
    return absl::InvalidArgumentError(
        absl::StrCat("MIXNET_NCCL_WARM_PATHS_MS=", s.nccl_warm_paths_ms,
                     ": expected 0 (do not ask) or a wait in ms up to 3600000"));
  }
  c.warm_paths = absl::Milliseconds(s.nccl_warm_paths_ms);
  if (c.host.empty()) {
    char buf[256] = {};
    if (gethostname(buf, sizeof(buf) - 1) == 0) c.host = buf;
  }
  absl::Status st =
      Bounded("MIXNET_NCCL_MAX_RECVS", s.nccl_max_recvs, 1, kMaxRecvsLimit, &c.max_recvs);
  if (st.ok()) {
    st = Bounded("MIXNET_NCCL_SPEED_MBPS", s.nccl_speed_mbps, 0, 100'000'000, &c.speed_mbps);
  }
  if (st.ok()) {
    st = Bounded("MIXNET_NCCL_MAX_REQUESTS", s.nccl_max_requests, 32, 1 << 16, &c.max_requests);
  }
  if (!st.ok()) return st;
  c.router = s.router;
  if (c.router != "v1" && c.router != "v2") {
    return absl::InvalidArgumentError(
        absl::StrCat("MIXNET_ROUTER=", c.router, ": expected v1 or v2"));
  }
  if (s.nccl_split_min_bytes < 4096 || s.nccl_split_min_bytes > (int64_t{1} << 30)) {
    return absl::InvalidArgumentError(
        absl::StrCat("MIXNET_NCCL_SPLIT_MIN_BYTES=", s.nccl_split_min_bytes,
                     ": expected an integer in [4096, 2^30]"));
  }
  c.split_min_bytes = s.nccl_split_min_bytes;
  if (s.suspended_paths < 0) {
    return absl::InvalidArgumentError(absl::StrCat("MIXNET_SUSPENDED_PATHS=", s.suspended_paths,
                                                   ": expected 0 (none) or a count"));
  }
  c.kept_lanes = s.suspended_paths;
  c.static_demand = s.nccl_static_demand;
  c.gpu_direct = s.nccl_gpu_direct;
  if (c.gpu_direct != "auto" && c.gpu_direct != "on" && c.gpu_direct != "off") {
    return absl::InvalidArgumentError(
        absl::StrCat("MIXNET_NCCL_GPU_DIRECT=", c.gpu_direct, ": expected auto, on or off"));
  }
  c.cuda_driver = s.cuda_driver;
  return c;
}

absl::StatusOr<router::RoutingPlan> LoadStaticDemand(const std::string& path) {
  std::ifstream in(path);
  if (!in) {
    return absl::InvalidArgumentError(absl::StrCat("MIXNET_NCCL_STATIC_DEMAND=", path,
                                                   ": cannot open it: ", std::strerror(errno)));
  }
  nlohmann::json j = nlohmann::json::parse(in, nullptr, /*allow_exceptions=*/false);
  router::RoutingPlan plan;
  try {
    if (j.is_discarded()) throw std::runtime_error("not valid JSON");
    plan.hosts = j.at("hosts").get<std::vector<std::string>>();
    plan.bytes = j.at("bytes").get<std::vector<double>>();
    plan.relay = j.value("relay", false);
  } catch (const std::exception& e) {
    return absl::InvalidArgumentError(
        absl::StrCat("MIXNET_NCCL_STATIC_DEMAND=", path,
                     ": expected {\"hosts\": [...], \"bytes\": [...]}: ", e.what()));
  }
  return plan;
}

}  // namespace mixnet::nccl
