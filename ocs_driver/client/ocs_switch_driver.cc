// OcsSwitchDriver (see ocs_switch_driver.h): SwitchDriver over OcsClient.
// Any thread.
#include "ocs_driver/client/ocs_switch_driver.h"

#include <algorithm>

#include "absl/strings/str_cat.h"
#include "ocs_driver/service/request_validation.h"
#include "runtime/common/status.h"

namespace mixnet::ocs {

static_assert(control::kMaxFencingEpoch == kMaxEpoch,
              "the controller's epoch limit must be the daemon's");

namespace {

absl::Duration Left(absl::Time deadline) {
  return std::max(deadline - absl::Now(), absl::Milliseconds(1));
}

std::vector<control::PortPair> Pairs(
    const google::protobuf::RepeatedPtrField<v1::Circuit>& circuits) {
  std::vector<control::PortPair> out;
  for (const v1::Circuit& c : circuits) {
    out.emplace_back(static_cast<int>(c.port_a()), static_cast<int>(c.port_b()));
  }
  return out;
}

control::SwitchApplyTiming TimingOf(const v1::GetInfoResponse& info) {
  control::SwitchApplyTiming t;
  t.samples = info.apply_samples();
  t.median = absl::Microseconds(static_cast<int64_t>(info.apply_median_us()));
  t.p90 = absl::Microseconds(static_cast<int64_t>(info.apply_p90_us()));
  t.max = absl::Microseconds(static_cast<int64_t>(info.apply_max_us()));
  return t;
}

}  // namespace

absl::StatusOr<std::unique_ptr<OcsSwitchDriver>> OcsSwitchDriver::Create(
    const OcsClientOptions& options, std::string controller_id) {
  ASSIGN_OR_RETURN(std::unique_ptr<OcsClient> client, OcsClient::Create(options));
  return std::unique_ptr<OcsSwitchDriver>(
      new OcsSwitchDriver(std::move(client), std::move(controller_id)));
}

absl::StatusOr<control::SwitchCircuits> OcsSwitchDriver::GetCircuits(absl::Time deadline) {
  ASSIGN_OR_RETURN(v1::GetInfoResponse info, client_->GetInfo(Left(deadline)));
  ASSIGN_OR_RETURN(v1::GetCrossConnectsResponse cc, client_->GetCrossConnects(Left(deadline)));
  control::SwitchCircuits out;
  out.circuits = Pairs(cc.actual());
  out.highest_epoch = std::max(info.highest_epoch(), cc.epoch());
  out.config_version = cc.config_version();
  out.apply_timing = TimingOf(info);
  return out;
}

absl::StatusOr<control::SwitchApplyTiming> OcsSwitchDriver::GetApplyTiming(absl::Time deadline) {
  ASSIGN_OR_RETURN(v1::GetInfoResponse info, client_->GetInfo(Left(deadline)));
  return TimingOf(info);
}

absl::StatusOr<control::SwitchApplyResult> OcsSwitchDriver::Apply(
    uint64_t epoch, uint64_t version, const std::vector<control::PortPair>& circuits,
    absl::Time deadline) {
  v1::ApplyCrossConnectsRequest request;
  request.set_epoch(epoch);
  request.set_config_version(version);
  request.set_controller_id(controller_id_);
  for (const auto& [a, b] : circuits) {
    v1::Circuit* c = request.add_circuits();
    c->set_port_a(static_cast<uint32_t>(std::min(a, b)));
    c->set_port_b(static_cast<uint32_t>(std::max(a, b)));
  }
  OcsApplyResult r = client_->Apply(request, Left(deadline));
  if (!r.ok()) return r.status;
  control::SwitchApplyResult out;
  out.highest_epoch = r.response.epoch();
  out.backend_time = absl::Microseconds(static_cast<int64_t>(r.response.backend_us()));
  out.actual = Pairs(r.response.actual());
  out.noop = r.response.noop();
  return out;
}

}  // namespace mixnet::ocs
