// Router v2's split from a linear program: on the installed circuits, the
// oracle's program (b) (oracle.h) over the paths the data plane runs (each
// pair's circuits and EPS; relays over two circuits; with one EPS hop only
// through a host that shares no circuit with that hop's other end), and among
// its optimal routings the one that relays the fewest bytes. The fluid
// model's optimum on those paths, where the water-filling (routing.h) is a
// heuristic. The LP knows no store and forward: BestRouting scores both with
// EvaluateRouting (tails included) and keeps the better. Pure computation
// (GLPK; each call owns its problem), callable from any thread.
#pragma once

#include <string_view>

#include "absl/status/statusor.h"
#include "runtime/planner/routing.h"

namespace mixnet::planner {

// Relay paths a pair may use in the data plane (the collectives' kMaxRelays);
// LpRouting folds a pair's smallest relay shares beyond it into EPS.
inline constexpr int kLpMaxRelaysPerPair = 8;

// The LP's routing, `completion_s` from EvaluateRouting with
// options.relay_chunk_bytes. InvalidArgument when the circuits run at
// different rates (the oracle's fabric has one rate per port; the caller
// falls back to the water-filling); Internal when GLPK fails.
absl::StatusOr<RegionRouting> LpRouting(const FluidModel& model, const Adjacency& adjacency,
                                        const RoutingOptions& options = {});

// "water-filling" or "lp": how router v2 computes its split
// (MIXNET_ROUTE_SOLVER, RouterV2Options::solver).
enum class RouteSolver { kWaterFilling, kLp };

// kWaterFilling: OptimiseRouting. kLp: the faster of OptimiseRouting and
// LpRouting by EvaluateRouting (OptimiseRouting's alone when the LP fails),
// so it is never slower in the model than the water-filling.
RegionRouting BestRouting(const FluidModel& model, const Adjacency& adjacency,
                          const RoutingOptions& options, RouteSolver solver);

// "water-filling" or "lp"; InvalidArgument naming the value otherwise.
absl::StatusOr<RouteSolver> ParseRouteSolver(std::string_view name);

// BestRouting with `solver`, as a RoutingFunction for router v2.
RoutingFunction RoutingFunctionFor(RouteSolver solver);

}  // namespace mixnet::planner
