// Flow-level network solver of the fabric simulator: a set of links (bytes/s
// per direction) and flows (bytes over a fixed list of links), all starting at
// time 0; rates are max-min fair (progressive filling) and recomputed whenever
// a flow finishes, until every flow is done. Flows that share no link (directly
// or through other flows) are solved independently (connected components), so
// a cluster of many regions costs the sum of its regions. Pure computation,
// single-threaded; a FlowNetwork is a plain value type.
#pragma once

#include <cstdint>
#include <initializer_list>
#include <span>
#include <vector>

namespace mixnet::sim {

class FlowNetwork {
 public:
  // Returns the link id. Capacity in bytes/s (>= 0).
  int AddLink(double Bps);
  // A flow of `bytes` over `links` (ids from AddLink). A flow with no bytes is
  // dropped; a flow with bytes and no links (it stays inside a server) takes
  // no time. Returns the flow id or -1 when dropped.
  int AddFlow(double bytes, std::span<const int> links);
  int AddFlow(double bytes, std::initializer_list<int> links) {
    return AddFlow(bytes, std::span<const int>(links.begin(), links.size()));
  }

  int links() const { return static_cast<int>(capacity_.size()); }
  int flows() const { return static_cast<int>(bytes_.size()); }
  double capacity(int link) const { return capacity_[link]; }
  double bytes(int flow) const { return bytes_[flow]; }
  std::span<const int> flow_links(int flow) const {
    return {flow_links_.data() + first_[flow], first_[flow + 1] - first_[flow]};
  }

 private:
  std::vector<double> capacity_;
  std::vector<double> bytes_;
  std::vector<int> flow_links_;
  std::vector<size_t> first_ = {0};
};

struct SolveResult {
  double completion_s = 0;       // the last flow's finish time (infinity if a flow can't move)
  std::vector<double> finish_s;  // per flow id
  int64_t events = 0;            // rate recomputations, over all components
  int components = 0;
};

// Max-min fair rates, recomputed at each flow completion (event-driven).
SolveResult SolveMaxMin(const FlowNetwork& network);

// One max-min fair allocation of the given flows (all active), for tests and
// for callers that want the instantaneous rates. rate[f] in bytes/s.
std::vector<double> MaxMinRates(const FlowNetwork& network);

}  // namespace mixnet::sim
