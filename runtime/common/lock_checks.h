// Abseil's lock-order (deadlock) checks, set once per process from
// MIXNET_LOCK_CHECKS. Debian builds abseil without NDEBUG, so every
// absl::Mutex lock and unlock updates a global lock graph (GraphCycles) unless
// the process turns the checks off; on the data plane's per-message path that
// is several percent of the CPU. The checks find lock-order inversions, so the
// test suite keeps them on (MIXNET_LOCK_CHECKS=1); by default they are off,
// as in abseil's release builds. Called by CreateDevice; any thread.
#pragma once

namespace mixnet {

// Applies MIXNET_LOCK_CHECKS to this process (abseil's setting is global).
// Only the first call acts; the setting is read once per process.
void ApplyLockChecks();

}  // namespace mixnet
