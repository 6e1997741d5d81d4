// The oracle's JSON input (what `mixnet-oracle` reads): one all-to-all's byte
// matrix and the fabric it ran on. Parsing only; any thread.
//
//   {"hosts": ["h0", "h1", ...],          optional: names (else "0", "1", ...)
//    "bytes": [[0, 5e6, ...], ...],       n x n, or n*n row-major; bytes i -> j
//    "eps_gbps": 25,                      per host EPS Gbit/s per direction (a
//                                         number for every host, or a list)
//    "ocs_ports": 3, "ocs_gbps": 25,      OCS ports per host and one port's rate
//    "wire_overhead": 1.0,                optional: wire bytes per payload byte
//    "circuits": [["h0", "h1"], [2, 3]]}  optional: the installed circuits, by
//                                         name or index
#pragma once

#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"
#include "runtime/planner/oracle.h"

namespace mixnet::planner {

struct OracleInput {
  std::vector<std::string> hosts;
  TrafficMatrix demand;
  OracleFabric fabric;
  std::optional<std::vector<UndirectedCircuit>> circuits;
};

// InvalidArgument naming the field (and the host or entry) on malformed JSON,
// a missing or mistyped field, a matrix of the wrong size, an unknown host.
absl::StatusOr<OracleInput> ParseOracleInput(std::string_view json);

}  // namespace mixnet::planner
