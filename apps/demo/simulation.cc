// The simulator's prediction of a demo phase (see simulation.h).
#include "apps/demo/simulation.h"

#include "absl/strings/str_cat.h"
#include "runtime/common/status.h"
#include "sim/emulated_cluster.h"

namespace mixnet::demo {
namespace {

absl::Status Simulate(const PhaseSimulation& p, const cluster::ClusterSpec& spec,
                      const Workload& w, PhaseResult& r) {
  const int n = w.hosts();
  TrafficMatrix demand(n);
  sim::EmulatedRouting routing;
  if (p.kind == FabricKind::kStatic && p.router == "v2" &&
      p.static_demand.size() == static_cast<size_t>(n) * n) {
    for (int s = 0; s < n; ++s)
      for (int d = 0; d < n; ++d) demand.at(s, d) = p.static_demand[s * n + d];
    routing.version = 2;
    routing.relay = p.relay;
    routing.demand = &demand;
  }
  router::Topology topology{.epoch = 0, .circuits = spec.circuits};
  ASSIGN_OR_RETURN(std::vector<router::RouteTable> tables,
                   sim::EmulatedRouteTables(spec, topology, routing));
  sim::EmulatedFabric fabric;
  fabric.burst_s = p.burst_ms / 1000;
  fabric.wire_per_payload = sim::kTcpFrameOverhead;  // the workers' transport is TCP
  if (p.kind == FabricKind::kOversub) {
    fabric.leaf_hosts = p.leaf_hosts;
    fabric.leaf_uplink_Bps = p.uplink_gbps * 1e9 / 8;
  }
  for (size_t it = 0; it < r.iterations.size(); ++it) {
    double compute_ms = 0, alltoall_ms = 0;
    for (const StepItem& item :
         IterationSteps(static_cast<int64_t>(it), p.iterations, w.layers(), p.compute)) {
      if (item.kind == StepItem::Kind::kCompute) compute_ms += item.compute_ms;
      if (item.kind != StepItem::Kind::kAlltoall) continue;
      TrafficMatrix m = w.DispatchMatrix(static_cast<int64_t>(it), item.layer);
      if (item.transpose) m = m.Transposed();
      ASSIGN_OR_RETURN(sim::EmulatedPrediction a, sim::PredictAlltoall(spec, tables, m, fabric));
      alltoall_ms += 1000 * a.time_s;
    }
    r.iterations[it].simulated_ms = compute_ms + alltoall_ms;
    r.iterations[it].simulated_alltoall_ms = alltoall_ms;
  }
  return absl::OkStatus();
}

}  // namespace

void SimulatePhase(const PhaseSimulation& p, const cluster::ClusterSpec& spec, const Workload& w,
                   PhaseResult& r) {
  r.simulated = false;
  if (p.loopback) {
    r.simulated_why = "loopback: no link rates to simulate";
    return;
  }
  if (p.kind == FabricKind::kMixnet) {
    r.simulated_why = "mixnet: not simulated yet (its circuits follow the controller's rounds)";
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
