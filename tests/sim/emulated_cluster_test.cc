// Emulation mode's all-to-all prediction (sim/emulated_cluster.h) against
// hand-worked cases on a 4-host cluster whose NICs all run at 10 MB/s
// (0.08 Gbit/s): every expected time below is bytes over rates, worked out
// from the topology and the routing, not from the code under test.
#include "sim/emulated_cluster.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

namespace mixnet::sim {
namespace {

using ::testing::HasSubstr;

constexpr double kRate = 1e7;  // bytes/s of every NIC

// h0..h3: eps0, and ocs0/ocs1 on switch ocs0 (ports 2h+1, 2h+2).
cluster::ClusterSpec Spec() {
  std::string y = "name: t\nocs_switches:\n  - {name: ocs0, ports: 8, switch_ms: 25}\nhosts:\n";
  for (int h = 0; h < 4; ++h) {
    y += "  - name: h" + std::to_string(h) + "\n    nics:\n";
    y += "      - {name: eps0, role: eps, address: 10.10.0." + std::to_string(h + 1) +
         "/24, gbps: 0.08}\n";
    for (int j = 0; j < 2; ++j) {
      y += "      - {name: ocs" + std::to_string(j) + ", role: ocs, address: 10.20." +
           std::to_string(j) + "." + std::to_string(h + 1) +
           "/24, gbps: 0.08, switch: ocs0, port: " + std::to_string(2 * h + j + 1) + "}\n";
    }
  }
  y += "regions:\n  - {name: r0, hosts: [h0, h1, h2, h3]}\n";
  absl::StatusOr<cluster::ClusterSpec> s = cluster::ClusterSpec::Parse(y, "test");
  EXPECT_TRUE(s.ok()) << s.status();
  return *s;
}

// Circuit between ocs NIC `a` of host ha and ocs NIC `b` of host hb.
cluster::CircuitSpec Circuit(int ha, int a, int hb, int b) {
  return cluster::CircuitSpec{"ocs0", 2 * ha + a + 1, 2 * hb + b + 1};
}

TEST(EmulatedCluster, UniformOverEpsIsThreeBlocksPerNic) {
  TrafficMatrix m(4);
  for (int s = 0; s < 4; ++s)
    for (int d = 0; d < 4; ++d) m.at(s, d) = s == d ? 5e6 : 1e6;  // diagonal stays home
  auto p = PredictAlltoall(Spec(), {}, m, {}, {});
  ASSERT_TRUE(p.ok()) << p.status();
  // Each eps0 sends and receives 3 x 1 MB at 10 MB/s.
  EXPECT_NEAR(p->time_s, 0.3, 1e-9);
  EXPECT_NEAR(p->floor_s, 0.3, 1e-9);
  EXPECT_EQ(p->flows, 12);
  EXPECT_THAT(p->busiest, HasSubstr("/eps0"));
  // As TCP frames: 1514 wire bytes per 1448 payload bytes.
  p = PredictAlltoall(Spec(), router::Topology{}, m, {.wire_per_payload = kTcpFrameOverhead}, {});
  ASSERT_TRUE(p.ok());
  EXPECT_NEAR(p->time_s, 0.3 * 1514 / 1448, 1e-9);
}

TEST(EmulatedCluster, LeavesSendCrossLeafBytesThroughTheirUplinks) {
  TrafficMatrix m(4);
  for (int s = 0; s < 4; ++s)
    for (int d = 0; d < 4; ++d) m.at(s, d) = s == d ? 0 : 1e6;
  EmulatedFabric f{.leaf_hosts = 2, .leaf_uplink_Bps = kRate};
  auto p = PredictAlltoall(Spec(), {}, m, f, {});
  ASSERT_TRUE(p.ok()) << p.status();
  // Leaf 0 (h0, h1) sends h0, h1 -> h2, h3: 4 MB over its 10 MB/s uplink;
  // the NICs' 3 MB take 0.3 s, so the uplinks bound it at 0.4 s.
  EXPECT_NEAR(p->time_s, 0.4, 1e-9);
  EXPECT_NEAR(p->floor_s, 0.4, 1e-9);
  EXPECT_THAT(p->busiest, HasSubstr("leaf"));
  // A bucket of 0.1 s of every link's rate off each: the floor is 0.3 s.
  f.burst_s = 0.1;
  p = PredictAlltoall(Spec(), {}, m, f, {});
  ASSERT_TRUE(p.ok());
  EXPECT_NEAR(p->floor_s, 0.3, 1e-9);
}

TEST(EmulatedCluster, RouterV1PutsAPairOnItsCircuitsStriped) {
  TrafficMatrix m(4);
  m.at(0, 1) = 2e6;  // joined by two circuits
  m.at(2, 3) = 2e6;  // no circuit: EPS
  router::Topology t{.epoch = 1, .circuits = {Circuit(0, 0, 1, 0), Circuit(0, 1, 1, 1)}};
  auto p = PredictAlltoall(Spec(), t, m, {}, {});
  ASSERT_TRUE(p.ok()) << p.status();
  // h0 -> h1: 1 MB on each circuit, 0.1 s; h2 -> h3: 2 MB on eps0, 0.2 s.
  EXPECT_NEAR(p->time_s, 0.2, 1e-9);
  EXPECT_EQ(p->flows, 3);
  EXPECT_THAT(p->busiest, HasSubstr("eps0"));
}

TEST(EmulatedCluster, RouterV2SplitsOverTheCircuitAndEps) {
  TrafficMatrix m(4);
  m.at(0, 1) = 2e6;
  router::Topology t{.epoch = 1, .circuits = {Circuit(0, 0, 1, 0)}};
  auto v1 = PredictAlltoall(Spec(), t, m, {}, {});
  ASSERT_TRUE(v1.ok()) << v1.status();
  EXPECT_NEAR(v1->time_s, 0.2, 1e-9);  // all on the circuit
  auto v2 = PredictAlltoall(Spec(), t, m, {}, {.version = 2, .demand = &m});
  ASSERT_TRUE(v2.ok()) << v2.status();
  // Circuit and EPS at the same rate, nothing else loaded: half on each.
  EXPECT_NEAR(v2->time_s, 0.1, 0.001);
  EXPECT_EQ(v2->flows, 2);
}

TEST(EmulatedCluster, RelaysAddATwoHopPathThroughAThirdHost) {
  // h0 -> h2 has no circuit; h0-h1 and h1-h2 have one each.
  TrafficMatrix m(4);
  m.at(0, 2) = 2e6;
  router::Topology t{.epoch = 1, .circuits = {Circuit(0, 0, 1, 0), Circuit(1, 1, 2, 0)}};
  auto direct = PredictAlltoall(Spec(), t, m, {}, {.version = 2, .demand = &m});
  ASSERT_TRUE(direct.ok()) << direct.status();
  EXPECT_NEAR(direct->time_s, 0.2, 1e-9);  // EPS only without relays
  auto relayed = PredictAlltoall(Spec(), t, m, {}, {.version = 2, .relay = true, .demand = &m});
  ASSERT_TRUE(relayed.ok()) << relayed.status();
  // Half over EPS, half over h0.ocs0 -> h1.ocs0, h1.ocs1 -> h2.ocs0.
  EXPECT_NEAR(relayed->time_s, 0.1, 0.002);
}

// Relays store and forward: the last chunk crosses the second hop after the
// flow's fluid end, alone on its circuit (10 MB/s).
TEST(EmulatedCluster, RelaysEndTheirLastChunkAfterTheFluidEnd) {
  TrafficMatrix m(4);
  m.at(0, 2) = 2e6;
  router::Topology t{.epoch = 1, .circuits = {Circuit(0, 0, 1, 0), Circuit(1, 1, 2, 0)}};
  // Tables split fluidly (half each way); the data plane's chunk is 250 kB:
  // the relayed 1 MB ends at 0.1 s + 0.025 s.
  auto fluid_split = PredictAlltoall(Spec(), t, m, {.relay_chunk_bytes = 250e3},
                                     {.version = 2, .relay = true, .demand = &m});
  ASSERT_TRUE(fluid_split.ok()) << fluid_split.status();
  EXPECT_NEAR(fluid_split->time_s, 0.125, 1e-4);  // the split within the search's 1e-4
  // Tables that know the chunk relay x with (2e6 - x) = x + 250e3 bytes'
  // worth of time: x = 875 kB, both paths done at 0.1125 s.
  auto split =
      PredictAlltoall(Spec(), t, m, {.relay_chunk_bytes = 250e3},
                      {.version = 2, .relay = true, .demand = &m, .relay_chunk_bytes = 250e3});
  ASSERT_TRUE(split.ok()) << split.status();
  EXPECT_NEAR(split->time_s, 0.1125, 0.0005);
}

// TCP's ACKs: each hop's receiver sends 66 bytes back per two 1448-byte
// segments, over the hop's reverse links.
TEST(EmulatedCluster, AcksLoadTheReverseLinksOfEveryHop) {
  const EmulatedFabric tcp{.wire_per_payload = kTcpFrameOverhead,
                           .ack_per_payload = kTcpAckPerPayload};
  EXPECT_NEAR(kTcpAckPerPayload, 66.0 / 2896.0, 1e-15);
  // Uniform over EPS: each eps0 sends 3 MB as frames and the ACKs of the
  // 3 MB it receives, 3e6 x (1514 + 33) / 1448 bytes at 10 MB/s.
  TrafficMatrix m(4);
  for (int s = 0; s < 4; ++s)
    for (int d = 0; d < 4; ++d) m.at(s, d) = s == d ? 0 : 1e6;
  auto p = PredictAlltoall(Spec(), router::Topology{}, m, tcp, {});
  ASSERT_TRUE(p.ok()) << p.status();
  EXPECT_NEAR(p->time_s, 0.3 * 1547 / 1448, 1e-9);
  EXPECT_NEAR(p->floor_s, 0.3 * 1547 / 1448, 1e-9);
  EXPECT_EQ(p->flows, 12);  // data flows; the ACKs ride along
  // One direction only: h0 -> h1 1 MB. The ACKs take h1's eps0 tx, which
  // carries nothing else, so the data's 0.1 s x 1514 / 1448 stands.
  TrafficMatrix one(4);
  one.at(0, 1) = 1e6;
  p = PredictAlltoall(Spec(), router::Topology{}, one, tcp, {});
  ASSERT_TRUE(p.ok());
  EXPECT_NEAR(p->time_s, 0.1 * 1514 / 1448, 1e-9);
  EXPECT_EQ(p->busiest, "h0/eps0 tx");
  // A relay: h0 -> h2 through h1 over circuits h0.ocs0-h1.ocs0 and
  // h1.ocs1-h2.ocs0, with h2 -> h0 sending as much back the same way (v2
  // with relays, EPS and the two-hop path each taking half): every circuit
  // direction carries half of one direction's data and the ACKs of half of
  // the other's, 1e6 x (1514 + 33) / 1448 bytes, like each eps0 direction.
  TrafficMatrix both(4);
  both.at(0, 2) = 2e6;
  both.at(2, 0) = 2e6;
  router::Topology t{.epoch = 1, .circuits = {Circuit(0, 0, 1, 0), Circuit(1, 1, 2, 0)}};
  p = PredictAlltoall(Spec(), t, both, tcp, {.version = 2, .relay = true, .demand = &both});
  ASSERT_TRUE(p.ok()) << p.status();
  EXPECT_NEAR(p->time_s, 0.1 * 1547 / 1448, 0.002);
}

TEST(EmulatedCluster, BadInputsAreErrors) {
  TrafficMatrix small(3);
  EXPECT_EQ(PredictAlltoall(Spec(), router::Topology{}, small, {}, {}).status().code(),
            absl::StatusCode::kInvalidArgument);
  TrafficMatrix m(4);
  m.at(0, 1) = 1;
  absl::Status v2 = PredictAlltoall(Spec(), {}, m, {}, {.version = 2}).status();
  EXPECT_THAT(std::string(v2.message()), HasSubstr("demand"));
  EXPECT_FALSE(PredictAlltoall(Spec(), {}, m, {.leaf_hosts = 2}, {}).ok());
  EXPECT_FALSE(PredictAlltoall(Spec(), {}, m, {.ack_per_payload = -0.1}, {}).ok());
  router::Topology bad{.epoch = 1, .circuits = {Circuit(0, 0, 0, 1)}};  // a self-loop
  EXPECT_FALSE(PredictAlltoall(Spec(), bad, m, {}, {}).ok());
}

}  // namespace
}  // namespace mixnet::sim
