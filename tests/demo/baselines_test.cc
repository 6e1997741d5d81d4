// Fair baselines of the demo (apps/demo/baselines.h). The cost-equal ratios
// are worked by hand from sim/prices.yaml for the demo's hosts (1 EPS + 3 OCS
// NICs): an oversubscribed tree costs per NIC A + B / r with A = NIC + 1 EPS
// port + 2 transceivers + 1 fibre and B = 5 ports + 5 transceivers + 2 fibres
// (fibre: 500 m at $0.3); MixNet costs C per NIC, the mean of one fat-tree
// NIC (NIC + 6 ports + 7 transceivers + 3 fibres) and three OCS NICs (NIC + 1
// transceiver + 1 fibre + an OCS port at $520). r = B / (C - A).
//   100G (NIC 659, port 187, transceiver 99): A = 1194, B = 1730,
//        C = (2924 + 3 x 1428) / 4 = 1802, r = 1730 / 608 = 2.845.
//   400G (NIC 1499, port 1090, transceiver 659): A = 4057, B = 9045,
//        C = (13102 + 3 x 2828) / 4 = 5396.5, r = 9045 / 1339.5 = 6.753.
// Test thread only.
#include "apps/demo/baselines.h"

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "mixnet_build_paths.h"
#include "sim/simulator.h"

namespace mixnet::demo {
namespace {

using ::testing::HasSubstr;

TEST(BaselinesTest, EveryPriceRowHasItsOwnRatio) {
  absl::StatusOr<sim::Prices> prices =
      sim::LoadPrices(std::string(MIXNET_SIM_DIR) + "/prices.yaml");
  ASSERT_TRUE(prices.ok()) << prices.status();
  FabricShape shape;  // 8 hosts, 3 OCS NICs, 0.025 Gbit/s
  absl::StatusOr<std::vector<OversubRow>> rows = CostEqualRows(*prices, shape, 4);
  ASSERT_TRUE(rows.ok()) << rows.status();
  ASSERT_EQ(rows->size(), 4u);
  EXPECT_EQ((*rows)[0].price_gbps, 100);
  EXPECT_EQ((*rows)[3].price_gbps, 800);
  EXPECT_NEAR((*rows)[0].cost.ratio, 1730.0 / 608.0, 1e-9);
  EXPECT_NEAR((*rows)[0].uplink_gbps, 4 * 4 * 0.025 / (1730.0 / 608.0), 1e-12);
  EXPECT_NEAR((*rows)[2].cost.ratio, 9045.0 / 1339.5, 1e-9);
  EXPECT_NEAR((*rows)[2].cost.mixnet_per_nic, 5396.5, 1e-9);
  EXPECT_EQ(OversubRowName(100), "oversub-100G");
}

TEST(BaselinesTest, PaperScaleAlltoallIsTheSimulatorsPerPhase) {
  // mixtral-8x22b: 56 layers, PP 8, 16 micro-batches: (16 + 8 - 1) slots x 7
  // layers per stage x 4 all-to-alls = 644 phases per iteration.
  const std::string models = std::string(MIXNET_SIM_DIR) + "/models";
  absl::StatusOr<double> a2a = PaperScaleAlltoallS(models, "mixtral-8x22b", 400);
  ASSERT_TRUE(a2a.ok()) << a2a.status();
  absl::StatusOr<sim::ModelConfig> m = sim::FindModel("mixtral-8x22b", models);
  ASSERT_TRUE(m.ok()) << m.status();
  sim::SimOptions so;
  so.fabric.link_gbps = 400;
  so.gpus = 1024;
  absl::StatusOr<sim::SimResult> r = sim::Simulate(*m, so);
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_GT(*a2a, 0);
  EXPECT_NEAR(*a2a, r->a2a_s / 644, 1e-12);
  EXPECT_THAT(PaperScaleAlltoallS(models, "no-such-model", 400).status().message(),
              HasSubstr("no-such-model"));
}

}  // namespace
}  // namespace mixnet::demo
