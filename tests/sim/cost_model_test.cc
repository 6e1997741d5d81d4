// Cost model checked by hand on a small cluster (sim/cost_model.h).
#include "sim/cost_model.h"

#include "gtest/gtest.h"
#include "mixnet_build_paths.h"  // MIXNET_SIM_DATA_DIR

namespace mixnet::sim {
namespace {

Prices PaperPrices400() {
  Prices p;
  p.fibre_m = 500;
  p.by_gbps[400] = {.transceiver = 659,
                    .nic = 1499,
                    .eps_port = 1090,
                    .ocs_port = 520,
                    .patch_panel_port = 100,
                    .fibre_per_m = 0.3};
  return p;
}

TEST(CostModelTest, SixteenGpuClusterByHand) {
  const Prices p = PaperPrices400();
  // Fat-tree, per NIC: NIC 1499 + 7 x 659 + 6 x 1090 + 3 fibres x 500 m x 0.3 = 13102.
  auto ft = NetworkCost({.kind = FabricKind::kFatTree, .link_gbps = 400}, 16, p);
  ASSERT_TRUE(ft.ok());
  EXPECT_NEAR(ft->total(), 16 * 13102.0, 1e-6);
  EXPECT_NEAR(ft->eps_ports, 16 * 6 * 1090.0, 1e-6);
  // MixNet alpha 6: 4 EPS NICs as the fat-tree, 12 OCS NICs at
  // NIC 1499 + transceiver 659 + OCS port 520 + fibre 150 = 2828.
  auto mix = NetworkCost({.kind = FabricKind::kMixNet, .link_gbps = 400, .alpha = 6}, 16, p);
  ASSERT_TRUE(mix.ok());
  EXPECT_NEAR(mix->total(), 4 * 13102.0 + 12 * 2828.0, 1e-6);
  EXPECT_NEAR(mix->ocs_ports, 12 * 520.0, 1e-6);
  // mixnet-static: MixNet's hardware.
  auto stat = NetworkCost({.kind = FabricKind::kMixNetStatic, .link_gbps = 400, .alpha = 6}, 16, p);
  ASSERT_TRUE(stat.ok());
  EXPECT_NEAR(stat->total(), mix->total(), 1e-6);
  // TopoOpt: all 16 NICs on the patch panel (100 instead of the OCS port), no EPS.
  auto topo = NetworkCost({.kind = FabricKind::kTopoOpt, .link_gbps = 400, .alpha = 6}, 16, p);
  ASSERT_TRUE(topo.ok());
  EXPECT_NEAR(topo->total(), 16 * (2828.0 - 520 + 100), 1e-6);
  EXPECT_EQ(topo->eps_ports, 0);
  // Oversubscribed 2:1: ports 1 + 5/2, transceivers 2 + 5/2, fibres 1 + 2/2 per NIC.
  auto os = NetworkCost({.kind = FabricKind::kOversub, .link_gbps = 400, .oversub = 2}, 16, p);
  ASSERT_TRUE(os.ok());
  EXPECT_NEAR(os->total(), 16 * (1499 + 4.5 * 659 + 3.5 * 1090 + 2 * 150.0), 1e-6);
  // Rail-optimised (2 tiers): 4 ports, 5 transceivers, 2 fibres per NIC.
  auto rail = NetworkCost({.kind = FabricKind::kRail, .link_gbps = 400}, 16, p);
  ASSERT_TRUE(rail.ok());
  EXPECT_NEAR(rail->total(), 16 * (1499 + 5 * 659 + 4 * 1090 + 2 * 150.0), 1e-6);
  // Its spine 2:1 (--rail-spine-oversub 2): the NIC-to-leaf hop stays (1 port,
  // 2 transceivers, 1 fibre), the leaf-to-spine part halves: ports 1 + 3/2,
  // transceivers 2 + 3/2, fibres 1 + 1/2 per NIC.
  auto rail2 =
      NetworkCost({.kind = FabricKind::kRail, .link_gbps = 400, .rail_spine_oversub = 2}, 16, p);
  ASSERT_TRUE(rail2.ok());
  EXPECT_NEAR(rail2->total(), 16 * (1499 + 3.5 * 659 + 2.5 * 1090 + 1.5 * 150.0), 1e-6);
}

TEST(CostModelTest, UnknownSpeedIsNotFound) {
  auto c = NetworkCost({.kind = FabricKind::kFatTree, .link_gbps = 1600}, 16, PaperPrices400());
  EXPECT_EQ(c.status().code(), absl::StatusCode::kNotFound);
  EXPECT_NE(c.status().message().find("1600"), std::string::npos);
}

TEST(CostModelTest, PerfPerDollar) {
  // Same speed at half the cost: 2x; twice as slow at half the cost: 1x.
  EXPECT_DOUBLE_EQ(PerfPerDollarVsFatTree(1.0, 50, 1.0, 100), 2.0);
  EXPECT_DOUBLE_EQ(PerfPerDollarVsFatTree(2.0, 50, 1.0, 100), 1.0);
}

TEST(CostModelTest, PriceFileMatchesThePaperTable) {
  auto p = LoadPrices(std::string(MIXNET_SIM_DATA_DIR) + "/prices.yaml");
  ASSERT_TRUE(p.ok()) << p.status();
  for (int g : {100, 200, 400, 800}) EXPECT_TRUE(p->At(g).ok()) << g;
  EXPECT_DOUBLE_EQ(p->At(400)->eps_port, 1090);
  EXPECT_DOUBLE_EQ(p->At(800)->transceiver, 1399);
  auto ft = NetworkCost({.kind = FabricKind::kFatTree, .link_gbps = 400}, 16, *p);
  ASSERT_TRUE(ft.ok());
  EXPECT_NEAR(ft->total(), 16 * 13102.0, 1e-6);
}

TEST(CostModelTest, CostEqualOversubscriptionByHand) {
  const Prices p = PaperPrices400();
  // Per NIC at 400G: fat-tree 13102 (above). MixNet with 3 of 4 NICs on
  // circuits: (13102 + 3 x (NIC 1499 + 659 + 500 m x 0.3 + OCS port 520)) / 4
  // = (13102 + 3 x 2828) / 4 = 5396.5. Oversubscribed by r: fixed A = NIC
  // 1499 + 2 x 659 + 1 x 1090 + 1 fibre 150 = 4057, scaled B = 5 x 659 +
  // 5 x 1090 + 2 x 150 = 9045; A + B / r = 5396.5 at r = 9045 / 1339.5.
  auto c = CostEqualOversubscription(p, 400, 3, 4);
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_NEAR(c->mixnet_per_nic, 5396.5, 1e-9);
  EXPECT_NEAR(c->fixed_per_nic, 4057, 1e-9);
  EXPECT_NEAR(c->scaled_per_nic, 9045, 1e-9);
  EXPECT_NEAR(c->nonblocking_per_nic, 13102, 1e-9);
  EXPECT_NEAR(c->ratio, 9045 / 1339.5, 1e-9);  // 6.75
  // The paper's 6 of 8 is the same share of NICs: the same ratio.
  auto paper = CostEqualOversubscription(p, 400, 6, 8);
  ASSERT_TRUE(paper.ok());
  EXPECT_NEAR(paper->ratio, c->ratio, 1e-9);
  // No NIC on circuits costs what the fat-tree costs: ratio 1.
  auto none = CostEqualOversubscription(p, 400, 0, 4);
  ASSERT_TRUE(none.ok());
  EXPECT_NEAR(none->ratio, 1, 1e-12);
  // Every NIC on circuits (4 x 2828 / 4 = 2828 < A = 4057): no such tree.
  EXPECT_TRUE(absl::IsFailedPrecondition(CostEqualOversubscription(p, 400, 4, 4).status()));
  EXPECT_TRUE(absl::IsNotFound(CostEqualOversubscription(p, 100, 3, 4).status()));
  EXPECT_TRUE(absl::IsInvalidArgument(CostEqualOversubscription(p, 400, 5, 4).status()));
}

}  // namespace
}  // namespace mixnet::sim
