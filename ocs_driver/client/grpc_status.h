// Conversions between gRPC call outcomes and absl::Status for the OCS client,
// and the partial-failure convention of ApplyCrossConnects: a failed Apply
// carries binary error details = a serialized google.rpc.Status whose
// details[0] is an Any-packed mixnet.ocs.v1.ApplyCrossConnectsResponse.
// Pure functions; usable from any thread.
#pragma once

#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "grpcpp/support/status.h"
#include "mixnet/ocs/v1/ocs_driver.pb.h"

namespace mixnet::ocs {

// The same code, with a message naming the target and the method:
// "<target>: <method>: <server message>". OK stays OK.
absl::Status FromGrpcStatus(const grpc::Status& status, absl::string_view target,
                            absl::string_view method);

// Decodes the error details of a failed ApplyCrossConnects. NotFound when
// there are none; InvalidArgument when they do not follow the convention.
absl::StatusOr<v1::ApplyCrossConnectsResponse> DecodeApplyFailureDetails(
    const std::string& binary_details);

// The encoding side (what the daemon sends): a grpc::Status with `code`,
// `message` and `response` packed as described above.
grpc::Status MakeApplyFailureStatus(grpc::StatusCode code, const std::string& message,
                                    const v1::ApplyCrossConnectsResponse& response);

}  // namespace mixnet::ocs
