// A gRPC channel to mixnet-controller for its clients (the worker agent, so
// the NCCL plugin and the Python binding; the Python status reader; the
// demo's orchestrator): plaintext, or (m)TLS from MIXNET_CONTROLLER_TLS_*
// (runtime/common/settings.h; a worker's certificate names its host, see
// controller_service.h). Any thread.
#pragma once

#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "grpcpp/channel.h"
#include "runtime/common/grpc_tls.h"

namespace mixnet::control {

// The TLS the MIXNET_CONTROLLER_TLS_* variables give (not Active: none set).
TlsClientOptions ControllerTlsFromSettings();

// A channel to `target` ("host:port" or "unix:/path"), not yet connected.
// InvalidArgument when only one of cert/key is given or a file cannot be
// read (naming it).
absl::StatusOr<std::shared_ptr<grpc::Channel>> MakeControllerChannel(const std::string& target,
                                                                     const TlsClientOptions& tls);

}  // namespace mixnet::control
