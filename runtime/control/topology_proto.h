// Conversions between mixnet.control.v1 messages and the runtime's types
// (router::Topology, cluster::CircuitSpec, GateKey direction). Pure functions;
// any thread.
#pragma once

#include "absl/status/statusor.h"
#include "mixnet/control/v1/controller.pb.h"
#include "runtime/locality/token_counts.h"
#include "runtime/router/route_table.h"

namespace mixnet::control {

router::Topology TopologyFromProto(const v1::Topology& proto);
v1::Topology TopologyToProto(const router::Topology& topology);
cluster::CircuitSpec CircuitFromProto(const v1::Circuit& proto);
v1::Circuit CircuitToProto(const cluster::CircuitSpec& circuit);

v1::Direction DirectionToProto(Direction direction);
// InvalidArgument for DIRECTION_UNSPECIFIED or an unknown value.
absl::StatusOr<Direction> DirectionFromProto(v1::Direction direction);

}  // namespace mixnet::control
