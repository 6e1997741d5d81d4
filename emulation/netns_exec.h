// Running a program inside a namespace, like `ip netns exec NS cmd...`: the
// child enters the network namespace, gets a private mount namespace with a
// fresh /sys (so /sys/class/net shows the namespace's interfaces) and execs.
// Used by multi-process tests and tools (one rank per emulated host). Any
// thread may call these; the child inherits the environment.
#pragma once

#include <sys/types.h>

#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/time/time.h"

namespace mixnet::emulation {

// Starts argv[0] (searched in PATH) with `argv` inside network namespace
// `netns`; returns its pid for waitpid. Extra environment: `env` entries
// "NAME=value" are added to (or override) the inherited environment.
absl::StatusOr<pid_t> SpawnCommandInNamespace(absl::string_view netns,
                                              const std::vector<std::string>& argv,
                                              const std::vector<std::string>& env = {});

// Spawns and waits: the exit code, or 128 + signal number when killed.
// DeadlineExceeded (after SIGKILL) when it runs longer than `timeout`.
absl::StatusOr<int> RunCommandInNamespace(absl::string_view netns,
                                          const std::vector<std::string>& argv,
                                          absl::Duration timeout = absl::InfiniteDuration(),
                                          const std::vector<std::string>& env = {});

// Waits for `pid` like RunCommandInNamespace does.
absl::StatusOr<int> WaitForCommand(pid_t pid, absl::Duration timeout = absl::InfiniteDuration());

}  // namespace mixnet::emulation
