// See lock_checks.h.
#include "runtime/common/lock_checks.h"

#include "absl/synchronization/mutex.h"
#include "runtime/common/settings.h"

namespace mixnet {

void ApplyLockChecks() {
  static const bool applied = [] {
    if (GetSettings().lock_checks == 0) {
      absl::SetMutexDeadlockDetectionMode(absl::OnDeadlockCycle::kIgnore);
    }
    return true;
  }();
  (void)applied;
}

}  // namespace mixnet
