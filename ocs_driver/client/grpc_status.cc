// gRPC status conversions and Apply failure details: see grpc_status.h.
#include "ocs_driver/client/grpc_status.h"

#include "absl/strings/str_cat.h"
#include "google/rpc/status.pb.h"

namespace mixnet::ocs {

absl::Status FromGrpcStatus(const grpc::Status& status, absl::string_view target,
                            absl::string_view method) {
  if (status.ok()) return absl::OkStatus();
  // grpc::StatusCode and absl::StatusCode share their values.
  return absl::Status(static_cast<absl::StatusCode>(status.error_code()),
                      absl::StrCat(target, ": ", method, ": ", status.error_message()));
}

absl::StatusOr<v1::ApplyCrossConnectsResponse> DecodeApplyFailureDetails(
    const std::string& binary_details) {
  if (binary_details.empty()) return absl::NotFoundError("no error details");
  google::rpc::Status rpc_status;
  if (!rpc_status.ParseFromString(binary_details)) {
    return absl::InvalidArgumentError("error details are not a google.rpc.Status");
  }
  if (rpc_status.details_size() == 0) {
    return absl::NotFoundError("google.rpc.Status in the error details has no details");
  }
  const google::protobuf::Any& any = rpc_status.details(0);
  v1::ApplyCrossConnectsResponse response;
  if (!any.Is<v1::ApplyCrossConnectsResponse>() || !any.UnpackTo(&response)) {
    return absl::InvalidArgumentError(
        absl::StrCat("error details[0] is '", any.type_url(),
                     "', not a mixnet.ocs.v1.ApplyCrossConnectsResponse"));
  }
  return response;
}

grpc::Status MakeApplyFailureStatus(grpc::StatusCode code, const std::string& message,
                                    const v1::ApplyCrossConnectsResponse& response) {
  google::rpc::Status rpc_status;
  rpc_status.set_code(static_cast<int>(code));
  rpc_status.set_message(message);
  rpc_status.add_details()->PackFrom(response);
  return grpc::Status(code, message, rpc_status.SerializeAsString());
}

}  // namespace mixnet::ocs
