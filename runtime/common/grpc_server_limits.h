// Limits shared by the project's gRPC servers (mixnet-ocsd, mixnet-controller)
// so that one bad call fails alone, with a status that says why:
//
//   - Request metadata. gRPC 1.51 ends the whole HTTP/2 connection (every
//     call on it, a Watch included) when a call's headers exceed its
//     GRPC_ARG_MAX_METADATA_SIZE (default 8 KiB). The servers set that
//     transport limit to kMaxTransportMetadataBytes (256 KiB) and refuse a
//     call whose metadata is above kMaxCallMetadataBytes (16 KiB) on their
//     own, RESOURCE_EXHAUSTED naming the size, leaving the connection alone.
//     Only headers above 256 KiB still end the connection (a limit of that
//     gRPC version, not avoidable by configuration).
//   - Malformed request bodies. gRPC answers a body that does not parse as
//     the request message with INTERNAL and an empty message, before any
//     handler runs; an interceptor turns that into INVALID_ARGUMENT naming
//     the method and the expected message type. Client streams are not
//     covered here: gRPC's synchronous API shows a server a malformed message
//     in one only as the end of the stream, so such a method must read raw
//     bytes and parse them itself (mixnet-controller's ReportTraffic does).
//   - Threads. A synchronous server keeps at most MAX_POLLERS idle polling
//     threads (gRPC's default: 2); a burst of concurrent calls (a round's
//     acks from every worker of a region) makes a thread for each call
//     beyond them, and those threads exit when their call ends: threads
//     created and destroyed every round. The servers keep up to
//     kSyncServerIdlePollers idle instead, so after the first bursts the
//     threads stay.
//
// Threading: ApplyServerLimits while building a server; the checks and the
// interceptor run on gRPC's threads.
#pragma once

#include <cstddef>

#include "grpcpp/server_builder.h"
#include "grpcpp/server_context.h"
#include "grpcpp/support/status.h"

namespace mixnet {

// A call's metadata above this fails that call (RESOURCE_EXHAUSTED).
inline constexpr size_t kMaxCallMetadataBytes = 16 * 1024;
// gRPC's own limit (GRPC_ARG_MAX_METADATA_SIZE); above it gRPC 1.51 ends
// the connection.
inline constexpr int kMaxTransportMetadataBytes = 256 * 1024;

// Idle polling threads a synchronous server keeps (MAX_POLLERS).
inline constexpr int kSyncServerIdlePollers = 64;

// Sets the transport metadata limit, the idle polling threads kept, and
// installs the malformed-request interceptor on `builder`.
void ApplyServerLimits(grpc::ServerBuilder& builder);

// The size of a call's request metadata as HTTP/2 counts it (RFC 7541: name
// + value + 32 per entry).
size_t CallMetadataBytes(const grpc::ServerContextBase& context);

// OK, or RESOURCE_EXHAUSTED when the call's metadata is above
// kMaxCallMetadataBytes. Call first in every handler.
grpc::Status CheckCallMetadata(const grpc::ServerContextBase& context);

}  // namespace mixnet
