// How long this switch's Applies really take: a bounded window of the wall
// times of the latest ApplyCrossConnects calls that changed the switch
// (kApplyTimeWindow of them; no-ops and failed calls are not counted),
// measured with the device held: read before, persist, drive the change,
// read back. Queueing behind another call for the device is not included.
// Exposed in GetInfo (apply_samples, apply_median_us, apply_p90_us,
// apply_max_us) so that controllers plan with it instead of a configured
// switching time. In memory only: a restarted daemon starts with none.
//
// Percentiles are nearest-rank over the window: the k-th smallest sample
// with k = ceil(p * n), p = 0.5 (median; the lower middle for even n) and
// p = 0.9.
//
// Not thread-safe; the service guards it with its mutex.
#pragma once

#include <cstddef>
#include <cstdint>
#include <deque>

#include "absl/time/time.h"

namespace mixnet::ocs {

inline constexpr size_t kApplyTimeWindow = 32;

struct ApplyTimeStats {
  uint32_t samples = 0;  // in the window (0: nothing measured yet)
  absl::Duration median = absl::ZeroDuration();
  absl::Duration p90 = absl::ZeroDuration();
  absl::Duration max = absl::ZeroDuration();
};

class ApplyTimeWindow {
 public:
  explicit ApplyTimeWindow(size_t capacity = kApplyTimeWindow) : capacity_(capacity) {}
  // Adds one measured Apply; the oldest falls out when the window is full.
  void Add(absl::Duration took);
  ApplyTimeStats Stats() const;

 private:
  size_t capacity_;
  std::deque<absl::Duration> samples_;  // oldest first
};

}  // namespace mixnet::ocs
