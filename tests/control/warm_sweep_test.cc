// The warm-up sweep's rounds (runtime/control/warm_sweep.h), label cpu.
// Expected counts are closed forms: every port pair of two region hosts on a
// switch once (C(n, 2) * k * k for n hosts with k ports), (n - 1) * k rounds
// for even n and n * k for odd n, and each round a set of circuits the spec
// accepts (cluster::ValidateCircuits: no port twice, no host to itself, no
// circuit across regions).
#include "runtime/control/warm_sweep.h"

#include <map>
#include <set>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "gtest/gtest.h"

namespace mixnet::control {
namespace {

// Host i is "h<i>" with the OCS ports hosts[i] (switch, port); regions name
// host indices.
struct Layout {
  std::vector<std::vector<std::pair<std::string, int>>> hosts;
  std::vector<std::pair<std::string, std::vector<int>>> regions;
};

cluster::ClusterSpec MakeSpec(const Layout& l) {
  std::set<std::string> switches;
  for (const auto& h : l.hosts) {
    for (const auto& [sw, p] : h) switches.insert(sw);
  }
  std::string y = "name: warm\nocs_switches:\n";
  for (const std::string& sw : switches) {
    absl::StrAppend(&y, "  - {name: ", sw, ", ports: 64, switch_ms: 1}\n");
  }
  y += "hosts:\n";
  int addr = 1;
  for (size_t i = 0; i < l.hosts.size(); ++i) {
    absl::StrAppend(&y, "  - name: h", i, "\n    nics:\n",
                    "      - {name: eps0, role: eps, address: 10.10.0.", i + 1, "/16, gbps: 1}\n");
    for (size_t k = 0; k < l.hosts[i].size(); ++k, ++addr) {
      absl::StrAppend(&y, "      - {name: ocs", k, ", role: ocs, address: 10.20.0.", addr,
                      "/16, gbps: 1, switch: ", l.hosts[i][k].first,
                      ", port: ", l.hosts[i][k].second, "}\n");
    }
  }
  y += "regions:\n";
  for (const auto& [name, members] : l.regions) {
    absl::StrAppend(&y, "  - {name: ", name, ", hosts: [");
    for (size_t j = 0; j < members.size(); ++j) absl::StrAppend(&y, j ? ", " : "", "h", members[j]);
    y += "]}\n";
  }
  absl::StatusOr<cluster::ClusterSpec> s = cluster::ClusterSpec::Parse(y, "warm-test");
  EXPECT_TRUE(s.ok()) << s.status() << "\n" << y;
  return s.ok() ? *s : cluster::ClusterSpec{};
}

// n hosts with k ports each on "ocs0" (host i: ports i*k+1 .. i*k+k), one region.
Layout Uniform(int n, int k) {
  Layout l;
  std::vector<int> members;
  for (int i = 0; i < n; ++i) {
    l.hosts.emplace_back();
    for (int j = 0; j < k; ++j) l.hosts.back().emplace_back("ocs0", i * k + j + 1);
    members.push_back(i);
  }
  l.regions.emplace_back("r0", members);
  return l;
}

using Key = std::tuple<std::string, int, int>;

// Every circuit of the sweep, counted; each round checked against the spec.
std::map<Key, int> Count(const cluster::ClusterSpec& spec,
                         const std::vector<std::vector<cluster::CircuitSpec>>& rounds) {
  std::map<Key, int> seen;
  for (size_t r = 0; r < rounds.size(); ++r) {
    EXPECT_TRUE(cluster::ValidateCircuits(spec, rounds[r]).ok())
        << "round " << r << ": " << cluster::ValidateCircuits(spec, rounds[r]);
    for (const cluster::CircuitSpec& c : rounds[r]) {
      ++seen[{c.ocs_switch, std::min(c.port_a, c.port_b), std::max(c.port_a, c.port_b)}];
    }
  }
  return seen;
}

TEST(WarmSweepTest, EightHostsThreeNicsIn21Rounds) {
  const cluster::ClusterSpec spec = MakeSpec(Uniform(8, 3));
  auto rounds = WarmSweep(spec, "r0");
  ASSERT_TRUE(rounds.ok()) << rounds.status();
  EXPECT_EQ(rounds->size(), 21u);  // (8 - 1) * 3: each port's degree, so optimal
  for (const auto& r : *rounds) EXPECT_EQ(r.size(), 12u);  // all 24 ports busy
  const std::map<Key, int> seen = Count(spec, *rounds);
  EXPECT_EQ(seen.size(), 252u);  // C(8, 2) * 3 * 3
  for (const auto& [k, n] : seen) EXPECT_EQ(n, 1) << std::get<1>(k) << "-" << std::get<2>(k);
}

TEST(WarmSweepTest, OddHostCountSitsOneOutPerMatching) {
  const cluster::ClusterSpec spec = MakeSpec(Uniform(5, 2));
  auto rounds = WarmSweep(spec, "r0");
  ASSERT_TRUE(rounds.ok()) << rounds.status();
  EXPECT_EQ(rounds->size(), 10u);                         // 5 matchings * 2 shifts
  for (const auto& r : *rounds) EXPECT_EQ(r.size(), 4u);  // 4 hosts * 2 ports / 2
  const std::map<Key, int> seen = Count(spec, *rounds);
  EXPECT_EQ(seen.size(), 40u);  // C(5, 2) * 2 * 2
  for (const auto& [k, n] : seen) EXPECT_EQ(n, 1);
}

TEST(WarmSweepTest, UnequalPortCountsShiftOverTheLarger) {
  Layout l;
  l.hosts = {{{"ocs0", 1}}, {{"ocs0", 2}, {"ocs0", 3}, {"ocs0", 4}}};
  l.regions = {{"r0", {0, 1}}};
  const cluster::ClusterSpec spec = MakeSpec(l);
  auto rounds = WarmSweep(spec, "r0");
  ASSERT_TRUE(rounds.ok()) << rounds.status();
  ASSERT_EQ(rounds->size(), 3u);
  const std::map<Key, int> seen = Count(spec, *rounds);
  EXPECT_EQ(seen,
            (std::map<Key, int>{{{"ocs0", 1, 2}, 1}, {{"ocs0", 1, 3}, 1}, {{"ocs0", 1, 4}, 1}}));
}

TEST(WarmSweepTest, SwitchesSweepSideBySide) {
  // Four hosts, one port on each of two switches: 3 rounds, each with two
  // circuits per switch.
  Layout l;
  for (int i = 0; i < 4; ++i) l.hosts.push_back({{"sa", i + 1}, {"sb", i + 1}});
  l.regions = {{"r0", {0, 1, 2, 3}}};
  const cluster::ClusterSpec spec = MakeSpec(l);
  auto rounds = WarmSweep(spec, "r0");
  ASSERT_TRUE(rounds.ok()) << rounds.status();
  ASSERT_EQ(rounds->size(), 3u);
  for (const auto& r : *rounds) {
    int on_a = 0;
    for (const cluster::CircuitSpec& c : r) on_a += c.ocs_switch == "sa";
    EXPECT_EQ(on_a, 2);
    EXPECT_EQ(r.size(), 4u);
  }
  EXPECT_EQ(Count(spec, *rounds).size(), 12u);  // C(4, 2) per switch
}

TEST(WarmSweepTest, OnlyTheRegionsPortsAndBadRegions) {
  // Two regions of two hosts on one switch: each sweeps its own pair.
  Layout l = Uniform(4, 1);
  l.regions = {{"r0", {0, 1}}, {"r1", {2, 3}}};
  const cluster::ClusterSpec spec = MakeSpec(l);
  auto r1 = WarmSweep(spec, "r1");
  ASSERT_TRUE(r1.ok()) << r1.status();
  ASSERT_EQ(r1->size(), 1u);
  ASSERT_EQ((*r1)[0].size(), 1u);
  EXPECT_EQ((*r1)[0][0].port_a, 3);
  EXPECT_EQ((*r1)[0][0].port_b, 4);
  EXPECT_EQ(WarmSweep(spec, "r9").status().code(), absl::StatusCode::kInvalidArgument);

  Layout one = Uniform(1, 2);
  auto none = WarmSweep(MakeSpec(one), "r0");
  ASSERT_TRUE(none.ok()) << none.status();
  EXPECT_TRUE(none->empty());
}

}  // namespace
}  // namespace mixnet::control
