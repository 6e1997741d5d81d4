// Helpers for the planner tests: hand-built regions, random demands and
// current topologies, an exhaustive optimum for tiny regions, and structural
// checks of a plan. Header-only; single-threaded.
#pragma once

#include <algorithm>
#include <functional>
#include <random>
#include <set>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "gtest/gtest.h"
#include "runtime/planner/planner.h"

namespace mixnet::planner::testing_util {

// n hosts "h<i>" with `ports` OCS ports each on switch "sw" (ports numbered
// from 1 in host order) at `gbps`, and `eps_Bps` of EPS.
inline RegionInput MakeRegionInput(int n, int ports, double gbps, double eps_Bps,
                                   const std::string& name = "r0", int first_port = 1,
                                   const std::string& sw = "sw") {
  RegionInput in;
  in.name = name;
  int next = first_port;
  for (int h = 0; h < n; ++h) {
    in.hosts.push_back(absl::StrCat(name, "h", h));
    std::vector<OcsPort> p;
    for (int k = 0; k < ports; ++k) p.push_back(OcsPort{absl::StrCat("ocs", k), sw, next++, gbps});
    in.ports.push_back(std::move(p));
    in.eps_Bps.push_back(eps_Bps);
  }
  return in;
}

inline Region MustRegion(RegionInput in, int alpha) {
  absl::StatusOr<Region> r = Region::Create(std::move(in), alpha);
  EXPECT_TRUE(r.ok()) << r.status();
  return *std::move(r);
}

inline TrafficMatrix RandomDemand(int n, std::mt19937_64& rng, double scale = 1e6) {
  TrafficMatrix m(n);
  std::uniform_real_distribution<double> u(0, 1);
  const int hot = static_cast<int>(rng() % n);
  for (int i = 0; i < n; ++i) {
    for (int j = 0; j < n; ++j) {
      if (i == j || rng() % 5 == 0) continue;
      m.at(i, j) = scale * u(rng) * u(rng) * (j == hot ? 4 : 1);
    }
  }
  return m;
}

// Random valid circuits over the region's ports (a port at most once, no self-loop).
inline std::vector<PlannedCircuit> RandomCircuits(const Region& r, std::mt19937_64& rng) {
  std::vector<PortRef> stubs;
  for (int h = 0; h < r.hosts(); ++h) {
    for (int k = 0; k < static_cast<int>(r.input().ports[h].size()); ++k) {
      if (rng() % 4 != 0) stubs.push_back({h, k});
    }
  }
  std::shuffle(stubs.begin(), stubs.end(), rng);
  std::vector<PlannedCircuit> out;
  std::vector<char> used(stubs.size(), 0);
  for (size_t i = 0; i < stubs.size(); ++i) {
    if (used[i]) continue;
    for (size_t j = i + 1; j < stubs.size(); ++j) {
      if (used[j] || stubs[j].host == stubs[i].host) continue;
      if (r.switch_of(stubs[i]) != r.switch_of(stubs[j])) continue;
      used[i] = used[j] = 1;
      out.push_back({stubs[i], stubs[j]});
      break;
    }
  }
  return out;
}

// Calls `visit` with every multiset of circuits between n hosts with at most
// ports[h] circuits at host h (no self-loops), each at rate(a, b): for
// exhaustive optima on tiny fabrics.
inline void ForEachCircuitSet(
    int n, std::vector<int> ports, const std::function<double(int, int)>& rate,
    const std::function<void(const std::vector<UndirectedCircuit>&)>& visit) {
  std::vector<std::pair<int, int>> pairs;
  for (int i = 0; i < n; ++i) {
    for (int j = i + 1; j < n; ++j) pairs.emplace_back(i, j);
  }
  std::vector<UndirectedCircuit> chosen;
  std::function<void(size_t)> rec = [&](size_t k) {
    if (k == pairs.size()) {
      visit(chosen);
      return;
    }
    const auto [a, b] = pairs[k];
    const int most = std::min(ports[a], ports[b]);
    for (int c = 0; c <= most; ++c) {
      for (int x = 0; x < c; ++x) chosen.push_back({a, b, rate(a, b)});
      ports[a] -= c;
      ports[b] -= c;
      rec(k + 1);
      ports[a] += c;
      ports[b] += c;
      for (int x = 0; x < c; ++x) chosen.pop_back();
    }
  };
  rec(0);
}

// The best direct-model completion time over every multigraph with at most
// `alpha` circuits per host (one switch, equal rates), by exhaustive search.
inline double BruteForceOptimum(const Region& region, const FluidModel& model) {
  const int n = region.hosts();
  std::vector<int> ports(n);
  for (int h = 0; h < n; ++h) ports[h] = static_cast<int>(region.input().ports[h].size());
  double best = kInfinity;
  ForEachCircuitSet(
      n, ports, [&](int a, int b) { return region.circuit_Bps(a, b); },
      [&](const std::vector<UndirectedCircuit>& set) {
        best = std::min(best, model.Estimate(MakeAdjacency(n, set)).completion_s);
      });
  return best;
}

// Structural checks every plan must pass: ports in range and used once,
// no self-loop, at most alpha circuits per host, a symmetric adjacency.
inline void ExpectWellFormed(const Region& region, const std::vector<PlannedCircuit>& circuits) {
  const int n = region.hosts();
  std::set<std::pair<int, int>> used;
  std::vector<int> degree(n, 0);
  for (const PlannedCircuit& c : circuits) {
    for (const PortRef& e : {c.a, c.b}) {
      ASSERT_GE(e.host, 0);
      ASSERT_LT(e.host, n);
      ASSERT_GE(e.port, 0);
      ASSERT_LT(e.port, static_cast<int>(region.input().ports[e.host].size()));
      EXPECT_TRUE(used.insert({e.host, e.port}).second)
          << "port used twice: host " << e.host << " port " << e.port;
      ++degree[e.host];
    }
    EXPECT_NE(c.a.host, c.b.host);
    EXPECT_EQ(region.switch_of(c.a), region.switch_of(c.b));
  }
  for (int h = 0; h < n; ++h) EXPECT_LE(degree[h], region.alpha()) << "host " << h;
  const Adjacency adj = region.ToAdjacency(circuits);
  for (int i = 0; i < n; ++i) {
    for (const CircuitLink& l : adj[i]) {
      bool mirrored = false;
      for (const CircuitLink& m : adj[l.peer]) mirrored |= (m.peer == i && m.Bps == l.Bps);
      EXPECT_TRUE(mirrored) << i << "-" << l.peer;
    }
  }
  // Round trip through the spec form: every circuit stays inside the region.
  std::vector<cluster::CircuitSpec> specs;
  for (const PlannedCircuit& c : circuits) specs.push_back(region.ToSpec(c));
  absl::StatusOr<std::vector<PlannedCircuit>> back = region.FromSpecs(specs);
  EXPECT_TRUE(back.ok()) << back.status();
}

}  // namespace mixnet::planner::testing_util
