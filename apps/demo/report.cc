// The demo's tables, summary, JSON and figure (see report.h).
#include "apps/demo/report.h"

#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "apps/demo/oracle_report.h"
#include "emulation/emulated_fabric.h"
#include "nlohmann/json.hpp"

namespace mixnet::demo {
namespace {

uint64_t Lost(const PhaseResult& p) {
  uint64_t lost = p.bytes_bad;
  // Bytes never verified in a phase that completed (a failed phase is
  // reported as failed, not as lost bytes).
  if (p.status.ok() && p.bytes_expected > p.bytes_verified + p.bytes_bad) {
    lost += p.bytes_expected - p.bytes_verified - p.bytes_bad;
  }
  return lost;
}

double Iter(const PhaseResult* p) { return p ? p->Mean(&IterationStats::wall_ms) : 0; }
// The simulator's iteration time, JSON null when there is none.
nlohmann::ordered_json Simulated(const PhaseResult* p) {
  if (p == nullptr || !p->simulated) return nullptr;
  return p->Mean(&IterationStats::simulated_ms);
}

nlohmann::json Ratio(const PhaseResult* mix, const PhaseResult* other, bool cpu_bound) {
  if (cpu_bound || mix == nullptr || other == nullptr || Iter(other) <= 0) return nullptr;
  return Iter(mix) / Iter(other);
}

// The steady iterations' ratio (JSON null when cpu_bound or unknown).
nlohmann::json SteadyRatio(const PhaseResult* mix, const PhaseResult* other, bool cpu_bound) {
  if (cpu_bound || mix == nullptr || other == nullptr || !mix->has_steady() ||
      !other->has_steady() || other->Steady(&IterationStats::wall_ms) <= 0) {
    return nullptr;
  }
  return mix->Steady(&IterationStats::wall_ms) / other->Steady(&IterationStats::wall_ms);
}

// mixnet's mean all-to-all (ms): its all-to-all time per iteration over the
// iteration's 4 per layer; 0 without it.
double MeanAlltoallMs(const DemoOptions& o, const PhaseResult* mix) {
  if (mix == nullptr || o.workload.layers <= 0) return 0;
  return mix->Mean(&IterationStats::alltoall_ms) / (4.0 * o.workload.layers);
}

nlohmann::ordered_json SwitchOverAlltoall(const DemoOptions& o, const PhaseResult* mix) {
  const double a2a = MeanAlltoallMs(o, mix);
  if (a2a <= 0) return nullptr;
  return o.shape.switch_ms / a2a;
}

// Every price row's oversub against mixnet (the primary row included).
nlohmann::ordered_json ByPrice(const OversubInfo& v, const std::vector<PhaseResult>& phases,
                               bool cpu_bound) {
  const PhaseResult* mix = FindPhase(phases, "mixnet");
  nlohmann::ordered_json rows = nlohmann::ordered_json::array();
  rows.push_back({{"price_gbps", v.price_gbps},
                  {"ratio", v.cost.ratio},
                  {"fabric", "oversub"},
                  {"mixnet_vs_oversub", Ratio(mix, FindPhase(phases, "oversub"), cpu_bound)}});
  for (const OversubRow& row : v.other_rows) {
    const std::string name = OversubRowName(row.price_gbps);
    rows.push_back({{"price_gbps", row.price_gbps},
                    {"ratio", row.cost.ratio},
                    {"fabric", name},
                    {"mixnet_vs_oversub", Ratio(mix, FindPhase(phases, name), cpu_bound)}});
  }
  return rows;
}

// The hosts' initial TCP window, segments (--init-cwnd, 0: the kernel's).
int InitialWindow(const DemoOptions& o) {
  return o.init_cwnd > 0 ? o.init_cwnd : static_cast<int>(emulation::kKernelInitCwnd);
}

}  // namespace

bool CpuBound(const std::vector<PhaseResult>& phases) {
  bool any = false;
  for (const PhaseResult& p : phases) {
    if (!p.status.ok()) continue;
    any = true;
    if (p.bound.utilisation() < kCpuBound) return true;
  }
  return !any;
}

void PrintHeader(const DemoOptions& o, const Workload& w, const OversubInfo& v) {
  const ComputeOptions& c = o.compute;
  std::printf("# %s\n", w.Describe().c_str());
  std::printf(
      "# step per iteration: forward per layer attention %g ms, dispatch, expert %g ms, combine; "
      "head %g ms;\n#   backward per layer (last first) combine-grad, expert %g ms, "
      "dispatch-grad, attention %g ms\n#   (%d all-to-alls, %g ms of compute)\n",
      c.attention_fwd_ms, c.expert_fwd_ms, c.head_ms, c.expert_bwd_ms, c.attention_bwd_ms,
      4 * w.layers(), c.PerIterationMs(w.layers()));
  const int k = o.shape.ocs_nics;
  std::printf(
      "# fabrics: %d hosts, every NIC %g Gbit/s (tbf bucket %g ms of rate; control class %s; "
      "initial TCP window %d segments)\n"
      "#   eps:         1 EPS NIC per host (its %d OCS NICs dark)\n"
      "#   oversub:     %d EPS NICs per host on leaves of %d hosts, each leaf's uplink %.4g "
      "Gbit/s\n"
      "#   static:      1 EPS + %d OCS NICs, circuits planned once from the mean of the first %d "
      "iterations\n"
      "#   mixnet:      1 EPS + %d OCS NICs, mixnet-controller re-wiring the OCS (switch %g ms)\n"
      "#   nonblocking: %d EPS NICs per host on one bridge\n",
      o.shape.hosts, o.shape.gbps, o.burst_ms,
      o.control_tos >= 0 ? absl::StrFormat("TOS %#x, strict priority", o.control_tos).c_str()
                         : "off",
      InitialWindow(o), k, 1 + k, o.leaf_hosts, v.uplink_gbps, k, o.static_iterations, k,
      o.shape.switch_ms, 1 + k);
  std::printf(
      "# oversub costs what mixnet costs (sim/prices.yaml at %gG, %d of %d NICs on circuits): "
      "$%.0f per NIC;\n#   a fat-tree oversubscribed r:1 costs $%.0f + $%.0f/r per NIC "
      "(non-blocking $%.0f), so r = %.3f;\n#   uplink = %d hosts x %d NICs x %g Gbit/s / r\n",
      v.price_gbps, k, 1 + k, v.cost.mixnet_per_nic, v.cost.fixed_per_nic, v.cost.scaled_per_nic,
      v.cost.nonblocking_per_nic, v.cost.ratio, v.leaf_hosts, 1 + k, o.shape.gbps);
  for (const OversubRow& row : v.other_rows) {
    std::printf("#   %s: at %gG prices r = %.3f, each leaf's uplink %.5g Gbit/s\n",
                OversubRowName(row.price_gbps).c_str(), row.price_gbps, row.cost.ratio,
                row.uplink_gbps);
  }
  std::fflush(stdout);
}

void PrintReport(const DemoOptions& o, const OversubInfo& v,
                 const std::vector<PhaseResult>& phases) {
  std::printf("\n# iteration wall time (ms; compute + all-to-alls + waits for rounds)\n");
  std::printf("%9s", "iteration");
  for (const PhaseResult& p : phases) std::printf(" %12s", p.fabric.c_str());
  std::printf("\n");
  for (int64_t it = 0; it < o.iterations; ++it) {
    std::printf("%9ld", static_cast<long>(it));
    for (const PhaseResult& p : phases) {
      if (!p.status.ok() || it >= static_cast<int64_t>(p.iterations.size())) {
        std::printf(" %12s", "-");
      } else {
        std::printf(" %12.1f", p.iterations[it].wall_ms);
      }
    }
    std::printf("\n");
  }
  const bool cpu_bound = CpuBound(phases);
  std::printf(
      "\n# per fabric (means per iteration; floor: bytes over rate of the busiest link, "
      "per all-to-all)\n");
  std::printf("%-12s %10s %9s %9s %9s %9s %9s %9s %6s %-18s %8s %6s %6s %12s %6s\n", "fabric",
              "iteration", "first", "steady", "simulated", "alltoall", "reconfig", "floor", "util",
              "busiest link", "retrans", "idle", "rounds", "verified", "lost");
  for (const PhaseResult& p : phases) {
    if (!p.status.ok()) {
      std::printf("%-12s FAILED: %s\n", p.fabric.c_str(), p.status.ToString().c_str());
      continue;
    }
    const std::string simulated =
        p.simulated ? absl::StrFormat("%.1f", p.Mean(&IterationStats::simulated_ms)) : "-";
    const std::string steady =
        p.has_steady() ? absl::StrFormat("%.1f", p.Steady(&IterationStats::wall_ms)) : "-";
    std::printf(
        "%-12s %10.1f %9.1f %9s %9s %9.1f %9.1f %9.1f %5.0f%% %-18s %8lu %5.0f%% %6ld %12lu %6lu\n",
        p.fabric.c_str(), p.Mean(&IterationStats::wall_ms), p.First(&IterationStats::wall_ms),
        steady.c_str(), simulated.c_str(), p.Mean(&IterationStats::alltoall_ms),
        p.Mean(&IterationStats::loss_ms), p.Mean(&IterationStats::floor_ms),
        100 * p.bound.utilisation(), p.BusiestLink().c_str(),
        static_cast<unsigned long>(p.retransmits), p.cpu_idle < 0 ? 0.0 : 100 * p.cpu_idle,
        static_cast<long>(std::max<int64_t>(p.reconfigurations, 0)),
        static_cast<unsigned long>(p.bytes_verified), static_cast<unsigned long>(Lost(p)));
  }
  {
    std::string line;
    for (const PhaseResult& p : phases) {
      if (!p.status.ok()) continue;
      absl::StrAppendFormat(&line, "%s%s %lu / %lu", line.empty() ? "" : ", ", p.fabric,
                            static_cast<unsigned long>(p.tcp_opens),
                            static_cast<unsigned long>(p.tcp_resets));
    }
    if (!line.empty()) {
      std::printf("TCP connections opened / reset during the timed iterations: %s\n", line.c_str());
    }
  }
  const PhaseResult* mix = FindPhase(phases, "mixnet");
  const PhaseResult* nb = FindPhase(phases, "nonblocking");
  const PhaseResult* eps = FindPhase(phases, "eps");
  const PhaseResult* ov = FindPhase(phases, "oversub");
  const PhaseResult* st = FindPhase(phases, "static");
  std::printf("\n# summary (%s)\n",
              o.loopback ? "loopback: times are NOT meaningful" : "emulated cluster");
  if (mix != nullptr) {
    std::printf(
        "mixnet: %ld rounds committed, %ld aborted, %ld skipped; %ld planned all-to-all pairs, "
        "%ld switched for, %ld waits timed out; %.1f ms per iteration lost waiting for rounds\n",
        static_cast<long>(std::max<int64_t>(mix->reconfigurations, 0)),
        static_cast<long>(mix->rounds_aborted), static_cast<long>(mix->rounds_skipped),
        static_cast<long>(mix->plan_waits), static_cast<long>(mix->plans_switched),
        static_cast<long>(mix->plan_timeouts), mix->Mean(&IterationStats::loss_ms));
    if (mix->warm_complete >= 0) {
      std::printf(
          "mixnet: warm-up sweep before the timed iterations: %ld rounds in %.1f ms (%s; not in "
          "the rounds above)\n",
          static_cast<long>(mix->warm_rounds), mix->warm_ms,
          mix->warm_complete != 0 ? "complete" : "INCOMPLETE, see the workers' log");
    }
    if (mix->round_samples > 0) {
      std::printf(
          "mixnet: a round took %.1f ms (median of %ld; from the completed matrix to every "
          "COMMITTED), %.1f ms over the switching time\n",
          mix->round_ms, static_cast<long>(mix->round_samples), mix->round_overhead_ms);
      if (!mix->simulated_rounds.empty()) {
        std::printf(
            "mixnet: the simulated column charges each round %.1f ms over the switching: %s\n",
            mix->simulated_round_overhead_ms,
            mix->simulated_rounds == "replay"
                ? "this run's own rounds (a replay, not a prediction)"
                : "the warm-up sweep's median round (a calibration before the timed "
                  "iterations)");
      }
      if (!mix->round_phases.empty()) {
        std::string line;
        for (const PhaseResult::RoundPhaseTimes& ph : mix->round_phases) {
          absl::StrAppendFormat(&line, "%s%s %.1f / %.1f", line.empty() ? "" : ", ", ph.name,
                                ph.p50_ms, ph.p99_ms);
        }
        std::printf("mixnet: round phases, p50 / p99 ms: %s\n", line.c_str());
        if (mix->worker_commit_p50_ms > 0) {
          std::printf(
              "mixnet: of which on the slowest worker (event in to ack out), p50 / p99 ms: "
              "prepare %.1f / %.1f, commit %.1f / %.1f\n",
              mix->worker_prepare_p50_ms, mix->worker_prepare_p99_ms, mix->worker_commit_p50_ms,
              mix->worker_commit_p99_ms);
        }
      }
      const PhaseResult::AfterRound ar = mix->AfterRoundAgainstLater();
      if (ar.after_round_n > 0 && ar.later_n > 0) {
        std::printf(
            "mixnet: the first all-to-all after a round ran at %.2fx its simulated time (%d), "
            "the others at %.2fx (%d): %.2fx (target <= 1.10x)\n",
            ar.after_round, ar.after_round_n, ar.later, ar.later_n, ar.after_round / ar.later);
      }
    }
  }
  if (cpu_bound) {
    std::printf(
        "cpu_bound: a fabric's busiest link ran below %.0f%% of its rate, so the links did not "
        "set the times; no ratios (see the table: retransmissions, CPU idle)\n",
        100 * kCpuBound);
  } else {
    auto line = [&](const char* what, const PhaseResult* other, const char* target) {
      if (mix == nullptr || other == nullptr) return;
      std::printf("mixnet / %-12s %.2fx (iteration time; target %s)", what, Iter(mix) / Iter(other),
                  target);
      if (mix->has_steady() && other->has_steady()) {
        std::printf("; steady iterations %.2fx, the first %.2fx",
                    mix->Steady(&IterationStats::wall_ms) / other->Steady(&IterationStats::wall_ms),
                    mix->First(&IterationStats::wall_ms) / other->First(&IterationStats::wall_ms));
      }
      std::printf("\n");
    };
    line("nonblocking", nb, "<= 1.10x");
    line("oversub", ov, "<= 0.90x");
    line("static", st, "<= 0.85x");
    line("eps", eps, "none");
    for (const OversubRow& row : v.other_rows) {
      const PhaseResult* other = FindPhase(phases, OversubRowName(row.price_gbps));
      if (mix == nullptr || other == nullptr) continue;
      std::printf(
          "mixnet / %-12s %.2fx (iteration time; the oversub that costs what mixnet costs "
          "at %gG prices, r = %.2f)\n",
          OversubRowName(row.price_gbps).c_str(), Iter(mix) / Iter(other), row.price_gbps,
          row.cost.ratio);
    }
    for (const PhaseResult& p : phases) {
      if (p.status.ok() && p.bound.utilisation() < kLinkBound) {
        std::printf("note: %s's busiest link ran at %.0f%% of its rate (below %.0f%%)\n",
                    p.fabric.c_str(), 100 * p.bound.utilisation(), 100 * kLinkBound);
      }
    }
  }
  if (mix != nullptr) {
    const double a2a = MeanAlltoallMs(o, mix);
    if (v.paper_alltoall_ms > 0 && a2a > 0) {
      std::printf(
          "regime: switching %g ms over mixnet's mean all-to-all %.1f ms = %.2f here; at paper "
          "scale (%s on a non-blocking fat-tree at %gG, the simulator) %g ms over %.2f ms = %.1f\n",
          o.shape.switch_ms, a2a, o.shape.switch_ms / a2a, o.sim_model.c_str(), v.price_gbps,
          o.shape.switch_ms, v.paper_alltoall_ms, o.shape.switch_ms / v.paper_alltoall_ms);
    } else if (!v.paper_why.empty()) {
      std::printf("regime: the simulator's paper-scale all-to-all is unknown: %s\n",
                  v.paper_why.c_str());
    }
  }
  PrintOracle(phases);
  uint64_t verified = 0, expected = 0, lost = 0;
  for (const PhaseResult& p : phases) {
    verified += p.bytes_verified;
    expected += p.bytes_expected;
    lost += Lost(p);
  }
  std::printf("bytes verified: %lu of %lu expected; lost or corrupted: %lu\n",
              static_cast<unsigned long>(verified), static_cast<unsigned long>(expected),
              static_cast<unsigned long>(lost));
  if (mix != nullptr && mix->controller_killed) {
    std::printf(
        "controller killed at epoch %lu, restarted at epoch %lu (workers ran on meanwhile: %s, "
        "%ld all-to-alls completed while it was down); %lu epochs at the end\n",
        static_cast<unsigned long>(mix->epoch_before_kill),
        static_cast<unsigned long>(mix->epoch_after_restart),
        mix->workers_ran_through_outage ? "yes" : "no",
        static_cast<long>(mix->layers_during_outage),
        static_cast<unsigned long>(mix->highest_epoch));
  }
  for (const PhaseResult& p : phases) {
    if (!p.status.ok()) {
      std::printf("FAILED %s phase: %s\n", p.fabric.c_str(), p.status.ToString().c_str());
    }
  }
  if (o.json) {
    for (const PhaseResult& p : phases) {
      nlohmann::ordered_json j = {{"fabric", p.fabric}, {"ok", p.status.ok()}};
      if (!p.status.ok()) j["error"] = p.status.ToString();
      j["iteration_ms"] = p.Mean(&IterationStats::wall_ms);
      // The first iteration (no forecast yet) apart from the steady ones.
      j["first_iteration_ms"] = p.First(&IterationStats::wall_ms);
      j["steady_iteration_ms"] =
          p.has_steady() ? nlohmann::ordered_json(p.Steady(&IterationStats::wall_ms)) : nullptr;
      j["steady_floor_ms"] =
          p.has_steady() ? nlohmann::ordered_json(p.Steady(&IterationStats::floor_ms)) : nullptr;
      j["alltoall_ms"] = p.Mean(&IterationStats::alltoall_ms);
      // The simulator's prediction of the same iterations (emulation mode).
      if (p.simulated) {
        j["simulated_ms"] = p.Mean(&IterationStats::simulated_ms);
        j["simulated_alltoall_ms"] = p.Mean(&IterationStats::simulated_alltoall_ms);
        j["simulated_reconfig_ms"] = p.Mean(&IterationStats::simulated_reconfig_ms);
      } else {
        j["simulated_ms"] = nullptr;
        j["simulated_why"] = p.simulated_why;
      }
      j["reconfig_loss_ms"] = p.Mean(&IterationStats::loss_ms);
      j["floor_ms"] = p.Mean(&IterationStats::floor_ms);
      j["compute_ms"] = p.Mean(&IterationStats::compute_ms);
      j["busiest_nic_utilisation"] = p.bound.utilisation();
      j["busiest_link"] = p.BusiestLink();
      j["reconfigurations"] = std::max<int64_t>(p.reconfigurations, 0);
      if (p.warm_complete >= 0) {
        j["warm_rounds"] = p.warm_rounds;
        j["warm_ms"] = p.warm_ms;
        j["warm_complete"] = p.warm_complete != 0;
      }
      if (p.round_samples > 0) {
        j["round_ms"] = p.round_ms;
        j["round_overhead_ms"] = p.round_overhead_ms;
        nlohmann::json phases = nlohmann::json::object();
        for (const PhaseResult::RoundPhaseTimes& ph : p.round_phases) {
          phases[ph.name] = {{"p50_ms", ph.p50_ms}, {"p99_ms", ph.p99_ms}};
        }
        j["round_phases"] = phases;
        if (p.worker_commit_p50_ms > 0) {
          j["worker_round_phases"] = {
              {"prepare",
               {{"p50_ms", p.worker_prepare_p50_ms}, {"p99_ms", p.worker_prepare_p99_ms}}},
              {"commit", {{"p50_ms", p.worker_commit_p50_ms}, {"p99_ms", p.worker_commit_p99_ms}}}};
        }
      }
      if (!p.simulated_rounds.empty()) {
        // What the simulation charged a round over the switching, and from where.
        j["simulated_rounds"] = p.simulated_rounds;
        j["simulated_round_overhead_ms"] = p.simulated_round_overhead_ms;
      }
      j["plan_timeouts"] = p.plan_timeouts;
      j["retransmits"] = p.retransmits;
      j["tcp_opens"] = p.tcp_opens;
      if (const PhaseResult::AfterRound ar = p.AfterRoundAgainstLater();
          ar.after_round_n > 0 && ar.later_n > 0) {
        j["after_round_over_simulated"] = ar.after_round;
        j["later_over_simulated"] = ar.later;
      }
      j["tcp_resets"] = p.tcp_resets;
      j["cpu_idle"] = p.cpu_idle;
      j["bytes_verified"] = p.bytes_verified;
      j["bytes_lost"] = Lost(p);
      AddOracleJson(p, j);
      nlohmann::json per = nlohmann::json::array();
      nlohmann::ordered_json detail = nlohmann::ordered_json::array();
      for (const IterationStats& s : p.iterations) {
        per.push_back(s.wall_ms);
        nlohmann::ordered_json d = {{"wall_ms", s.wall_ms},
                                    {"alltoall_ms", s.alltoall_ms},
                                    {"reconfig_loss_ms", s.loss_ms},
                                    {"floor_ms", s.floor_ms},
                                    {"alltoalls_ms", s.each_alltoall_ms}};
        if (p.oracle.computed) {
          d["oracle_nonblocking_floor_ms"] = s.oracle_nonblocking_ms;
          d["oracle_installed_floor_ms"] = s.oracle_installed_ms;
          if (p.oracle.has_best) d["oracle_best_floor_ms"] = s.oracle_best_ms;
        }
        if (p.simulated) {
          d["simulated_ms"] = s.simulated_ms;
          d["simulated_alltoall_ms"] = s.simulated_alltoall_ms;
          d["simulated_reconfig_ms"] = s.simulated_reconfig_ms;
          d["simulated_alltoalls_ms"] = s.each_simulated_alltoall_ms;
        }
        detail.push_back(std::move(d));
      }
      j["iterations"] = per;
      // Each iteration's parts, measured and simulated, to see where the two part.
      j["per_iteration"] = detail;
      if (p.controller_killed) {
        j["controller_killed_at_epoch"] = p.epoch_before_kill;
        j["controller_restarted_at_epoch"] = p.epoch_after_restart;
        j["workers_ran_through_outage"] = p.workers_ran_through_outage;
        j["layers_during_outage"] = p.layers_during_outage;
        j["final_epoch"] = p.highest_epoch;
      }
      std::printf("%s\n", j.dump().c_str());
    }
    nlohmann::ordered_json s = {
        {"summary", true},
        {"iterations", o.iterations},
        {"cpu_bound", cpu_bound},
        {"control_tc", o.control_tos},
        {"init_cwnd", InitialWindow(o)},
        {"mixnet_vs_nonblocking", Ratio(mix, nb, cpu_bound)},
        {"mixnet_vs_nonblocking_steady", SteadyRatio(mix, nb, cpu_bound)},
        {"mixnet_vs_eps", Ratio(mix, eps, cpu_bound)},
        {"mixnet_vs_oversub", Ratio(mix, ov, cpu_bound)},
        {"mixnet_vs_static", Ratio(mix, st, cpu_bound)},
        {"oversub_ratio", v.cost.ratio},
        {"mixnet_vs_oversub_by_price", ByPrice(v, phases, cpu_bound)},
        {"switch_over_alltoall", SwitchOverAlltoall(o, mix)},
        {"paper_alltoall_ms",
         v.paper_alltoall_ms > 0 ? nlohmann::ordered_json(v.paper_alltoall_ms) : nullptr},
        {"paper_switch_over_alltoall",
         v.paper_alltoall_ms > 0 ? nlohmann::ordered_json(o.shape.switch_ms / v.paper_alltoall_ms)
                                 : nullptr},
        {"gap_split", GapSplitJson(phases)},
        {"steady_targets", SteadyTargetsJson(phases)},
        {"bytes_verified", verified},
        {"bytes_lost", lost}};
    std::printf("%s\n", s.dump().c_str());
  }
  std::fflush(stdout);
}

absl::Status WritePlot(const DemoOptions& o, const std::vector<PhaseResult>& phases) {
  std::error_code ec;
  std::filesystem::create_directories(o.plot_dir, ec);
  if (ec) return absl::InternalError(absl::StrCat("mkdir ", o.plot_dir, ": ", ec.message()));
  const std::string dat = o.plot_dir + "/iterations.dat", gp = o.plot_dir + "/iterations.gp",
                    png = o.plot_dir + "/iterations.png";
  std::vector<const PhaseResult*> ok;
  for (const PhaseResult& p : phases) {
    if (p.status.ok()) ok.push_back(&p);
  }
  if (ok.empty()) return absl::FailedPreconditionError("no phase completed: nothing to plot");
  {
    std::ofstream d(dat);
    d << "# iteration";
    for (const PhaseResult* p : ok) d << " " << p->fabric;
    d << "\n";
    for (int64_t it = 0; it < o.iterations; ++it) {
      d << it;
      for (const PhaseResult* p : ok) {
        d << " "
          << (it < static_cast<int64_t>(p->iterations.size()) ? p->iterations[it].wall_ms : 0);
      }
      d << "\n";
    }
    std::ofstream g(gp);
    g << "set terminal pngcairo size 900,500\nset output '" << png << "'\n"
      << "set title 'mixnet-demo: iteration wall time per fabric'\n"
      << "set xlabel 'iteration'\nset ylabel 'ms'\nset key outside right\nset grid\n"
      << "plot ";
    for (size_t i = 0; i < ok.size(); ++i) {
      g << (i ? ", " : "") << "'" << dat << "' using 1:" << i + 2 << " with linespoints title '"
        << ok[i]->fabric << "'";
    }
    g << "\n";
    if (!d || !g) return absl::InternalError(absl::StrCat("cannot write ", dat, " / ", gp));
  }
  const std::string cmd = absl::StrCat("gnuplot '", gp, "' 2>&1");
  if (int rc = std::system(cmd.c_str()); rc != 0) {
    return absl::UnavailableError(
        absl::StrCat("`", cmd, "` failed (exit ", rc, "); is gnuplot installed (gnuplot-nox)?"));
  }
  std::printf("# plot: %s\n", png.c_str());
  return absl::OkStatus();
}

void PrintSweepCell(const DemoOptions& o, const SweepCell& cell) {
  const PhaseResult* mix = FindPhase(cell.phases, "mixnet");
  const PhaseResult* st = FindPhase(cell.phases, "static");
  const PhaseResult* nb = FindPhase(cell.phases, "nonblocking");
  const bool cpu_bound = CpuBound(cell.phases);
  std::fprintf(stderr,
               "# sweep: share %.2f switch %g ms: mixnet %.1f static %.1f nonblocking "
               "%.1f ms%s\n",
               cell.affine_share, cell.switch_ms, Iter(mix), Iter(st), Iter(nb),
               cpu_bound ? " (cpu_bound)" : "");
  if (!o.json) return;
  nlohmann::ordered_json j = {
      {"sweep", true},
      {"affine_share", cell.affine_share},
      {"switch_ms", cell.switch_ms},
      {"cpu_bound", cpu_bound},
      {"mixnet_ms", Iter(mix)},
      {"static_ms", Iter(st)},
      {"nonblocking_ms", Iter(nb)},
      {"mixnet_simulated_ms", Simulated(mix)},
      {"static_simulated_ms", Simulated(st)},
      {"nonblocking_simulated_ms", Simulated(nb)},
      {"mixnet_vs_nonblocking", Ratio(mix, nb, cpu_bound)},
      {"mixnet_vs_static", Ratio(mix, st, cpu_bound)},
      {"mixnet_reconfig_loss_ms", mix ? mix->Mean(&IterationStats::loss_ms) : 0},
      {"mixnet_utilisation", mix ? mix->bound.utilisation() : 0},
      {"nonblocking_utilisation", nb ? nb->bound.utilisation() : 0}};
  std::printf("%s\n", j.dump().c_str());
  std::fflush(stdout);
}

void PrintSweepTable(const DemoOptions& o, const std::vector<SweepCell>& cells) {
  (void)o;
  for (const char* what : {"nonblocking", "static"}) {
    std::printf("\n# mixnet / %s (iteration time; '*': cpu_bound, not link-bound)\n", what);
    std::printf("%12s %10s %10s %10s\n", "share", "10 ms", "25 ms", "100 ms");
    for (size_t i = 0; i < cells.size(); i += 3) {
      std::printf("%12.2f", cells[i].affine_share);
      for (size_t k = i; k < i + 3 && k < cells.size(); ++k) {
        const PhaseResult* mix = FindPhase(cells[k].phases, "mixnet");
        const PhaseResult* other = FindPhase(cells[k].phases, what);
        if (mix == nullptr || other == nullptr || Iter(other) <= 0) {
          std::printf(" %10s", "-");
        } else {
          std::printf(" %9.2f%s", Iter(mix) / Iter(other), CpuBound(cells[k].phases) ? "*" : "x");
        }
      }
      std::printf("\n");
    }
  }
  std::fflush(stdout);
}

}  // namespace mixnet::demo
