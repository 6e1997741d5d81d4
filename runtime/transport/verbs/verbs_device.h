// RDMA verbs transport entry point (implemented in this folder).
#pragma once

#include <memory>

#include "absl/status/statusor.h"
#include "runtime/transport/transport.h"

namespace mixnet::transport {

// Opens the verbs device named in options (or the first one). Unavailable with
// the reason when no device, port or GID is usable.
absl::StatusOr<std::unique_ptr<Device>> CreateVerbsDevice(const DeviceOptions& options);

}  // namespace mixnet::transport
