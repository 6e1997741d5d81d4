// Which path an NCCL connection takes: the seam between the plugin and the
// router.
//
// Today (no controller configured) the policy is static: a connection leaves
// through the NIC NCCL asked for (`connect(dev, ...)`) and goes to the
// listener's NIC named in the handle, for the connection's whole life. This is
// epoch 0 of the router's model: EPS paths, no circuits.
//
// Issue 5 (topology epochs) plugs in here:
//   * An epoch-following policy (fed by the worker agent's PREPARE/COMMIT)
//     implements RoutePolicy over router::RouteTable, using HandleInfo::host
//     (the listener's host name, carried in the handle) to find PathsTo(peer).
//   * Every SendComm/RecvComm keeps its transport connection in a PathBinding
//     (comm.h) tagged with the epoch it was chosen under. At PREPARE(epoch+1)
//     the plugin stops posting new requests on bindings whose path changes
//     (isend/irecv return a NULL request, which NCCL retries: nothing lost),
//     lets the outstanding ones finish (FIFO per connection keeps order), then
//     at COMMIT re-dials through DialPeer over the new path with the same
//     listen id and swaps the binding. Receivers accept the replacement on
//     their listen-side control socket, keyed by the comm's connection id.
//   * Until then, a topology change during transfers is not handled by the
//     plugin; the tests leave that case to issue 5.
// Thread: Choose runs on NCCL's proxy service thread (connect).
#pragma once

#include <cstdint>
#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "plugins/nccl_net/handshake.h"

namespace mixnet::nccl {

struct PathChoice {
  int local_nic = 0;  // index into the plugin's NICs
  HandleInfo remote;  // where to dial
  uint64_t epoch = 0;
  std::string why;  // for logs: "static: NCCL chose dev 0"
};

class RoutePolicy {
 public:
  virtual ~RoutePolicy() = default;
  // Picks the path for a new connection from NIC `requested_nic` to `peer`.
  virtual absl::StatusOr<PathChoice> Choose(int requested_nic, const HandleInfo& peer) = 0;
  // The topology epoch the policy currently routes by.
  virtual uint64_t epoch() const = 0;
};

// The policy used when no controller is configured.
std::unique_ptr<RoutePolicy> MakeStaticRoutePolicy(int nic_count);

}  // namespace mixnet::nccl
