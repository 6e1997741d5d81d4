// mixnet_planner_bench: how fast the circuit planner decides and how good its
// topologies are by the fluid model, greedy (the paper) against improved, on
// single regions of 8/16/32 hosts and whole clusters of 1024 and 32768 GPUs,
// with uniform, Zipf-skewed and the paper's 8-expert traffic; with --oracle,
// each plan's best routed floor against the oracle's best circuit set on the
// single-region cases of at most 8 hosts. Single-threaded (one core, as the
// targets say).
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <ctime>
#include <iostream>
#include <random>
#include <string>
#include <vector>

#include "CLI/CLI.hpp"
#include "bench/planner_bench/direct_bound.h"
#include "bench/planner_bench/workloads.h"
#include "nlohmann/json.hpp"
#include "runtime/common/status.h"
#include "runtime/planner/cluster_planner.h"
#include "runtime/planner/oracle.h"
#include "runtime/planner/routing.h"

namespace mixnet::bench {
namespace {

using planner::Algorithm;

struct Options {
  FabricParams fabric;
  bool json = false;
  uint64_t seed = 1;
  int samples = 16;         // regions per single-region case (results averaged)
  double min_time_s = 0.2;  // timing: repeat until this much time has passed
  double switch_ms = 25;
  bool relay_scoring = false;
  int local_search_rounds = planner::PlannerOptions{}.local_search_rounds;
  double local_search_budget_us = planner::PlannerOptions{}.local_search_budget_us;
  int routed_search = planner::PlannerOptions{}.routed_search_evaluations;
  double overlap_ms = 0;
  double uses = 1;
  bool from_empty = false;
  bool direct_bound = false;  // also compute the per-host direct-routing bound (slow)
  std::string only;           // run cases whose name contains this
  bool oracle = false;        // (b) of each plan against (c), regions of <= kOracleHosts
};

// --oracle: single-region cases up to this size (one (c) search is about
// 400 LPs; at 16 hosts each LP takes tens of ms).
constexpr int kOracleHosts = 8;

struct CaseSpec {
  std::string name;
  int regions = 1;
  int region_hosts = 8;
  bool cluster = false;  // aggregate by max over regions (else mean)
  Traffic traffic = Traffic::kUniform;
};

struct Row {
  CaseSpec c;
  Algorithm algo;
  double plan_us = 0;
  double completion_ms = 0;
  double relay_ms = 0;
  double initial_ms = 0;
  double bound_ms = 0;
  double direct_bound_ms = 0;  // --direct-bound: no direct-routing plan beats it
  bool direct_bound_exact = true;
  int reconfigured = 0;
  long ports_changed = 0;
  double b_over_c = 0;  // --oracle: mean over regions of (b) of the plan / (c); 0: not run
};

double Seconds(std::chrono::steady_clock::duration d) {
  return std::chrono::duration<double>(d).count();
}

// CPU time of this thread: the "one core" the targets speak of, and steadier
// than wall time on a shared machine.
double ThreadCpuSeconds() {
  timespec ts{};
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
  return static_cast<double>(ts.tv_sec) + ts.tv_nsec * 1e-9;
}

absl::StatusOr<std::vector<Row>> RunCase(const CaseSpec& c, const Options& o) {
  std::mt19937_64 rng(o.seed * 1000003 + std::hash<std::string>{}(c.name));
  ASSIGN_OR_RETURN(planner::ClusterPlanner cp,
                   planner::ClusterPlanner::FromRegions(
                       MakeRegions(c.regions, c.region_hosts, o.fabric), o.fabric.alpha));
  std::vector<TrafficMatrix> demands;
  std::vector<std::vector<planner::PlannedCircuit>> initial;
  std::vector<cluster::CircuitSpec> initial_specs;
  for (const planner::Region& r : cp.regions()) {
    demands.push_back(MakeTraffic(c.traffic, r.hosts(), o.fabric, rng));
    initial.push_back(o.from_empty ? std::vector<planner::PlannedCircuit>{}
                                   : RandomRegular(r, rng));
    for (const planner::PlannedCircuit& pc : initial.back()) initial_specs.push_back(r.ToSpec(pc));
  }
  // --oracle: (c) of every region, once for both algorithms.
  const bool oracle = o.oracle && !c.cluster && c.region_hosts <= kOracleHosts;
  std::vector<double> best_c;
  if (oracle) {
    for (size_t r = 0; r < demands.size(); ++r) {
      ASSIGN_OR_RETURN(
          const planner::BestFloor best,
          planner::SearchBestFloor(demands[r], planner::OracleFabricOf(cp.regions()[r])));
      best_c.push_back(best.floor_s);
    }
  }
  planner::DecideOptions decide;
  decide.switch_s = o.switch_ms / 1e3;
  decide.overlap_s = o.overlap_ms / 1e3;
  decide.uses = o.uses;
  std::vector<Row> rows;
  for (Algorithm algo : {Algorithm::kGreedy, Algorithm::kImproved}) {
    planner::PlannerOptions popt;
    popt.algorithm = algo;
    popt.relay = o.relay_scoring;
    popt.local_search_rounds = o.local_search_rounds;
    popt.local_search_budget_us = o.local_search_budget_us;
    popt.routed_search_evaluations = o.routed_search;
    // Timing: the whole decision, from the live circuits in spec form to the
    // topology to apply, repeated; the median counts.
    std::vector<double> times;
    absl::StatusOr<planner::ClusterDecision> d;
    const auto start = std::chrono::steady_clock::now();
    while (times.size() < 3 || (Seconds(std::chrono::steady_clock::now() - start) < o.min_time_s &&
                                times.size() < 2000)) {
      const double t0 = ThreadCpuSeconds();
      d = cp.Plan(demands, initial_specs, popt, decide);
      times.push_back(ThreadCpuSeconds() - t0);
      if (!d.ok()) return d.status();
    }
    std::nth_element(times.begin(), times.begin() + times.size() / 2, times.end());
    Row row{c, algo};
    row.plan_us = times[times.size() / 2] * 1e6 / (c.cluster ? 1 : c.regions);
    const int n = static_cast<int>(cp.regions().size());
    for (int r = 0; r < n; ++r) {
      const planner::Region& region = cp.regions()[r];
      const planner::RegionPlan& plan = d->regions[r].plan;
      const planner::FluidModel model(demands[r], region.input().eps_Bps);
      const double relay =
          planner::OptimiseRouting(model, region.ToAdjacency(plan.circuits)).completion_s;
      const double vals[4] = {plan.completion_s, relay, plan.current_completion_s,
                              plan.lower_bound_s};
      double* acc[4] = {&row.completion_ms, &row.relay_ms, &row.initial_ms, &row.bound_ms};
      for (int k = 0; k < 4; ++k) {
        *acc[k] = c.cluster ? std::max(*acc[k], vals[k] * 1e3) : *acc[k] + vals[k] * 1e3 / n;
      }
      if (o.direct_bound) {
        const DirectBound db = DirectLowerBound(region, model);
        const double v = db.bound_s * 1e3;
        row.direct_bound_ms =
            c.cluster ? std::max(row.direct_bound_ms, v) : row.direct_bound_ms + v / n;
        row.direct_bound_exact &= db.exact;
      }
      if (oracle && best_c[r] > 0) {
        ASSIGN_OR_RETURN(const double b,
                         planner::InstalledFloor(demands[r], planner::OracleFabricOf(region),
                                                 planner::HostCircuitsOf(region, plan.circuits)));
        row.b_over_c += b / best_c[r] / n;
      }
      row.reconfigured += d->regions[r].decision.reconfigure ? 1 : 0;
      row.ports_changed += plan.ports_changed;
    }
    rows.push_back(row);
  }
  return rows;
}

// A single-region case describes one region (the samples are repeats).
int Hosts(const CaseSpec& c) { return c.cluster ? c.regions * c.region_hosts : c.region_hosts; }

void Print(const std::vector<Row>& rows, const Options& o) {
  if (o.json) {
    for (const Row& r : rows) {
      nlohmann::json j;
      j["case"] = r.c.name;
      j["gpus"] = Hosts(r.c) * o.fabric.gpus_per_host;
      j["hosts"] = Hosts(r.c);
      j["algo"] = std::string(planner::AlgorithmName(r.algo));
      j["plan_us"] = r.plan_us;
      j["completion_ms"] = r.completion_ms;
      j["traffic"] = TrafficName(r.c.traffic);
      j["regions"] = r.c.regions;
      j["region_hosts"] = r.c.region_hosts;
      j["relay_ms"] = r.relay_ms;
      j["initial_ms"] = r.initial_ms;
      j["bound_ms"] = r.bound_ms;
      if (o.direct_bound) {
        j["direct_bound_ms"] = r.direct_bound_ms;
        j["direct_bound_exact"] = r.direct_bound_exact;
      }
      if (r.b_over_c > 0) j["oracle_b_over_c"] = r.b_over_c;
      j["reconfigured_regions"] = r.reconfigured;
      j["ports_changed"] = r.ports_changed;
      j["aggregate"] = r.c.cluster ? "max over regions" : "mean over regions";
      j["plan_us_is"] = r.c.cluster ? "whole cluster" : "per region";
      std::cout << j.dump() << "\n";
    }
    return;
  }
  std::printf("%-22s %6s %5s %-8s %11s %9s %9s %9s %9s %8s %6s%s", "case", "gpus", "hosts", "algo",
              "plan_us", "compl_ms", "relay_ms", "init_ms", "bound_ms", "vs_grdy", "reconf",
              o.direct_bound ? "  dbound_ms" : "");
  std::printf("%s\n", o.oracle ? "      b/c" : "");
  double greedy_ms = 0;
  for (const Row& r : rows) {
    if (r.algo == Algorithm::kGreedy) greedy_ms = r.completion_ms;
    const double vs = greedy_ms > 0 ? (r.completion_ms / greedy_ms - 1) * 100 : 0;
    std::printf("%-22s %6d %5d %-8s %11.1f %9.3f %9.3f %9.3f %9.3f %+7.1f%% %3d/%-3d",
                r.c.name.c_str(), Hosts(r.c) * o.fabric.gpus_per_host, Hosts(r.c),
                std::string(planner::AlgorithmName(r.algo)).c_str(), r.plan_us, r.completion_ms,
                r.relay_ms, r.initial_ms, r.bound_ms, vs, r.reconfigured, r.c.regions);
    if (o.direct_bound) std::printf(" %9.3f%s", r.direct_bound_ms, r.direct_bound_exact ? "" : "*");
    if (r.b_over_c > 0) std::printf(" %8.4f", r.b_over_c);
    std::printf("\n");
  }
  std::printf(
      "\nplan_us: median thread CPU time of the decision (single-region cases: per region; "
      "clusters: whole cluster)\n"
      "compl_ms: fluid model, direct routing (single regions: mean of %d regions; clusters: max)\n"
      "relay_ms: router v2 split with relays; init_ms: the initial random %d-regular topology;\n"
      "bound_ms: every host's bytes over all its NICs; vs_grdy: compl_ms against greedy's\n"
      "dbound_ms (--direct-bound): per-host best under direct routing, ignoring that peers'\n"
      "  ports are shared: no direct-routing plan beats it (*: per-side bound, not enumerated)\n"
      "b/c (--oracle, single regions of <= 8 hosts): the oracle's best routing on the plan's\n"
      "  circuits over its best circuit set (oracle.h (b) / (c)), mean over the regions\n",
      o.samples, o.fabric.alpha);
}

std::vector<CaseSpec> Cases(const Options& o) {
  std::vector<CaseSpec> out;
  for (Traffic t : {Traffic::kUniform, Traffic::kZipf, Traffic::kExpert8}) {
    const std::string tn = TrafficName(t);
    for (int n : {8, 16, 32})
      out.push_back({"region" + std::to_string(n) + "/" + tn, o.samples, n, false, t});
    out.push_back({"cluster1024/" + tn, 16, 8, true, t});
    out.push_back({"cluster32768-r8/" + tn, 512, 8, true, t});
    out.push_back({"cluster32768-r16/" + tn, 256, 16, true, t});
  }
  return out;
}

}  // namespace
}  // namespace mixnet::bench

int main(int argc, char** argv) {
  using namespace mixnet::bench;
  Options o;
  CLI::App app{"mixnet_planner_bench: circuit planner speed and fluid-model quality"};
  app.add_flag("--json", o.json, "One JSON object per line");
  app.add_option("--alpha", o.fabric.alpha, "OCS NICs per host")->capture_default_str();
  app.add_option("--nics", o.fabric.nics, "NICs per host (the rest are EPS)")
      ->capture_default_str();
  app.add_option("--gbps", o.fabric.gbps, "Line rate per NIC, Gb/s")->capture_default_str();
  app.add_option("--gpus-per-host", o.fabric.gpus_per_host)->capture_default_str();
  app.add_option("--bytes-per-host", o.fabric.bytes_per_host,
                 "Bytes each host sends per all-to-all")
      ->capture_default_str();
  app.add_option("--zipf", o.fabric.zipf_s, "Zipf exponent of the skewed workload")
      ->capture_default_str();
  app.add_option("--switch-ms", o.switch_ms, "OCS switching time for Decide")
      ->capture_default_str();
  app.add_option("--samples", o.samples, "Regions per single-region case")->capture_default_str();
  app.add_option("--min-time", o.min_time_s, "Seconds of repetitions per timing")
      ->capture_default_str();
  app.add_option("--seed", o.seed)->capture_default_str();
  app.add_flag("--relay-scoring", o.relay_scoring, "Planner scores plans with relay routing");
  app.add_option("--ls-rounds", o.local_search_rounds,
                 "Local-search rounds of the improved planner")
      ->capture_default_str();
  app.add_option("--ls-budget-us", o.local_search_budget_us,
                 "Local-search time budget per region, us (0: rounds only)")
      ->capture_default_str();
  app.add_option("--routed-search", o.routed_search,
                 "With --relay-scoring: relay splits the routed search may evaluate per region "
                 "(0: none)")
      ->check(CLI::NonNegativeNumber)
      ->capture_default_str();
  app.add_option("--overlap-ms", o.overlap_ms, "Switching time hidden behind compute (Decide)")
      ->capture_default_str();
  app.add_option("--uses", o.uses, "All-to-alls served per topology (Decide)")
      ->capture_default_str();
  app.add_flag("--from-empty", o.from_empty,
               "Start from no circuits instead of the paper's random alpha-regular topology");
  app.add_option("--only", o.only, "Run the cases whose name contains this");
  app.add_flag("--direct-bound", o.direct_bound,
               "Also report the per-host direct-routing lower bound (slow)");
  app.add_flag("--oracle", o.oracle,
               "Single regions of <= 8 hosts: each plan's best routed floor (the oracle's LP) "
               "over the oracle's best circuit set (slow: about 1 s per region)");
  CLI11_PARSE(app, argc, argv);
  if (o.fabric.alpha < 1 || o.fabric.alpha > o.fabric.nics || o.samples < 1) {
    std::cerr << "mixnet_planner_bench: need 1 <= alpha <= nics and samples >= 1\n";
    return 2;
  }
  std::vector<Row> rows;
  for (const CaseSpec& c : Cases(o)) {
    if (!o.only.empty() && c.name.find(o.only) == std::string::npos) continue;
    absl::StatusOr<std::vector<Row>> r = RunCase(c, o);
    if (!r.ok()) {
      std::cerr << "mixnet_planner_bench: " << c.name << ": " << r.status() << "\n";
      return 1;
    }
    rows.insert(rows.end(), r->begin(), r->end());
    if (o.json) {
      Print(*r, o);
      rows.clear();
    }
  }
  if (!o.json) Print(rows, o);
  return 0;
}
