// Checks an ApplyCrossConnectsRequest before the daemon takes the device:
// epoch in 1..kMaxEpoch, config version >= 1, every port in 1..ports, no self-loop, no port
// used twice, message and controller id within their size limits. Everything
// here is INVALID_ARGUMENT; fencing (epochs against the persisted state) is
// the service's job. Pure functions; any thread.
#pragma once

#include <cstddef>
#include <cstdint>
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
// Highest fencing epoch accepted: 2^53 - 1. Above it a client's mistake
// (--epoch -1 is 2^64 - 1) would fence every later epoch for good and make a
// controller's "highest + 1" wrap to 0. 2^53 - 1 is the largest integer
// every JSON reader (state.json, --json output) holds exactly; at 1,000
// reconfigurations a second it lasts 285,000 years. The controller refuses
// to start when the next epoch would exceed it (runtime/control/
// switch_driver.h, kMaxFencingEpoch, the same value).
inline constexpr uint64_t kMaxEpoch = (uint64_t{1} << 53) - 1;

// The request's circuits normalised (a < b) and sorted, or InvalidArgument
// naming the first problem.
absl::StatusOr<std::vector<Circuit>> ValidateApplyRequest(
    const mixnet::ocs::v1::ApplyCrossConnectsRequest& request, int ports);

}  // namespace mixnet::ocs
