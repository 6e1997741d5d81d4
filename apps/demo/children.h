// The orchestrator's child processes (mixnet-ocsd, mixnet-controller, the
// workers): spawned in a network namespace (or here, in loopback mode),
// waited for with a timeout, and always killed at the end (SIGTERM, then
// SIGKILL). Used by the orchestrator's main thread only; not thread-safe.
#pragma once

#include <sys/types.h>

#include <atomic>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/time/time.h"

namespace mixnet::demo {

// Set by SIGINT/SIGTERM in the orchestrator: every wait gives up early.
extern std::atomic<bool> g_interrupted;

class Children {
 public:
  ~Children();  // KillAll
  // Starts argv (argv[0] a path) in `netns`, or in this namespace when empty.
  // stdout/stderr are inherited. `name` names it in messages.
  absl::Status Spawn(const std::string& name, const std::string& netns,
                     const std::vector<std::string>& argv);
  // Waits until every child of `names` (all live children when empty) has
  // exited. Error (naming the child and its exit code) as soon as one exits
  // non-zero; DeadlineExceeded naming those still running at `timeout`;
  // Cancelled when interrupted. Exit code 3 of a worker (bad bytes) is
  // reported as DataLoss.
  absl::Status WaitAll(absl::Duration timeout, const std::vector<std::string>& names = {});
  // Ok while the named child runs; an error naming it and its status otherwise.
  absl::Status CheckRunning(const std::string& name);
  // SIGTERM to the named child, then SIGKILL after `grace`; reaps it.
  void Stop(const std::string& name, absl::Duration grace = absl::Seconds(3));
  void KillAll(absl::Duration grace = absl::Seconds(2));

 private:
  struct Child {
    std::string name;
    pid_t pid = -1;
    bool done = false;
    int status = 0;  // exit code, or 128 + signal
  };
  Child* Find(const std::string& name);
  // Reaps `c` if it exited; true when done.
  bool Poll(Child& c);
  std::vector<Child> children_;
};

// Waits until `path` exists (a daemon's --ready-file) or `who` died.
absl::Status WaitForFile(const std::string& path, absl::Duration timeout, Children& children,
                         const std::string& who);

}  // namespace mixnet::demo
