// Parsing of OCS driver addresses as users write them on command lines:
// "host:port", "[v6addr]:port" or "unix:/path/to/socket" (gRPC's own forms).
// Pure functions; usable from any thread.
#pragma once

#include <string>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace mixnet::ocs {

struct OcsTarget {
  std::string text;         // as given
  std::string grpc_target;  // what grpc::CreateCustomChannel takes
  bool unix_socket = false;
  std::string host;  // host name or address without brackets ("" for unix)
  int port = 0;      // 1..65535 (0 for unix)
  std::string path;  // socket path (unix only)
};

// InvalidArgument naming `text` when it is none of the accepted forms: an
// empty host or path, a missing or out-of-range port, an IPv6 address without
// brackets, blanks.
absl::StatusOr<OcsTarget> ParseOcsTarget(absl::string_view text);

}  // namespace mixnet::ocs
