// The `sim` backend of mixnet-ocsd: an in-memory optical circuit switch with a
// configurable port count and switching time. Change() sleeps the switching
// time once when anything changed, like a real switch moving its mirrors.
//
// Two testing aids:
//   - fail_ports: adds that touch one of these ports fail with Unavailable
//     (an injected hardware fault), so partial failures can be tested;
//   - hardware_file: the "hardware" state is kept in this file (loaded at
//     open, rewritten atomically at open and as soon as a change is made,
//     before the switching time), emulating a switch that outlives the daemon.
//
// Threading: the service calls it from one thread at a time (OcsBackend's
// contract); it has no background work and no locking of its own.
#pragma once

#include <memory>
#include <set>
#include <string>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "ocs_driver/backend.h"

namespace mixnet::ocs {

struct SimOptions {
  // Duplex ports, 1..ports (>= 2).
  int ports = 0;
  // Slept once per Change that changed something.
  absl::Duration switching_time = absl::ZeroDuration();
  // Testing: adds touching these ports fail (Unavailable).
  std::set<int> fail_ports = {};
  // Testing: persist the "hardware" here (empty: memory only).
  std::string hardware_file = "";
};

// Validates the options (ports >= 2, switching time >= 0, fail_ports in
// range) and loads the hardware_file when it exists, then rewrites it. Every
// problem is an error naming the setting (as its mixnet-ocsd flag) or the
// file and line: InvalidArgument for bad settings or a malformed file (not
// "a b" per line, a port out of range or used twice, a self-loop), the
// errno's code when the file cannot be read or written. There is no
// fallback to an empty switch: a daemon with a bad sim setup does not start.
absl::StatusOr<std::unique_ptr<OcsBackend>> OpenSimBackend(const SimOptions& options);

}  // namespace mixnet::ocs
