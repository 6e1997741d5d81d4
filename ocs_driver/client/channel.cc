// MakeOcsChannel: see channel.h.
#include "ocs_driver/client/channel.h"

#include <cerrno>
#include <cstring>
#include <fstream>
#include <sstream>

#include "absl/strings/str_cat.h"
#include "grpcpp/create_channel.h"
#include "grpcpp/security/credentials.h"
#include "grpcpp/support/channel_arguments.h"
#include "runtime/common/status.h"

namespace mixnet::ocs {
namespace {

absl::StatusOr<std::string> ReadPem(const std::string& path, absl::string_view what) {
  std::ifstream in(path, std::ios::binary);
  if (!in) {
    int err = errno;
    return absl::InvalidArgumentError(absl::StrCat("cannot read TLS ", what, " file '", path,
                                                   "': ", ErrnoText(err), " (errno ", err, ")"));
  }
  std::ostringstream ss;
  ss << in.rdbuf();
  std::string pem = ss.str();
  if (pem.find("-----BEGIN") == std::string::npos) {
    return absl::InvalidArgumentError(
        absl::StrCat("TLS ", what, " file '", path, "' holds no PEM block"));
  }
  return pem;
}

}  // namespace

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
  std::shared_ptr<grpc::ChannelCredentials> creds;
  if (!tls.Active()) {
    creds = grpc::InsecureChannelCredentials();
  } else {
    if (tls.cert_file.empty() != tls.key_file.empty()) {
      return absl::InvalidArgumentError(
          "a TLS client certificate needs both its certificate and its key (--tls-cert and "
          "--tls-key; mixnet-controller: --ocs-tls-cert and --ocs-tls-key)");
    }
    grpc::SslCredentialsOptions ssl;
    if (!tls.ca_file.empty()) {
      ASSIGN_OR_RETURN(ssl.pem_root_certs, ReadPem(tls.ca_file, "CA"));
    }
    if (!tls.cert_file.empty()) {
      ASSIGN_OR_RETURN(ssl.pem_cert_chain, ReadPem(tls.cert_file, "certificate"));
      ASSIGN_OR_RETURN(ssl.pem_private_key, ReadPem(tls.key_file, "key"));
    }
    creds = grpc::SslCredentials(ssl);
    if (!tls.server_name.empty()) {
      args.SetSslTargetNameOverride(tls.server_name);
    } else if (target.unix_socket) {
      // A unix socket has no host name to check; "localhost" is the usual SAN.
      args.SetSslTargetNameOverride("localhost");
    }
  }
  return grpc::CreateCustomChannel(target.grpc_target, creds, args);
}

}  // namespace mixnet::ocs
