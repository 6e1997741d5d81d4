// OcsClient: see ocs_client.h. Each unary call builds its own ClientContext
// with a deadline; nothing here blocks without one.
#include "ocs_driver/client/ocs_client.h"

#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "grpcpp/client_context.h"
#include "ocs_driver/client/grpc_status.h"
#include "runtime/common/status.h"

namespace mixnet::ocs {
namespace {

const char* StateName(grpc_connectivity_state state) {
  switch (state) {
    case GRPC_CHANNEL_IDLE:
      return "idle";
    case GRPC_CHANNEL_CONNECTING:
      return "connecting";
    case GRPC_CHANNEL_READY:
      return "ready";
    case GRPC_CHANNEL_TRANSIENT_FAILURE:
      return "failing to connect";
    case GRPC_CHANNEL_SHUTDOWN:
      return "shut down";
  }
  return "unknown";
}

}  // namespace

absl::StatusOr<std::unique_ptr<OcsClient>> OcsClient::Create(const OcsClientOptions& options) {
  ASSIGN_OR_RETURN(OcsTarget target, ParseOcsTarget(options.target));
  if (options.timeout <= absl::ZeroDuration()) {
    return absl::InvalidArgumentError(absl::StrCat("OCS client timeout must be positive, got ",
                                                   absl::FormatDuration(options.timeout)));
  }
  ASSIGN_OR_RETURN(std::shared_ptr<grpc::Channel> channel, MakeOcsChannel(target, options.tls));
  return std::unique_ptr<OcsClient>(
      new OcsClient(std::move(target), std::move(channel), options.timeout));
}

OcsClient::OcsClient(OcsTarget target, std::shared_ptr<grpc::Channel> channel,
                     absl::Duration timeout)
    : target_(std::move(target)),
      channel_(std::move(channel)),
      timeout_(timeout),
      stub_(v1::OcsDriver::NewStub(channel_)),
      health_stub_(grpc::health::v1::Health::NewStub(channel_)) {}

absl::Time OcsClient::Deadline(absl::Duration timeout) const {
  return absl::Now() + (timeout > absl::ZeroDuration() ? timeout : timeout_);
}

absl::Status OcsClient::WaitForConnected(absl::Duration timeout) {
  absl::Duration t = timeout > absl::ZeroDuration() ? timeout : timeout_;
  if (channel_->WaitForConnected(absl::ToChronoTime(absl::Now() + t))) return absl::OkStatus();
  return absl::UnavailableError(absl::StrCat(target_.text, ": not connected within ",
                                             absl::FormatDuration(t), " (channel ",
                                             StateName(channel_->GetState(false)), ")"));
}

absl::StatusOr<v1::GetInfoResponse> OcsClient::GetInfo(absl::Duration timeout) {
  grpc::ClientContext ctx;
  ctx.set_deadline(absl::ToChronoTime(Deadline(timeout)));
  v1::GetInfoResponse response;
  grpc::Status s = stub_->GetInfo(&ctx, v1::GetInfoRequest(), &response);
  RETURN_IF_ERROR(FromGrpcStatus(s, target_.text, "GetInfo"));
  return response;
}

absl::StatusOr<v1::GetCrossConnectsResponse> OcsClient::GetCrossConnects(absl::Duration timeout) {
  grpc::ClientContext ctx;
  ctx.set_deadline(absl::ToChronoTime(Deadline(timeout)));
  v1::GetCrossConnectsResponse response;
  grpc::Status s = stub_->GetCrossConnects(&ctx, v1::GetCrossConnectsRequest(), &response);
  RETURN_IF_ERROR(FromGrpcStatus(s, target_.text, "GetCrossConnects"));
  return response;
}

OcsApplyResult OcsClient::Apply(const v1::ApplyCrossConnectsRequest& request,
                                absl::Duration timeout) {
  grpc::ClientContext ctx;
  ctx.set_deadline(absl::ToChronoTime(Deadline(timeout)));
  OcsApplyResult result;
  grpc::Status s = stub_->ApplyCrossConnects(&ctx, request, &result.response);
  result.status = FromGrpcStatus(s, target_.text, "ApplyCrossConnects");
  if (s.ok()) {
    result.has_response = true;
    return result;
  }
  result.response.Clear();
  absl::StatusOr<v1::ApplyCrossConnectsResponse> details =
      DecodeApplyFailureDetails(s.error_details());
  if (details.ok()) {
    result.response = *std::move(details);
    result.has_response = true;
  } else if (!absl::IsNotFound(details.status())) {
    // Keep the call's code; say that the details were unreadable.
    result.status = absl::Status(
        result.status.code(), absl::StrCat(result.status.message(), " (undecodable error details: ",
                                           details.status().message(), ")"));
  }
  return result;
}

absl::StatusOr<grpc::health::v1::HealthCheckResponse> OcsClient::Health(const std::string& service,
                                                                        absl::Duration timeout) {
  grpc::ClientContext ctx;
  ctx.set_deadline(absl::ToChronoTime(Deadline(timeout)));
  grpc::health::v1::HealthCheckRequest request;
  request.set_service(service);
  grpc::health::v1::HealthCheckResponse response;
  grpc::Status s = health_stub_->Check(&ctx, request, &response);
  RETURN_IF_ERROR(FromGrpcStatus(s, target_.text, "grpc.health.v1.Health/Check"));
  return response;
}

absl::StatusOr<std::unique_ptr<OcsWatch>> OcsClient::Watch(OcsWatch::Callback on_event) {
  RETURN_IF_ERROR(WaitForConnected());
  return std::make_unique<OcsWatch>(stub_.get(), target_.text, std::move(on_event));
}

}  // namespace mixnet::ocs
