// Fabric models against closed forms: uniform all-to-all on the non-blocking
// fat-tree, oversubscription scaling, MixNet bounded by its NICs and EPS, and
// the three routings (router v1, v2, v2 with relays) on a hand-made topology.
#include "sim/fabric.h"

#include "gtest/gtest.h"

namespace mixnet::sim {
namespace {

constexpr double kGbps = 400;
constexpr double kServerBps = 8 * kGbps * 1e9 / 8;  // 8 NICs

Layout TwoRegionsOfEight() {
  Layout l;
  l.servers = 16;
  l.gpus = 128;
  l.region_servers = 8;
  l.regions = 2;
  l.pp = 2;
  l.ep = 8;
  l.tp = 8;
  return l;
}

std::vector<TrafficMatrix> Uniform(const Layout& l, double bytes) {
  std::vector<TrafficMatrix> m(l.regions, TrafficMatrix(l.region_servers));
  for (auto& x : m)
    for (int i = 0; i < l.region_servers; ++i)
      for (int j = 0; j < l.region_servers; ++j)
        if (i != j) x.at(i, j) = bytes;
  return m;
}

double A2A(FabricOptions o, const Layout& l, const std::vector<TrafficMatrix>& m) {
  auto f = MakeFabric(o, l);
  EXPECT_TRUE(f.ok()) << f.status();
  auto t = (*f)->AllToAll(m, m, {});
  EXPECT_TRUE(t.ok()) << t.status();
  return t->seconds;
}

TEST(FabricTest, UniformAllToAllOnFatTreeIsAnalytic) {
  const Layout l = TwoRegionsOfEight();
  const double B = 100e6;
  FabricOptions o{.kind = FabricKind::kFatTree, .link_gbps = kGbps};
  EXPECT_NEAR(A2A(o, l, Uniform(l, B)), 7 * B / kServerBps, 1e-12);
  o.kind = FabricKind::kRail;
  EXPECT_NEAR(A2A(o, l, Uniform(l, B)), 7 * B / kServerBps, 1e-12);
}

TEST(FabricTest, OversubscriptionScalesCrossPodTime) {
  // Pods of 4 servers: each server sends 4 B across its pod; a pod's uplink is
  // 4 x 8 NICs / ratio, so the all-to-all takes 16 B / (32 R / ratio).
  const Layout l = TwoRegionsOfEight();
  const double B = 50e6;
  const double R = kGbps * 1e9 / 8;
  for (double ratio : {2.0, 4.0, 8.0}) {
    FabricOptions o{
        .kind = FabricKind::kOversub, .link_gbps = kGbps, .oversub = ratio, .pod_servers = 4};
    EXPECT_NEAR(A2A(o, l, Uniform(l, B)), ratio * B / (2 * R), 1e-9) << "ratio " << ratio;
  }
  // Ratio 1 is the non-blocking fat-tree.
  FabricOptions o{.kind = FabricKind::kOversub, .link_gbps = kGbps, .oversub = 1, .pod_servers = 4};
  EXPECT_NEAR(A2A(o, l, Uniform(l, B)), 7 * B / kServerBps, 1e-12);
}

TEST(FabricTest, TransferIncastOnServerNics) {
  const Layout l = TwoRegionsOfEight();
  FabricOptions o{.kind = FabricKind::kFatTree, .link_gbps = kGbps};
  auto f = MakeFabric(o, l);
  ASSERT_TRUE(f.ok());
  std::vector<ServerFlow> flows;
  for (int s = 1; s < 16; ++s) flows.push_back({s, 0, 1e9});
  EXPECT_NEAR((*f)->Transfer(flows), 15e9 / kServerBps, 1e-9);
}

TEST(FabricTest, MixNetUniformLiesBetweenAllNicsAndEpsOnly) {
  const Layout l = TwoRegionsOfEight();
  const double B = 100e6;
  FabricOptions o{.kind = FabricKind::kMixNet, .link_gbps = kGbps, .alpha = 6};
  auto f = MakeFabric(o, l);
  ASSERT_TRUE(f.ok());
  const auto m = Uniform(l, B);
  // Switching fully hidden: every region reconfigures from no circuits.
  auto t = (*f)->AllToAll(m, m, {.plan = true, .overlap_s = 1, .uses = 2});
  ASSERT_TRUE(t.ok()) << t.status();
  EXPECT_EQ(t->reconfigured_regions, 2);
  EXPECT_DOUBLE_EQ(t->switch_s, 0);
  EXPECT_GE(t->seconds, 7 * B / kServerBps * (1 - 1e-9));
  EXPECT_LT(t->seconds, 7 * B / (kServerBps * 2 / 8));  // better than EPS alone
  // Unhidden switching is added.
  FabricOptions o2 = o;
  o2.switch_s = 0.025;
  auto f2 = MakeFabric(o2, l);
  ASSERT_TRUE(f2.ok());
  auto t2 = (*f2)->AllToAll(m, m, {.plan = true, .overlap_s = 0.005, .uses = 1000});
  ASSERT_TRUE(t2.ok());
  ASSERT_EQ(t2->reconfigured_regions, 2);
  EXPECT_NEAR(t2->switch_s, 0.020, 1e-12);
  EXPECT_NEAR(t2->seconds, t->seconds + 0.020, 1e-9);
  // The combine reuses the circuits: no switching.
  auto c = (*f2)->AllToAll(m, m, {.plan = false});
  ASSERT_TRUE(c.ok());
  EXPECT_EQ(c->reconfigured_regions, 0);
  EXPECT_NEAR(c->seconds, t->seconds, 1e-9);
}

TEST(FabricTest, MixNetSkewedBeatsItsEpsAndMixNetStaticIsStatic) {
  const Layout l = TwoRegionsOfEight();
  // A hot pair per region: 0 -> 1 carries most bytes.
  auto m = Uniform(l, 10e6);
  for (auto& x : m) x.at(0, 1) = 2e9;
  FabricOptions o{.kind = FabricKind::kMixNet, .link_gbps = kGbps, .alpha = 6};
  auto mix = MakeFabric(o, l);
  ASSERT_TRUE(mix.ok());
  auto t = (*mix)->AllToAll(m, m, {.plan = true, .overlap_s = 1});
  ASSERT_TRUE(t.ok());
  // The hot pair can use all 6 circuits plus EPS: 2 GB over at most 8 NICs,
  // and at least the 6 circuits.
  const double R = kGbps * 1e9 / 8;
  EXPECT_GE(t->seconds, 2e9 / (8 * R) * (1 - 1e-9));
  EXPECT_LT(t->seconds, 2e9 / (6 * R) * 1.05);
  // mixnet-static without Prepare has no circuits: EPS only (2 NICs).
  o.kind = FabricKind::kMixNetStatic;
  auto topo = MakeFabric(o, l);
  ASSERT_TRUE(topo.ok());
  auto te = (*topo)->AllToAll(m, m, {.plan = true, .overlap_s = 1});
  ASSERT_TRUE(te.ok());
  EXPECT_EQ(te->reconfigured_regions, 0);
  EXPECT_NEAR(te->seconds, (2e9 + 6 * 10e6) / (2 * R), 1e-6);
  ASSERT_TRUE((*topo)->Prepare({.a2a_mean = m, .a2a_phases = 0, .other = {}}).ok());
  auto tp = (*topo)->AllToAll(m, m, {});
  ASSERT_TRUE(tp.ok());
  EXPECT_LT(tp->seconds, te->seconds / 2);
}

TEST(FabricTest, BadOptionsAreRejected) {
  const Layout l = TwoRegionsOfEight();
  EXPECT_FALSE(MakeFabric({.kind = FabricKind::kMixNet, .alpha = 9}, l).ok());
  EXPECT_FALSE(MakeFabric({.kind = FabricKind::kMixNetStatic, .alpha = 8}, l).ok());
  EXPECT_FALSE(MakeFabric({.kind = FabricKind::kOversub, .oversub = 0.5}, l).ok());
  EXPECT_FALSE(MakeFabric({.kind = FabricKind::kFatTree, .link_gbps = 0}, l).ok());
  EXPECT_FALSE(ParseFabric("torus").ok());
  EXPECT_EQ(*ParseFabric("mixnet"), FabricKind::kMixNet);
}

// One region of three servers, alpha 2: host h's OCS NIC k is port 2h + k + 1
// of "ocs0". Start topology: one circuit 0-1 (ports 1-3), 0-2 (2-5), 2-1 (6-4).
Layout ThreeServers() {
  Layout l;
  l.servers = 3;
  l.gpus = 24;
  l.region_servers = 3;
  l.regions = 1;
  l.pp = 1;
  l.ep = 3;
  l.tp = 8;
  return l;
}

FabricOptions Triangle(Router router, bool relay) {
  FabricOptions o{.kind = FabricKind::kMixNet,
                  .link_gbps = kGbps,
                  .alpha = 2,
                  .router = router,
                  .relay = relay};
  o.initial_circuits = {{.ocs_switch = "ocs0", .port_a = 1, .port_b = 3},
                        {.ocs_switch = "ocs0", .port_a = 2, .port_b = 5},
                        {.ocs_switch = "ocs0", .port_a = 6, .port_b = 4}};
  return o;
}

// Only 0 -> 1 has bytes, D. R = one NIC; EPS = 8 - 2 = 6 NICs = 6R.
//  v1: a pair with circuits uses only them: D over the one 0-1 circuit, D / R.
//  v2: circuit and EPS finish together: D / (R + 6R).
//  v2 + relay: also 0 -> 2 -> 1 over the two idle circuits: D / (R + 6R + R).
TEST(FabricTest, RoutersSplitAsTheWorkersDo) {
  const Layout l = ThreeServers();
  const double R = kGbps * 1e9 / 8, D = 1e9;
  std::vector<TrafficMatrix> m(1, TrafficMatrix(3));
  m[0].at(0, 1) = D;
  struct Want {
    Router router;
    bool relay;
    const char* name;
    double seconds;
    double rel;  // relay routing binary-searches its target (routing.h)
  };
  for (const Want& w : {Want{Router::kV1, false, "v1", D / R, 1e-12},
                        Want{Router::kV2, false, "v2", D / (7 * R), 1e-12},
                        Want{Router::kV2, true, "v2+relay", D / (8 * R), 1e-4}}) {
    auto f = MakeFabric(Triangle(w.router, w.relay), l);
    ASSERT_TRUE(f.ok()) << f.status();
    EXPECT_EQ((*f)->Routing(), w.name);
    auto t = (*f)->AllToAll(m, m, {.plan = false});
    ASSERT_TRUE(t.ok()) << t.status();
    EXPECT_GE(t->seconds, w.seconds * (1 - 1e-12)) << w.name;
    EXPECT_LE(t->seconds, w.seconds * (1 + w.rel)) << w.name;
  }
  // Planning (switching free, hidden): hosts 0 and 1 join both their ports.
  // v1 then sends D over 2 circuits, D / 2R; v2 adds EPS, D / 8R.
  for (const auto& [router, want] :
       {std::pair{Router::kV1, D / (2 * R)}, std::pair{Router::kV2, D / (8 * R)}}) {
    auto f = MakeFabric(Triangle(router, false), l);
    ASSERT_TRUE(f.ok()) << f.status();
    auto t = (*f)->AllToAll(m, m, {.plan = true, .overlap_s = 1, .uses = 2});
    ASSERT_TRUE(t.ok()) << t.status();
    EXPECT_EQ(t->reconfigured_regions, 1);
    EXPECT_NEAR(t->seconds, want, 1e-12);
  }
}

TEST(FabricTest, BadRoutingOrStartTopologyIsRejected) {
  const Layout l = ThreeServers();
  auto v1_relay = MakeFabric(Triangle(Router::kV1, true), l);
  ASSERT_FALSE(v1_relay.ok());
  EXPECT_NE(v1_relay.status().message().find("router v2"), std::string::npos);
  FabricOptions o = Triangle(Router::kV2, false);
  o.initial_circuits.push_back({.ocs_switch = "ocs0", .port_a = 1, .port_b = 6});  // port 1 twice
  auto twice = MakeFabric(o, l);
  ASSERT_FALSE(twice.ok());
  EXPECT_EQ(twice.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(twice.status().message().find("start topology"), std::string::npos) << twice.status();
  EXPECT_FALSE(ParseRouter("v3").ok());
  EXPECT_EQ(*ParseRouter("v1"), Router::kV1);
  EXPECT_EQ(RoutingName(Router::kV2, true), "v2+relay");
}

}  // namespace
}  // namespace mixnet::sim
