// OcsSwitchDriver: the controller's SwitchDriver (runtime/control/
// switch_driver.h) for one switch behind a mixnet-ocsd daemon, over
// OcsClient. GetCircuits is GetCrossConnects (actual circuits) plus the
// daemon's highest accepted epoch and measured Apply times (GetInfo);
// GetApplyTiming is GetInfo alone; Apply is ApplyCrossConnects with
// the controller's epoch as fencing token. FAILED_PRECONDITION from the
// daemon (a stale epoch) is passed through unchanged: the controller is
// fenced.
//
// Threading: like OcsClient, usable from any thread.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "ocs_driver/client/ocs_client.h"
#include "runtime/control/switch_driver.h"

namespace mixnet::ocs {

class OcsSwitchDriver final : public control::SwitchDriver {
 public:
  // `controller_id` is sent with every Apply (the daemon logs it).
  static absl::StatusOr<std::unique_ptr<OcsSwitchDriver>> Create(const OcsClientOptions& options,
                                                                 std::string controller_id);

  std::string target() const override { return client_->target().text; }
  absl::StatusOr<control::SwitchCircuits> GetCircuits(absl::Time deadline) override;
  absl::StatusOr<control::SwitchApplyResult> Apply(uint64_t epoch, uint64_t version,
                                                   const std::vector<control::PortPair>& circuits,
                                                   absl::Time deadline) override;
  absl::StatusOr<control::SwitchApplyTiming> GetApplyTiming(absl::Time deadline) override;

 private:
  OcsSwitchDriver(std::unique_ptr<OcsClient> client, std::string controller_id)
      : client_(std::move(client)), controller_id_(std::move(controller_id)) {}
  std::unique_ptr<OcsClient> client_;
  const std::string controller_id_;
};

}  // namespace mixnet::ocs
