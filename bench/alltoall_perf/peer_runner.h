// Runs the Gloo and Open MPI peers of mixnet_alltoall_perf (bench/peers) as
// child processes, reads their JSON lines, and prints the side-by-side report.
// Called from the launcher's main thread.
#pragma once

#include <map>
#include <string>
#include <vector>

#include "bench/peers/peer_common.h"
#include "nlohmann/json.hpp"

namespace mixnet::bench {

// Peer name ("gloo", "mpi" over TCP; "mpi_shm", Open MPI's shared-memory
// BTL, a reference for the intra-host transport) -> results per size. A peer that is not built or
// fails is reported on stderr and left out. `mpirun`: the Open MPI peers'
// mpirun (their --mpirun); empty: theirs ($MIXNET_MPIRUN, else PATH).
std::map<std::string, std::vector<peers::Result>> RunPeers(const peers::PeerOptions& common,
                                                           const std::string& mpirun = "");

// Per size, the result with the median time over `rounds` (each one run's
// results, one per size); sizes in first-seen order. Even counts take the
// lower middle, so the result is one that was measured.
std::vector<peers::Result> MedianPerSize(const std::vector<std::vector<peers::Result>>& rounds);

// Table (or JSON lines) of our results; with peers, their busbw and our ratio
// to the best TCP peer at each size (and to mpi_shm, when it ran). `rounds`:
// how many runs each figure is the median of (JSON key "rounds").
void PrintReport(const std::vector<peers::Result>& ours,
                 const std::map<std::string, std::vector<peers::Result>>& peer_results, bool json,
                 int rounds = 1);

}  // namespace mixnet::bench
