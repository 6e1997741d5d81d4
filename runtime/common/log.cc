// spdlog set-up for the runtime (see log.h).
#include "runtime/common/log.h"

#include <memory>
#include <mutex>
#include <string>

#include "runtime/common/settings.h"
#include "spdlog/sinks/stdout_color_sinks.h"

namespace mixnet::log {
namespace {

std::shared_ptr<spdlog::logger> MakeLogger() {
  // Not registered in spdlog's process-wide registry (libspdlog is shared):
  // a host process that has its own "mixnet" logger, or a second copy of the
  // runtime (the NCCL plugin links it statically), must not make this throw.
  auto logger = std::make_shared<spdlog::logger>(
      "mixnet", std::make_shared<spdlog::sinks::stderr_color_sink_mt>());
  // Settings::FromEnv (not GetSettings, which may itself log) supplies the level.
  absl::StatusOr<Settings> s = Settings::FromEnv();
  logger->set_level(spdlog::level::from_str(s.ok() ? s->log_level : "info"));
  logger->set_pattern("[%H:%M:%S.%e mixnet %l] %v");
  return logger;
}

}  // namespace

spdlog::logger& Logger() {
  static std::shared_ptr<spdlog::logger> logger = MakeLogger();
  return *logger;
}

void Init() { (void)Logger(); }

void SetProcessTag(absl::string_view tag) {
  Logger().set_pattern(std::string("[%H:%M:%S.%e mixnet ") + std::string(tag) + " %l] %v");
}

}  // namespace mixnet::log
