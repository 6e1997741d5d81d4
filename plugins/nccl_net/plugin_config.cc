// Reads the plugin's settings (see plugin_config.h). Runs on NCCL's init thread.
#include "plugins/nccl_net/plugin_config.h"

#include <unistd.h>

#include "absl/strings/str_cat.h"
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
  return c;
}

}  // namespace mixnet::nccl
