// A bounded window of the latest measured durations and their nearest-rank
// statistics: the median (the ceil(n/2)-th smallest, the lower middle for
// even n), p90 (the ceil(0.9 n)-th) and the max. Negative durations count as
// zero. Used for how long a switch's Applies take (ocs_driver/service/
// apply_timing.h) and how long the controller's rounds take
// (runtime/control/controller.h).
// Not thread-safe; the owner guards it.
#pragma once

#include <cstddef>
#include <cstdint>
#include <deque>

#include "absl/time/time.h"

namespace mixnet {

struct DurationStats {
  uint32_t samples = 0;  // in the window (0: nothing measured yet)
  absl::Duration median = absl::ZeroDuration();
  absl::Duration p90 = absl::ZeroDuration();
  absl::Duration p99 = absl::ZeroDuration();
  absl::Duration max = absl::ZeroDuration();
};

class DurationWindow {
 public:
  explicit DurationWindow(size_t capacity) : capacity_(capacity) {}
  // Adds one duration; the oldest falls out when the window is full.
  void Add(absl::Duration took);
  DurationStats Stats() const;

 private:
  size_t capacity_;
  std::deque<absl::Duration> samples_;  // oldest first
};

}  // namespace mixnet
