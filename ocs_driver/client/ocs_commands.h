// `mixnetctl ocs ...`: the subcommands that talk to one OCS driver daemon
// (info, get, apply, watch, health). Registered on a CLI11 app by main; the
// chosen one runs after parsing. Main thread (watch callbacks print from the
// watch's reader thread while main waits).
#pragma once

#include <functional>
#include <memory>

#include "CLI/CLI.hpp"

namespace mixnet::ocs {

// Exit codes of mixnetctl.
inline constexpr int kExitOk = 0;
inline constexpr int kExitRpcError = 1;    // the call failed: message names target and code
inline constexpr int kExitUsage = 2;       // bad flags or input
inline constexpr int kExitNotServing = 3;  // health: the daemon answered, not SERVING

// Adds the "ocs" subcommand with its own subcommands to `app`. After
// app.parse(), call the returned function to run the chosen one; it returns
// the exit code.
std::function<int()> AddOcsCommands(CLI::App* app);

}  // namespace mixnet::ocs
