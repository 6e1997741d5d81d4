// The `polatis` backend of mixnet-ocsd: a HUBER+SUHNER Polatis N x N optical
// circuit switch driven over SCPI on raw TCP (default port 5025).
//
// Port mapping: duplex port p (1..N) is ingress p plus egress N+p, so the
// duplex circuit {a,b} is the two one-way connections ingress a -> egress N+b
// and ingress b -> egress N+a. A lone one-way connection (or a loop ingress p
// -> egress N+p) is not a circuit: Read logs it and leaves it out.
//
// Change sends `:oxc:swit:conn:sub` for the removals (and for one-way
// leftovers on the ports of the change, which would block the additions),
// then `:oxc:swit:conn:add` for the additions (batched channel lists), each
// phase followed by `*OPC?` (bounded by completion_timeout) and a drain of
// the error queue (`:syst:err?` until code 0). The result of each circuit is
// decided by reading the map back (`:oxc:swit:conn:stat?`) once the switch
// said the change is complete; when the connection was lost, a reply timed
// out or the read failed, once more on a new connection after `*OPC?`; if
// that fails the state is unknown (ChangeReport::after unset). What the
// switch holds is the truth; device errors that name a circuit's ports become
// that circuit's failure text. The leftovers are found in the map of the Read
// just before (the service reads, then changes) when no command was sent
// since on the same connection, else read again. `:oxc:swit:conn:only` is
// deliberately not used: the service already computes the difference and
// wants removals before additions, `only` would also tear down connections
// this daemon does not manage (one-way leftovers an operator made by hand on
// other ports) and gives no per-circuit errors.
//
// Threading: one call at a time (the service serialises backend calls).
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "ocs_driver/backend.h"
#include "ocs_driver/polatis/duplex.h"

namespace mixnet::ocs {

struct PolatisOptions {
  std::string host;
  int port = 5025;
  // Minimum gap between a command the switch does not answer (add, sub) and
  // the next command; a command sent once the reply to the previous one has
  // arrived is not delayed. 100 ms by default, as open-source Polatis clients
  // (which never read replies) sleep before each write, because some
  // firmware misbehaves under fast command streams; 0 disables pacing.
  absl::Duration command_pacing = absl::Milliseconds(100);
  // Wait for one reply line (and for the TCP connect).
  absl::Duration reply_timeout = absl::Seconds(5);
  // Wait for `*OPC?` after a batch of connection changes.
  absl::Duration completion_timeout = absl::Seconds(30);
};

// Connects to the switch and reads its size (fails with Unavailable or
// DeadlineExceeded naming host:port when it cannot), so a wrong --device is
// reported at start-up; Info() then only asks *IDN?. InvalidArgument for bad
// options.
absl::StatusOr<std::unique_ptr<OcsBackend>> OpenPolatisBackend(const PolatisOptions& options);

namespace polatis {

// The largest number of connections one add/sub command carries; larger
// batches are split into several commands (one `*OPC?` for the whole phase).
inline constexpr int kMaxConnectionsPerCommand = 64;

}  // namespace polatis
}  // namespace mixnet::ocs
