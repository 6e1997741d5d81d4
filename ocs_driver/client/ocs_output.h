// How mixnetctl shows OcsDriver replies: JSON objects (nlohmann-json; numbers
// as numbers, circuits as [a, b] pairs) and short human-readable text. The
// JSON keys are documented in ocs_driver/client/README.md. Pure functions.
#pragma once

#include <string>

#include "absl/status/status.h"
#include "absl/time/time.h"
#include "grpc/health/v1/health.pb.h"
#include "mixnet/ocs/v1/ocs_driver.pb.h"
#include "nlohmann/json.hpp"
#include "ocs_driver/client/ocs_client.h"

namespace mixnet::ocs {

nlohmann::json CircuitsJson(const google::protobuf::RepeatedPtrField<v1::Circuit>& circuits);
// "1-2 3-4" ("none" when empty).
std::string CircuitsText(const google::protobuf::RepeatedPtrField<v1::Circuit>& circuits);

// {"code": "UNAVAILABLE", "message": "..."}
nlohmann::json StatusJson(const absl::Status& status);

nlohmann::json InfoJson(const v1::GetInfoResponse& info);
std::string InfoText(const v1::GetInfoResponse& info);

nlohmann::json CrossConnectsJson(const v1::GetCrossConnectsResponse& cc);
std::string CrossConnectsText(const v1::GetCrossConnectsResponse& cc);

// `latency` is the client's time from request to reply.
nlohmann::json ApplyJson(const OcsApplyResult& result, absl::Duration latency);
std::string ApplyText(const OcsApplyResult& result, absl::Duration latency);

nlohmann::json WatchEventJson(const v1::WatchEvent& event);
std::string WatchEventText(const v1::WatchEvent& event);  // one line

nlohmann::json HealthJson(const grpc::health::v1::HealthCheckResponse& health);
std::string HealthText(const grpc::health::v1::HealthCheckResponse& health);

}  // namespace mixnet::ocs
