// The all-to-all oracle: for the byte matrix one all-to-all carried, the
// shortest time any schedule could take on a fabric of EPS NICs and circuits,
// as linear programs over every direct and two-hop path (solved with GLPK).
// Three figures, each a floor (bytes over link capacity, no protocol, no
// latency):
//  (a) NonblockingFloor: every NIC of every host on one non-blocking switch;
//  (b) InstalledFloor: the circuits that were installed, best routing on them;
//  (c) SearchBestFloor: the best circuit set the switch allows (ports per host,
//      one circuit per port, a pair may hold several), from a local search
//      with (b) as its inner step, beside a lower bound (the LP relaxation
//      with fractional circuits) that no circuit set beats.
// Paths of a pair (i, j): EPS; its own circuits; through any third host k:
// circuit then circuit, EPS then circuit, circuit then EPS. Every NIC's
// capacity counts in both directions. Pure functions, callable from any
// thread (each call builds and frees its own GLPK problem).
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"
#include "runtime/locality/traffic_matrix.h"
#include "runtime/planner/fluid_model.h"
#include "runtime/planner/planner.h"

namespace mixnet::planner {

struct OracleFabric {
  std::vector<double> eps_Bps;       // per host: EPS bytes/s per direction (its EPS NICs summed)
  std::vector<int> ocs_ports;        // per host: OCS ports, one circuit each
  std::vector<double> ocs_port_Bps;  // per host: one OCS port's bytes/s per direction
  // Wire bytes per payload byte (headers, ACKs): matrix entries are scaled by
  // it before they meet the link rates. At least 1.
  double wire_overhead = 1.0;

  int hosts() const { return static_cast<int>(eps_Bps.size()); }
  // The rate of one circuit between a and b: the slower end's port.
  double circuit_Bps(int a, int b) const;
  // InvalidArgument naming the host and field: lists of different lengths,
  // negative or non-finite rates, negative ports, overhead below 1.
  absl::Status Validate() const;
};

// (a): max over hosts of max(egress, ingress) wire bytes over all the host's
// NICs (EPS plus every OCS port at its rate). 0 for a matrix without
// off-diagonal bytes.
absl::StatusOr<double> NonblockingFloor(const TrafficMatrix& demand, const OracleFabric& fabric);

struct OracleOptions {
  // Two-hop paths (circuit-circuit, EPS-circuit, circuit-EPS) besides the
  // direct ones; false: each pair on its own circuits and EPS only.
  bool two_hop = true;
  // Inner LPs the search may solve (the starts included); it also stops at a
  // local optimum or when a set meets the lower bound.
  int max_evaluations = 400;
  // Simplex iterations per LP (0: GLPK's default, no limit). A solve that
  // reaches it fails with Internal naming GLPK's return code.
  int max_simplex_iterations = 0;
  // With two_hop: also the one-sided two-hop paths (EPS-circuit,
  // circuit-EPS); false: circuit-circuit only.
  bool one_sided = true;
  // Only the paths the data plane runs (runtime/collectives/alltoall_relay.cc
  // sends each hop over the pair's circuits when it has any): an EPS-circuit
  // path i -> k -> j only when i and k share no circuit, a circuit-EPS path
  // only when k and j share none. The physics floors leave it off.
  bool data_plane_paths = false;
  // InstalledRouting: among the routings within `optimality_slack` of the
  // best time, the one that sends the fewest bytes over two-hop paths (a
  // second LP from the first one's basis). Relayed bytes cost the relay host
  // a forwarding copy, and a relay adds store and forward's tail.
  bool fewest_relayed = false;
  double optimality_slack = 1e-6;
};

// A planner region as the oracle's fabric (each host's EPS capacity, its OCS
// port count and its first port's rate), and a plan's circuits as host pairs
// at the region's circuit rate: to score the planner's plans with (b) and (c).
OracleFabric OracleFabricOf(const Region& region);
std::vector<UndirectedCircuit> HostCircuitsOf(const Region& region,
                                              const std::vector<PlannedCircuit>& circuits);

// (b): the best routing's time on `circuits` (each joins two distinct hosts;
// the Bps field is ignored: a circuit runs at circuit_Bps). Infinity when
// some pair has bytes and no path. InvalidArgument for a circuit outside the
// fabric, a self-loop or more circuits at a host than its ports; Internal
// naming GLPK's status when the solver fails.
absl::StatusOr<double> InstalledFloor(const TrafficMatrix& demand, const OracleFabric& fabric,
                                      const std::vector<UndirectedCircuit>& circuits,
                                      const OracleOptions& options = {});

struct BestFloor {
  double floor_s = 0;                       // (c): the best set found, best routing on it
  double lower_bound_s = 0;                 // the relaxation: no circuit set beats it
  std::vector<UndirectedCircuit> circuits;  // the set that gave floor_s
  int evaluations = 0;                      // inner LPs solved
  bool at_bound = false;                    // floor_s meets lower_bound_s (optimal)
};

// (c). `start`, when given (e.g. the installed circuits), is one of the
// search's starting points; the other is the relaxation rounded to whole
// circuits. Errors as InstalledFloor.
absl::StatusOr<BestFloor> SearchBestFloor(const TrafficMatrix& demand, const OracleFabric& fabric,
                                          const std::vector<UndirectedCircuit>* start = nullptr,
                                          const OracleOptions& options = {});

// The best routing (b) itself: for every pair with bytes, the paths the LP
// uses and the share of the pair's bytes on each (summing to 1). A router
// that splits by these weights reaches InstalledFloor's time. Paths through
// a third host name it in `via`.
enum class OraclePathKind { kEps, kCircuit, kCircuitCircuit, kEpsCircuit, kCircuitEps };
std::string_view OraclePathKindName(
    OraclePathKind kind);  // "eps", "circuit", "circuit-circuit", ...
struct OraclePath {
  OraclePathKind kind = OraclePathKind::kEps;
  int via = -1;  // the relay host of a two-hop path, else -1
  double weight = 0;
};
struct OracleRouting {
  double floor_s = 0;  // InstalledFloor's
  // Row-major n x n: paths[src * n + dst], empty for pairs without bytes
  // (and for every pair when floor_s is 0 or infinite).
  std::vector<std::vector<OraclePath>> paths;
};
absl::StatusOr<OracleRouting> InstalledRouting(const TrafficMatrix& demand,
                                               const OracleFabric& fabric,
                                               const std::vector<UndirectedCircuit>& circuits,
                                               const OracleOptions& options = {});

// The relaxation alone: the LP of (b) with a fractional circuit count per
// pair (at most each host's ports in all). Also returns the counts per
// unordered pair (row-major n x n, symmetric) for rounding.
struct Relaxation {
  double lower_bound_s = 0;
  std::vector<double> circuits;
};
absl::StatusOr<Relaxation> RelaxedFloor(const TrafficMatrix& demand, const OracleFabric& fabric,
                                        const OracleOptions& options = {});

}  // namespace mixnet::planner
