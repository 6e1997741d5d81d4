// The kernel's TCP counters (the "Tcp:" lines of /proc/<thread>/net/snmp) of
// the network namespace the calling thread is in: connections opened and
// reset, segments re-sent. Read by the demo, the benchmarks and the
// emulation tests to count what a run did to TCP. Stateless; any thread.
#pragma once

#include <cstdint>
#include <string>

#include "absl/status/statusor.h"

namespace mixnet {

struct TcpCounters {
  uint64_t active_opens = 0;   // ActiveOpens: connections this namespace dialled
  uint64_t passive_opens = 0;  // PassiveOpens: connections it accepted
  uint64_t estab_resets = 0;   // EstabResets: established connections reset
  uint64_t retrans_segs = 0;   // RetransSegs: segments sent again
  uint64_t opens() const { return active_opens + passive_opens; }
};

// From /proc/thread-self/net/snmp; DataLoss naming the file when a field is
// missing, the errno's status when it cannot be read.
absl::StatusOr<TcpCounters> ReadTcpCounters();

// Parses the text of a net/snmp file (for tests).
absl::StatusOr<TcpCounters> ParseTcpCounters(const std::string& snmp);

}  // namespace mixnet
