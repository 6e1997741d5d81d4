// OcsClient: the client of one OCS driver daemon (mixnet-ocsd), used by
// mixnetctl, mixnet_ocs_bench and the controller. Every unary call carries a
// deadline (the client's timeout unless the call names one) and fails fast
// (UNAVAILABLE) when the daemon cannot be reached. Errors keep the gRPC code
// and name the target and the method.
//
// Threading: an OcsClient may be used from any number of threads at once (a
// gRPC channel and stub are thread-safe). Watch callbacks run on the watch's
// own reader thread.
#pragma once

#include <memory>
#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "grpc/health/v1/health.grpc.pb.h"
#include "grpcpp/channel.h"
#include "mixnet/ocs/v1/ocs_driver.grpc.pb.h"
#include "ocs_driver/client/channel.h"
#include "ocs_driver/client/target.h"
#include "ocs_driver/client/watch.h"

namespace mixnet::ocs {

struct OcsClientOptions {
  std::string target;  // "host:port" or "unix:/path"
  OcsTlsOptions tls;
  absl::Duration timeout = absl::Seconds(5);  // per call
};

// The outcome of ApplyCrossConnects. `status` is the overall result; on
// success `response` is the reply, on a partial or total hardware failure it
// is the ApplyCrossConnectsResponse decoded from the error details (a result
// per changed circuit and the state read back), when the daemon sent one.
struct OcsApplyResult {
  absl::Status status;
  bool has_response = false;
  v1::ApplyCrossConnectsResponse response;

  bool ok() const { return status.ok(); }
};

class OcsClient {
 public:
  // Parses the target and builds the channel; does not connect (see
  // WaitForConnected). InvalidArgument for a bad target or TLS files.
  static absl::StatusOr<std::unique_ptr<OcsClient>> Create(const OcsClientOptions& options);

  const OcsTarget& target() const { return target_; }
  absl::Duration timeout() const { return timeout_; }

  // Connects now; Unavailable naming the target when not connected within
  // `timeout` (the client's timeout when zero).
  absl::Status WaitForConnected(absl::Duration timeout = absl::ZeroDuration());

  // Unary calls; `timeout` zero = the client's timeout.
  absl::StatusOr<v1::GetInfoResponse> GetInfo(absl::Duration timeout = absl::ZeroDuration());
  absl::StatusOr<v1::GetCrossConnectsResponse> GetCrossConnects(
      absl::Duration timeout = absl::ZeroDuration());
  OcsApplyResult Apply(const v1::ApplyCrossConnectsRequest& request,
                       absl::Duration timeout = absl::ZeroDuration());
  // grpc.health.v1.Health/Check for `service` ("" = the whole server).
  absl::StatusOr<grpc::health::v1::HealthCheckResponse> Health(
      const std::string& service = "", absl::Duration timeout = absl::ZeroDuration());

  // Starts a Watch stream after connecting (within the client's timeout):
  // `on_event` gets the snapshot, then every change, until it returns false,
  // the stream ends or the OcsWatch is cancelled/destroyed. The stream itself
  // has no deadline.
  absl::StatusOr<std::unique_ptr<OcsWatch>> Watch(OcsWatch::Callback on_event);

 private:
  OcsClient(OcsTarget target, std::shared_ptr<grpc::Channel> channel, absl::Duration timeout);
  absl::Time Deadline(absl::Duration timeout) const;

  const OcsTarget target_;
  const std::shared_ptr<grpc::Channel> channel_;
  const absl::Duration timeout_;
  const std::unique_ptr<v1::OcsDriver::Stub> stub_;
  const std::unique_ptr<grpc::health::v1::Health::Stub> health_stub_;
};

}  // namespace mixnet::ocs
