// The objects behind the opaque pointers the plugin hands to NCCL (contexts,
// listen/send/recv comms, requests, memory handles) and the registry that
// tells live ones from NULL, freed or foreign pointers, so misuse is an error
// and never a crash. Comms are used by NCCL's proxy threads; the registry is
// thread-safe.
#pragma once

#include <array>
#include <cstdint>
#include <deque>
#include <memory>

#include "absl/container/flat_hash_map.h"
#include "absl/container/flat_hash_set.h"
#include "absl/synchronization/mutex.h"
#include "plugins/nccl_net/background.h"
#include "plugins/nccl_net/handshake.h"
#include "plugins/nccl_net/nic.h"
#include "plugins/nccl_net/plugin_config.h"
#include "runtime/transport/transport.h"

namespace mixnet::nccl {

using ConnectionTask = Background<std::unique_ptr<transport::Connection>>;

// Per-communicator state of the v11 API.
struct Context {
  uint64_t comm_id = 0;
  int traffic_class = -1;
};

// The transport connection a comm currently runs over and the epoch its path
// was chosen under. Issue 5 swaps `connection` here at an epoch change once the
// comm has drained (see route_policy.h); nothing else holds the connection.
struct PathBinding {
  std::unique_ptr<transport::Connection> connection;
  uint64_t epoch = 0;
};

struct Request;

// A send or receive comm: one direction of one transport connection.
struct Comm {
  bool is_send = false;
  Nic* nic = nullptr;
  PathBinding path;
  int max_requests = 256;
  absl::Mutex mu;
  absl::flat_hash_set<Request*> live ABSL_GUARDED_BY(mu);
};

// One isend, or one grouped irecv of `n` buffers.
struct Request {
  Comm* comm = nullptr;
  int n = 0;
  std::array<std::unique_ptr<transport::Request>, kMaxRecvsLimit> parts;
};

struct ListenComm {
  Nic* nic = nullptr;
  uint64_t listen_id = 0;
  ControlListener control;
  // Connections being answered, oldest first (proxy service thread only).
  std::deque<std::shared_ptr<ConnectionTask>> pending;
};

// A registration. Host memory needs none in our transports; the handle records
// the range for checks and messages.
struct MemHandle {
  void* comm = nullptr;
  void* data = nullptr;
  size_t size = 0;
  int type = 0;
};

enum class Kind : uint8_t { kContext, kListen, kSend, kRecv, kRequest, kMemory };
const char* KindName(Kind kind);

class Registry {
 public:
  void Add(const void* p, Kind kind);
  // False when `p` is not a live object of `kind`.
  bool Remove(const void* p, Kind kind);
  bool Contains(const void* p, Kind kind) const;

 private:
  mutable absl::Mutex mu_;
  absl::flat_hash_map<const void*, Kind> objects_ ABSL_GUARDED_BY(mu_);
};

}  // namespace mixnet::nccl
