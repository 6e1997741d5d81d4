// Emulation mode of the fabric simulator (issue 22 item 5), first part: one
// all-to-all on a cluster spec as the emulated cluster carries it, so that
// the simulator's figure can be set beside a measured one. The model:
//   - every NIC of the spec is a link of its own rate in each direction (the
//     token bucket in front of each veth end, emulation/links.h);
//   - EPS NICs hang off one non-blocking bridge, or, with `leaf_hosts` > 0,
//     off leaf bridges of that many hosts (host h on leaf h / leaf_hosts)
//     whose uplinks to the spine carry `leaf_uplink_Bps` each way (the
//     demo's oversubscribed fabric), crossed by flows between two leaves;
//   - a circuit of the topology joins two OCS NICs directly;
//   - each host pair's bytes follow the workers' own route tables
//     (runtime/router: v1, or v2 split by the plan's demand, with relays
//     through a third host when asked), one flow per path and weight;
//   - the flows share the links max-min fairly, recomputed at every flow's
//     end (flow_solver.h), as for the simulator's other fabrics.
// Bytes count as frames on the wire (`wire_per_payload`, headers included),
// as the token buckets and the NIC counters of the demo's floor count them,
// and every hop's ACKs load its reverse links (`ack_per_payload`), as flows
// of their own. A relayed flow's last chunk crosses the second hop after the
// flow's fluid end (store and forward, `relay_chunk_bytes`). What it leaves
// out, and so where a measurement should be slower: TCP's own dynamics (slow
// start, losses and retransmission timeouts at the token buckets' queues),
// the collectives' per-message round trips, and the CPUs that move every
// byte. The floor (the busiest link-direction's bytes over its rate, less the
// bucket an idle link sends at once) is the demo's accounting.h floor, from
// the routed bytes.
// Pure computation; any thread.
#pragma once

#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "runtime/cluster/cluster_spec.h"
#include "runtime/locality/traffic_matrix.h"
#include "runtime/planner/routing.h"
#include "runtime/router/route_table.h"

namespace mixnet::sim {

struct EmulatedFabric {
  int leaf_hosts = 0;          // > 0: EPS NICs on leaves of this many hosts
  double leaf_uplink_Bps = 0;  // each leaf's uplink, each direction (bytes/s)
  double burst_s = 0;          // token bucket of every link, in seconds of its rate (floor)
  // Bytes on the wire per payload byte (the token buckets count whole
  // frames): kTcpFrameOverhead for TCP over the emulation's veths, 1 for
  // payload alone.
  double wire_per_payload = 1;
  // Bytes the receiver sends back per payload byte on every hop, over the
  // reverse links of the hop (TCP's ACKs): kTcpAckPerPayload, or 0.
  double ack_per_payload = 0;
  // Router v2's relays store and forward this many payload bytes at a time
  // (the workers' MIXNET_RELAY_CHUNK_BYTES): a relayed flow ends its last
  // chunk's time on the second hop's link after its fluid end. 0: fluid.
  double relay_chunk_bytes = 0;
};

// A full TCP segment on a 1500-byte MTU with timestamps (Linux's default)
// carries 1448 payload bytes in a 1514-byte Ethernet frame (20 IPv4 + 32 TCP
// with the timestamp option + 14 Ethernet).
inline constexpr double kTcpFrameOverhead = 1514.0 / 1448.0;
// The ACKs the other way: one per two full segments (Linux's delayed ACK),
// 66 bytes each (14 Ethernet + 20 IPv4 + 32 TCP with timestamps), 2.3% of
// the payload. With kTcpFrameOverhead, 1.068 wire bytes per payload byte in
// all, as mixnet_route_bench measures over all NICs (its wire_factor,
// 1.0705: the protocol's own frames are the rest).
inline constexpr double kTcpAckPerPayload = 66.0 / (2 * 1448.0);

struct EmulatedRouting {
  int version = 1;                           // router v1 or v2
  bool relay = false;                        // v2: two-hop relays allowed
  const TrafficMatrix* demand = nullptr;     // v2: the matrix the split is planned from
  double relay_chunk_bytes = 0;              // v2: the workers' relay chunk (their routing's model)
  planner::RoutingFunction split = nullptr;  // v2: the workers' split (null: water-filling)
};

struct EmulatedPrediction {
  double time_s = 0;    // when the last flow ends
  double floor_s = 0;   // the busiest link-direction's bytes (less the burst) over its rate
  std::string busiest;  // "h3/eps0 rx", "leaf1 up"
  int flows = 0;
};

// Every host's route table (spec order) under `topology` and `routing`, as
// the workers build them. InvalidArgument for a topology the spec does not
// allow, or v2 without a demand.
absl::StatusOr<std::vector<router::RouteTable>> EmulatedRouteTables(
    const cluster::ClusterSpec& spec, const router::Topology& topology,
    const EmulatedRouting& routing);

// `matrix`: bytes host i sends host j, hosts in the spec's order (the
// diagonal stays inside a host); `tables` from EmulatedRouteTables.
// InvalidArgument for a matrix or tables of another size.
absl::StatusOr<EmulatedPrediction> PredictAlltoall(const cluster::ClusterSpec& spec,
                                                   const std::vector<router::RouteTable>& tables,
                                                   const TrafficMatrix& matrix,
                                                   const EmulatedFabric& fabric);
// The same, building the tables first.
absl::StatusOr<EmulatedPrediction> PredictAlltoall(const cluster::ClusterSpec& spec,
                                                   const router::Topology& topology,
                                                   const TrafficMatrix& matrix,
                                                   const EmulatedFabric& fabric,
                                                   const EmulatedRouting& routing);

}  // namespace mixnet::sim
