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
#include "runtime/common/grpc_tls.h"

namespace mixnet::ocs {

// TLS to the daemon (runtime/common/grpc_tls.h).
using OcsTlsOptions = TlsClientOptions;

// A channel to `target` (not yet connected). InvalidArgument when only one of
// cert/key is given or a file cannot be read (naming the file and errno).
absl::StatusOr<std::shared_ptr<grpc::Channel>> MakeOcsChannel(const OcsTarget& target,
                                                              const OcsTlsOptions& tls);

}  // namespace mixnet::ocs
