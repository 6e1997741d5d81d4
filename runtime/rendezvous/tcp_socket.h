// Socket helpers for the TCP store: address formatting, listening, connecting
// with a deadline, and blocking-style send/recv on non-blocking sockets with an
// idle timeout (so a dead or stalled peer is an error, never a hang).
// Internal to runtime/rendezvous; any thread (each call uses only its own fd).
#pragma once

#include <cstddef>
#include <string>
#include "absl/strings/string_view.h"

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "runtime/rendezvous/store_internal.h"

namespace mixnet::rendezvous::internal {

// "host:port", with IPv6 literals bracketed: "[::1]:29500".
std::string HostPort(absl::string_view host, int port);

// Non-blocking, close-on-exec listening socket with SO_REUSEADDR bound to
// `bind_address` (empty, "*" = any) and `port` (0 = ephemeral).
absl::StatusOr<UniqueFd> Listen(const std::string& bind_address, int port);
// The local port of a bound socket.
absl::StatusOr<int> LocalPort(int fd, absl::string_view what);

// One connection attempt to every address `host` resolves to, each bounded by
// `deadline`. Returns a non-blocking, close-on-exec, TCP_NODELAY socket, or the
// error; `*unresolvable` (if given) is set when the host name does not resolve
// (retrying will not help).
absl::StatusOr<UniqueFd> ConnectOnce(const std::string& host, int port, absl::Time deadline,
                                     bool* unresolvable = nullptr);

// Sends all of [data, data+len). Waits at most `idle` for the socket to accept
// more bytes. `more` sets MSG_MORE. Errors are annotated with `peer`.
absl::Status SendAll(int fd, const char* data, size_t len, absl::Duration idle,
                     absl::string_view peer, bool more = false);
// Receives exactly `len` bytes. The first byte may take until `first_deadline`,
// later ones at most `idle` each. EOF is Unavailable naming `peer`.
absl::Status RecvAll(int fd, char* data, size_t len, absl::Time first_deadline, absl::Duration idle,
                     absl::string_view peer);

}  // namespace mixnet::rendezvous::internal
