// Parsing of the MIXNET_* settings table (see settings.h).
#include "runtime/common/settings.h"

#include <cstdlib>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "runtime/common/cpu_affinity.h"
#include "runtime/common/log.h"

namespace mixnet {
namespace {

absl::Status Parse(const char* env, const std::string& v, std::string* out) {
  *out = v;
  return absl::OkStatus();
}

absl::Status Parse(const char* env, const std::string& v, int64_t* out) {
  if (!absl::SimpleAtoi(v, out)) {
    return absl::InvalidArgumentError(absl::StrCat(env, "='", v, "' is not an integer"));
  }
  return absl::OkStatus();
}

template <typename T>
std::string DefaultText(const T& v) {
  if constexpr (std::is_same_v<T, std::string>) {
    return v;
  } else {
    return absl::StrCat(v);
  }
}

}  // namespace

absl::StatusOr<Settings> Settings::FromEnv(
    const std::function<std::optional<std::string>(const char*)>& getenv_fn) {
  auto get = [&](const char* name) -> std::optional<std::string> {
    if (getenv_fn) return getenv_fn(name);
    const char* v = std::getenv(name);
    if (v == nullptr) return std::nullopt;
    return std::string(v);
  };
  Settings s;
#define MIXNET_SETTINGS_PARSE_(type, field, env, def, doc) \
  if (auto v = get(env); v.has_value() && !v->empty()) {   \
    absl::Status st = Parse(env, *v, &s.field);            \
    if (!st.ok()) return st;                               \
  }
  MIXNET_SETTINGS_TABLE(MIXNET_SETTINGS_PARSE_)
#undef MIXNET_SETTINGS_PARSE_
  if (s.sockets_per_path < 1 || s.sockets_per_path > 64) {
    return absl::InvalidArgumentError("MIXNET_SOCKETS_PER_PATH must be in [1, 64]");
  }
  if (s.chunk_bytes < 4096) {
    return absl::InvalidArgumentError("MIXNET_CHUNK_BYTES must be at least 4096");
  }
  if (s.socket_buffer_bytes < 0) {
    return absl::InvalidArgumentError("MIXNET_SOCKET_BUFFER_BYTES must be >= 0");
  }
  if (s.intra_host != "local" && s.intra_host != "nic") {
    return absl::InvalidArgumentError(
        absl::StrCat("MIXNET_INTRA_HOST='", s.intra_host, "' must be local or nic"));
  }
  if (s.router != "v1" && s.router != "v2") {
    return absl::InvalidArgumentError(
        absl::StrCat("MIXNET_ROUTER='", s.router, "' must be v1 or v2"));
  }
  if (s.relay_chunk_bytes < 4096 || s.relay_chunk_bytes > (int64_t{1} << 30)) {
    return absl::InvalidArgumentError("MIXNET_RELAY_CHUNK_BYTES must be in [4096, 2^30]");
  }
  if (s.relay_buffer_bytes < s.relay_chunk_bytes) {
    return absl::InvalidArgumentError(
        "MIXNET_RELAY_BUFFER_BYTES must be at least MIXNET_RELAY_CHUNK_BYTES");
  }
  if (s.suspended_paths < 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("MIXNET_SUSPENDED_PATHS=", s.suspended_paths, " must be >= 0"));
  }
  if (s.eager_bytes < 0 || s.local_eager_bytes < 0) {
    return absl::InvalidArgumentError(
        "MIXNET_EAGER_BYTES and MIXNET_LOCAL_EAGER_BYTES must be >= 0");
  }
  if (s.ib_unexpected_bytes < 0 || s.ib_reg_cache_bytes < 0) {
    return absl::InvalidArgumentError(
        "MIXNET_IB_UNEXPECTED_BYTES and MIXNET_IB_REG_CACHE_BYTES must be >= 0");
  }
  if (s.progress_spin_us < 0 || s.progress_spin_us > 1000000) {
    return absl::InvalidArgumentError("MIXNET_PROGRESS_SPIN_US must be in [0, 1000000]");
  }
  if (s.progress_cpus != "auto" && s.progress_cpus != "none") {
    absl::StatusOr<std::vector<int>> cpus = ParseCpuList(s.progress_cpus);
    if (!cpus.ok()) {
      return absl::InvalidArgumentError(
          absl::StrCat("MIXNET_PROGRESS_CPUS='", s.progress_cpus,
                       "' must be auto, none or a CPU list: ", cpus.status().message()));
    }
  }
  if (s.lock_checks != 0 && s.lock_checks != 1) {
    return absl::InvalidArgumentError("MIXNET_LOCK_CHECKS must be 0 or 1");
  }
  if (s.timeout_ms <= 0 || s.connect_timeout_ms <= 0) {
    return absl::InvalidArgumentError(
        "MIXNET_TIMEOUT_MS and MIXNET_CONNECT_TIMEOUT_MS must be > 0");
  }
  return s;
}

std::vector<Settings::Doc> Settings::Documentation() {
  std::vector<Doc> docs;
  Settings defaults;
#define MIXNET_SETTINGS_DOC_(type, field, env, def, doc) \
  docs.push_back(Doc{env, DefaultText(defaults.field), doc});
  MIXNET_SETTINGS_TABLE(MIXNET_SETTINGS_DOC_)
#undef MIXNET_SETTINGS_DOC_
  return docs;
}

const Settings& GetSettings() {
  static const Settings settings = [] {
    absl::StatusOr<Settings> s = Settings::FromEnv();
    if (!s.ok()) {
      log::Warn("ignoring environment settings: {}", s.status().ToString());
      return Settings{};
    }
    return *std::move(s);
  }();
  return settings;
}

}  // namespace mixnet
