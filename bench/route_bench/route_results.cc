// Figures and verdicts of mixnet_route_bench (see route_results.h).
#include "bench/route_bench/route_results.h"

#include <algorithm>
#include <cmath>

#include "absl/strings/str_cat.h"
#include "apps/demo/accounting.h"
#include "runtime/common/status.h"

namespace mixnet::bench {

nlohmann::json RecordToJson(const RankRecord& r) {
  nlohmann::json j = {{"router", r.router},
                      {"iteration", r.iteration},
                      {"warm", r.warm},
                      {"ms", r.ms},
                      {"nics", demo::CountersToJson(r.nics)},
                      {"retransmits", r.retransmits},
                      {"bytes_bad", r.bytes_bad}};
  if (r.cpu_total > 0) j["cpu"] = {r.cpu_idle, r.cpu_total};
  for (const auto& [nic, e] : r.link_ends) {
    j["link_spans"][nic] = {{e.rx.start_ms, e.rx.end_ms, e.rx.bytes},
                            {e.tx.start_ms, e.tx.end_ms, e.tx.bytes}};
  }
  return j;
}

absl::StatusOr<RankRecord> RecordFromJson(const nlohmann::json& j, int rank) {
  const std::string what = absl::StrCat("rank ", rank, " record ", j.dump().substr(0, 200));
  for (const char* k : {"router", "iteration", "warm", "ms", "nics", "retransmits", "bytes_bad"}) {
    if (!j.is_object() || !j.contains(k)) {
      return absl::InvalidArgumentError(absl::StrCat(what, ": no field '", k, "'"));
    }
  }
  if (!j["router"].is_string() || !j["iteration"].is_number_integer() || !j["warm"].is_boolean() ||
      !j["ms"].is_number() || !j["retransmits"].is_number_unsigned() ||
      !j["bytes_bad"].is_number_unsigned()) {
    return absl::InvalidArgumentError(absl::StrCat(what, ": a field has the wrong type"));
  }
  RankRecord r;
  r.rank = rank;
  r.router = j["router"].get<std::string>();
  r.iteration = j["iteration"].get<int>();
  r.warm = j["warm"].get<bool>();
  r.ms = j["ms"].get<double>();
  r.retransmits = j["retransmits"].get<uint64_t>();
  r.bytes_bad = j["bytes_bad"].get<uint64_t>();
  if (j.contains("cpu")) {
    const nlohmann::json& c = j["cpu"];
    if (!c.is_array() || c.size() != 2 || !c[0].is_number_unsigned() ||
        !c[1].is_number_unsigned()) {
      return absl::InvalidArgumentError(absl::StrCat(what, ": 'cpu' is not [idle, total]"));
    }
    r.cpu_idle = c[0].get<uint64_t>();
    r.cpu_total = c[1].get<uint64_t>();
  }
  absl::StatusOr<std::map<std::string, demo::ByteCounters>> nics =
      demo::CountersFromJson(j["nics"]);
  if (!nics.ok()) return Annotate(nics.status(), what);
  r.nics = *std::move(nics);
  return r;
}

double LowerMedian(std::vector<double> v) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  return v[(v.size() - 1) / 2];
}

absl::StatusOr<RouterFigures> Summarise(const std::string& case_name, const std::string& router,
                                        const std::vector<RankRecord>& records, int warmup,
                                        const std::vector<std::string>& hosts,
                                        const std::map<std::string, LinkRate>& rates,
                                        uint64_t hop_bytes, double model_s) {
  const std::string what = absl::StrCat("case ", case_name, " router ", router);
  // Per timed iteration: each rank's record of the warm call, and of the cold one.
  std::map<int, std::map<int, const RankRecord*>> by_iter, cold_by_iter;
  RouterFigures f;
  f.case_name = case_name;
  f.router = router;
  for (const RankRecord& r : records) {
    f.bytes_bad += r.bytes_bad;
    if (r.iteration < warmup) continue;
    if (r.rank < 0 || r.rank >= static_cast<int>(hosts.size())) {
      return absl::InvalidArgumentError(absl::StrCat(what, ": rank ", r.rank, " has no host"));
    }
    (r.warm ? by_iter : cold_by_iter)[r.iteration][r.rank] = &r;
  }
  if (by_iter.empty()) return absl::DataLossError(absl::StrCat(what, ": no timed warm call"));
  // A rank missing from a call another rank recorded is lost data, not a faster call.
  const auto complete = [&](int it, size_t ranks, const char* call) -> absl::Status {
    if (ranks == hosts.size()) return absl::OkStatus();
    return absl::DataLossError(absl::StrCat(what, ": iteration ", it, "'s ", call,
                                            " call has records of ", ranks, " of ", hosts.size(),
                                            " ranks"));
  };
  for (const auto& [it, ranks] : cold_by_iter) {
    RETURN_IF_ERROR(complete(it, ranks.size(), "cold"));
    double ms = 0;
    for (const auto& [rank, rec] : ranks) ms = std::max(ms, rec->ms);
    f.cold_iterations_ms.push_back(ms);
  }
  f.cold_ms = LowerMedian(f.cold_iterations_ms);
  struct Iter {
    double ms = 0;
    demo::PhaseBound bound;
    double wire = 0;
  };
  std::vector<Iter> iters;
  uint64_t cpu_idle = 0, cpu_total = 0;
  for (const auto& [it, ranks] : by_iter) {
    RETURN_IF_ERROR(complete(it, ranks.size(), "warm"));
    Iter x;
    std::vector<demo::LinkLoad> links;
    uint64_t tx = 0;
    for (const auto& [rank, rec] : ranks) {
      x.ms = std::max(x.ms, rec->ms);
      f.retransmits += rec->retransmits;
      cpu_idle += rec->cpu_idle;
      cpu_total += rec->cpu_total;
      for (const auto& [nic, c] : rec->nics) {
        const std::string name = absl::StrCat(hosts[rank], "/", nic);
        const auto rate = rates.find(name);
        if (rate == rates.end()) continue;  // lo and the like
        links.push_back({name, rate->second.rate_Bps, rate->second.burst_bytes, c.rx, c.tx});
        tx += c.tx;
      }
    }
    x.bound = demo::BoundPhase(links, x.ms);
    x.wire = hop_bytes > 0 ? static_cast<double>(tx) / static_cast<double>(hop_bytes) : 0;
    iters.push_back(std::move(x));
  }
  std::vector<double> ms, floors, utils, wires;
  for (const Iter& x : iters) {
    ms.push_back(x.ms);
    floors.push_back(x.bound.floor_ms);
    utils.push_back(x.bound.utilisation);
    wires.push_back(x.wire);
  }
  f.iterations = static_cast<int>(iters.size());
  f.iterations_ms = ms;
  f.measured_ms = LowerMedian(ms);
  f.measured_min_ms = *std::min_element(ms.begin(), ms.end());
  f.measured_max_ms = *std::max_element(ms.begin(), ms.end());
  f.floor_ms = LowerMedian(floors);
  f.utilisation = LowerMedian(utils);
  for (const Iter& x : iters) {
    if (x.ms == f.measured_ms) {
      f.busiest = x.bound.busiest;
      break;
    }
  }
  if (cpu_total > 0) f.cpu_idle = static_cast<double>(cpu_idle) / static_cast<double>(cpu_total);
  f.model_ms = model_s * 1e3;
  f.wire_factor = LowerMedian(wires);
  f.predicted_ms = f.model_ms * f.wire_factor;
  return f;
}

Verdicts Judge(const std::vector<CaseFigures>& cases) {
  Verdicts v;
  v.min_utilisation = cases.empty() ? 0 : 1e9;
  double worst_err = -1, worst_cold = -1;
  // Keeps the row whose `ms` is farthest from its prediction.
  const auto farthest = [](const CaseFigures& c, const RouterFigures& f, double ms, double* worst,
                           double* error, std::string* row) {
    const double err = f.predicted_ms > 0 ? ms / f.predicted_ms - 1 : INFINITY;
    if (std::fabs(err) <= *worst) return;
    *worst = std::fabs(err);
    *error = err;
    *row = absl::StrCat(c.case_name, " ", f.router);
  };
  for (const CaseFigures& c : cases) {
    for (const RouterFigures* f : {&c.v1, &c.v2}) {
      v.min_utilisation = std::min(v.min_utilisation, f->utilisation);
      farthest(c, *f, f->measured_ms, &worst_err, &v.worst_model_error, &v.worst_model_row);
      if (f->cold_iterations_ms.empty()) continue;
      farthest(c, *f, f->cold_ms, &worst_cold, &v.worst_cold_error, &v.worst_cold_row);
    }
    const double ratio = c.ratio();
    if (ratio > v.worst_ratio) {
      v.worst_ratio = ratio;
      v.worst_case = c.case_name;
    }
    if (c.case_name == "partner-0.5" || c.case_name == "expert8") {
      v.gain_ratio[c.case_name] = ratio;
      if (!(ratio <= kGainTarget)) v.gain_met = false;
    }
  }
  v.link_bound = !cases.empty() && v.min_utilisation >= demo::kLinkBound;
  v.cpu_bound = cases.empty() || v.min_utilisation < demo::kCpuBound;
  v.no_regression = v.worst_ratio <= kRegressionTarget;
  v.model_met = worst_err >= 0 && worst_err <= kModelTolerance;
  return v;
}

}  // namespace mixnet::bench
