// Logging for the runtime: a thin layer over spdlog so every component logs
// with the same format ("[mixnet rank host] ...") and level (MIXNET_LOG_LEVEL).
// Thread-safe.
#pragma once

#include "absl/strings/string_view.h"

#include "spdlog/spdlog.h"

namespace mixnet::log {

// Applies MIXNET_LOG_LEVEL (called lazily by the first log call too).
void Init();

// Sets a prefix such as "rank 3" shown on every line of this process.
void SetProcessTag(absl::string_view tag);

spdlog::logger& Logger();

template <typename... Args>
void Debug(spdlog::format_string_t<Args...> fmt, Args&&... args) {
  Logger().debug(fmt, std::forward<Args>(args)...);
}
template <typename... Args>
void Info(spdlog::format_string_t<Args...> fmt, Args&&... args) {
  Logger().info(fmt, std::forward<Args>(args)...);
}
template <typename... Args>
void Warn(spdlog::format_string_t<Args...> fmt, Args&&... args) {
  Logger().warn(fmt, std::forward<Args>(args)...);
}
template <typename... Args>
void Error(spdlog::format_string_t<Args...> fmt, Args&&... args) {
  Logger().error(fmt, std::forward<Args>(args)...);
}

}  // namespace mixnet::log
