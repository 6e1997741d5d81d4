// One rank's buffers of a checked alltoallv over an H x H byte matrix: the
// counts and displacements, a send buffer filled with the deterministic
// payload of workload.h (FillBlock) and a poisoned receive buffer, and the
// check of what arrived (VerifyBlock). Shared by the demo worker and
// mixnet_route_bench's worker. Plain value type; the caller's thread.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

#include "apps/demo/workload.h"
#include "runtime/collectives/alltoall.h"

namespace mixnet::demo {

struct Exchange {
  std::vector<size_t> send_counts, send_displs, recv_counts, recv_displs;
  std::vector<uint8_t> send, recv;
};

// The byte every receive buffer is filled with before an all-to-all (a byte
// never written cannot pass VerifyBlock).
inline constexpr uint8_t kPoison = 0xA5;

// Lays out one all-to-all for `rank` from the H x H matrix D (bytes[s*n+d]:
// s sends d), transposed when `transpose`, fills the send blocks with the
// payload of `base` (src/dst set per block) and poisons the receive buffer.
void PrepareExchange(const std::vector<size_t>& bytes, int n, int rank, bool transpose,
                     const BlockId& base, Exchange& x);

// Re-poisons the receive buffer (before re-running the same all-to-all).
void PoisonReceive(Exchange& x);

// Per source rank, how many received bytes differ from the payload of
// `base` (src/dst set per block; dst = `rank`).
std::vector<size_t> VerifyExchange(const Exchange& x, int n, int rank, const BlockId& base);

// The alltoallv arguments over `x`'s buffers (valid while `x` is unchanged).
// Inline, so that the library needs no link to the collectives.
inline collectives::AlltoallvArgs AlltoallvArgsOf(Exchange& x) {
  collectives::AlltoallvArgs a;
  a.send = x.send.data();
  a.send_bytes = x.send.size();
  a.send_counts = x.send_counts;
  a.send_displs = x.send_displs;
  a.recv = x.recv.data();
  a.recv_bytes = x.recv.size();
  a.recv_counts = x.recv_counts;
  a.recv_displs = x.recv_displs;
  return a;
}

}  // namespace mixnet::demo
