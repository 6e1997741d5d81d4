// Full re-wirings for mixnet_ocs_bench: two random perfect matchings of
// ports 1..n that share no circuit, so that going from one to the other
// changes the circuit of every port. Pure functions; any thread.
#pragma once

#include <cstdint>
#include <functional>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"

namespace mixnet::ocs::bench {

using Matching = std::vector<std::pair<int, int>>;  // each pair a < b, sorted

// From a random cyclic order p0..p(n-1) of the ports: A joins (p0,p1),
// (p2,p3), ...; B joins (p1,p2), ..., (p(n-1),p0). For n >= 4 no pair is in
// both. Orders with a pair for which `forbidden(a, b)` holds are redrawn
// (up to 10000 times). InvalidArgument for odd n or n < 4; NotFound when no
// allowed order turned up.
absl::StatusOr<std::pair<Matching, Matching>> DisjointMatchings(
    int n, uint64_t seed, const std::function<bool(int, int)>& forbidden = nullptr);

}  // namespace mixnet::ocs::bench
