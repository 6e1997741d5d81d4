// SwitchDriver: how the controller (runtime/control) talks to one OCS switch,
// without depending on ocs_driver/ (the dependency points the other way:
// ocs_driver/client/ocs_switch_driver.h implements it with OcsClient, tests
// use fakes). One SwitchDriver per OCS switch of the cluster spec.
//
// The controller learns each switch's real Apply time from it
// (SwitchApplyTiming; how it is used: switch_timing.h).
//
// Threading: the controller calls a driver from its planner thread (and once
// at start-up); implementations must be safe to call from one thread at a
// time at least.
#pragma once

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/time/time.h"

namespace mixnet::control {

// Highest fencing epoch a switch accepts (mixnet-ocsd refuses anything
// above it, see ocs_driver/service/request_validation.h kMaxEpoch: 2^53 - 1,
// exact in every JSON reader). A controller whose next epoch would exceed
// it refuses to start instead of wrapping to 0.
inline constexpr uint64_t kMaxFencingEpoch = (uint64_t{1} << 53) - 1;

// A duplex circuit between two 1-based ports of one switch (a < b).
using PortPair = std::pair<int, int>;

// How long Applies really take on a switch, as its daemon measured them
// (mixnet-ocsd: the latest, up to 32, Applies that changed the switch;
// nearest-rank median / p90, and the max). samples 0: none measured yet.
struct SwitchApplyTiming {
  uint32_t samples = 0;
  absl::Duration median = absl::ZeroDuration();
  absl::Duration p90 = absl::ZeroDuration();
  absl::Duration max = absl::ZeroDuration();
};

struct SwitchCircuits {
  std::vector<PortPair> circuits;  // what the switch holds now (read back)
  uint64_t highest_epoch = 0;      // highest fencing epoch it accepted
  uint64_t config_version = 0;
  SwitchApplyTiming apply_timing;  // measured so far (none from a driver that cannot tell)
};

struct SwitchApplyResult {
  uint64_t highest_epoch = 0;    // after the change
  absl::Duration backend_time;   // time the switch took, switching time included
  std::vector<PortPair> actual;  // read back after the change
  bool noop = false;
};

class SwitchDriver {
 public:
  virtual ~SwitchDriver() = default;
  // Where the driver points (for logs): "unix:/run/ocs0.sock", "fake".
  virtual std::string target() const = 0;
  // The switch's actual circuits and highest epoch; Unavailable /
  // DeadlineExceeded naming the target when it cannot be read.
  virtual absl::StatusOr<SwitchCircuits> GetCircuits(absl::Time deadline) = 0;
  // Installs exactly `circuits` (the whole desired set) with fencing epoch
  // `epoch` and config version `version`. FailedPrecondition when the switch
  // has seen a higher epoch (this controller is stale: fenced); other codes
  // for hardware or transport failures (the switch may be partly changed).
  virtual absl::StatusOr<SwitchApplyResult> Apply(uint64_t epoch, uint64_t version,
                                                  const std::vector<PortPair>& circuits,
                                                  absl::Time deadline) = 0;
  // The switch's measured Apply times (cheap: no device access). The
  // default reads them through GetCircuits.
  virtual absl::StatusOr<SwitchApplyTiming> GetApplyTiming(absl::Time deadline) {
    absl::StatusOr<SwitchCircuits> c = GetCircuits(deadline);
    if (!c.ok()) return c.status();
    return c->apply_timing;
  }
};

}  // namespace mixnet::control
