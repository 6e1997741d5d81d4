// The circuit planner of one region: from the region's host-pair byte matrix,
// each host's OCS ports (at most alpha), the current circuits and the EPS
// capacity, a degree-bounded symmetric multigraph of circuits with the concrete
// NIC / switch port of each end, and the decision whether switching to it pays.
// A Region is built once from the (static) cabling and is immutable; PlanRegion
// and Decide are pure functions callable from any thread (the controller calls
// them per MoE layer and direction, inside the switching window).
//
// Algorithms (see README.md):
//  - kGreedy: the paper's greedy matching, exactly (the baseline);
//  - kImproved: worst-host-first marginal-gain greedy on the fluid model
//    (fluid_model.h), then local search (moves and swaps around the slowest
//    host), ties broken towards keeping current circuits; never returns a plan
//    the model scores worse than greedy's.
// Ports: a circuit kept from the current topology keeps its two ports; new
// circuits take ports freed by dropped circuits before idle ones, so as few
// ports as possible change (go dark while the switch re-points).
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "runtime/cluster/cluster_spec.h"
#include "runtime/locality/traffic_matrix.h"
#include "runtime/planner/fluid_model.h"

namespace mixnet::planner {

enum class Algorithm { kGreedy, kImproved };
std::string_view AlgorithmName(Algorithm a);
// "greedy" or "improved"; InvalidArgument otherwise.
absl::StatusOr<Algorithm> ParseAlgorithm(std::string_view name);

// One OCS port of a host: the NIC cabled to it and its line rate.
struct OcsPort {
  std::string nic;
  std::string ocs_switch;
  int port = 0;     // 1-based switch port
  double gbps = 0;  // NIC line rate
};

// The static description of a region (from the cluster spec or built by hand).
struct RegionInput {
  std::string name;
  std::vector<std::string> hosts;
  std::vector<std::vector<OcsPort>> ports;  // per host, at most alpha
  std::vector<double> eps_Bps;              // per host: EPS bytes/s per direction
};

// One end of a circuit: host index in the region, port index in its port list.
struct PortRef {
  int host = -1;
  int port = -1;
  friend bool operator==(const PortRef&, const PortRef&) = default;
};

struct PlannedCircuit {
  PortRef a;
  PortRef b;
};

class Region {
 public:
  // InvalidArgument naming the culprit when alpha < 1, the lists disagree in
  // length, a host has more than alpha ports, a port number or line rate is
  // bad, an EPS capacity is negative or not finite, or a (switch, port) is
  // cabled to two NICs.
  static absl::StatusOr<Region> Create(RegionInput input, int alpha);

  const RegionInput& input() const { return in_; }
  int hosts() const { return static_cast<int>(in_.hosts.size()); }
  int alpha() const { return alpha_; }
  int switches() const { return static_cast<int>(switch_names_.size()); }
  int switch_of(PortRef p) const { return port_switch_[p.host][p.port]; }
  // Bytes/s per direction of one circuit between hosts a and b: the slower
  // end's OCS line rate (a host's rate is its slowest OCS port).
  double circuit_Bps(int a, int b) const;
  // circuit_Bps for every pair, row-major (0 on the diagonal).
  const std::vector<double>& pair_Bps() const { return pair_Bps_; }
  // Sum of host h's OCS port rates (for FluidModel::LowerBound).
  const std::vector<double>& ocs_Bps() const { return ocs_total_Bps_; }
  // Ports of host h on switch s (indices into input().ports[h]).
  const std::vector<int>& ports_on(int h, int s) const { return by_switch_[h * switches() + s]; }

  // Circuits in spec form <-> compact form. InvalidArgument naming the circuit
  // when a port is not an OCS port of this region ("circuit outside the
  // region"), a port is used twice or a circuit joins a host to itself.
  absl::StatusOr<std::vector<PlannedCircuit>> FromSpecs(
      const std::vector<cluster::CircuitSpec>& circuits) const;
  cluster::CircuitSpec ToSpec(const PlannedCircuit& c) const;
  // The fluid-model adjacency of a set of circuits.
  Adjacency ToAdjacency(const std::vector<PlannedCircuit>& circuits) const;

  // InvalidArgument unless `demand` is hosts() x hosts() with finite entries
  // >= 0 (the message names the two hosts).
  absl::Status ValidateDemand(const TrafficMatrix& demand) const;

 private:
  RegionInput in_;
  int alpha_ = 0;
  std::vector<std::string> switch_names_;
  std::vector<std::vector<int>> port_switch_;  // [host][port] -> switch index
  std::vector<std::vector<int>> by_switch_;    // [host * S + s] -> port indices
  std::vector<double> host_rate_Bps_;          // slowest OCS port per host
  std::vector<double> pair_Bps_;               // [a * n + b] -> circuit_Bps(a, b)
  std::vector<double> ocs_total_Bps_;
};

struct PlannerOptions {
  Algorithm algorithm = Algorithm::kImproved;
  // Local-search rounds of the improved planner (each: one move or swap).
  int local_search_rounds = 64;
  // Elapsed-time budget of the local search per region, microseconds (0: no
  // budget, rounds only).
  // Stops after the round in progress when spent; the plan found so far is
  // kept (never worse than the start). Makes the result depend on timing.
  double local_search_budget_us = 0;
  // Score plans with relay routing (routing.h) instead of direct routing.
  // Slower (a binary search per score); the planner's inner loops always use
  // the exact direct model.
  bool relay = false;
  // With `relay`: the workers' relay chunk (MIXNET_RELAY_CHUNK_BYTES), the
  // relays' store and forward in the score (routing.h); 0: fluid relays.
  double relay_chunk_bytes = 0;
  // With `relay` (improved planner): after the direct-model phases, a local
  // search scored by the relay routing itself (routed_search.cc), so that
  // the circuits are chosen for the routed floor (hot receivers fed through
  // their partners, relays, EPS); at most this many routings (each about
  // 0.06 ms at 8 hosts on one core; 64 reaches the exhaustive optimum's
  // routed floor within 1% on average in planner_vs_oracle_test). 0: none,
  // the default: on the demo its circuits' best routed floor is 2% lower but
  // the floor the workers' split achieves on them 5% higher
  // (docs/design/planner.md, "routed search").
  int routed_search_evaluations = 0;
  // Score plans with the routing of router v1 instead (routing.h,
  // CircuitOnlyRouting: a pair's bytes over its circuits if it has any, else
  // over EPS), for a controller whose workers run v1; overrides `relay`.
  bool circuit_only = false;
};

struct RegionPlan {
  Algorithm algorithm = Algorithm::kImproved;
  std::vector<PlannedCircuit> circuits;  // the new topology, ports assigned
  double completion_s = 0;               // model score of `circuits`
  double current_completion_s = 0;       // model score of the current circuits
  double lower_bound_s = 0;              // FluidModel::LowerBound: no plan beats it
  int circuits_kept = 0;                 // current circuits kept port for port
  int ports_changed = 0;                 // ports whose peer changes (incl. to/from dark)
  bool used_greedy = false;              // improved planner fell back to greedy's plan
};

// Plans one region. `current` are its live circuits (compact form, already
// checked by FromSpecs). InvalidArgument for a bad demand matrix.
absl::StatusOr<RegionPlan> PlanRegion(const Region& region, const TrafficMatrix& demand,
                                      const std::vector<PlannedCircuit>& current,
                                      const PlannerOptions& options = {});

// The model score (completion time) of given circuits.
double ScoreCircuits(const Region& region, const FluidModel& model,
                     const std::vector<PlannedCircuit>& circuits, bool relay);

// Whether to switch to a plan. The gain is what the coming all-to-alls save,
// (current_completion_s - completion_s) x `uses` (all-to-alls served by the new
// topology, e.g. 2 for dispatch and combine). The cost is the part of the
// reconfiguration not hidden behind compute, max(0, switch_s + protocol_s -
// overlap_s): the switching itself and the reconfiguration protocol's own
// time (persisting the epoch, PREPARE, COMMIT and the workers' new
// connections; the controller measures it per round), charged when any port
// changes. Reconfigure iff gain > cost.
struct DecideOptions {
  double switch_s = 0.025;
  double protocol_s = 0;
  double overlap_s = 0;
  double uses = 1;
};
struct Decision {
  bool reconfigure = false;
  double gain_s = 0;
  double cost_s = 0;
};
Decision Decide(const RegionPlan& plan, const DecideOptions& options);

}  // namespace mixnet::planner
