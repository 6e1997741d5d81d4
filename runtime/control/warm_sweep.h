// The warm-up sweep: the circuit sets a controller installs one after the
// other at job start so that every OCS NIC pair a circuit of a region can
// join is lit once, and each worker makes (then keeps, suspended) the
// data-plane connection over it before the first timed step. Pure function
// of the cluster spec; any thread.
//
// Per switch, the region's hosts with OCS NICs on it are paired by the
// circle method (n - 1 host matchings, n when n is odd: one host sits out),
// and each host pair (a, b) is run through max(|a|, |b|) port shifts: the
// i-th port of the host with fewer ports on the switch meets the
// ((i + s) mod max)-th port of the other. Every port pair of two region hosts
// on one switch is in exactly one round, and no port is in two circuits of a
// round. Switches are independent: round r holds every switch's r-th set.
// With k ports per host on a switch: (n - 1) * k rounds for even n, n * k for
// odd n; each port's degree is (n - 1) * k, so the even case is optimal.
#pragma once

#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "runtime/cluster/cluster_spec.h"

namespace mixnet::control {

// The sweep's rounds for the region `region` of `spec` (each a set of
// circuits joining only that region's hosts). Empty when the region has fewer
// than two hosts with OCS ports on a common switch. InvalidArgument for a
// region the spec does not have.
absl::StatusOr<std::vector<std::vector<cluster::CircuitSpec>>> WarmSweep(
    const cluster::ClusterSpec& spec, const std::string& region);

}  // namespace mixnet::control
