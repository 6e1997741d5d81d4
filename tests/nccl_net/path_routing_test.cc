// PathMover's router v2 split (plugins/nccl_net/path_routing.cc) for a plan
// that allows relays: while no comm of the mover reaches a peer's relay host
// (relays are set up over one, path_mover_relay.cc), it splits as router v2
// without relays (label cpu; one mover, no transfers; relays running:
// nccl_net_relay_test). Hand-worked, every
// rate 1 (EPS NIC and circuit, bytes per second), circuits h0-h1 and h1-h2,
// demand h0 -> h1 3, h0 -> h2 2, h3 -> h2 2:
//  - without relays h2's EPS ingress carries 4, so T0 = 4 and h0 -> h1 keeps
//    all 3 on its circuit (3 <= T0): EPS share 0;
//  - with relays h0's egress (EPS and its one circuit, 5 bytes) bounds
//    T >= 2.5, which h3 -EPS-> h1 -circuit-> h2 (1.5 of h3's 2) meets; at
//    T = 2.5 the h0-h1 circuit carries at most 2.5 of h0 -> h1's 3, so 0.5
//    goes over EPS: share 1/6. The plugin would send it over EPS only to
//    make room on the circuit for relayed bytes it never relays.
// Test thread only (the mover's thread runs but moves nothing).
#include <memory>

#include "gtest/gtest.h"
#include "plugins/nccl_net/path_mover.h"
#include "runtime/router/route_table_v2.h"

namespace mixnet::nccl {
namespace {

constexpr char kSpec[] = R"(name: relay-plan
ocs_switches:
  - {name: s0, ports: 4, switch_ms: 1}
hosts:
  - name: h0
    nics:
      - {name: eps0, role: eps, address: 127.0.71.1/32, gbps: 8e-9}
      - {name: ocs0, role: ocs, address: 127.0.72.1/32, gbps: 8e-9, switch: s0, port: 1}
  - name: h1
    nics:
      - {name: eps0, role: eps, address: 127.0.71.2/32, gbps: 8e-9}
      - {name: ocs0, role: ocs, address: 127.0.72.2/32, gbps: 8e-9, switch: s0, port: 2}
      - {name: ocs1, role: ocs, address: 127.0.73.2/32, gbps: 8e-9, switch: s0, port: 3}
  - name: h2
    nics:
      - {name: eps0, role: eps, address: 127.0.71.3/32, gbps: 8e-9}
      - {name: ocs0, role: ocs, address: 127.0.72.3/32, gbps: 8e-9, switch: s0, port: 4}
  - name: h3
    nics:
      - {name: eps0, role: eps, address: 127.0.71.4/32, gbps: 8e-9}
regions:
  - {name: r0, hosts: [h0, h1, h2, h3]}
circuits:
  - {switch: s0, ports: [1, 2]}
  - {switch: s0, ports: [3, 4]}
)";

router::RoutingPlan Plan() {
  router::RoutingPlan p;
  p.relay = true;
  p.hosts = {"h0", "h1", "h2", "h3"};
  p.bytes.assign(16, 0.0);
  p.bytes[0 * 4 + 1] = 3;
  p.bytes[0 * 4 + 2] = 2;
  p.bytes[3 * 4 + 2] = 2;
  return p;
}

TEST(PathRouting, APlanWithRelaysIsSplitAsTheLanesRunIt) {
  absl::StatusOr<cluster::ClusterSpec> spec = cluster::ClusterSpec::Parse(kSpec);
  ASSERT_TRUE(spec.ok()) << spec.status();
  const router::Topology topology{0, spec->circuits};
  // The scenario discriminates: router v2 with relays moves a sixth of
  // h0 -> h1 onto EPS.
  absl::StatusOr<TrafficMatrix> demand = router::PlanDemand(*spec, Plan());
  ASSERT_TRUE(demand.ok()) << demand.status();
  absl::StatusOr<router::RouteTable> with_relays = router::BuildRouteTableV2(
      *spec, topology, "h0", *demand, router::RouterV2Options{.relay = true});
  ASSERT_TRUE(with_relays.ok()) << with_relays.status();
  EXPECT_NEAR(router::EpsShare(*with_relays, "h1"), 1.0 / 6, 1e-3);
  EXPECT_NEAR(with_relays->predicted_completion_s(), 2.5, 1e-3);

  PathMover::Options o;
  o.spec = *spec;
  o.host = "h0";
  o.initial = topology;
  o.device = [](const std::string& nic) -> absl::StatusOr<transport::Device*> {
    return absl::UnavailableError("no devices in this test: " + nic);
  };
  o.router = "v2";
  absl::StatusOr<std::unique_ptr<PathMover>> mover = PathMover::Create(std::move(o));
  ASSERT_TRUE(mover.ok()) << mover.status();
  ASSERT_TRUE((*mover)->SetRouting(Plan()).ok());
  Comm to_h1, to_h2;
  to_h1.is_send = to_h2.is_send = true;
  to_h1.peer_host = "h1";
  to_h2.peer_host = "h2";
  EXPECT_EQ((*mover)->EpsShare(to_h1), 0.0);
  EXPECT_EQ((*mover)->EpsShare(to_h2), 1.0);  // no circuit: EPS
}

// Which circuits a lane with relay stripes depends on (what PREPARE moves
// comms off), hand-worked.
TEST(PathRouting, ALaneLeavesWithAnyCircuitItRunsOver) {
  const cluster::CircuitSpec c01{"s0", 1, 2}, c23{"s0", 3, 4}, c12{"s0", 5, 6};
  LanePath lane;  // on EPS, relays circuit-then-EPS over c01 and EPS-then-circuit over c23
  lane.local_nic = lane.remote_nic = "eps0";
  StripePath via_h1;
  via_h1.relay_host = "h1";
  via_h1.first_direct = true;
  via_h1.first_circuit = c01;
  via_h1.second_direct = false;
  via_h1.circuit = c12;  // not a hop of this relay: ignored
  StripePath via_h2;
  via_h2.relay_host = "h2";
  via_h2.first_direct = false;
  via_h2.first_circuit = c12;  // ignored likewise
  via_h2.second_direct = true;
  via_h2.circuit = {"s0", 4, 3};  // c23, ports the other way round
  lane.stripes = {via_h1, via_h2};
  EXPECT_FALSE(RunsOverMissingCircuit(lane, {c01, c23}));
  EXPECT_TRUE(RunsOverMissingCircuit(lane, {c23}));  // via h1's first hop leaves
  EXPECT_TRUE(RunsOverMissingCircuit(lane, {c01}));  // via h2's second hop leaves
  EXPECT_FALSE(RunsOverMissingCircuit(lane, {c01, c23, c12}));
  // A lane on EPS alone depends on no circuit; a direct one on its own.
  EXPECT_FALSE(RunsOverMissingCircuit(LanePath{}, {}));
  LanePath direct;
  direct.direct = true;
  direct.circuit = c12;
  EXPECT_TRUE(RunsOverMissingCircuit(direct, {c01}));
  EXPECT_FALSE(RunsOverMissingCircuit(direct, {{"s0", 6, 5}}));
}

// The cut weights of a lane with relay stripes, hand-worked.
TEST(PathRouting, RelayWeightsGiveEachStripeItsShare) {
  // A circuit of rate 3, EPS 0.2, one relay 0.3: the circuit carries 0.5,
  // so the relay weighs 0.3 x 3 / 0.5 = 1.8 and gets 1.8 / 4.8 of the
  // primary (0.8 of the bytes): 0.3.
  LaneWeights w = RelayLaneWeights({3}, 0.2, {0.3});
  EXPECT_DOUBLE_EQ(w.home_share, 0.2);
  ASSERT_EQ(w.weights.size(), 2u);
  EXPECT_DOUBLE_EQ(w.weights[0], 3);
  EXPECT_NEAR(w.weights[1], 1.8, 1e-12);
  // Two circuits of 3, EPS 0.1, a relay 0.45: circuits 0.45 over rate 6.
  w = RelayLaneWeights({3, 3}, 0.1, {0.45});
  ASSERT_EQ(w.weights.size(), 3u);
  EXPECT_NEAR(w.weights[2], 6, 1e-12);
  // No circuit: the lane's own connection is EPS and carries its share;
  // nothing goes to home.
  w = RelayLaneWeights({}, 0.4, {0.3, 0.3});
  EXPECT_EQ(w.home_share, 0);
  EXPECT_EQ(w.weights, (std::vector<double>{0.4, 0.3, 0.3}));
}

}  // namespace
}  // namespace mixnet::nccl
