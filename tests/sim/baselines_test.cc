// The baselines' structure against hand-worked times: TopoOpt's multi-hop
// forwarding on a ring and its plan from the job's traffic, rail-optimised
// against the fat-tree where the rails (and the spine) matter and where they
// do not. Main thread.
#include "gtest/gtest.h"
#include "sim/direct_connect.h"
#include "sim/fabric.h"

namespace mixnet::sim {
namespace {

constexpr double kGbps = 100;
constexpr double R = kGbps * 1e9 / 8;  // one NIC, bytes/s

// One region of `servers` servers, nothing else.
Layout OneRegion(int servers, int tp, int ep) {
  Layout l;
  l.servers = servers;
  l.gpus = 8 * servers;
  l.region_servers = servers;
  l.regions = 1;
  l.tp = tp;
  l.ep = ep;
  return l;
}

std::unique_ptr<Fabric> Make(const FabricOptions& o, const Layout& l) {
  auto f = MakeFabric(o, l);
  EXPECT_TRUE(f.ok()) << f.status();
  return f.ok() ? *std::move(f) : nullptr;
}

// Four servers with one NIC each: TopoOpt's only NIC is the ring permutation
// 0 -> 1 -> 2 -> 3 -> 0. A uniform all-to-all of b per pair sends each pair's
// bytes h = 1, 2, 3 hops along the ring, so every link carries 1 + 2 + 3 = 6
// flows at R / 6 each: 6 b / R. Transfers 0 -> 2 and 1 -> 2 share link 1 -> 2:
// R / 2 each, both done at 2 B / R.
TEST(TopoOptTest, MultiHopOnARingByHand) {
  const Layout l = OneRegion(4, 8, 4);
  const double b = 1e8, B = 3e8;
  auto f = Make({.kind = FabricKind::kTopoOpt, .link_gbps = kGbps, .nics_per_server = 1}, l);
  ASSERT_NE(f, nullptr);
  TrafficMatrix u(4);
  for (int i = 0; i < 4; ++i)
    for (int j = 0; j < 4; ++j)
      if (i != j) u.at(i, j) = b;
  EXPECT_FALSE(f->AllToAll({u}, {u}, {}).ok());  // not planned yet
  ASSERT_TRUE(f->Prepare({.a2a_mean = {u}, .a2a_phases = 1, .other = {}}).ok());
  EXPECT_EQ(f->Routing(), "multihop");
  auto t = f->AllToAll({u}, {u}, {});
  ASSERT_TRUE(t.ok()) << t.status();
  EXPECT_NEAR(t->seconds, 6 * b / R, 1e-12);
  EXPECT_EQ(t->switch_s, 0);
  EXPECT_NEAR(f->Transfer({{0, 2, B}, {1, 2, B}}), 2 * B / R, 1e-12);
  EXPECT_NEAR(f->Transfer({{3, 1, B}}), B / R, 1e-12);  // 3 -> 0 -> 1
}

// With a second NIC the plan follows the job's traffic: only 0 -> 2 carries
// bytes (2 hops on the ring), so round 1 gives it a direct link, and its
// bytes then take that link alone (the shortest path): B / R, not the ring's
// two hops. The other second NICs are matched off in index order.
TEST(TopoOptTest, PlannedOncePerJobFromItsTraffic) {
  auto plan = PlanDirectConnect(4, 2, {0, 1, 2, 3}, {{0, 2, 5e9}});
  ASSERT_TRUE(plan.ok()) << plan.status();
  EXPECT_EQ(plan->out[0], (std::vector<int>{1, 2}));
  EXPECT_EQ(plan->out[1], (std::vector<int>{2, 0}));
  EXPECT_EQ(plan->out[2], (std::vector<int>{3, 1}));
  EXPECT_EQ(plan->out[3], (std::vector<int>{0, -1}));  // only 3 itself has a free receiver

  const Layout l = OneRegion(4, 8, 4);
  auto f = Make({.kind = FabricKind::kTopoOpt, .link_gbps = kGbps, .nics_per_server = 2}, l);
  ASSERT_NE(f, nullptr);
  TrafficMatrix m(4);
  m.at(0, 2) = 5e9;
  ASSERT_TRUE(f->Prepare({.a2a_mean = {m}, .a2a_phases = 1, .other = {}}).ok());
  auto t = f->AllToAll({m}, {m}, {});
  ASSERT_TRUE(t.ok());
  EXPECT_NEAR(t->seconds, 5e9 / R, 1e-9);
  EXPECT_FALSE(PlanDirectConnect(4, 2, {0, 1, 1, 3}, {}).ok());  // not a permutation
}

// Two servers, TP 1, EP 16: rank g is GPU g, on server g / 8 and rail g % 8.
// Ranks 0..7 (server 0) each send B to rank 8 (server 1's GPU 0, rail 0).
// The fat-tree pools a server's 8 NICs: 8 B over 8 R = B / R. Rail pins
// every byte to rail 0 (PXN at the sender): 8 B over one NIC = 8 B / R.
TEST(RailTest, BytesForOneGpuShareItsRail) {
  const Layout l = OneRegion(2, 1, 16);
  const double B = 1e8;
  TrafficMatrix ranks(16), hosts(2);
  for (int i = 0; i < 8; ++i) ranks.at(i, 8) = B;
  hosts.at(0, 1) = 8 * B;
  auto ft = Make({.kind = FabricKind::kFatTree, .link_gbps = kGbps}, l);
  auto rail = Make({.kind = FabricKind::kRail, .link_gbps = kGbps}, l);
  ASSERT_TRUE(ft && rail);
  const std::vector<TrafficMatrix> by_rank = {ranks};
  auto tf = ft->AllToAll({hosts}, {hosts}, {.ranks = &by_rank});
  auto tr = rail->AllToAll({hosts}, {hosts}, {.ranks = &by_rank});
  ASSERT_TRUE(tf.ok() && tr.ok());
  EXPECT_NEAR(tf->seconds, B / R, 1e-12);
  EXPECT_NEAR(tr->seconds, 8 * B / R, 1e-12);
  EXPECT_EQ(rail->Routing(), "rail");

  // Rank-aligned on distinct rails (i -> 8 + i): every rail carries B, as the
  // fat-tree's pool does: B / R both.
  TrafficMatrix aligned(16);
  for (int i = 0; i < 8; ++i) aligned.at(i, 8 + i) = B;
  const std::vector<TrafficMatrix> by_rank2 = {aligned};
  auto ta = rail->AllToAll({hosts}, {hosts}, {.ranks = &by_rank2});
  ASSERT_TRUE(ta.ok());
  EXPECT_NEAR(ta->seconds, B / R, 1e-12);
}

// Each server under its own rail leaf, the spine oversubscribed 4:1: a leaf
// reaches the spine at R / 4, so server 0's B per rail to server 1 takes
// 4 B / R; the non-blocking fat-tree B / R. Under one leaf (the default 32
// servers) the spine is not crossed: B / R.
TEST(RailTest, AnOversubscribedSpineSlowsCrossLeafBytes) {
  const Layout l = OneRegion(2, 8, 2);
  const double B = 1e8;
  TrafficMatrix hosts(2);
  hosts.at(0, 1) = 8 * B;
  auto split = Make({.kind = FabricKind::kRail,
                     .link_gbps = kGbps,
                     .rail_group_servers = 1,
                     .rail_spine_oversub = 4},
                    l);
  auto one_leaf = Make({.kind = FabricKind::kRail, .link_gbps = kGbps, .rail_spine_oversub = 4}, l);
  ASSERT_TRUE(split && one_leaf);
  auto ts = split->AllToAll({hosts}, {hosts}, {});
  auto to = one_leaf->AllToAll({hosts}, {hosts}, {});
  ASSERT_TRUE(ts.ok() && to.ok());
  EXPECT_NEAR(ts->seconds, 4 * B / R, 1e-12);
  EXPECT_NEAR(to->seconds, B / R, 1e-12);
  EXPECT_NEAR(split->Transfer({{0, 1, 8 * B}}), 4 * B / R, 1e-12);
  EXPECT_FALSE(MakeFabric({.kind = FabricKind::kRail, .rail_spine_oversub = 0.5}, l).ok());
  EXPECT_FALSE(MakeFabric({.kind = FabricKind::kRail, .rail_group_servers = 0}, l).ok());
}

}  // namespace
}  // namespace mixnet::sim
