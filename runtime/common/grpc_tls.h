// TLS for the gRPC endpoints (mixnet-controller, mixnet-ocsd) and their
// clients (worker agent, Python binding, NCCL plugin, mixnetctl): PEM files
// into credentials, the plaintext-listen policy the daemons share, and the
// names a verified client certificate carries (for identity checks).
//
// Pure functions (they read files when asked); any thread.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "grpcpp/security/credentials.h"
#include "grpcpp/security/server_credentials.h"
#include "grpcpp/server_context.h"
#include "grpcpp/support/channel_arguments.h"

namespace mixnet {

// A client's TLS: the CA that signs the server, and (mTLS) its own
// certificate and key.
struct TlsClientOptions {
  bool enabled = false;     // TLS at all; implied by any of the files below
  std::string ca_file;      // PEM roots that sign the server certificate ("" = system roots)
  std::string cert_file;    // client certificate chain (mTLS); needs key_file
  std::string key_file;     // client private key
  std::string server_name;  // name to verify instead of the target's host

  bool Active() const {
    return enabled || !ca_file.empty() || !cert_file.empty() || !key_file.empty();
  }
};

// A server's mTLS: its certificate and key, and the CA its clients'
// certificates must chain to. All three or none.
struct TlsServerOptions {
  std::string cert_file;
  std::string key_file;
  std::string client_ca_file;

  int given() const { return !cert_file.empty() + !key_file.empty() + !client_ca_file.empty(); }
  bool Active() const { return given() == 3; }
};

// The PEM text of `path`; InvalidArgument naming `what`, the file and errno,
// or saying it holds no PEM block.
absl::StatusOr<std::string> ReadPem(const std::string& path, absl::string_view what);

// Credentials for a channel (insecure when `tls` is not Active). Sets the
// name checked against the server certificate on `args`: tls.server_name,
// else "localhost" for a unix socket. InvalidArgument when only one of
// cert/key is given (`flags` names the flags, for the message) or a file
// cannot be read.
absl::StatusOr<std::shared_ptr<grpc::ChannelCredentials>> ClientCredentials(
    const TlsClientOptions& tls, bool unix_socket, absl::string_view flags,
    grpc::ChannelArguments& args);

// Server credentials that require and verify a client certificate signed by
// tls.client_ca_file (insecure when `tls` is not Active). InvalidArgument
// when only some of the three files are given or one cannot be read.
absl::StatusOr<std::shared_ptr<grpc::ServerCredentials>> ServerCredentials(
    const TlsServerOptions& tls);

// Splits "host:port" / "[v6]:port" into host (brackets removed) and port.
absl::Status SplitHostPort(const std::string& listen, std::string& host, int& port);

// The daemons' listen policy: a unix socket or a loopback address always;
// any other address only with TLS or `insecure_listen_any`. PermissionDenied
// naming the address and the flags that allow it.
absl::Status CheckPlaintextListen(const std::string& listen, bool tls, bool insecure_listen_any);

// The names of the verified client certificate of the call: its common
// name and its DNS subject alternative names. Empty without TLS.
std::vector<std::string> PeerCertificateNames(const grpc::ServerContextBase& context);

}  // namespace mixnet
