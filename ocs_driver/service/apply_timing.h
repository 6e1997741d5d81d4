// How long this switch's Applies really take: a bounded window of the wall
// times of the latest ApplyCrossConnects calls that changed the switch
// (kApplyTimeWindow of them; no-ops and failed calls are not counted),
// measured with the device held: read before, persist, drive the change,
// read back. Queueing behind another call for the device is not included.
// Exposed in GetInfo (apply_samples, apply_median_us, apply_p90_us,
// apply_max_us) so that controllers plan with it instead of a configured
// switching time. In memory only: a restarted daemon starts with none.
//
// Percentiles are nearest-rank over the window (runtime/common/
// duration_window.h). Not thread-safe; the service guards it with its mutex.
#pragma once

#include <cstddef>

#include "runtime/common/duration_window.h"

namespace mixnet::ocs {

inline constexpr size_t kApplyTimeWindow = 32;

using ApplyTimeStats = DurationStats;

class ApplyTimeWindow : public DurationWindow {
 public:
  explicit ApplyTimeWindow(size_t capacity = kApplyTimeWindow) : DurationWindow(capacity) {}
};

}  // namespace mixnet::ocs
