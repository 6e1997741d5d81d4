// OcsBackend: the one interface every optical switch backend of mixnet-ocsd
// implements (sim, netns, polatis, ...). The service above it owns the
// semantics (validation, fencing, persistence, diffing, one write at a time);
// a backend only reads and changes the switch.
//
// Ports are the switch's duplex ports, 1..Info().ports. A backend with
// separate ingress/egress numbering maps duplex port p to its own numbers
// (Polatis N x N: ingress p, egress N+p; one duplex circuit = two connections).
//
// Threading: the service calls a backend from one thread at a time (it holds
// its write lock around every call), so backends need no locking of their own
// unless they run background work.
#pragma once

#include <compare>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/time/time.h"

namespace mixnet::ocs {

// A duplex circuit between two different duplex ports; normalised a < b.
struct Circuit {
  int a = 0;
  int b = 0;
  static Circuit Of(int x, int y) { return x < y ? Circuit{x, y} : Circuit{y, x}; }
  friend auto operator<=>(const Circuit&, const Circuit&) = default;
};

struct BackendInfo {
  std::string backend;  // "sim", "netns", "polatis", ...
  std::string vendor;   // e.g. "HUBER+SUHNER Polatis"
  std::string model;    // e.g. from *IDN?
  std::string serial;
  std::string firmware;
  int ports = 0;                  // duplex ports, 1..ports
  absl::Duration switching_time;  // nominal time a changed port is dark
};

// The outcome of one circuit in a Change.
struct CircuitOutcome {
  Circuit circuit;
  bool add = false;     // false: removal
  absl::Status status;  // OK when done
};

// What a Change did, read back from the switch.
struct ChangeReport {
  // One entry per circuit of `remove` and `add`, in that order, decided by
  // the read-back when there is one: an add is done when the switch holds
  // the circuit afterwards, a removal when it does not.
  std::vector<CircuitOutcome> outcomes;
  // The circuits the switch holds after the change (sorted), read back once
  // the switch reported the change complete (reconnecting once if the
  // connection was lost). Unset when it could not be read: the state is
  // unknown, which is not the same as "no circuits".
  std::optional<std::vector<Circuit>> after;
  // Why `after` is unset (OK when it is set).
  absl::Status read_back;
  // One-way connections (half a duplex circuit, e.g. left by an earlier
  // partial failure) on the ports of this change that the backend removed
  // before the additions, as text ("ingress 2 -> egress 19 ...").
  std::vector<std::string> cleared;
};

class OcsBackend {
 public:
  virtual ~OcsBackend() = default;

  // Static facts; may talk to the device (cached by the service).
  virtual absl::StatusOr<BackendInfo> Info() = 0;

  // The circuits the switch holds now, read from the device (authoritative),
  // sorted. A one-way connection (half a duplex circuit) is not a circuit; a
  // backend that finds one reports it through Read's caller-visible log and
  // leaves it out.
  virtual absl::StatusOr<std::vector<Circuit>> Read() = 0;

  // Removes `remove`, then adds `add` (the service has already checked that
  // after the removals every port of `add` is free of circuits and that all
  // ports are in range). One-way leftovers on those ports are removed first
  // (listed in report.cleared). Waits until the switch reports completion,
  // including the switching time, then reads the switch back into
  // report.after. Fills report.outcomes (see ChangeReport) and returns OK
  // only when every circuit is verified done by the read-back; otherwise
  // the first failure (for an unknown state, the reason it is unknown).
  // A change with nothing to do sends nothing and returns OK with `after`
  // unset.
  virtual absl::Status Change(const std::vector<Circuit>& remove, const std::vector<Circuit>& add,
                              ChangeReport& report) = 0;
};

}  // namespace mixnet::ocs
