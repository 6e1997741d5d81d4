// Connection set-up between a plugin listen comm and a connecting peer.
//
// NCCL ships the 128-byte handle that `listen` wrote to the peer, which passes
// it to `connect`. Our handle names a small control listener (one per listen
// comm, on the NIC's address) and the listen comm's id. The connector dials it,
// says which connection id it picked, and reads back the listener's transport
// address; then both ends call the transport's blocking Device::Connect with
// that id (connector as initiator). Both halves run on Background threads, so
// NCCL's connect/accept only poll.
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
#include "runtime/transport/transport.h"

namespace mixnet::nccl {

inline constexpr uint32_t kHandleMagic = 0x484E584Du;  // "MXNH"
inline constexpr uint16_t kHandleVersion = 2;

// What our handle carries, decoded.
struct HandleInfo {
  uint16_t nic = 0;  // listener's device index (for messages and routes)
  std::string ip;    // control listener
  int port = 0;
  uint64_t listen_id = 0;
  uint64_t connect_token = 0;  // connector side only: 0 = not started
  std::string host;            // listener's host name (route lookups)
  std::string nic_name;        // listener NIC's cluster-spec name (empty without a spec)
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

// Connector: dials the handle's control listener from `local_ip`/`ifname`,
// announces `connection_id`, learns the peer's transport address and makes the
// transport connection as initiator. Blocking, bounded by `timeout`.
absl::StatusOr<std::unique_ptr<transport::Connection>> DialPeer(
    transport::Device* device, const std::string& local_ip, const std::string& ifname,
    const HandleInfo& peer, uint64_t connection_id, absl::Duration timeout,
    const std::atomic<bool>& cancelled);

// Listener: answers one accepted control socket `fd` (takes it) for listen comm
// `listen_id` and makes the transport connection as the waiting side.
// NotFound means a stray dial (not a plugin peer, or another listen comm's);
// the caller drops it quietly. Blocking, bounded by `timeout`.
absl::StatusOr<std::unique_ptr<transport::Connection>> AnswerPeer(
    transport::Device* device, int fd, uint64_t listen_id, absl::Duration timeout,
    const std::atomic<bool>& cancelled);

}  // namespace mixnet::nccl
