// ParseOcsTarget: see target.h.
#include "ocs_driver/client/target.h"

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"

namespace mixnet::ocs {
namespace {

absl::Status Bad(absl::string_view text, absl::string_view why) {
  return absl::InvalidArgumentError(absl::StrCat("bad OCS target '", text, "': ", why,
                                                 " (expected host:port, [v6]:port or unix:/path)"));
}

bool HasBlank(absl::string_view s) {
  for (char c : s) {
    if (absl::ascii_isspace(static_cast<unsigned char>(c)) || absl::ascii_iscntrl(c)) return true;
  }
  return false;
}

}  // namespace

absl::StatusOr<OcsTarget> ParseOcsTarget(absl::string_view text) {
  OcsTarget t;
  t.text = std::string(text);
  if (text.empty()) return Bad(text, "empty");
  if (HasBlank(text)) return Bad(text, "contains blanks");
  if (absl::StartsWith(text, "unix:")) {
    absl::string_view path = text.substr(5);
    // gRPC also accepts unix:///abs/path; keep one slash for the path.
    if (absl::StartsWith(path, "//")) path.remove_prefix(2);
    if (path.empty()) return Bad(text, "empty socket path");
    t.unix_socket = true;
    t.path = std::string(path);
    t.grpc_target = absl::StrCat("unix:", path);
    return t;
  }
  absl::string_view host;
  absl::string_view port;
  if (absl::StartsWith(text, "[")) {
    size_t close = text.find(']');
    if (close == absl::string_view::npos) return Bad(text, "missing ']'");
    host = text.substr(1, close - 1);
    absl::string_view rest = text.substr(close + 1);
    if (!absl::StartsWith(rest, ":")) return Bad(text, "missing :port after ']'");
    port = rest.substr(1);
  } else {
    size_t colon = text.rfind(':');
    if (colon == absl::string_view::npos) return Bad(text, "missing :port");
    host = text.substr(0, colon);
    port = text.substr(colon + 1);
    if (absl::StrContains(host, ':')) return Bad(text, "IPv6 addresses need brackets");
    if (absl::StrContains(host, '/')) return Bad(text, "unknown scheme or '/' in host");
  }
  if (host.empty()) return Bad(text, "empty host");
  int p = 0;
  if (port.empty() || !absl::SimpleAtoi(port, &p) || p < 1 || p > 65535 ||
      port.find_first_not_of("0123456789") != absl::string_view::npos) {
    return Bad(text, "port must be 1..65535");
  }
  t.host = std::string(host);
  t.port = p;
  t.grpc_target =
      absl::StrContains(host, ':') ? absl::StrCat("[", host, "]:", p) : absl::StrCat(host, ":", p);
  return t;
}

}  // namespace mixnet::ocs
