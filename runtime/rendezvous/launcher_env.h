// Rank, world size, local rank and rendezvous store from the environment a
// job launcher gives each process, so that our binaries and mixnet.init()
// start the way the ecosystem's do: torchrun (RANK, WORLD_SIZE, LOCAL_RANK,
// MASTER_ADDR, MASTER_PORT), Slurm's srun (SLURM_PROCID, SLURM_NTASKS,
// SLURM_LOCALID, SLURM_STEP_NODELIST) and Open MPI's mpirun
// (OMPI_COMM_WORLD_RANK, _SIZE, _LOCAL_RANK, _LOCAL_SIZE).
//
// The store, unless MIXNET_STORE names one ("file:DIR" or "tcp://HOST:PORT"),
// is a TCP store served by rank 0 on the master host at MIXNET_STORE_PORT,
// else MASTER_PORT + 1 (torchrun's own store, and torch.distributed's, use
// MASTER_PORT itself), else 29501. The master host: MASTER_ADDR; else under
// Slurm the first host of the step's node list (rank 0's under srun's block
// distribution); else, when every rank is on this host (Open MPI's local
// size equals the world size), 127.0.0.1. Rank and world size are required
// (a launcher with only one of them, values that are not numbers, or a rank
// outside the world is InvalidArgument naming the launcher and the
// variable); the local rank is optional, as for torch.distributed's env://
// (-1 when unset: callers that need it take this rank's index among the
// ranks on its machine, which the communicator finds at rendezvous).
// Explicit flags or arguments take precedence over all of this (callers
// apply them first); a caller that has its own store says so
// (StoreNeed::kOptional), and then no master host is needed.
// Pure functions; any thread.
#pragma once

#include <functional>
#include <optional>
#include <string>

#include "absl/status/statusor.h"
#include "runtime/common/settings.h"

namespace mixnet::rendezvous {

struct LaunchInfo {
  std::string launcher;  // "torchrun", "slurm", "openmpi"
  int rank = -1;
  int world = 0;
  int local_rank = -1;  // -1: the launcher did not say
  std::string store;    // "tcp://HOST:PORT" or MIXNET_STORE; empty only with kOptional
};

// Whether the caller needs the environment's store (it has none of its own).
enum class StoreNeed { kRequired, kOptional };

// Looks a variable up (std::getenv by default); nullopt when unset.
using EnvLookup = std::function<std::optional<std::string>(const std::string&)>;
EnvLookup ProcessEnvironment();

// NotFound when no launcher's variables are set (the caller then needs its
// flags); otherwise what the launcher says, or InvalidArgument as above.
// torchrun is checked first (it may run under srun or mpirun), then Open
// MPI (mpirun inside a Slurm batch script inherits the batch step's
// SLURM_PROCID = 0), then Slurm.
// MIXNET_STORE and MIXNET_STORE_PORT come from `settings` (settings.h), the
// launcher's own variables from `env`.
absl::StatusOr<LaunchInfo> LaunchFromEnvironment(const EnvLookup& env = ProcessEnvironment(),
                                                 const Settings& settings = GetSettings(),
                                                 StoreNeed need = StoreNeed::kRequired);

// The first host of a Slurm host list: "node[03-05,9]" -> "node03",
// "a,b" -> "a", "gpu-[1-2]-ib" -> "gpu-1-ib". InvalidArgument when malformed.
absl::StatusOr<std::string> FirstSlurmHost(const std::string& nodelist);

}  // namespace mixnet::rendezvous
