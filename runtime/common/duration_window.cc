// DurationWindow (see duration_window.h). Under its owner's lock.
#include "runtime/common/duration_window.h"

#include <algorithm>
#include <vector>

namespace mixnet {

void DurationWindow::Add(absl::Duration took) {
  if (capacity_ == 0) return;
  if (samples_.size() == capacity_) samples_.pop_front();
  samples_.push_back(std::max(took, absl::ZeroDuration()));
}

DurationStats DurationWindow::Stats() const {
  DurationStats s;
  if (samples_.empty()) return s;
  std::vector<absl::Duration> sorted(samples_.begin(), samples_.end());
  std::sort(sorted.begin(), sorted.end());
  const size_t n = sorted.size();
  // Nearest rank: the ceil(p * n)-th smallest, computed in integers.
  auto rank = [&](size_t percent) { return std::max<size_t>(1, (percent * n + 99) / 100) - 1; };
  s.samples = static_cast<uint32_t>(n);
  s.median = sorted[rank(50)];
  s.p90 = sorted[rank(90)];
  s.p99 = sorted[rank(99)];
  s.max = sorted.back();
  return s;
}

}  // namespace mixnet
