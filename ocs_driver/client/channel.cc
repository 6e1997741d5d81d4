// MakeOcsChannel: see channel.h.
#include "ocs_driver/client/channel.h"

#include "grpcpp/create_channel.h"
#include "grpcpp/support/channel_arguments.h"
#include "runtime/common/grpc_tls.h"
#include "runtime/common/status.h"

namespace mixnet::ocs {

absl::StatusOr<std::shared_ptr<grpc::Channel>> MakeOcsChannel(const OcsTarget& target,
                                                              const OcsTlsOptions& tls) {
  grpc::ChannelArguments args;
  // Come back quickly after a daemon restart (retries 100 ms apart, at most
  // 1 s); calls fail fast meanwhile. gRPC gives each connection attempt
  // max(back-off, MIN_RECONNECT_BACKOFF) to finish TCP, TLS and the HTTP/2
  // SETTINGS exchange: keep that generous, or a slow or distant daemon is
  // never reached (a refused connection still fails at once).
  args.SetInt(GRPC_ARG_INITIAL_RECONNECT_BACKOFF_MS, 100);
  args.SetInt(GRPC_ARG_MIN_RECONNECT_BACKOFF_MS, 5000);
  args.SetInt(GRPC_ARG_MAX_RECONNECT_BACKOFF_MS, 1000);
  args.SetMaxReceiveMessageSize(16 << 20);
  ASSIGN_OR_RETURN(std::shared_ptr<grpc::ChannelCredentials> creds,
                   ClientCredentials(tls, target.unix_socket,
                                     "--tls-cert and --tls-key; mixnet-controller: --ocs-tls-cert "
                                     "and --ocs-tls-key",
                                     args));
  return grpc::CreateCustomChannel(target.grpc_target, creds, args);
}

}  // namespace mixnet::ocs
