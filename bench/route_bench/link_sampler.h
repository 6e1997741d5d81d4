// When each of a host's links carried its part of one all-to-all: a thread
// that samples the NICs' byte counters (/proc/self/net/dev of the worker's
// namespace) every `period` while the caller's all-to-all runs, and then,
// per NIC and direction, the times at which 1% and 99% of the bytes it moved
// in the all-to-all had moved. A link that ends well before the all-to-all
// does sat idle at the end (its pair's bytes were cut for it before the
// transfer, and the slower paths finished the call); one that starts late
// waited for something else; bytes over (end - start) below the link's rate
// ran slowly in between. Started and stopped by the route
// bench's worker thread; the sampling runs on its own thread.
#pragma once

#include <atomic>
#include <chrono>
#include <map>
#include <string>
#include <thread>
#include <vector>

#include "absl/status/status.h"
#include "apps/demo/counters.h"

namespace mixnet::bench {

// One direction of one NIC: ms since Start at which 1% and 99% of its bytes
// had moved (both 0 for a direction that moved nothing), and the bytes.
struct LinkSpan {
  double start_ms = 0;
  double end_ms = 0;
  uint64_t bytes = 0;
};
struct LinkEnd {
  LinkSpan rx, tx;
};

// Pure: from samples (time since start, counters) of one NIC, the time at
// which `share` of the last sample's bytes (over the first's) had moved, per
// direction, linearly interpolated between samples (0 when nothing moved).
double TimeOfShare(const std::vector<double>& t_ms, const std::vector<uint64_t>& v, double share);
// Both directions' spans (shares 0.01 and 0.99).
LinkEnd EndOf(const std::vector<double>& t_ms, const std::vector<demo::ByteCounters>& c);

class LinkSampler {
 public:
  LinkSampler(std::vector<std::string> nics, std::chrono::microseconds period)
      : nics_(std::move(nics)), period_(period) {}
  ~LinkSampler() { (void)Stop(); }
  // Takes the first sample on the caller's thread (the clock starts then).
  absl::Status Start();
  // Takes the last sample and joins; the ends per NIC.
  absl::StatusOr<std::map<std::string, LinkEnd>> Stop();

 private:
  void Loop();
  absl::Status Sample();

  const std::vector<std::string> nics_;
  const std::chrono::microseconds period_;
  std::chrono::steady_clock::time_point t0_;
  std::vector<double> t_ms_;
  std::map<std::string, std::vector<demo::ByteCounters>> samples_;
  absl::Status error_;
  std::atomic<bool> stop_{false};
  std::thread thread_;
};

}  // namespace mixnet::bench
