// The figures of mixnet_route_bench from its workers' records: per case and
// router the median measured all-to-all time (each iteration's time is the
// slowest rank's), the floor (demo::BoundPhase over every host's NIC
// counters: the busiest link-direction's bytes, less its tbf bucket, over
// its rate) and the busiest link's utilisation (floor / time), and the
// fluid model's prediction scaled for the bytes the NICs actually carried
// (wire factor = all NICs' transmitted bytes / the payload: headers, ACKs,
// the protocol's control frames); then the run's verdicts against the
// targets of issue 21 (T2-3). Pure functions; any thread.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "apps/demo/counters.h"
#include "bench/route_bench/link_sampler.h"
#include "nlohmann/json.hpp"

namespace mixnet::bench {

// One rank's record of one all-to-all (a line of its result file):
//   {"router", "iteration", "warm", "ms", "nics": {ifname: [rx, tx]}, "retransmits",
//    "bytes_bad", "cpu": [idle, total] (rank 0 only: the machine's jiffies over the all-to-all)}
struct RankRecord {
  int rank = 0;
  std::string router;  // "v1" or "v2"
  int iteration = 0;   // 0-based, warm-up included
  // Each iteration runs each router twice in a row: false for the first call
  // (the router's connections idle since its previous pair, the other
  // router's two calls: "cold"), true for the second ("warm").
  bool warm = true;
  double ms = 0;
  std::map<std::string, demo::ByteCounters> nics;  // deltas over the all-to-all
  uint64_t retransmits = 0;
  uint64_t bytes_bad = 0;
  uint64_t cpu_idle = 0, cpu_total = 0;  // jiffies, all CPUs (0, 0: not sampled)
  // When each NIC moved its bytes, ms from the start ("link_spans": {ifname:
  // [[rx start, rx end, rx bytes], [tx ...]]}, 1% and 99% of the bytes; empty
  // unless the worker sampled, --link-ends-us).
  std::map<std::string, LinkEnd> link_ends;
};
nlohmann::json RecordToJson(const RankRecord& r);
// InvalidArgument naming the missing or mistyped field.
absl::StatusOr<RankRecord> RecordFromJson(const nlohmann::json& j, int rank);

// A link's rate (bytes/s per direction) and tbf bucket, by "<host>/<nic>".
struct LinkRate {
  double rate_Bps = 0;
  uint64_t burst_bytes = 0;
};

// Every figure but the cold ones is over the warm calls of the timed
// iterations (what the fluid model describes: connections in use).
struct RouterFigures {
  std::string case_name;
  std::string router;
  int iterations = 0;      // timed
  double measured_ms = 0;  // median over timed iterations' warm calls
  double measured_min_ms = 0, measured_max_ms = 0;
  std::vector<double> iterations_ms;  // each timed iteration's slowest rank, in order
  // The cold calls (the first of each pair: the connections idle for the
  // other router's two calls, so TCP restarts their windows): median and
  // each timed iteration's, in order. Not in the model; reported beside.
  double cold_ms = 0;
  std::vector<double> cold_iterations_ms;
  double floor_ms = 0;     // median of the iterations' floors
  double utilisation = 0;  // median of the iterations' floor / time
  std::string busiest;     // busiest link-direction of the median iteration
  double model_ms = 0;     // fluid model, payload bytes
  // Median of NIC tx bytes / the payload bytes the hops carry (a relayed byte
  // counts once per hop): frames and ACKs per payload byte on a link.
  double wire_factor = 0;
  double predicted_ms = 0;  // model_ms x wire_factor
  // The simulator's emulation mode (sim/emulated_cluster.h): the routed flows
  // max-min fair over the links, frames, ACKs and relays' store and forward.
  double simulated_ms = 0;
  uint64_t retransmits = 0;  // all ranks, timed iterations
  uint64_t bytes_bad = 0;    // all ranks, all iterations
  double cpu_idle = -1;      // idle share of all CPUs over the timed all-to-alls (-1: unknown)
};

// `records`: every rank's records of one router (warm-up included; those
// with iteration < warmup are left out of the figures), warm and cold calls.
// `hosts[rank]` names the host of each rank for the link names. DataLoss when
// a rank lacks a timed call another has, or no warm call is timed. `hop_bytes`: the
// payload bytes the links carry, relayed bytes twice (the model's time is
// the payload's; the links carry frames and ACKs besides).
absl::StatusOr<RouterFigures> Summarise(const std::string& case_name, const std::string& router,
                                        const std::vector<RankRecord>& records, int warmup,
                                        const std::vector<std::string>& hosts,
                                        const std::map<std::string, LinkRate>& rates,
                                        uint64_t hop_bytes, double model_s);

// The lower median (a value that was measured); 0 for none.
double LowerMedian(std::vector<double> v);

// One case: both routers' figures on the same circuits.
struct CaseFigures {
  std::string case_name;
  std::string what;
  int circuits = 0;
  double lower_bound_ms = 0;
  // The oracle's floors, payload bytes (route_plan.h): on the case's
  // circuits, on the best circuit set, and the bound under the latter.
  double oracle_installed_ms = 0, oracle_best_ms = 0, oracle_bound_ms = 0;
  double oracle_dataplane_ms = 0;  // (b) on the data plane's paths (route_plan.h)
  double v2_split_ms = 0;          // one host's v2 table (the route solver's decision time)
  RouterFigures v1, v2;
  double ratio() const { return v1.measured_ms > 0 ? v2.measured_ms / v1.measured_ms : 0; }
};

// The verdicts of issue 21 (T2-3, item 6) over the cases that ran.
struct Verdicts {
  // Link-bound as T2-1 defines it: every row's busiest link at >= 80% of
  // its rate; not link-bound (cpu_bound) when any row is below 60%.
  bool link_bound = false;
  bool cpu_bound = false;
  double min_utilisation = 0;
  // v2 measured <= 0.85 x v1 on partner-0.5 and expert8 (those that ran).
  std::map<std::string, double> gain_ratio;
  bool gain_met = true;
  // No case slower under v2 than v1 by more than 3%.
  double worst_ratio = 0;
  std::string worst_case;
  bool no_regression = true;
  // measured within +-15% of the prediction on every row.
  double worst_model_error = 0;  // measured / predicted - 1 of the row farthest from 0
  std::string worst_model_row;   // "case router"
  bool model_met = true;
  // The same for the cold calls: reported, not a target (the model has no
  // restarted windows).
  double worst_cold_error = 0;
  std::string worst_cold_row;
};
inline constexpr double kGainTarget = 0.85;
inline constexpr double kRegressionTarget = 1.03;
inline constexpr double kModelTolerance = 0.15;
Verdicts Judge(const std::vector<CaseFigures>& cases);

}  // namespace mixnet::bench
