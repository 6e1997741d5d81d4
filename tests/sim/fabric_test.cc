// Fabric models against closed forms: uniform all-to-all on the non-blocking
// fat-tree, oversubscription scaling, MixNet bounded by its NICs and EPS.
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

TEST(FabricTest, MixNetSkewedBeatsItsEpsAndTopoOptIsStatic) {
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
  // TopoOpt without Prepare has no circuits: EPS only (2 NICs).
  o.kind = FabricKind::kTopoOpt;
  auto topo = MakeFabric(o, l);
  ASSERT_TRUE(topo.ok());
  auto te = (*topo)->AllToAll(m, m, {.plan = true, .overlap_s = 1});
  ASSERT_TRUE(te.ok());
  EXPECT_EQ(te->reconfigured_regions, 0);
  EXPECT_NEAR(te->seconds, (2e9 + 6 * 10e6) / (2 * R), 1e-6);
  ASSERT_TRUE((*topo)->Prepare(m).ok());
  auto tp = (*topo)->AllToAll(m, m, {});
  ASSERT_TRUE(tp.ok());
  EXPECT_LT(tp->seconds, te->seconds / 2);
}

TEST(FabricTest, BadOptionsAreRejected) {
  const Layout l = TwoRegionsOfEight();
  EXPECT_FALSE(MakeFabric({.kind = FabricKind::kMixNet, .alpha = 9}, l).ok());
  EXPECT_FALSE(MakeFabric({.kind = FabricKind::kTopoOpt, .alpha = 8}, l).ok());
  EXPECT_FALSE(MakeFabric({.kind = FabricKind::kOversub, .oversub = 0.5}, l).ok());
  EXPECT_FALSE(MakeFabric({.kind = FabricKind::kFatTree, .link_gbps = 0}, l).ok());
  EXPECT_FALSE(ParseFabric("torus").ok());
  EXPECT_EQ(*ParseFabric("mixnet"), FabricKind::kMixNet);
}

}  // namespace
}  // namespace mixnet::sim
