// The simulator's prediction of a demo phase (see simulation.h).
#include "apps/demo/simulation.h"

#include <algorithm>
#include <map>
#include <vector>

#include "absl/strings/str_cat.h"
#include "runtime/common/settings.h"
#include "runtime/common/status.h"
#include "runtime/planner/lp_routing.h"
#include "runtime/router/route_table_v2.h"
#include "sim/emulated_cluster.h"

namespace mixnet::demo {
namespace {

// The route tables of one topology and plan, rebuilt only when they change.
class TableCache {
 public:
  TableCache(const cluster::ClusterSpec& spec, planner::RoutingFunction split)
      : spec_(spec), split_(std::move(split)) {}
  absl::StatusOr<const std::vector<router::RouteTable>*> For(const A2aRouting& r) {
    if (valid_ && r.epoch == epoch_ && r.has_plan == has_plan_ &&
        (!r.has_plan || (r.plan.bytes == plan_.bytes && r.plan.relay == plan_.relay))) {
      return &tables_;
    }
    sim::EmulatedRouting routing;
    TrafficMatrix demand;
    if (r.has_plan) {
      ASSIGN_OR_RETURN(demand, router::PlanDemand(spec_, r.plan));
      routing.version = 2;
      routing.relay = r.plan.relay;
      routing.relay_chunk_bytes = static_cast<double>(GetSettings().relay_chunk_bytes);
      routing.demand = &demand;
      routing.split = split_;
    }
    router::Topology topology{.epoch = r.epoch, .circuits = r.circuits};
    ASSIGN_OR_RETURN(tables_, sim::EmulatedRouteTables(spec_, topology, routing));
    valid_ = true;
    epoch_ = r.epoch;
    has_plan_ = r.has_plan;
    plan_ = r.plan;
    return &tables_;
  }

 private:
  const cluster::ClusterSpec& spec_;
  const planner::RoutingFunction split_;
  bool valid_ = false;
  uint64_t epoch_ = 0;
  bool has_plan_ = false;
  router::RoutingPlan plan_;
  std::vector<router::RouteTable> tables_;
};

absl::Status Simulate(const PhaseSimulation& p, const cluster::ClusterSpec& spec, const Workload& w,
                      PhaseResult& r) {
  const int n = w.hosts();
  sim::EmulatedFabric fabric;
  fabric.burst_s = p.burst_ms / 1000;
  fabric.wire_per_payload = sim::kTcpFrameOverhead;  // the workers' transport is TCP
  fabric.ack_per_payload = sim::kTcpAckPerPayload;
  fabric.relay_chunk_bytes = static_cast<double>(GetSettings().relay_chunk_bytes);  // the workers'
  if (p.kind == FabricKind::kOversub) {
    fabric.leaf_hosts = p.leaf_hosts;
    fabric.leaf_uplink_Bps = p.uplink_gbps * 1e9 / 8;
  }
  // Every fabric but mixnet runs one topology and routing all along: the
  // spec's circuits (static only), split by static's planned demand under v2.
  A2aRouting fixed;
  fixed.circuits = spec.circuits;
  if (p.kind == FabricKind::kStatic && p.router == "v2" &&
      p.static_demand.size() == static_cast<size_t>(n) * n) {
    fixed.has_plan = true;
    fixed.plan.relay = p.relay;
    for (const cluster::HostSpec& h : spec.hosts) fixed.plan.hosts.push_back(h.name);
    fixed.plan.bytes = p.static_demand;
  }
  // The workers' split (the same function they ran).
  ASSIGN_OR_RETURN(const planner::RouteSolver solver, planner::ParseRouteSolver(p.route_solver));
  TableCache tables(spec, planner::RoutingFunctionFor(solver));
  TableCache reverse_tables(spec, planner::RoutingFunctionFor(solver));  // the plans' transposes
  uint64_t last_epoch = 0;
  bool first = true;
  // A round's cost over the switching: the warm-up sweep's (a calibration
  // measured before the timed iterations), else this run's own (a replay).
  const bool calibrated = r.warm_rounds > 0;
  const double overhead_ms = calibrated ? r.warm_round_overhead_ms : r.round_overhead_ms;
  r.simulated_round_overhead_ms = 0;
  r.simulated_rounds.clear();
  if (p.kind == FabricKind::kMixnet && (calibrated || r.round_samples > 0)) {
    r.simulated_round_overhead_ms = overhead_ms;
    r.simulated_rounds = calibrated ? "warm-up sweep" : "replay";
  }
  // The window a round hides in: the compute since the plan request that
  // started it (across an iteration's end for the next iteration's first
  // layer).
  PlanWindow window;
  for (size_t it = 0; it < r.iterations.size(); ++it) {
    r.iterations[it].each_simulated_alltoall_ms.clear();
    double compute_ms = 0, alltoall_ms = 0, reconfig_ms = 0;
    int seq = 0;
    for (const StepItem& item : IterationSteps(static_cast<int64_t>(it), p.iterations, w.layers(),
                                               p.compute, p.replan_combine)) {
      window.Step(item);
      if (item.kind == StepItem::Kind::kCompute) compute_ms += item.compute_ms;
      if (item.kind != StepItem::Kind::kAlltoall) continue;
      const A2aRouting* route = &fixed;
      if (p.kind == FabricKind::kMixnet) {
        auto found = r.routing.find({static_cast<int64_t>(it), seq});
        if (found == r.routing.end()) {
          return absl::DataLossError(
              absl::StrCat("no routing recorded for all-to-all ", seq, " of iteration ", it));
        }
        route = &found->second;
        // A new epoch: its round (the switching and the controller's
        // measured protocol time), less the compute window it overlapped.
        if (!first && route->epoch != last_epoch) {
          reconfig_ms += std::max(0.0, p.switch_ms + overhead_ms - window.ms());
        }
        last_epoch = route->epoch;
        first = false;
      }
      ++seq;
      ASSIGN_OR_RETURN(const std::vector<router::RouteTable>* t, tables.For(*route));
      TrafficMatrix m = w.DispatchMatrix(static_cast<int64_t>(it), item.layer);
      if (item.transpose) m = m.Transposed();
      std::vector<router::RouteTable> chosen;
      if (route->has_plan) {
        // Each host routes by the plan or its reverse, whichever its counts
        // weigh more on, as the workers do (Communicator::BeginTransfer).
        A2aRouting reverse = *route;
        const size_t k = route->plan.hosts.size();
        for (size_t i = 0; i < k; ++i) {
          for (size_t j = 0; j < k; ++j)
            reverse.plan.bytes[i * k + j] = route->plan.bytes[j * k + i];
        }
        ASSIGN_OR_RETURN(const std::vector<router::RouteTable>* rt, reverse_tables.For(reverse));
        ASSIGN_OR_RETURN(const TrafficMatrix plan, router::PlanDemand(spec, route->plan));
        chosen = *t;
        const int k_hosts = std::min(n, plan.hosts());
        for (int h = 0; h < k_hosts; ++h) {
          std::vector<double> sent(k_hosts, 0), received(k_hosts, 0), to(k_hosts, 0),
              from(k_hosts, 0);
          for (int o = 0; o < k_hosts; ++o) {
            if (o == h) continue;
            sent[o] = m.at(h, o);
            received[o] = m.at(o, h);
            to[o] = plan.at(h, o);
            from[o] = plan.at(o, h);
          }
          if (router::PrefersReverse(sent, received, to, from)) chosen[h] = (*rt)[h];
        }
        t = &chosen;
      }
      ASSIGN_OR_RETURN(sim::EmulatedPrediction a, sim::PredictAlltoall(spec, *t, m, fabric));
      alltoall_ms += 1000 * a.time_s;
      r.iterations[it].each_simulated_alltoall_ms.push_back(1000 * a.time_s);
    }
    r.iterations[it].simulated_ms = compute_ms + alltoall_ms + reconfig_ms;
    r.iterations[it].simulated_alltoall_ms = alltoall_ms;
    r.iterations[it].simulated_reconfig_ms = reconfig_ms;
  }
  return absl::OkStatus();
}

}  // namespace

PhaseSimulation SimulationOf(FabricKind kind, const RunConfig& c) {
  PhaseSimulation sim;
  sim.kind = kind;
  sim.compute = c.compute;
  sim.iterations = c.iterations;
  sim.router = c.router;
  sim.relay = c.relay;
  sim.route_solver = c.route_solver;
  sim.replan_combine = c.replan_combine;
  sim.static_demand = c.static_demand;
  sim.leaf_hosts = c.leaf_hosts;
  sim.uplink_gbps = c.uplink_gbps;
  sim.burst_ms = c.burst_ms;
  sim.switch_ms = c.switch_ms;
  sim.loopback = c.loopback;
  return sim;
}

void SimulatePhase(const PhaseSimulation& p, const cluster::ClusterSpec& spec, const Workload& w,
                   PhaseResult& r) {
  r.simulated = false;
  if (p.loopback) {
    r.simulated_why = "loopback: no link rates to simulate";
    return;
  }
  if (p.kind == FabricKind::kMixnet && r.routing.empty()) {
    r.simulated_why = "mixnet: the workers recorded no routing to replay";
    return;
  }
  absl::Status s = Simulate(p, spec, w, r);
  if (!s.ok()) {
    r.simulated_why = absl::StrCat("simulation failed: ", s.ToString());
    return;
  }
  r.simulated = true;
}

}  // namespace mixnet::demo
