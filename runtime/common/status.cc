// Errno -> absl::Status mapping (see status.h).
#include "runtime/common/status.h"

namespace mixnet {
namespace {
// strerror_r comes in two shapes: GNU's returns the text (in buf or static),
// POSIX's returns 0 and fills buf.
[[maybe_unused]] const char* StrerrorResult(const char* text, const char*) { return text; }
[[maybe_unused]] const char* StrerrorResult(int rc, const char* buf) {
  return rc == 0 ? buf : "unknown error";
}
}  // namespace

std::string ErrnoText(int err) {
  char buf[128];
  buf[0] = '\0';
  return StrerrorResult(strerror_r(err, buf, sizeof(buf)), buf);
}

absl::Status ErrnoStatus(absl::string_view what, absl::string_view syscall, int err) {
  std::string msg =
      absl::StrCat(what, ": ", syscall, " failed: ", ErrnoText(err), " (errno ", err, ")");
  switch (err) {
    case ECONNREFUSED:
    case ECONNRESET:
    case ECONNABORTED:
    case EPIPE:
    case EHOSTUNREACH:
    case ENETUNREACH:
    case ENETDOWN:
    case EHOSTDOWN:
    case ENOTCONN:
      return absl::UnavailableError(msg);
    case ETIMEDOUT:
      return absl::DeadlineExceededError(msg);
    case EINVAL:
    case EBADF:
    case ENODEV:
    case EADDRNOTAVAIL:
      return absl::InvalidArgumentError(msg);
    case ENOENT:
      return absl::NotFoundError(msg);
    case EPERM:
    case EACCES:
      return absl::PermissionDeniedError(msg);
    case ENOMEM:
    case ENOBUFS:
    case EMFILE:
    case ENFILE:
      return absl::ResourceExhaustedError(msg);
    default:
      return absl::InternalError(msg);
  }
}

absl::Status Annotate(const absl::Status& s, absl::string_view context) {
  if (s.ok()) return s;
  return absl::Status(s.code(), absl::StrCat(context, ": ", s.message()));
}

}  // namespace mixnet
