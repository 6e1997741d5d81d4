// Tests for router v1: intra-host, EPS-only, single and striped circuits,
// several EPS NICs, topology checks, unreachable hosts, and a seeded property
// test that every pair's paths mirror each other on random specs with random
// valid circuits. Single-threaded.
#include "runtime/router/route_table.h"

#include <algorithm>
#include <map>
#include <random>
#include <set>
#include <string>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace mixnet::router {
namespace {

using cluster::CircuitSpec;
using cluster::ClusterSpec;
using cluster::HostSpec;
using cluster::NicRole;
using cluster::NicSpec;
using ::testing::HasSubstr;

// Three hosts; h0 has two OCS NICs and h1 two so that they can be striped.
constexpr char kSpec[] = R"(name: demo
ocs_switches:
  - {name: sw, ports: 8}
hosts:
  - name: h0
    nics:
      - {name: eps0, role: eps, address: 10.10.0.1, gbps: 0.2}
      - {name: ocs0, role: ocs, address: 10.20.0.1, gbps: 0.4, switch: sw, port: 1}
      - {name: ocs1, role: ocs, address: 10.20.0.2, gbps: 0.4, switch: sw, port: 2}
  - name: h1
    nics:
      - {name: eps0, role: eps, address: 10.10.0.2, gbps: 0.2}
      - {name: ocs0, role: ocs, address: 10.20.1.1, gbps: 0.3, switch: sw, port: 3}
      - {name: ocs1, role: ocs, address: 10.20.1.2, gbps: 0.4, switch: sw, port: 4}
  - name: h2
    nics:
      - {name: eps0, role: eps, address: 10.10.0.3, gbps: 0.1}
      - {name: ocs0, role: ocs, address: 10.20.2.1, gbps: 0.4, switch: sw, port: 5}
)";

ClusterSpec MustParse(const char* text) {
  absl::StatusOr<ClusterSpec> spec = ClusterSpec::Parse(text, "test.yaml");
  EXPECT_TRUE(spec.ok()) << spec.status();
  return spec.ok() ? *spec : ClusterSpec{};
}

RouteTable MustBuild(const ClusterSpec& spec, const Topology& topo, const std::string& host) {
  absl::StatusOr<RouteTable> table = BuildRouteTable(spec, topo, host);
  EXPECT_TRUE(table.ok()) << table.status();
  return table.ok() ? *table : RouteTable{};
}

void ExpectPath(const Path& p, PathKind kind, const std::string& local_nic,
                const std::string& local_address, const std::string& remote_nic,
                const std::string& remote_address, double gbps) {
  EXPECT_EQ(p.kind, kind) << PathKindName(p.kind);
  EXPECT_EQ(p.local_nic, local_nic);
  EXPECT_EQ(p.local_address, local_address);
  EXPECT_EQ(p.remote_nic, remote_nic);
  EXPECT_EQ(p.remote_address, remote_address);
  EXPECT_DOUBLE_EQ(p.gbps, gbps);
}

TEST(RouteTableTest, PathKindNames) {
  EXPECT_EQ(PathKindName(PathKind::kIntraHost), "intra-host");
  EXPECT_EQ(PathKindName(PathKind::kOcs), "ocs");
  EXPECT_EQ(PathKindName(PathKind::kEps), "eps");
}

TEST(RouteTableTest, IntraHostOnLoopbackSingleHost) {
  ClusterSpec spec = ClusterSpec::SingleHost("node", "lo", "127.0.0.1");
  RouteTable table = MustBuild(spec, Topology{.epoch = 3, .circuits = {}}, "node");
  EXPECT_EQ(table.epoch(), 3u);
  EXPECT_EQ(table.local_host(), "node");
  ASSERT_EQ(table.PathsTo("node").size(), 1u);
  ExpectPath(table.PathsTo("node")[0], PathKind::kIntraHost, "lo", "127.0.0.1", "lo", "127.0.0.1",
             100);
  EXPECT_EQ(table.all().size(), 1u);
  EXPECT_TRUE(table.PathsTo("other").empty());
  EXPECT_EQ(table.EpsPathsTo("node").size(), 1u);
}

TEST(RouteTableTest, IntraHostUsesFirstEpsNicElseFirstNic) {
  ClusterSpec spec = MustParse(kSpec);
  RouteTable t0 = MustBuild(spec, {}, "h0");
  ASSERT_EQ(t0.PathsTo("h0").size(), 1u);
  ExpectPath(t0.PathsTo("h0")[0], PathKind::kIntraHost, "eps0", "10.10.0.1", "eps0", "10.10.0.1",
             0.2);

  // A host with OCS NICs only (and a circuit to each peer so it is reachable).
  ClusterSpec ocs_only = MustParse(R"(ocs_switches: [{name: sw, ports: 4}]
hosts:
  - name: a
    nics: [{name: o0, role: ocs, address: 10.0.0.1, gbps: 1, switch: sw, port: 1}]
  - name: b
    nics: [{name: o0, role: ocs, address: 10.0.0.2, gbps: 2, switch: sw, port: 2}]
)");
  RouteTable ta = MustBuild(ocs_only, Topology{.epoch = 1, .circuits = {{"sw", 1, 2}}}, "a");
  ASSERT_EQ(ta.PathsTo("a").size(), 1u);
  ExpectPath(ta.PathsTo("a")[0], PathKind::kIntraHost, "o0", "10.0.0.1", "o0", "10.0.0.1", 1);
  ASSERT_EQ(ta.PathsTo("b").size(), 1u);
  ExpectPath(ta.PathsTo("b")[0], PathKind::kOcs, "o0", "10.0.0.1", "o0", "10.0.0.2", 1);
  EXPECT_TRUE(ta.EpsPathsTo("b").empty());
}

TEST(RouteTableTest, EpsOnly) {
  ClusterSpec spec = MustParse(kSpec);
  RouteTable table = MustBuild(spec, Topology{.epoch = 9, .circuits = {}}, "h0");
  EXPECT_EQ(table.all().size(), 3u);
  ASSERT_EQ(table.PathsTo("h1").size(), 1u);
  ExpectPath(table.PathsTo("h1")[0], PathKind::kEps, "eps0", "10.10.0.1", "eps0", "10.10.0.2", 0.2);
  ASSERT_EQ(table.PathsTo("h2").size(), 1u);
  ExpectPath(table.PathsTo("h2")[0], PathKind::kEps, "eps0", "10.10.0.1", "eps0", "10.10.0.3",
             0.1);  // min of both ends
}

TEST(RouteTableTest, OneCircuit) {
  ClusterSpec spec = MustParse(kSpec);
  Topology topo{.epoch = 2, .circuits = {{"sw", 3, 1}}};  // h1:ocs0 <-> h0:ocs0
  RouteTable t0 = MustBuild(spec, topo, "h0");
  ASSERT_EQ(t0.PathsTo("h1").size(), 1u);
  ExpectPath(t0.PathsTo("h1")[0], PathKind::kOcs, "ocs0", "10.20.0.1", "ocs0", "10.20.1.1", 0.3);
  // The EPS paths stay available for fallback.
  ASSERT_EQ(t0.EpsPathsTo("h1").size(), 1u);
  EXPECT_EQ(t0.EpsPathsTo("h1")[0].kind, PathKind::kEps);
  // h2 has no circuit: EPS.
  ASSERT_EQ(t0.PathsTo("h2").size(), 1u);
  EXPECT_EQ(t0.PathsTo("h2")[0].kind, PathKind::kEps);

  RouteTable t1 = MustBuild(spec, topo, "h1");
  ASSERT_EQ(t1.PathsTo("h0").size(), 1u);
  ExpectPath(t1.PathsTo("h0")[0], PathKind::kOcs, "ocs0", "10.20.1.1", "ocs0", "10.20.0.1", 0.3);
  RouteTable t2 = MustBuild(spec, topo, "h2");
  EXPECT_EQ(t2.PathsTo("h0")[0].kind, PathKind::kEps);
}

TEST(RouteTableTest, StripedCircuitsInCanonicalOrder) {
  ClusterSpec spec = MustParse(kSpec);
  // Listed in a different order and orientation than the canonical one.
  Topology topo{.epoch = 4, .circuits = {{"sw", 4, 2}, {"sw", 1, 3}}};
  RouteTable t0 = MustBuild(spec, topo, "h0");
  const std::vector<Path>& paths = t0.PathsTo("h1");
  ASSERT_EQ(paths.size(), 2u);
  ExpectPath(paths[0], PathKind::kOcs, "ocs0", "10.20.0.1", "ocs0", "10.20.1.1", 0.3);
  ExpectPath(paths[1], PathKind::kOcs, "ocs1", "10.20.0.2", "ocs1", "10.20.1.2", 0.4);
  RouteTable t1 = MustBuild(spec, topo, "h1");
  ASSERT_EQ(t1.PathsTo("h0").size(), 2u);
  EXPECT_EQ(t1.PathsTo("h0")[0].local_nic, "ocs0");
  EXPECT_EQ(t1.PathsTo("h0")[1].local_nic, "ocs1");
}

TEST(RouteTableTest, CircuitsToDifferentPeers) {
  ClusterSpec spec = MustParse(kSpec);
  Topology topo{.epoch = 5, .circuits = {{"sw", 1, 3}, {"sw", 2, 5}}};
  RouteTable t0 = MustBuild(spec, topo, "h0");
  ASSERT_EQ(t0.PathsTo("h1").size(), 1u);
  EXPECT_EQ(t0.PathsTo("h1")[0].local_nic, "ocs0");
  ASSERT_EQ(t0.PathsTo("h2").size(), 1u);
  ExpectPath(t0.PathsTo("h2")[0], PathKind::kOcs, "ocs1", "10.20.0.2", "ocs0", "10.20.2.1", 0.4);
  RouteTable t1 = MustBuild(spec, topo, "h1");
  EXPECT_EQ(t1.PathsTo("h2")[0].kind, PathKind::kEps);
}

TEST(RouteTableTest, SeveralEpsNicsPairInOrderAndWrap) {
  ClusterSpec spec = MustParse(R"(hosts:
  - name: a
    nics:
      - {name: e0, role: eps, address: 10.0.0.1, gbps: 1}
      - {name: e1, role: eps, address: 10.0.0.2, gbps: 1}
      - {name: e2, role: eps, address: 10.0.0.3, gbps: 1}
  - name: b
    nics:
      - {name: f0, role: eps, address: 10.0.1.1, gbps: 2}
      - {name: f1, role: eps, address: 10.0.1.2, gbps: 0.5}
)");
  RouteTable ta = MustBuild(spec, {}, "a");
  const std::vector<Path>& ab = ta.PathsTo("b");
  ASSERT_EQ(ab.size(), 3u);
  ExpectPath(ab[0], PathKind::kEps, "e0", "10.0.0.1", "f0", "10.0.1.1", 1);
  ExpectPath(ab[1], PathKind::kEps, "e1", "10.0.0.2", "f1", "10.0.1.2", 0.5);
  ExpectPath(ab[2], PathKind::kEps, "e2", "10.0.0.3", "f0", "10.0.1.1", 1);
  RouteTable tb = MustBuild(spec, {}, "b");
  const std::vector<Path>& ba = tb.PathsTo("a");
  ASSERT_EQ(ba.size(), 3u);
  ExpectPath(ba[0], PathKind::kEps, "f0", "10.0.1.1", "e0", "10.0.0.1", 1);
  ExpectPath(ba[1], PathKind::kEps, "f1", "10.0.1.2", "e1", "10.0.0.2", 0.5);
  ExpectPath(ba[2], PathKind::kEps, "f0", "10.0.1.1", "e2", "10.0.0.3", 1);
}

TEST(RouteTableTest, UnknownLocalHost) {
  ClusterSpec spec = MustParse(kSpec);
  absl::StatusOr<RouteTable> table = BuildRouteTable(spec, {}, "h9");
  ASSERT_FALSE(table.ok());
  EXPECT_EQ(table.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(table.status().message()), HasSubstr("'h9'"));
}

TEST(RouteTableTest, UnreachableHostNamesBoth) {
  ClusterSpec spec = MustParse(R"(ocs_switches: [{name: sw, ports: 4}]
hosts:
  - name: a
    nics: [{name: e0, role: eps, address: 10.0.0.1, gbps: 1}]
  - name: island
    nics: [{name: o0, role: ocs, address: 10.0.0.2, gbps: 1, switch: sw, port: 1}]
  - name: c
    nics:
      - {name: e0, role: eps, address: 10.0.0.3, gbps: 1}
      - {name: o0, role: ocs, address: 10.0.0.4, gbps: 1, switch: sw, port: 2}
)");
  for (const char* local : {"a", "island"}) {
    absl::StatusOr<RouteTable> table =
        BuildRouteTable(spec, Topology{.epoch = 6, .circuits = {}}, local);
    ASSERT_FALSE(table.ok()) << local;
    EXPECT_EQ(table.status().code(), absl::StatusCode::kInvalidArgument);
    const std::string msg(table.status().message());
    EXPECT_THAT(msg,
                HasSubstr(local == std::string("a") ? "host island is unreachable from host a"
                                                    : "host a is unreachable from host island"));
    EXPECT_THAT(msg, HasSubstr("host island has no EPS NIC"));
    EXPECT_THAT(msg, HasSubstr("epoch 6"));
  }
  // A circuit joins island and c; island still cannot reach a.
  Topology topo{.epoch = 7, .circuits = {{"sw", 1, 2}}};
  absl::StatusOr<RouteTable> c = BuildRouteTable(spec, topo, "c");
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_EQ(c->PathsTo("island")[0].kind, PathKind::kOcs);
  EXPECT_FALSE(BuildRouteTable(spec, topo, "island").ok());
}

TEST(RouteTableTest, BadTopologies) {
  ClusterSpec spec = MustParse(kSpec);
  struct Case {
    std::vector<CircuitSpec> circuits;
    const char* want;
  };
  const Case cases[] = {
      {{{"nope", 1, 3}}, "topology epoch 8: circuits[0].switch: unknown switch 'nope'"},
      {{{"sw", 1, 6}}, "circuits[0].ports[1]: port 6 of switch sw is not cabled"},
      {{{"sw", 1, 9}}, "circuits[0].ports[1]: port 9 out of range 1..8"},
      {{{"sw", 1, 3}, {"sw", 1, 4}}, "circuits[1].ports[0]: port 1 of switch sw is already used"},
      {{{"sw", 1, 2}}, "circuits[0].ports: circuit joins two NICs of host h0"},
      {{{"sw", 3, 3}}, "circuits[0].ports: self-loop"},
  };
  for (const Case& c : cases) {
    Topology topo{.epoch = 8, .circuits = c.circuits};
    absl::Status v = ValidateTopology(spec, topo);
    EXPECT_EQ(v.code(), absl::StatusCode::kInvalidArgument) << c.want;
    EXPECT_THAT(std::string(v.message()), HasSubstr(c.want));
    absl::StatusOr<RouteTable> table = BuildRouteTable(spec, topo, "h2");
    ASSERT_FALSE(table.ok()) << c.want;
    EXPECT_EQ(table.status().code(), absl::StatusCode::kInvalidArgument);
    EXPECT_THAT(std::string(table.status().message()), HasSubstr(c.want));
  }
}

TEST(RouteTableTest, CircuitAcrossRegionsIsRejected) {
  ClusterSpec spec = MustParse(R"(ocs_switches: [{name: sw, ports: 4}]
hosts:
  - name: a
    nics:
      - {name: e0, role: eps, address: 10.0.0.1, gbps: 1}
      - {name: o0, role: ocs, address: 10.0.1.1, gbps: 1, switch: sw, port: 1}
  - name: b
    nics:
      - {name: e0, role: eps, address: 10.0.0.2, gbps: 1}
      - {name: o0, role: ocs, address: 10.0.1.2, gbps: 1, switch: sw, port: 2}
regions:
  - {name: r0, hosts: [a]}
  - {name: r1, hosts: [b]}
)");
  absl::Status s = ValidateTopology(spec, Topology{.epoch = 1, .circuits = {{"sw", 1, 2}}});
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(s.message()), HasSubstr("crosses regions"));
}

// ---- Property: route tables of every pair mirror each other. -------------

struct RandomCluster {
  ClusterSpec spec;
  std::vector<CircuitSpec> circuits;
};

// A random spec (1-3 EPS NICs and 0-4 OCS NICs per host over 1-2 switches,
// random regions) with random circuits that respect every rule.
RandomCluster MakeRandomCluster(uint32_t seed) {
  std::mt19937 rng(seed);
  auto uniform = [&](int lo, int hi) { return std::uniform_int_distribution<int>(lo, hi)(rng); };
  RandomCluster rc;
  ClusterSpec& spec = rc.spec;
  spec.name = "random";
  const int num_switches = uniform(1, 2);
  for (int s = 0; s < num_switches; ++s)
    spec.ocs_switches.push_back({"sw" + std::to_string(s), 64, 1});
  const int num_regions = uniform(0, 3);
  for (int r = 0; r < num_regions; ++r) spec.regions.push_back({"r" + std::to_string(r), {}});
  std::vector<int> next_port(num_switches, 1);
  const int num_hosts = uniform(2, 9);
  int address = 1;
  auto next_address = [&] {
    ++address;
    return "10." + std::to_string(address / 65536) + "." + std::to_string(address / 256 % 256) +
           "." + std::to_string(address % 256);
  };
  for (int h = 0; h < num_hosts; ++h) {
    HostSpec host;
    host.name = "host" + std::to_string(h);
    const int eps = uniform(1, 3), ocs = uniform(0, 4);
    for (int i = 0; i < eps; ++i) {
      host.nics.push_back({"eps" + std::to_string(i), NicRole::kEps, next_address(), 32,
                           0.1 * uniform(1, 4), "", 0});
    }
    for (int i = 0; i < ocs; ++i) {
      const int s = uniform(0, num_switches - 1);
      host.nics.push_back({"ocs" + std::to_string(i), NicRole::kOcs, next_address(), 32,
                           0.1 * uniform(1, 4), spec.ocs_switches[s].name, next_port[s]++});
    }
    if (num_regions > 0 && uniform(0, 4) != 0) {
      const int r = uniform(0, num_regions - 1);
      host.region = spec.regions[r].name;
      spec.regions[r].hosts.push_back(host.name);
    }
    spec.hosts.push_back(std::move(host));
  }
  // Random circuits: try random port pairs, keep the valid ones.
  std::vector<std::pair<const HostSpec*, const NicSpec*>> ports;
  for (const HostSpec& h : spec.hosts) {
    for (const NicSpec& n : h.nics) {
      if (n.role == NicRole::kOcs) ports.push_back({&h, &n});
    }
  }
  std::set<std::pair<std::string, int>> used;
  for (int attempt = 0; attempt < 40 && ports.size() >= 2; ++attempt) {
    const auto& [ha, na] = ports[uniform(0, static_cast<int>(ports.size()) - 1)];
    const auto& [hb, nb] = ports[uniform(0, static_cast<int>(ports.size()) - 1)];
    if (ha == hb || na->ocs_switch != nb->ocs_switch) continue;
    if (!ha->region.empty() && !hb->region.empty() && ha->region != hb->region) continue;
    if (used.count({na->ocs_switch, na->ocs_port}) || used.count({nb->ocs_switch, nb->ocs_port})) {
      continue;
    }
    used.insert({na->ocs_switch, na->ocs_port});
    used.insert({nb->ocs_switch, nb->ocs_port});
    rc.circuits.push_back({na->ocs_switch, na->ocs_port, nb->ocs_port});
  }
  std::shuffle(rc.circuits.begin(), rc.circuits.end(), rng);
  return rc;
}

int CircuitsBetween(const ClusterSpec& spec, const std::vector<CircuitSpec>& circuits,
                    const std::string& a, const std::string& b) {
  int n = 0;
  for (const CircuitSpec& c : circuits) {
    std::string x = spec.FindPort(c.ocs_switch, c.port_a)->host->name;
    std::string y = spec.FindPort(c.ocs_switch, c.port_b)->host->name;
    if ((x == a && y == b) || (x == b && y == a)) ++n;
  }
  return n;
}

void ExpectMirror(const std::vector<Path>& ab, const std::vector<Path>& ba) {
  ASSERT_EQ(ab.size(), ba.size());
  for (size_t i = 0; i < ab.size(); ++i) {
    EXPECT_EQ(ab[i].kind, ba[i].kind) << i;
    EXPECT_EQ(ab[i].local_nic, ba[i].remote_nic) << i;
    EXPECT_EQ(ab[i].local_address, ba[i].remote_address) << i;
    EXPECT_EQ(ab[i].remote_nic, ba[i].local_nic) << i;
    EXPECT_EQ(ab[i].remote_address, ba[i].local_address) << i;
    EXPECT_DOUBLE_EQ(ab[i].gbps, ba[i].gbps) << i;
  }
}

class SymmetryTest : public ::testing::TestWithParam<uint32_t> {};

TEST_P(SymmetryTest, PathsMirrorAcrossEveryPair) {
  RandomCluster rc = MakeRandomCluster(GetParam());
  ASSERT_TRUE(cluster::ValidateCircuits(rc.spec, rc.circuits).ok())
      << cluster::ValidateCircuits(rc.spec, rc.circuits);
  const Topology topo{.epoch = GetParam(), .circuits = rc.circuits};
  std::map<std::string, RouteTable> tables;
  for (const HostSpec& h : rc.spec.hosts) tables.emplace(h.name, MustBuild(rc.spec, topo, h.name));

  for (const HostSpec& a : rc.spec.hosts) {
    const RouteTable& ta = tables.at(a.name);
    EXPECT_EQ(ta.epoch(), GetParam());
    EXPECT_EQ(ta.all().size(), rc.spec.hosts.size());
    for (const HostSpec& b : rc.spec.hosts) {
      SCOPED_TRACE("seed " + std::to_string(GetParam()) + " " + a.name + " -> " + b.name);
      const std::vector<Path>& ab = ta.PathsTo(b.name);
      ASSERT_FALSE(ab.empty());
      ExpectMirror(ab, tables.at(b.name).PathsTo(a.name));
      ExpectMirror(ta.EpsPathsTo(b.name), tables.at(b.name).EpsPathsTo(a.name));
      if (&a == &b) {
        ASSERT_EQ(ab.size(), 1u);
        EXPECT_EQ(ab[0].kind, PathKind::kIntraHost);
        continue;
      }
      const int circuits = CircuitsBetween(rc.spec, rc.circuits, a.name, b.name);
      if (circuits > 0) {
        EXPECT_EQ(static_cast<int>(ab.size()), circuits);
        for (const Path& p : ab) EXPECT_EQ(p.kind, PathKind::kOcs);
      } else {
        EXPECT_EQ(ab.size(), ta.EpsPathsTo(b.name).size());
        for (const Path& p : ab) EXPECT_EQ(p.kind, PathKind::kEps);
      }
      // Every path leaves through a NIC of a with the right role and address.
      for (const Path& p : ab) {
        const NicSpec* local = a.FindNic(p.local_nic);
        const NicSpec* remote = b.FindNic(p.remote_nic);
        ASSERT_NE(local, nullptr);
        ASSERT_NE(remote, nullptr);
        EXPECT_EQ(local->address, p.local_address);
        EXPECT_EQ(remote->address, p.remote_address);
        EXPECT_EQ(local->role, p.kind == PathKind::kOcs ? NicRole::kOcs : NicRole::kEps);
        EXPECT_DOUBLE_EQ(p.gbps, std::min(local->gbps, remote->gbps));
      }
    }
  }
}

INSTANTIATE_TEST_SUITE_P(Seeds, SymmetryTest, ::testing::Range<uint32_t>(1, 41));

}  // namespace
}  // namespace mixnet::router
