// Conversions between mixnet.control.v1 messages and the runtime's types
// (router::Topology, cluster::CircuitSpec, GateKey direction). Pure functions;
// any thread.
#pragma once

#include "absl/status/statusor.h"
#include "mixnet/control/v1/controller.pb.h"
#include "runtime/locality/token_counts.h"
#include "runtime/router/route_table.h"
#include "runtime/router/route_table_v2.h"

namespace mixnet::control {

router::Topology TopologyFromProto(const v1::Topology& proto);
v1::Topology TopologyToProto(const router::Topology& topology);
cluster::CircuitSpec CircuitFromProto(const v1::Circuit& proto);
v1::Circuit CircuitToProto(const cluster::CircuitSpec& circuit);

// Routing <-> router::RoutingPlan (no checks; router::PlanDemand checks).
router::RoutingPlan RoutingFromProto(const v1::Routing& proto);
v1::Routing RoutingToProto(const router::RoutingPlan& plan);

v1::Direction DirectionToProto(Direction direction);
// InvalidArgument for DIRECTION_UNSPECIFIED or an unknown value.
absl::StatusOr<Direction> DirectionFromProto(v1::Direction direction);

}  // namespace mixnet::control
