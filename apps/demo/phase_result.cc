// Reading a phase's result files (see phase_result.h).
#include "apps/demo/phase_result.h"

#include <algorithm>
#include <fstream>
#include <iterator>
#include <string>
#include <tuple>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "emulation/links.h"
#include "nlohmann/json.hpp"

namespace mixnet::demo {
namespace {

struct A2aAgg {
  double ms = 0;
  std::vector<LinkLoad> links;
  uint64_t cpu_idle = 0, cpu_total = 0;
};

// Rates (bytes/s) and tbf buckets of a host's NICs or of the uplinks.
struct Rates {
  std::map<std::string, double> rate;
  std::map<std::string, uint64_t> burst;
  void Add(const std::string& name, double gbps, double burst_ms) {
    rate[name] = gbps * 1e9 / 8;
    absl::StatusOr<emulation::TbfParams> p = emulation::TbfFor(gbps, burst_ms);
    burst[name] = p.ok() ? p->burst_bytes : 0;
  }
};

void AddLinks(const nlohmann::json& j, const std::string& prefix, const Rates& rates,
              std::vector<LinkLoad>& out) {
  if (!j.is_object()) return;
  for (auto it = j.begin(); it != j.end(); ++it) {
    const auto rate = rates.rate.find(it.key());
    const auto burst = rates.burst.find(it.key());
    LinkLoad l;
    l.name = absl::StrCat(prefix, "/", it.key());
    l.rate_bytes_per_s = rate == rates.rate.end() ? 0 : rate->second;
    l.burst_bytes = burst == rates.burst.end() ? 0 : burst->second;
    l.rx_bytes = it.value().at(0).get<uint64_t>();
    l.tx_bytes = it.value().at(1).get<uint64_t>();
    out.push_back(std::move(l));
  }
}

}  // namespace

const PhaseResult* FindPhase(const std::vector<PhaseResult>& phases, const std::string& fabric) {
  for (const PhaseResult& p : phases) {
    if (p.fabric == fabric && p.status.ok()) return &p;
  }
  return nullptr;
}

double PhaseResult::Mean(double IterationStats::*field, size_t from) const {
  if (iterations.size() <= from) return 0;
  double s = 0;
  for (size_t i = from; i < iterations.size(); ++i) s += iterations[i].*field;
  return s / static_cast<double>(iterations.size() - from);
}

PhaseResult::AfterRound PhaseResult::AfterRoundAgainstLater() const {
  AfterRound out;
  double m[2] = {0, 0}, s[2] = {0, 0};
  bool have_prev = false;
  uint64_t prev = 0;
  for (size_t it = 0; it < iterations.size(); ++it) {
    const IterationStats& st = iterations[it];
    for (size_t k = 0; k < st.each_alltoall_ms.size(); ++k) {
      auto found = routing.find({static_cast<int64_t>(it), static_cast<int>(k)});
      if (found == routing.end()) continue;
      const uint64_t epoch = found->second.epoch;
      const bool after_round = have_prev && epoch != prev;
      const bool counted = have_prev && k < st.each_simulated_alltoall_ms.size() &&
                           st.each_simulated_alltoall_ms[k] > 0;
      have_prev = true;
      prev = epoch;
      if (!counted) continue;
      m[after_round ? 0 : 1] += st.each_alltoall_ms[k];
      s[after_round ? 0 : 1] += st.each_simulated_alltoall_ms[k];
      ++(after_round ? out.after_round_n : out.later_n);
    }
  }
  if (s[0] > 0) out.after_round = m[0] / s[0];
  if (s[1] > 0) out.later = m[1] / s[1];
  return out;
}

std::string PhaseResult::BusiestLink() const {
  std::string best;
  int n = 0;
  for (const auto& [link, count] : busiest) {
    if (count > n) {
      best = link;
      n = count;
    }
  }
  return best;
}

absl::Status ReadResults(const RunConfig& c, const cluster::ClusterSpec& spec, double uplink_gbps,
                         PhaseResult& r) {
  const int hosts = static_cast<int>(spec.hosts.size());
  std::map<std::pair<int64_t, int>, A2aAgg> a2a;  // (iteration, seq)
  // (iteration, layer, pass, the combine's own plan)
  std::map<std::tuple<int64_t, int, int, bool>, double> waits;
  std::map<std::tuple<int64_t, int, int, bool>, bool> switched, timeouts;
  std::vector<IterationStats> iters(c.iterations);
  std::vector<int> iter_seen(c.iterations, 0);
  uint64_t cpu_idle = 0, cpu_total = 0;
  Rates uplink_rates;
  for (const std::string& u : c.uplinks) uplink_rates.Add(u, uplink_gbps, c.burst_ms);
  for (int rank = 0; rank < hosts; ++rank) {
    const cluster::HostSpec& h = spec.hosts[rank];
    Rates rates;
    for (const cluster::NicSpec& n : h.nics) rates.Add(n.name, n.gbps, c.burst_ms);
    std::ifstream in(c.ResultFile(rank));
    if (!in) return absl::NotFoundError(absl::StrCat(c.fabric, ": no results from rank ", rank));
    std::string line;
    while (std::getline(in, line)) {
      nlohmann::json j = nlohmann::json::parse(line, nullptr, false);
      if (!j.is_object()) continue;
      const std::string type = j.value("type", "");
      const int64_t it = j.value("iteration", int64_t{0});
      if (type == "final") {
        r.retransmits += j.value("retransmits", uint64_t{0});
        r.tcp_opens += j.value("tcp_opens", uint64_t{0});
        r.tcp_resets += j.value("tcp_resets", uint64_t{0});
        if (j.contains("warm") && j["warm"].is_object()) {
          const bool done = j["warm"].value("complete", false);
          r.warm_complete = r.warm_complete < 0 ? done : (r.warm_complete != 0 && done);
        }
        if (j.contains("agent")) {
          const nlohmann::json& a = j["agent"];
          r.agent_commits_max =
              std::max<uint64_t>(r.agent_commits_max, a.value("commits", uint64_t{0}));
          for (auto [key, field] :
               {std::pair{"prepare_p50_ms", &PhaseResult::worker_prepare_p50_ms},
                std::pair{"prepare_p99_ms", &PhaseResult::worker_prepare_p99_ms},
                std::pair{"commit_p50_ms", &PhaseResult::worker_commit_p50_ms},
                std::pair{"commit_p99_ms", &PhaseResult::worker_commit_p99_ms}}) {
            r.*field = std::max(r.*field, a.value(key, 0.0));
          }
        }
      } else if (type == "a2a") {
        A2aAgg& g = a2a[{it, j.value("seq", 0)}];
        if (rank == 0 && j.contains("circuits")) {
          // Written by this program's workers; a malformed entry is skipped
          // (the simulation of that all-to-all then says so).
          A2aRouting route;
          route.epoch = j.value("epoch", uint64_t{0});
          bool good = j["circuits"].is_array();
          if (good) {
            for (const nlohmann::json& c : j["circuits"]) {
              good = good && c.is_array() && c.size() == 3 && c[0].is_string() &&
                     c[1].is_number_integer() && c[2].is_number_integer();
              if (!good) break;
              route.circuits.push_back(
                  cluster::CircuitSpec{c[0].get<std::string>(), c[1].get<int>(), c[2].get<int>()});
            }
          }
          if (good && j.contains("plan")) {
            const nlohmann::json& p = j["plan"];
            good = p.is_object() && p.contains("hosts") && p["hosts"].is_array() &&
                   p.contains("bytes") && p["bytes"].is_array();
            if (good) {
              route.has_plan = true;
              route.plan.relay = p.value("relay", false);
              for (const nlohmann::json& x : p["hosts"]) {
                if (x.is_string()) route.plan.hosts.push_back(x.get<std::string>());
              }
              for (const nlohmann::json& x : p["bytes"]) {
                if (x.is_number()) route.plan.bytes.push_back(x.get<double>());
              }
            }
          }
          if (good) r.routing[{it, j.value("seq", 0)}] = std::move(route);
        }
        g.ms = std::max(g.ms, j.value("ms", 0.0));
        AddLinks(j["nics"], h.name, rates, g.links);
        if (j.contains("uplinks")) AddLinks(j["uplinks"], "eps", uplink_rates, g.links);
        if (j.contains("cpu")) {
          cpu_idle += j["cpu"].at(0).get<uint64_t>();
          cpu_total += j["cpu"].at(1).get<uint64_t>();
        }
        r.bytes_verified += j.value("bytes_verified", uint64_t{0});
        r.bytes_bad += j.value("bytes_bad", uint64_t{0});
        const double done_ms = j.value("t_end_ms", 0.0);
        if (r.controller_killed && done_ms > r.outage_from_ms && done_ms < r.outage_to_ms) {
          ++r.layers_during_outage;
        }
      } else if (type == "await") {
        const auto key =
            std::make_tuple(it, j.value("layer", 0), j.value("pass", 0), j.value("combine", false));
        double& w = waits[key];
        w = std::max(w, j.value("waited_ms", 0.0));
        switched[key] = switched[key] || j.value("reconfigure", false);
        timeouts[key] = timeouts[key] || j.value("timed_out", false);
      } else if (type == "iteration" && it >= 0 && it < c.iterations) {
        iters[it].wall_ms = std::max(iters[it].wall_ms, j.value("wall_ms", 0.0));
        iters[it].compute_ms = std::max(iters[it].compute_ms, j.value("compute_ms", 0.0));
        ++iter_seen[it];
      }
    }
  }
  for (const auto& [key, g] : a2a) {
    if (key.first < 0 || key.first >= c.iterations) continue;
    const PhaseBound b = BoundPhase(g.links, g.ms);
    iters[key.first].alltoall_ms += g.ms;
    iters[key.first].each_alltoall_ms.push_back(g.ms);  // the map is in (iteration, seq) order
    iters[key.first].floor_ms += b.floor_ms;
    r.bound.Add(b, g.ms);
    if (!b.busiest.empty()) ++r.busiest[b.busiest];
  }
  for (const auto& [key, w] : waits) {
    const int64_t it = std::get<0>(key);
    if (it >= 0 && it < c.iterations) iters[it].loss_ms += w;
    ++r.plan_waits;
    r.plans_switched += switched[key] ? 1 : 0;
    r.plan_timeouts += timeouts[key] ? 1 : 0;
  }
  if (cpu_total > 0) r.cpu_idle = static_cast<double>(cpu_idle) / static_cast<double>(cpu_total);
  r.iterations = std::move(iters);
  // mixnet: the controller's round times, when the orchestrator wrote them
  // (runs kept before they were recorded have none: round_samples stays 0).
  if (std::ifstream ct(c.results_dir + "/" + kControllerTimesFile); ct) {
    std::string text((std::istreambuf_iterator<char>(ct)), std::istreambuf_iterator<char>());
    nlohmann::json j = nlohmann::json::parse(text, nullptr, false);
    if (!j.is_object()) {
      return absl::DataLossError(
          absl::StrCat(c.results_dir, "/", kControllerTimesFile, ": not a JSON object"));
    }
    r.round_ms = j.value("round_ms", 0.0);
    r.round_overhead_ms = j.value("round_overhead_ms", 0.0);
    r.round_samples = j.value("round_samples", int64_t{0});
    r.warm_rounds = j.value("warm_rounds", int64_t{0});
    r.warm_round_overhead_ms = j.value("warm_round_overhead_ms", 0.0);
  }
  const int per_iteration = 4 * c.workload.layers;
  if (static_cast<int64_t>(a2a.size()) != c.iterations * per_iteration) {
    return absl::DataLossError(absl::StrCat(c.fabric, ": results for ", a2a.size(), " of ",
                                            c.iterations * per_iteration, " all-to-alls"));
  }
  for (int64_t it = 0; it < c.iterations; ++it) {
    if (iter_seen[it] != hosts) {
      return absl::DataLossError(absl::StrCat(c.fabric, ": iteration ", it, " reported by ",
                                              iter_seen[it], " of ", hosts, " ranks"));
    }
  }
  return absl::OkStatus();
}

void RecordWorkerError(const std::string& path, int rank, const absl::Status& status) {
  std::ofstream out(path, std::ios::app);
  out << nlohmann::json{{"type", "error"},
                        {"rank", rank},
                        {"t_ms", absl::ToUnixMicros(absl::Now()) / 1000.0},
                        {"status", status.ToString()}}
             .dump()
      << "\n";
}

std::string FirstFailure(const RunConfig& c, int hosts) {
  struct Err {
    double t = 0;
    int rank = 0;
    std::string status;
  };
  std::vector<Err> errs;
  for (int rank = 0; rank < hosts; ++rank) {
    std::ifstream in(c.ResultFile(rank));
    std::string line;
    while (std::getline(in, line)) {
      nlohmann::json j = nlohmann::json::parse(line, nullptr, false);
      if (!j.is_object() || j.value("type", "") != "error") continue;
      errs.push_back({j.value("t_ms", 0.0), rank, j.value("status", "")});
    }
  }
  if (errs.empty()) return "";
  std::sort(errs.begin(), errs.end(), [](const Err& a, const Err& b) { return a.t < b.t; });
  std::string out = absl::StrCat("first failure: rank ", errs[0].rank, ": ", errs[0].status);
  for (size_t i = 1; i < errs.size() && i < 4; ++i) {
    absl::StrAppendFormat(&out, "; then rank %d (+%.0f ms): %s", errs[i].rank,
                          errs[i].t - errs[0].t, errs[i].status);
  }
  if (errs.size() > 4) absl::StrAppend(&out, "; and ", errs.size() - 4, " more");
  return out;
}

}  // namespace mixnet::demo
