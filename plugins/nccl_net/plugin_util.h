// Small helpers shared by the plugin core's files (plugin.cc,
// plugin_requests.cc): messages for misuse. Any thread.
#pragma once

#include <cstdint>
#include <string>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"

namespace mixnet::nccl {

inline std::string Ptr(const void* p) {
  return absl::StrCat("0x", absl::Hex(reinterpret_cast<uintptr_t>(p)));
}

inline absl::Status NotLive(const char* call, const void* p, const char* what) {
  return absl::InvalidArgumentError(absl::StrCat(call, ": ", p == nullptr ? "NULL" : Ptr(p),
                                                 " is not an open ", what,
                                                 " (NULL, closed or never created)"));
}

inline absl::Status NullOut(const char* call, const char* what) {
  return absl::InvalidArgumentError(absl::StrCat(call, ": output pointer ", what, " is NULL"));
}

}  // namespace mixnet::nccl
