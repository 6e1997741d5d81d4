// Conversions between control-plane messages and runtime types (see topology_proto.h).
#include "runtime/control/topology_proto.h"

#include "absl/strings/str_cat.h"

namespace mixnet::control {

cluster::CircuitSpec CircuitFromProto(const v1::Circuit& proto) {
  cluster::CircuitSpec c;
  c.ocs_switch = proto.ocs_switch();
  c.port_a = static_cast<int>(proto.port_a());
  c.port_b = static_cast<int>(proto.port_b());
  return c;
}

v1::Circuit CircuitToProto(const cluster::CircuitSpec& circuit) {
  v1::Circuit c;
  c.set_ocs_switch(circuit.ocs_switch);
  c.set_port_a(static_cast<uint32_t>(circuit.port_a));
  c.set_port_b(static_cast<uint32_t>(circuit.port_b));
  return c;
}

router::Topology TopologyFromProto(const v1::Topology& proto) {
  router::Topology t;
  t.epoch = proto.epoch();
  t.circuits.reserve(proto.circuits_size());
  for (const v1::Circuit& c : proto.circuits()) t.circuits.push_back(CircuitFromProto(c));
  return t;
}

v1::Topology TopologyToProto(const router::Topology& topology) {
  v1::Topology t;
  t.set_epoch(topology.epoch);
  for (const cluster::CircuitSpec& c : topology.circuits) *t.add_circuits() = CircuitToProto(c);
  return t;
}

router::RoutingPlan RoutingFromProto(const v1::Routing& proto) {
  router::RoutingPlan p;
  p.version = static_cast<int>(proto.version());
  p.relay = proto.relay();
  p.hosts.assign(proto.hosts().begin(), proto.hosts().end());
  p.bytes.assign(proto.bytes().begin(), proto.bytes().end());
  return p;
}

v1::Routing RoutingToProto(const router::RoutingPlan& plan) {
  v1::Routing r;
  r.set_version(static_cast<uint32_t>(plan.version));
  r.set_relay(plan.relay);
  for (const std::string& h : plan.hosts) r.add_hosts(h);
  for (double b : plan.bytes) r.add_bytes(b);
  return r;
}

v1::Direction DirectionToProto(Direction direction) {
  return direction == Direction::kCombine ? v1::COMBINE : v1::DISPATCH;
}

absl::StatusOr<Direction> DirectionFromProto(v1::Direction direction) {
  switch (direction) {
    case v1::DISPATCH:
      return Direction::kDispatch;
    case v1::COMBINE:
      return Direction::kCombine;
    default:
      return absl::InvalidArgumentError(absl::StrCat("traffic report: direction ",
                                                     static_cast<int>(direction),
                                                     " is neither DISPATCH nor COMBINE"));
  }
}

}  // namespace mixnet::control
