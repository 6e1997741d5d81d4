// Error handling helpers shared by every MixNet component.
// Errors are absl::Status values whose codes match gRPC's; these macros keep
// call sites short. Usable from any thread.
#pragma once

#include <cerrno>
#include <cstring>
#include <string>
#include "absl/strings/string_view.h"

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"

#define MIXNET_CONCAT_INNER_(a, b) a##b
#define MIXNET_CONCAT_(a, b) MIXNET_CONCAT_INNER_(a, b)

// Returns the status from the enclosing function when `expr` is not OK.
#define RETURN_IF_ERROR(expr)                        \
  do {                                               \
    ::absl::Status mixnet_status_ = (expr);          \
    if (!mixnet_status_.ok()) return mixnet_status_; \
  } while (0)

// ASSIGN_OR_RETURN(auto x, MakeX()); declares x from a StatusOr or returns its error.
#define ASSIGN_OR_RETURN(lhs, rexpr) \
  MIXNET_ASSIGN_OR_RETURN_IMPL_(MIXNET_CONCAT_(mixnet_statusor_, __LINE__), lhs, rexpr)
#define MIXNET_ASSIGN_OR_RETURN_IMPL_(tmp, lhs, rexpr) \
  auto tmp = (rexpr);                                  \
  if (!tmp.ok()) return std::move(tmp).status();       \
  lhs = std::move(tmp).value()

namespace mixnet {

// The text of an errno value ("Connection refused", "Unknown error 4242").
// Safe from any thread: std::strerror may format unknown values into one
// buffer shared by the process (glibc documents it MT-Unsafe).
std::string ErrnoText(int err);

// "<what>: <syscall> failed: <ErrnoText(errno)> (errno N)" with a code chosen from errno:
// connection-loss errnos map to Unavailable, timeouts to DeadlineExceeded, bad
// arguments to InvalidArgument, the rest to Internal.
absl::Status ErrnoStatus(absl::string_view what, absl::string_view syscall, int err = errno);

// Adds context in front of a status message, keeping its code.
absl::Status Annotate(const absl::Status& s, absl::string_view context);

}  // namespace mixnet
