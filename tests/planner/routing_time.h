// Test-side scoring of a region's routing, written from the fluid model's
// definition (runtime/planner/fluid_model.h) apart from the planner's own
// EvaluateRouting, so that tests can check the planner's and the router's
// predicted times against something they do not compute themselves.
// Header-only, single-threaded.
#pragma once

#include <algorithm>
#include <limits>
#include <vector>

#include "runtime/planner/fluid_model.h"
#include "runtime/planner/routing.h"

namespace mixnet::routing_time {

// The time `r` needs: the largest bytes / rate over every circuit direction
// (direct bytes plus each relay hop over circuits; a pair's rate is the sum of
// the circuits joining it) and every host's EPS egress and ingress over
// eps_Bps[h] (direct bytes plus each relay hop over EPS).
// Infinity when bytes use a path of rate 0.
inline double RoutingTime(const std::vector<double>& eps_Bps,
                          const std::vector<planner::UndirectedCircuit>& circuits,
                          const planner::RegionRouting& r) {
  const int n = r.hosts;
  std::vector<double> rate(n * n, 0), load(n * n, 0), out(n, 0), in(n, 0);
  for (const planner::UndirectedCircuit& c : circuits) {
    rate[c.a * n + c.b] += c.Bps;
    rate[c.b * n + c.a] += c.Bps;
  }
  for (int i = 0; i < n; ++i) {
    for (int j = 0; j < n; ++j) {
      if (i == j) continue;
      const planner::PairSplit& p = r.at(i, j);
      load[i * n + j] += p.circuit;
      out[i] += p.eps;
      in[j] += p.eps;
      for (const auto& [k, bytes] : p.relay) {
        load[i * n + k] += bytes;
        load[k * n + j] += bytes;
      }
      for (const auto& [k, bytes] : p.eps_circuit) {  // i -EPS-> k -circuit-> j
        out[i] += bytes;
        in[k] += bytes;
        load[k * n + j] += bytes;
      }
      for (const auto& [k, bytes] : p.circuit_eps) {  // i -circuit-> k -EPS-> j
        load[i * n + k] += bytes;
        out[k] += bytes;
        in[j] += bytes;
      }
    }
  }
  const double inf = std::numeric_limits<double>::infinity();
  auto time = [&](double bytes, double bps) {
    return bytes <= 0 ? 0.0 : bps > 0 ? bytes / bps : inf;
  };
  double t = 0;
  for (int x = 0; x < n * n; ++x) t = std::max(t, time(load[x], rate[x]));
  for (int h = 0; h < n; ++h) t = std::max({t, time(out[h], eps_Bps[h]), time(in[h], eps_Bps[h])});
  return t;
}

}  // namespace mixnet::routing_time
