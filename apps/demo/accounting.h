// What bounds an all-to-all phase of the demo, from the bytes that crossed
// every link during it: the floor (the busiest link-direction's bytes over
// its rate, less the token bucket that an idle link sends at once: no
// schedule can finish the phase sooner) and the busiest link's utilisation
// (floor / measured time). Summed over a fabric's phases, the
// utilisation says whether the links or something else (the CPUs, losses
// and retransmission timeouts, protocol round trips) set the times, and so
// whether comparing fabrics means anything. Pure functions; any thread.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace mixnet::demo {

// One link of the fabric during one phase: bytes received and sent at one
// end (a host NIC, or a leaf uplink) and its rate in each direction.
struct LinkLoad {
  std::string name;  // "h3/eps0", "eps/up0"
  double rate_bytes_per_s = 0;
  uint64_t burst_bytes = 0;  // the tbf bucket in front of each direction
  uint64_t rx_bytes = 0;
  uint64_t tx_bytes = 0;
};

struct PhaseBound {
  double floor_ms = 0;     // max over links and directions of bytes / rate
  double utilisation = 0;  // floor_ms / time_ms (0 when time_ms is 0)
  std::string busiest;     // "h3/eps0 rx"
};

// floor = max over links and directions of max(0, bytes - burst) / rate.
// Links with a rate <= 0 are ignored.
PhaseBound BoundPhase(const std::vector<LinkLoad>& links, double time_ms);

// A fabric's phases together: utilisation = sum of floors / sum of times.
struct FabricBound {
  double floor_ms = 0;
  double time_ms = 0;
  int phases = 0;
  void Add(const PhaseBound& b, double time_ms);
  double utilisation() const { return time_ms > 0 ? floor_ms / time_ms : 0; }
};

// The demo's verdict rules: a fabric is link-bound when its busiest link ran
// at >= kLinkBound of its rate; a run whose any fabric is below kCpuBound is
// marked cpu_bound and prints no ratios.
inline constexpr double kLinkBound = 0.80;
inline constexpr double kCpuBound = 0.60;

}  // namespace mixnet::demo
