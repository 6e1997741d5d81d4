// TLS credentials, listen policy and peer names: see grpc_tls.h.
#include "runtime/common/grpc_tls.h"

#include <cerrno>
#include <fstream>
#include <sstream>

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "grpc/grpc_security_constants.h"
#include "runtime/common/status.h"

namespace mixnet {

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

absl::StatusOr<std::shared_ptr<grpc::ChannelCredentials>> ClientCredentials(
    const TlsClientOptions& tls, bool unix_socket, absl::string_view flags,
    grpc::ChannelArguments& args) {
  if (!tls.Active()) return grpc::InsecureChannelCredentials();
  if (tls.cert_file.empty() != tls.key_file.empty()) {
    return absl::InvalidArgumentError(absl::StrCat(
        "a TLS client certificate needs both its certificate and its key (", flags, ")"));
  }
  grpc::SslCredentialsOptions ssl;
  if (!tls.ca_file.empty()) {
    ASSIGN_OR_RETURN(ssl.pem_root_certs, ReadPem(tls.ca_file, "CA"));
  }
  if (!tls.cert_file.empty()) {
    ASSIGN_OR_RETURN(ssl.pem_cert_chain, ReadPem(tls.cert_file, "certificate"));
    ASSIGN_OR_RETURN(ssl.pem_private_key, ReadPem(tls.key_file, "key"));
  }
  if (!tls.server_name.empty()) {
    args.SetSslTargetNameOverride(tls.server_name);
  } else if (unix_socket) {
    // A unix socket has no host name to check; "localhost" is the usual SAN.
    args.SetSslTargetNameOverride("localhost");
  }
  return grpc::SslCredentials(ssl);
}

absl::StatusOr<std::shared_ptr<grpc::ServerCredentials>> ServerCredentials(
    const TlsServerOptions& tls) {
  if (tls.given() == 0) return grpc::InsecureServerCredentials();
  if (!tls.Active()) {
    return absl::InvalidArgumentError(
        "mTLS needs all of --tls-cert, --tls-key and --tls-client-ca");
  }
  grpc::SslServerCredentialsOptions ssl(GRPC_SSL_REQUEST_AND_REQUIRE_CLIENT_CERTIFICATE_AND_VERIFY);
  ASSIGN_OR_RETURN(ssl.pem_root_certs, ReadPem(tls.client_ca_file, "--tls-client-ca"));
  grpc::SslServerCredentialsOptions::PemKeyCertPair pair;
  ASSIGN_OR_RETURN(pair.private_key, ReadPem(tls.key_file, "--tls-key"));
  ASSIGN_OR_RETURN(pair.cert_chain, ReadPem(tls.cert_file, "--tls-cert"));
  ssl.pem_key_cert_pairs.push_back(std::move(pair));
  return grpc::SslServerCredentials(ssl);
}

absl::Status SplitHostPort(const std::string& listen, std::string& host, int& port) {
  const size_t colon = listen.rfind(':');
  if (colon == std::string::npos) {
    return absl::InvalidArgumentError(
        absl::StrCat("--listen ", listen, ": expected HOST:PORT or unix:/path"));
  }
  host = listen.substr(0, colon);
  if (!absl::SimpleAtoi(listen.substr(colon + 1), &port) || port < 0 || port > 65535) {
    return absl::InvalidArgumentError(absl::StrCat("--listen ", listen, ": bad port"));
  }
  if (host.size() >= 2 && host.front() == '[' && host.back() == ']') {
    host = host.substr(1, host.size() - 2);
  }
  return absl::OkStatus();
}

absl::Status CheckPlaintextListen(const std::string& listen, bool tls, bool insecure_listen_any) {
  if (absl::StartsWith(listen, "unix:")) {
    if (listen.size() == 5) return absl::InvalidArgumentError("--listen unix: needs a path");
    return absl::OkStatus();
  }
  std::string host;
  int port = 0;
  RETURN_IF_ERROR(SplitHostPort(listen, host, port));
  const bool loopback = host == "localhost" || host == "::1" || absl::StartsWith(host, "127.");
  if (loopback || tls || insecure_listen_any) return absl::OkStatus();
  return absl::PermissionDeniedError(
      absl::StrCat("refusing to listen on ", listen,
                   " without TLS: use a loopback address or unix:/path, give --tls-cert/--tls-key/"
                   "--tls-client-ca, or --insecure-listen-any"));
}

std::vector<std::string> PeerCertificateNames(const grpc::ServerContextBase& context) {
  std::vector<std::string> names;
  std::shared_ptr<const grpc::AuthContext> auth = context.auth_context();
  if (auth == nullptr || !auth->IsPeerAuthenticated()) return names;
  for (const char* prop : {GRPC_X509_CN_PROPERTY_NAME, GRPC_X509_SAN_PROPERTY_NAME}) {
    for (const grpc::string_ref& v : auth->FindPropertyValues(prop)) {
      names.emplace_back(v.data(), v.size());
    }
  }
  return names;
}

}  // namespace mixnet
