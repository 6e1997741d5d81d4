// Workloads for mixnet_planner_bench (see workloads.h). Main thread only.
#include "bench/planner_bench/workloads.h"

#include <algorithm>
#include <cmath>
#include <numeric>

#include "absl/strings/str_cat.h"

namespace mixnet::bench {

const char* TrafficName(Traffic t) {
  switch (t) {
    case Traffic::kUniform:
      return "uniform";
    case Traffic::kZipf:
      return "zipf";
    case Traffic::kExpert8:
      return "expert8";
  }
  return "unknown";
}

std::vector<planner::RegionInput> MakeRegions(int count, int hosts, const FabricParams& p) {
  std::vector<planner::RegionInput> out;
  int next_port = 0;  // global OCS port counter, packed onto switch_ports-port switches
  for (int r = 0; r < count; ++r) {
    planner::RegionInput in;
    in.name = absl::StrCat("r", r);
    // A region's ports stay on one switch: start a new switch when they do not fit.
    const int need = hosts * p.alpha;
    if (next_port % p.switch_ports + need > p.switch_ports) {
      next_port += p.switch_ports - next_port % p.switch_ports;
    }
    for (int h = 0; h < hosts; ++h) {
      in.hosts.push_back(absl::StrCat("h", r * hosts + h));
      std::vector<planner::OcsPort> ports;
      for (int k = 0; k < p.alpha; ++k) {
        const int sw = next_port / p.switch_ports;
        ports.push_back(planner::OcsPort{absl::StrCat("ocs", k), absl::StrCat("ocs", sw),
                                         next_port % p.switch_ports + 1, p.gbps});
        ++next_port;
      }
      in.ports.push_back(std::move(ports));
      in.eps_Bps.push_back((p.nics - p.alpha) * p.gbps * 1e9 / 8);
    }
    out.push_back(std::move(in));
  }
  return out;
}

TrafficMatrix MakeTraffic(Traffic kind, int n, const FabricParams& p, std::mt19937_64& rng) {
  TrafficMatrix m(n);
  std::uniform_real_distribution<double> jitter(0.95, 1.05);
  static constexpr double kShares[8] = {29.6, 17.1, 3.1, 9.9, 12.2, 9.2, 2.8, 16.2};
  for (int i = 0; i < n; ++i) {
    std::vector<double> w(n, 0);
    switch (kind) {
      case Traffic::kUniform:
        for (int j = 0; j < n; ++j) w[j] = jitter(rng);
        break;
      case Traffic::kZipf: {
        std::vector<int> order(n);
        std::iota(order.begin(), order.end(), 0);
        std::shuffle(order.begin(), order.end(), rng);
        for (int r = 0; r < n; ++r) w[order[r]] = 1.0 / std::pow(r + 1, p.zipf_s);
        break;
      }
      case Traffic::kExpert8:
        for (int j = 0; j < n; ++j) w[j] = kShares[j % 8] * jitter(rng);
        break;
    }
    const double total = std::accumulate(w.begin(), w.end(), 0.0);
    for (int j = 0; j < n; ++j) {
      if (j != i) m.at(i, j) = p.bytes_per_host * w[j] / total;
    }
  }
  return m;
}

std::vector<planner::PlannedCircuit> RandomRegular(const planner::Region& region,
                                                   std::mt19937_64& rng) {
  const int n = region.hosts();
  std::vector<planner::PlannedCircuit> best;
  for (int attempt = 0; attempt < 50; ++attempt) {
    // Stubs: one per port; pair them at random, rejecting self-loops and repeats.
    std::vector<planner::PortRef> stubs;
    for (int h = 0; h < n; ++h) {
      for (int k = 0; k < static_cast<int>(region.input().ports[h].size()); ++k) {
        stubs.push_back({h, k});
      }
    }
    std::shuffle(stubs.begin(), stubs.end(), rng);
    std::vector<char> joined(static_cast<size_t>(n) * n, 0);
    std::vector<planner::PlannedCircuit> out;
    std::vector<planner::PortRef> left;
    for (const planner::PortRef& s : stubs) {
      bool paired = false;
      for (size_t i = 0; i < left.size(); ++i) {
        const planner::PortRef& o = left[i];
        if (o.host == s.host || joined[o.host * n + s.host]) continue;
        if (region.switch_of(o) != region.switch_of(s)) continue;
        joined[o.host * n + s.host] = joined[s.host * n + o.host] = 1;
        out.push_back({o, s});
        left.erase(left.begin() + static_cast<long>(i));
        paired = true;
        break;
      }
      if (!paired) left.push_back(s);
    }
    if (out.size() > best.size()) best = out;
    if (left.empty()) break;
  }
  return best;
}

}  // namespace mixnet::bench
