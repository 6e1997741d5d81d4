// Internal to the oracle (oracle_lp.cc, oracle_search.cc): circuit sets as
// counts per unordered host pair (n x n, symmetric, row-major) and (b) on
// them without re-validating the inputs.
#pragma once

#include <vector>

#include "absl/status/statusor.h"
#include "runtime/planner/oracle.h"

namespace mixnet::planner {

// InvalidArgument for a circuit outside the fabric, a self-loop or more
// circuits at a host than its ports.
absl::StatusOr<std::vector<int>> CircuitCounts(const OracleFabric& fabric,
                                               const std::vector<UndirectedCircuit>& circuits);
// (b) on validated inputs.
absl::StatusOr<double> FloorOnCounts(const TrafficMatrix& demand, const OracleFabric& fabric,
                                     const std::vector<int>& counts, const OracleOptions& options);

}  // namespace mixnet::planner
