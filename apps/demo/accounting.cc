// Floors and utilisation of the demo's phases (see accounting.h).
#include "apps/demo/accounting.h"

#include <algorithm>

namespace mixnet::demo {

PhaseBound BoundPhase(const std::vector<LinkLoad>& links, double time_ms) {
  PhaseBound b;
  for (const LinkLoad& l : links) {
    if (!(l.rate_bytes_per_s > 0)) continue;
    for (const auto& [bytes, dir] : {std::pair{l.rx_bytes, "rx"}, std::pair{l.tx_bytes, "tx"}}) {
      const double paced = bytes > l.burst_bytes ? static_cast<double>(bytes - l.burst_bytes) : 0;
      const double ms = 1e3 * paced / l.rate_bytes_per_s;
      if (ms > b.floor_ms) {
        b.floor_ms = ms;
        b.busiest = l.name + " " + dir;
      }
    }
  }
  b.utilisation = time_ms > 0 ? b.floor_ms / time_ms : 0;
  return b;
}

void FabricBound::Add(const PhaseBound& b, double t) {
  floor_ms += b.floor_ms;
  time_ms += t;
  ++phases;
}

}  // namespace mixnet::demo
