// Duplex circuits on an N x N switch with one-way connections (Polatis):
// duplex port p is ingress p plus egress N+p, so circuit {a,b} is ingress a ->
// egress N+b together with ingress b -> egress N+a. Shared by the SCPI and TL1
// backends: mapping connections to circuits and deciding each circuit's
// outcome of a change from what the switch holds afterwards. Pure functions;
// any thread.
#pragma once

#include <functional>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/time/time.h"
#include "ocs_driver/backend.h"

namespace mixnet::ocs::polatis {

// Nominal switching time of a Polatis beam-steering switch (datasheet: about
// 25 ms or less per connection).
inline constexpr absl::Duration kSwitchingTime = absl::Milliseconds(25);

using OneWay = std::pair<int, int>;  // {ingress, egress}

// The two one-way connections of `c` on a switch with `ingress_ports`.
std::vector<OneWay> ConnectionsOf(const Circuit& c, int ingress_ports);

// Duplex circuits held by a set of one-way connections on a switch with
// `ingress_ports` ingress ports (egress numbering starts at ingress_ports+1)
// and `ports` duplex ports. Sorted. Every connection that is not half of a
// circuit is described in `leftovers` (when not null).
std::vector<Circuit> CircuitsOf(const std::vector<OneWay>& connections, int ingress_ports,
                                int ports, std::vector<std::string>* leftovers);

// The connections of `connections` that are not half of a duplex circuit
// (one-way leftovers, loops, connections outside the duplex range; see
// CircuitsOf) and hold the ingress or egress port of one of the duplex ports
// `touched`: they would block a circuit on those ports. Sorted.
std::vector<OneWay> LeftoversOn(const std::vector<OneWay>& connections, int ingress_ports,
                                int ports, const std::set<int>& touched);

// What a change must clear before its additions: LeftoversOn(connections,
// ingress_ports, ports, touched) less the halves of the circuits in `remove`
// (a removal's own half goes with it). Sorted.
std::vector<OneWay> LeftoversToClear(const std::vector<OneWay>& connections, int ingress_ports,
                                     int ports, const std::set<int>& touched,
                                     const std::vector<Circuit>& remove);

// "ingress 2 -> egress 19 (duplex 2 -> 3, one-way)" on a switch with
// `ingress_ports` ingress ports.
std::string OneWayText(const OneWay& c, int ingress_ports);

// Sets every outcome's status from `held` (the connections read back after
// the change): an add is done when both its connections are held, a removal
// when neither is. For a circuit that is not done, `why` builds the status
// from the outcome and a description of what the switch holds for it.
// Returns the first failure (OK when all are done).
absl::Status VerifyOutcomes(
    const std::set<OneWay>& held, int ingress_ports, std::vector<CircuitOutcome>& outcomes,
    const std::function<absl::Status(const CircuitOutcome&, const std::string& state)>& why);

std::string CircuitText(const Circuit& c);

}  // namespace mixnet::ocs::polatis
