// gRPC channels to an OCS driver: insecure (plaintext, loopback or unix
// socket) or TLS with a CA bundle, an optional client certificate (mTLS) and
// an optional override of the name checked against the server certificate.
// Reads the PEM files once, at creation. Usable from any thread.
#pragma once

#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "grpcpp/channel.h"
#include "ocs_driver/client/target.h"

namespace mixnet::ocs {

struct OcsTlsOptions {
  bool enabled = false;     // TLS at all; implied by any of the files below
  std::string ca_file;      // PEM roots that sign the server certificate ("" = system roots)
  std::string cert_file;    // client certificate chain (mTLS); needs key_file
  std::string key_file;     // client private key
  std::string server_name;  // name to verify instead of the target's host

  bool Active() const {
    return enabled || !ca_file.empty() || !cert_file.empty() || !key_file.empty();
  }
};

// A channel to `target` (not yet connected). InvalidArgument when only one of
// cert/key is given or a file cannot be read (naming the file and errno).
absl::StatusOr<std::shared_ptr<grpc::Channel>> MakeOcsChannel(const OcsTarget& target,
                                                              const OcsTlsOptions& tls);

}  // namespace mixnet::ocs
