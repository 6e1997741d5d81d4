// The controller's switching-time rules: how the Apply times a switch's
// daemon measured (SwitchApplyTiming, switch_driver.h) replace the spec's
// nominal switch_ms in planning and in the round's deadlines.
//
//   - Decide (DecideOptions::switch_s): per switch, the larger of the spec's
//     switch_ms and the measured median Apply time (the typical cost of one
//     reconfiguration: a round waits for the Apply, and never less than
//     switch_ms, which it settles out); before the switch has measured an
//     Apply, switch_ms alone. The controller plans with the slowest switch.
//   - Apply deadline: the larger of --switch-timeout-ms and
//     kApplyDeadlineFactor x the switch's measured maximum. A switch measured
//     slower than the configured timeout allows gets the time it needs; the
//     timeout stays the floor because the Apply time grows with the number
//     of ports a round changes, which the window does not see, and an Apply
//     cut short leaves the switch half-changed.
//
// Pure functions; any thread (the controller calls them on its planner
// thread).
#pragma once

#include <algorithm>

#include "absl/time/time.h"
#include "runtime/control/switch_driver.h"

namespace mixnet::control {

inline constexpr int kApplyDeadlineFactor = 4;

// Seconds one reconfiguration of this switch costs (see above).
inline double SwitchSeconds(double spec_switch_ms, const SwitchApplyTiming& measured) {
  const double spec_s = spec_switch_ms / 1000.0;
  if (measured.samples == 0) return spec_s;
  return std::max(spec_s, absl::ToDoubleSeconds(measured.median));
}

// How long one Apply on this switch may take (see above).
inline absl::Duration ApplyTimeout(absl::Duration switch_timeout,
                                   const SwitchApplyTiming& measured) {
  if (measured.samples == 0) return switch_timeout;
  return std::max(switch_timeout, kApplyDeadlineFactor * measured.max);
}

}  // namespace mixnet::control
