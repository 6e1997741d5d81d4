// `mixnet-demo worker --config FILE --rank R`: one rank of one fabric phase,
// spawned by the orchestrator inside its host's namespace (or, without
// --rank, by a launcher: its environment gives the rank, launcher_env.h). Runs on the
// process's main thread (the WorkerAgent, when a controller is given, runs
// its own threads and drives the Communicator as a TopologyFollower).
#pragma once

#include <string>

namespace mixnet::demo {

// Exit code: 0 all bytes verified, 3 some received byte was wrong or missing,
// 1 a phase failed (set-up, collective, controller), 2 bad arguments.
// `launcher_world` (> 0): the world size a launcher gave, which must be the
// config's host count.
int RunWorker(const std::string& config_path, int rank, int launcher_world = 0);

}  // namespace mixnet::demo
