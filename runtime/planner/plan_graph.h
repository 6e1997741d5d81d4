// Internal to the planner: the host-level circuit multigraph a planning
// algorithm edits (circuits as host pairs on a switch, free ports per host and
// switch, per-peer aggregated rates for the fluid model), and the algorithms
// that edit it. Ports are assigned afterwards (AssignPorts). Single-threaded:
// one PlanGraph per planning call.
#pragma once

#include <cstdint>
#include <vector>

#include "runtime/planner/fluid_model.h"
#include "runtime/planner/planner.h"
#include "runtime/planner/routing.h"

namespace mixnet::planner::internal {

struct HostCircuit {
  int a = 0;
  int b = 0;
  int s = 0;  // switch index
};

class PlanGraph {
 public:
  explicit PlanGraph(const Region& region);

  int hosts() const { return n_; }
  int switches() const { return s_; }
  int free(int h, int s) const { return free_[h * s_ + s]; }
  bool AnyFree(int h) const { return s_ <= 64 ? free_mask_[h] != 0 : AnyFreeSlow(h); }
  // A switch where both hosts have a free port (the one with the most free
  // ports at the scarcer end), or -1.
  int CommonSwitch(int a, int b) const;
  // CommonSwitch(a, b) >= 0, in O(1) for up to 64 switches.
  bool MayConnect(int a, int b) const {
    return s_ <= 64 ? (free_mask_[a] & free_mask_[b]) != 0 : CommonSwitch(a, b) >= 0;
  }
  int count(int a, int b) const { return count_[a * n_ + b]; }
  int count_on(int a, int b, int s) const { return count_s_[(a * n_ + b) * s_ + s]; }
  double circuit_Bps(int a, int b) const { return rate_[a * n_ + b]; }

  void Add(int a, int b, int s);
  // False when no such circuit exists.
  bool Remove(int a, int b, int s);

  const std::vector<CircuitLink>& links(int h) const { return adj_[h]; }
  const Adjacency& adjacency() const { return adj_; }
  const std::vector<HostCircuit>& circuits() const { return circuits_; }

 private:
  void Bump(int a, int b);  // re-derives adj_[a]'s entry for b from the count
  bool AnyFreeSlow(int h) const;
  void SetFree(int h, int s, int delta);

  int n_ = 0;
  int s_ = 0;
  std::vector<int> free_;
  std::vector<uint64_t> free_mask_;  // bit s: host has a free port on switch s (s_ <= 64)
  std::vector<int> count_;
  std::vector<int> count_s_;
  const double* rate_;  // the region's pair_Bps(), which outlives the graph
  Adjacency adj_;
  std::vector<HostCircuit> circuits_;
};

// Host h's time (fluid_model.h) with its circuits changed by up to two
// deltas: `add` gains one circuit to peer add (skip with -1), `remove` loses
// one circuit to peer remove (skip with -1).
double TimeWith(const FluidModel& model, const PlanGraph& g, int h, int add, int remove);

// Per ordered pair: how many circuits of the current topology join it.
std::vector<int> CurrentCounts(const Region& region, const std::vector<PlannedCircuit>& current);

// The paper's greedy (planner.h).
void PaperGreedy(const FluidModel& model, PlanGraph& g);
// The improved planner (planner.h); `current` from CurrentCounts.
void ImprovedPlan(const FluidModel& model, const Region& region, const std::vector<int>& current,
                  const PlannerOptions& options, PlanGraph& g);

// routed_search.cc: first-improvement local search over `g`'s circuits
// (swap two circuits' ends, move one end to a free port, add a circuit),
// each candidate scored by OptimiseRouting(model, ., routing), candidates
// tried in the order of the direct bytes they would put on circuits; at most
// `max_evaluations` routings, none once within 0.1% of `lower_bound` (no
// routing beats it). Returns the routed completion time of `g` as left
// (never worse than at the start).
double RoutedSearch(const FluidModel& model, const RoutingOptions& routing, double lower_bound,
                    int max_evaluations, PlanGraph& g);

struct PortAssignment {
  std::vector<PlannedCircuit> circuits;
  int kept = 0;
  int ports_changed = 0;
};
// Concrete ports for the host-level circuits of `g` (planner.h: kept circuits
// keep their ports; new ones prefer ports freed by dropped circuits).
PortAssignment AssignPorts(const Region& region, const PlanGraph& g,
                           const std::vector<PlannedCircuit>& current);

}  // namespace mixnet::planner::internal
