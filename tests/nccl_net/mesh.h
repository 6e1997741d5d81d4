// A full mesh of NCCL-plugin connections between the harness's forked ranks
// (every rank listens once per peer and connects to every peer, all polled
// from one thread as NCCL does) and a byte-checked exchange over it. Shared by
// the loopback and emulated-cluster transfer tests; runs in each rank.
#pragma once

#include <cstddef>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "tests/nccl_net/plugin_harness.h"

namespace mixnet::nccl_test {

struct Mesh {
  std::vector<void*> send, recv;  // by peer rank
};

absl::StatusOr<Mesh> BuildMesh(const Net& net, int me, Board* b);

// One message of `bytes` to and from every peer; receives are posted 64 bytes
// larger, every byte is checked and the bytes past the message must stay
// untouched. `seq` varies the payload between calls.
absl::Status ExchangeAll(const Net& net, const Mesh& m, int me, int n, size_t bytes, int seq);
// The same with `to[p]` bytes sent to and `from[p]` bytes expected from each
// peer p (entries for `me` are ignored).
absl::Status Exchange(const Net& net, const Mesh& m, int me, const std::vector<size_t>& to,
                      const std::vector<size_t>& from, int seq);

// Closes every comm of the mesh, then finalizes the plugin.
absl::Status CloseMesh(const Net& net, const Mesh& m);

}  // namespace mixnet::nccl_test
