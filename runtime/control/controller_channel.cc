// MakeControllerChannel: see controller_channel.h.
#include "runtime/control/controller_channel.h"

#include "absl/strings/match.h"
#include "grpcpp/create_channel.h"
#include "grpcpp/support/channel_arguments.h"
#include "runtime/common/settings.h"
#include "runtime/common/status.h"

namespace mixnet::control {

TlsClientOptions ControllerTlsFromSettings() {
  const Settings& s = GetSettings();
  TlsClientOptions tls;
  tls.ca_file = s.controller_tls_ca;
  tls.cert_file = s.controller_tls_cert;
  tls.key_file = s.controller_tls_key;
  tls.server_name = s.controller_tls_server_name;
  tls.enabled = !tls.server_name.empty();
  return tls;
}

absl::StatusOr<std::shared_ptr<grpc::Channel>> MakeControllerChannel(const std::string& target,
                                                                     const TlsClientOptions& tls) {
  grpc::ChannelArguments args;
  ASSIGN_OR_RETURN(
      std::shared_ptr<grpc::ChannelCredentials> creds,
      ClientCredentials(tls, absl::StartsWith(target, "unix:"),
                        "MIXNET_CONTROLLER_TLS_CERT and MIXNET_CONTROLLER_TLS_KEY", args));
  return grpc::CreateCustomChannel(target, creds, args);
}

}  // namespace mixnet::control
