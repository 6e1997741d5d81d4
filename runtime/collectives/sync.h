// Barrier and a small allgather over a Communicator (control-sized data:
// counts, timings, checksums). Called from the communicator's caller thread.
#pragma once

#include <cstddef>

#include "absl/status/status.h"
#include "runtime/collectives/communicator.h"

namespace mixnet::collectives {

// Dissemination barrier: ceil(log2 n) rounds of zero-byte messages.
absl::Status Barrier(Communicator& comm);

// Every rank contributes `bytes` from `send`; `recv` receives world_size blocks
// in rank order. Direct exchange (every pair at once): meant for small blocks.
absl::Status Allgather(Communicator& comm, const void* send, void* recv, size_t bytes);

}  // namespace mixnet::collectives
