// The `polatis-tl1` backend of mixnet-ocsd: a HUBER+SUHNER Polatis N x N
// switch driven over TL1 on TCP (default port 3082), for units or sites
// where SCPI is not enabled.
//
// Same port mapping as the SCPI backend (duplex port p = ingress p + egress
// N+p; see duplex.h). Each call logs in (`ACT-USER`) when its connection is
// new. Change sends one `DLT-PATCH::<ingress>` per connection to remove, then
// (only when every removal was COMPLD) one `ENT-PATCH::<ingress>,<egress>` per
// connection to add, each with its own ctag and answered COMPLD (done,
// including the switching) or DENY (that connection failed; the error code and
// comment go into the circuit's status). The map is then read back with
// `RTRV-PATCH` and decides each circuit, as in the SCPI backend. Autonomous
// messages and acknowledgements between responses are skipped; a response
// with another ctag is discarded.
//
// Threading: one call at a time (the service serialises backend calls).
#pragma once

#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "ocs_driver/backend.h"

namespace mixnet::ocs {

struct PolatisTl1Options {
  std::string host;
  int port = 3082;
  std::string user;      // TL1 user (ACT-USER); required
  std::string password;  // its password
  std::string tid;       // target identifier; empty addresses the switch we talk to
  // N of the N x N switch; 0: from the model name that RTRV-NETYPE reports
  // (e.g. "N-OST-48x48-..."), InvalidArgument at open when it names none.
  int size = 0;
  // As PolatisOptions: 100 ms between command starts by default (0: none).
  absl::Duration command_pacing = absl::Milliseconds(100);
  absl::Duration reply_timeout = absl::Seconds(5);        // plain responses, connect
  absl::Duration completion_timeout = absl::Seconds(30);  // ENT-PATCH / DLT-PATCH
};

// Connects, logs in and learns the size. Unavailable / DeadlineExceeded when
// the switch cannot be reached, PermissionDenied when the login is refused,
// InvalidArgument for bad options.
absl::StatusOr<std::unique_ptr<OcsBackend>> OpenPolatisTl1Backend(const PolatisTl1Options& options);

}  // namespace mixnet::ocs
