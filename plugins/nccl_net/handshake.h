// Connection set-up between a plugin listen comm and a connecting peer.
//
// NCCL ships the 128-byte handle that `listen` wrote to the peer, which passes
// it to `connect`. Our handle names a small control listener (one per listen
// comm, on the NIC's address) and the listen comm's id. The connector dials it,
// says which connection id it picked and who it is (identity.h: plugin
// version, cluster-spec fingerprint, host), and reads back the listener's
// identity (with its full host and NIC names, which the handle only holds
// cut to fit) and transport address; then both ends call the transport's
// blocking Device::Connect with that id (connector as initiator). Ends whose
// plugin versions or cluster specs differ fail instead, both of them, with a
// message naming both sides' values. Both halves run on HelperPool threads
// (Background), so NCCL's connect/accept only poll.
//
// Control messages (version kControlVersion = 3): a header {magic, version,
// body length} and a JSON body. Older plugins (version 2: a fixed 24-byte
// request) are told apart by the version field and named in the error.
//
// The connector also keeps its progress token in the handle (NCCL passes the
// same buffer on every retry).
#pragma once

#include <atomic>
#include <cstdint>
#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "plugins/nccl_net/identity.h"
#include "runtime/transport/transport.h"

namespace mixnet::nccl {

inline constexpr uint32_t kHandleMagic = 0x484E584Du;  // "MXNH"
inline constexpr uint16_t kHandleVersion = 2;
inline constexpr uint32_t kControlVersion = 3;

// What our handle carries, decoded.
struct HandleInfo {
  uint16_t nic = 0;  // listener's device index (for messages and routes)
  std::string ip;    // control listener
  int port = 0;
  uint64_t listen_id = 0;
  uint64_t connect_token = 0;  // connector side only: 0 = not started
  // The listener's host and NIC (cluster-spec) names, cut to fit the handle:
  // for messages before the handshake; the handshake gives the full names.
  std::string host;
  std::string nic_name;
};

// Encodes into / decodes from NCCL's handle buffer (128 bytes, any alignment).
void WriteHandle(void* buf, const HandleInfo& info);
// InvalidArgument when the buffer is not one of our handles.
absl::StatusOr<HandleInfo> ReadHandle(const void* buf);
void SetConnectToken(void* buf, uint64_t token);

// A non-blocking listening socket on `ip` (ephemeral port).
struct ControlListener {
  int fd = -1;
  std::string ip;
  int port = 0;
};
absl::StatusOr<ControlListener> OpenControlListener(const std::string& ip);

// A made connection and who is at its other end.
struct PeerConnection {
  std::unique_ptr<transport::Connection> connection;
  Identity peer;
};

// Connector: dials the handle's control listener from `local_ip`/`ifname`,
// announces `connection_id` and `self`, learns the peer's identity and
// transport address and makes the transport connection as initiator.
// FailedPrecondition when the two ends' identities do not match (naming
// both). Blocking until `deadline` at most.
absl::StatusOr<PeerConnection> DialPeer(transport::Device* device, const std::string& local_ip,
                                        const std::string& ifname, const HandleInfo& peer,
                                        uint64_t connection_id, const Identity& self,
                                        absl::Time deadline, const std::atomic<bool>& cancelled,
                                        int traffic_class = -1);

// Listener: answers one accepted control socket `fd` (takes it) for listen comm
// `listen_id` and makes the transport connection as the waiting side.
// NotFound means a stray dial (not a plugin peer, or another listen comm's);
// the caller drops it quietly. FailedPrecondition: a plugin peer whose
// identity does not match (or an older plugin), naming both sides. Blocking
// until `deadline` at most.
absl::StatusOr<PeerConnection> AnswerPeer(transport::Device* device, int fd, uint64_t listen_id,
                                          const Identity& self, absl::Time deadline,
                                          const std::atomic<bool>& cancelled,
                                          int traffic_class = -1);

}  // namespace mixnet::nccl
