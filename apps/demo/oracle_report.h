// The demo's oracle output (oracle_phase.h): a table of each phase's floors
// beside what it achieved, the split of mixnet's gap over nonblocking by
// cause, and their JSON fields. Main thread.
#pragma once

#include <vector>

#include "apps/demo/phase_result.h"
#include "nlohmann/json.hpp"

namespace mixnet::demo {

// Nothing when no phase has oracle figures.
void PrintOracle(const std::vector<PhaseResult>& phases);
// oracle_nonblocking_floor_ms, oracle_installed_floor_ms, oracle_best_floor_ms,
// oracle_lower_bound_ms, oracle_slowest_solve_ms (null with oracle_why when
// not computed; the best and bound null on fabrics without OCS ports).
void AddOracleJson(const PhaseResult& p, nlohmann::ordered_json& j);
// The split as an object (physics_ms, planning_ms, routing_ms,
// data_plane_ms, reconfiguration_ms, other_ms, mixnet_ms, nonblocking_ms), or
// null.
nlohmann::ordered_json GapSplitJson(const std::vector<PhaseResult>& phases);
// The steady iterations' target ratios (SteadyRatios in oracle_phase.h):
// floor_over_best, floor_over_nonblocking_floor, iteration_over_nonblocking,
// first_iteration_over_nonblocking; or null.
nlohmann::ordered_json SteadyTargetsJson(const std::vector<PhaseResult>& phases);

}  // namespace mixnet::demo
