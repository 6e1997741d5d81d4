// Checks an ApplyCrossConnectsRequest before the daemon takes the device:
// epoch and config version >= 1, every port in 1..ports, no self-loop, no port
// used twice, message and controller id within their size limits. Everything
// here is INVALID_ARGUMENT; fencing (epochs against the persisted state) is
// the service's job. Pure functions; any thread.
#pragma once

#include <cstddef>
#include <vector>

#include "absl/status/statusor.h"
#include "mixnet/ocs/v1/ocs_driver.pb.h"
#include "ocs_driver/backend.h"

namespace mixnet::ocs {

// Largest ApplyCrossConnectsRequest accepted (bytes, serialized). gRPC's own
// limit (DaemonOptions::max_receive_bytes) is higher, so a larger request is
// answered INVALID_ARGUMENT here rather than RESOURCE_EXHAUSTED.
inline constexpr size_t kMaxApplyRequestBytes = 64 * 1024;
inline constexpr size_t kMaxControllerIdBytes = 256;

// The request's circuits normalised (a < b) and sorted, or InvalidArgument
// naming the first problem.
absl::StatusOr<std::vector<Circuit>> ValidateApplyRequest(
    const mixnet::ocs::v1::ApplyCrossConnectsRequest& request, int ports);

}  // namespace mixnet::ocs
