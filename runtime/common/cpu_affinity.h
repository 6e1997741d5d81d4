// CPU affinity of the runtime's own threads (transport progress and poller
// threads): which CPUs this process may use, parsing a CPU list, and pinning
// one std::thread. Used once per device, on the thread that sets it up.
//
// Why pin: with ranks sharing cores, a progress thread that the scheduler
// moves between cores pays cross-core wake-ups (IPIs, VM exits under a
// hypervisor) for every message it completes, and its rank's main thread,
// woken by it, drifts along. A progress thread on a fixed CPU keeps each
// rank's threads together (see Communicator, MIXNET_PROGRESS_CPUS).
#pragma once

#include <string>
#include <thread>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"

namespace mixnet {

// The CPUs this process may run on (sched_getaffinity), ascending.
absl::StatusOr<std::vector<int>> AllowedCpus();

// Parses "0,2,8-11" into {0, 2, 8, 9, 10, 11}, in the order written.
// InvalidArgument names the bad element.
absl::StatusOr<std::vector<int>> ParseCpuList(const std::string& text);

// Restricts `thread` to `cpu`. The error names the thread, the CPU and errno.
absl::Status PinThread(std::thread& thread, int cpu, const std::string& thread_name);

// The CPUs `thread` may run on.
absl::StatusOr<std::vector<int>> ThreadCpus(std::thread& thread);

}  // namespace mixnet
