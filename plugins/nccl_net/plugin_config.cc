// Reads the plugin's settings (see plugin_config.h). Runs on NCCL's init thread.
#include "plugins/nccl_net/plugin_config.h"

#include <unistd.h>

#include <cstdlib>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "runtime/common/settings.h"

namespace mixnet::nccl {
namespace {

// One integer row of the plugin's own settings, bounded to [lo, hi].
absl::Status ReadInt(const char* name, int lo, int hi, int* out) {
  const char* v = std::getenv(name);
  if (v == nullptr || *v == '\0') return absl::OkStatus();
  int parsed = 0;
  if (!absl::SimpleAtoi(v, &parsed) || parsed < lo || parsed > hi) {
    return absl::InvalidArgumentError(
        absl::StrCat(name, "='", v, "': expected an integer in [", lo, ", ", hi, "]"));
  }
  *out = parsed;
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
  if (c.host.empty()) {
    char buf[256] = {};
    if (gethostname(buf, sizeof(buf) - 1) == 0) c.host = buf;
  }
  absl::Status st = ReadInt("MIXNET_NCCL_MAX_RECVS", 1, kMaxRecvsLimit, &c.max_recvs);
  if (st.ok()) st = ReadInt("MIXNET_NCCL_SPEED_MBPS", 0, 100'000'000, &c.speed_mbps);
  if (st.ok()) st = ReadInt("MIXNET_NCCL_MAX_REQUESTS", 32, 1 << 16, &c.max_requests);
  if (!st.ok()) return st;
  return c;
}

}  // namespace mixnet::nccl
