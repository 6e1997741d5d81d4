// All-to-all collectives over a Communicator. Every peer progresses at once
// (all receives posted, then all sends, then one wait), and each peer's bytes
// are split across the paths the router chose for that peer (direct circuits
// striped by link speed, else EPS). Pairs whose direct paths follow the
// topology first agree per call on the direct paths both ends consider usable,
// and re-send over EPS, exactly once, what a dying circuit lost (protocol and
// tag layout: alltoall_internal.h, alltoall_dynamic.cc). Called from the
// communicator's caller thread.
//
// Counts and displacements are in bytes. Ranks exchange their counts with each
// call, so a mismatch (rank i sends n bytes to j, j expects m) is an
// InvalidArgument on both ranks naming both, and nothing is written outside
// the given buffers.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

#include "absl/status/status.h"
#include "absl/types/span.h"
#include "runtime/collectives/communicator.h"

namespace mixnet::collectives {

// send: world_size blocks of bytes_per_peer (block j goes to rank j);
// recv: world_size blocks (block j came from rank j). Buffers must not overlap.
absl::Status Alltoall(Communicator& comm, const void* send, void* recv, size_t bytes_per_peer);

struct AlltoallvArgs {
  const void* send = nullptr;
  size_t send_bytes = 0;  // size of the whole send buffer (bounds check)
  absl::Span<const size_t> send_counts;
  absl::Span<const size_t> send_displs;
  void* recv = nullptr;
  size_t recv_bytes = 0;  // size of the whole receive buffer (bounds check)
  absl::Span<const size_t> recv_counts;
  absl::Span<const size_t> recv_displs;
};
absl::Status Alltoallv(Communicator& comm, const AlltoallvArgs& args);

// How `bytes` to one peer are split across paths of the given speeds:
// proportional to speed in whole 4 KiB pages (largest remainder), the bytes
// short of a page with one of them; paths of speed 0 get nothing unless all
// are 0 (then equal shares). Where shares tie for a page left over, the
// paths take turns from `first`: callers pass one value per pair (both ends
// the same, see PairSplitFirst), so that an all-to-all of small blocks does
// not put every pair's rounding on the same NIC. Deterministic, so sender
// and receiver compute the same pieces.
std::vector<size_t> SplitAcrossPaths(size_t bytes, const std::vector<double>& gbps,
                                     size_t first = 0);

// The `first` path of SplitAcrossPaths for the pair of ranks `a` and `b`
// (either order: both directions, and both ends, get the same).
inline size_t PairSplitFirst(int a, int b) {
  return static_cast<size_t>(a) + static_cast<size_t>(b);
}

}  // namespace mixnet::collectives
