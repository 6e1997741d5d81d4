// mixnet_fabricsim: iteration time, network cost and performance per dollar of
// MoE training on fat-tree, oversubscribed fat-tree, rail-optimised, TopoOpt,
// mixnet-static and MixNet fabrics, per model, GPU count and link speed. Thin main: flags,
// then one Simulate per case (main thread), then the report.
#include <unistd.h>

#include <chrono>
#include <cmath>
#include <cstdio>
#include <fstream>
#include <iostream>
#include <map>

#include "CLI/CLI.hpp"
#include "absl/strings/str_split.h"
#include "fmt/format.h"
#include "runtime/planner/planner.h"
#include "sim/cost_model.h"
#include "sim/report.h"
#include "sim/simulator.h"

#include "mixnet_build_paths.h"  // MIXNET_SIM_DATA_DIR (sim/CMakeLists.txt)

namespace {

using namespace mixnet::sim;

std::vector<std::string> SplitList(const std::vector<std::string>& in) {
  std::vector<std::string> out;
  for (const std::string& s : in)
    for (absl::string_view p : absl::StrSplit(s, ',', absl::SkipEmpty()))
      out.emplace_back(p.data(), p.size());
  return out;
}

// A one-line progress bar on stderr (only when stderr is a terminal).
class Progress {
 public:
  explicit Progress(bool on) : on_(on) {}
  void Show(const std::string& label, double fraction) {
    if (!on_) return;
    const int width = 30, filled = static_cast<int>(fraction * width + 0.5);
    std::fprintf(stderr, "\r%-40.40s [%s%s] %3.0f%%", label.c_str(),
                 std::string(filled, '#').c_str(), std::string(width - filled, '.').c_str(),
                 fraction * 100);
    std::fflush(stderr);
  }
  void Done() {
    if (on_) std::fprintf(stderr, "\r%*s\r", 80, "");
  }

 private:
  bool on_;
};

int Fail(const absl::Status& s) {
  std::fprintf(stderr, "mixnet_fabricsim: %s\n", std::string(s.ToString()).c_str());
  return 1;
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"mixnet_fabricsim: MoE training iteration time and cost per fabric"};
  std::vector<std::string> models_arg{"mixtral-8x22b"},
      fabrics_arg{"fattree,oversub,rail,topoopt,mixnet"}, gbps_arg{"100,200,400,800"};
  std::string data_dir = MIXNET_SIM_DATA_DIR, models_dir, prices_path, csv_path, plot_dir;
  int gpus = 0;
  bool json = false, list = false, no_progress = false;
  bool no_hide_backward = false, no_forward_ahead = false;
  SimOptions base;
  double switch_ms = 25;
  std::string algo = "improved", router = "v2", relay = "off";
  std::string trace, trace_placement = "contiguous";
  app.add_option("--model", models_arg,
                 "models (names in the models dir or YAML paths), comma-separated");
  app.add_option("--gpus", gpus, "GPUs (default: the model's); DP = gpus / (EP TP PP)");
  app.add_option("--fabric", fabrics_arg, "fattree,oversub,rail,topoopt,mixnet-static,mixnet");
  app.add_option("--link-gbps", gbps_arg, "link speeds in Gb/s, comma-separated");
  app.add_flag("--json", json, "one JSON object per (model, fabric, link speed) on stdout");
  app.add_option("--csv", csv_path, "also write CSV here");
  app.add_option("--plot-dir", plot_dir, "write gnuplot data, script and PNGs here");
  app.add_option("--models-dir", models_dir, "model YAML folder (default <data>/models)");
  app.add_option("--prices", prices_path, "price file (default <data>/prices.yaml)");
  app.add_option("--alpha", base.fabric.alpha, "NICs per server on the OCS (mixnet, topoopt)");
  app.add_option("--switch-ms", switch_ms, "OCS switching delay, ms");
  app.add_option("--oversub", base.fabric.oversub, "oversubscription ratio of 'oversub'");
  app.add_option("--pod-servers", base.fabric.pod_servers, "servers per leaf of 'oversub'");
  app.add_option("--rail-group-servers", base.fabric.rail_group_servers,
                 "rail: servers under one rail leaf (per rail); more leaves meet at the spine");
  app.add_option("--rail-spine-oversub", base.fabric.rail_spine_oversub,
                 "rail: a leaf's NIC capacity over its spine capacity (1: non-blocking)");
  app.add_option("--topoopt-paths", base.fabric.topoopt_paths,
                 "topoopt: shortest paths each server pair's bytes are split over");
  app.add_option("--trace", trace,
                 "drive every model by this token-count trace (TrafficReport JSON lines, as "
                 "runtime/locality and examples/moe_pytorch --trace-out write them)");
  app.add_option("--trace-placement", trace_placement,
                 "where the trace's expert e lived: contiguous (blocks per rank) or round_robin "
                 "(rank e % ranks, the demo's default)")
      ->check(CLI::IsMember({"contiguous", "round_robin"}));
  app.add_option("--iterations", base.iterations, "measured iterations (averaged)");
  app.add_option("--decide-uses", base.decide_uses,
                 "all-to-alls a new topology is credited with when deciding to switch");
  app.add_option("--predictor", base.predictor, "last, ewma or share_trend");
  app.add_option("--planner", algo, "greedy or improved");
  app.add_option("--ls-budget-us", base.fabric.planner.local_search_budget_us,
                 "planner local-search budget per region (0: rounds only)");
  app.add_option("--router", router,
                 "routing of topoopt / mixnet bytes, as the workers run it: v1 (a pair's bytes "
                 "over its circuits if any, else EPS) or v2 (the fluid model's split over "
                 "circuits and EPS; the runtime's default)")
      ->check(CLI::IsMember({"v1", "v2"}));
  app.add_option("--relay", relay,
                 "router v2 two-hop relays through a third host (two circuits, or one circuit "
                 "and EPS; on|off, default off; the collectives run them)")
      ->check(CLI::IsMember({"on", "off"}));
  app.add_flag("--no-hide-backward", no_hide_backward,
               "do not hide backward switching under compute");
  app.add_flag("--backward-window-layer", base.backward_window_layer,
               "backward switching hides under the previous layer's whole backward compute "
               "(default: its attention backward only)");
  app.add_flag("--no-forward-ahead", no_forward_ahead,
               "forward switching not overlapped (no prediction ahead)");
  app.add_flag("--no-progress", no_progress, "no progress bar");
  app.add_flag("--list-models", list, "list the models and exit");
  CLI11_PARSE(app, argc, argv);

  if (models_dir.empty()) models_dir = data_dir + "/models";
  if (prices_path.empty()) prices_path = data_dir + "/prices.yaml";
  if (list) {
    for (const auto& n : ListModels(models_dir)) std::cout << n << "\n";
    return 0;
  }
  auto algorithm = mixnet::planner::ParseAlgorithm(algo);
  if (!algorithm.ok()) return Fail(algorithm.status());
  base.fabric.planner.algorithm = *algorithm;
  base.fabric.switch_s = switch_ms / 1e3;
  auto parsed_router = ParseRouter(router);
  if (!parsed_router.ok()) return Fail(parsed_router.status());
  base.fabric.router = *parsed_router;
  base.fabric.relay = relay == "on";
  if (base.fabric.router == Router::kV1 && base.fabric.relay)
    return Fail(absl::InvalidArgumentError("--relay on needs --router v2"));
  base.hide_backward = !no_hide_backward;
  base.forward_ahead = !no_forward_ahead;
  auto prices = LoadPrices(prices_path);
  if (!prices.ok()) return Fail(prices.status());

  std::vector<FabricKind> fabrics;
  for (const std::string& f : SplitList(fabrics_arg)) {
    auto k = ParseFabric(f);
    if (!k.ok()) return Fail(k.status());
    fabrics.push_back(*k);
  }
  std::vector<double> speeds;
  for (const std::string& g : SplitList(gbps_arg)) {
    try {
      speeds.push_back(std::stod(g));
    } catch (const std::exception&) {
      return Fail(absl::InvalidArgumentError("bad --link-gbps value '" + g + "'"));
    }
  }
  for (double g : speeds) {  // fail before simulating when a price is missing
    auto lp = prices->At(static_cast<int>(std::lround(g)));
    if (!lp.ok()) return Fail(lp.status());
  }
  Progress progress(!no_progress && isatty(STDERR_FILENO));
  std::vector<ResultRow> rows;
  for (const std::string& name : SplitList(models_arg)) {
    auto model = FindModel(name, models_dir);
    if (!model.ok()) return Fail(model.status());
    if (!trace.empty())
      if (auto st = UseTrace(*model, trace, trace_placement); !st.ok()) return Fail(st);
    const int n_gpus = gpus > 0 ? gpus : model->gpus;
    for (double gbps : speeds) {
      // The fat-tree is always simulated: it normalises perf per dollar.
      std::map<FabricKind, std::pair<SimResult, double>> done;
      std::vector<FabricKind> todo = {FabricKind::kFatTree};
      for (FabricKind k : fabrics)
        if (k != FabricKind::kFatTree) todo.push_back(k);
      for (FabricKind k : todo) {
        SimOptions o = base;
        o.gpus = n_gpus;
        o.fabric.kind = k;
        o.fabric.link_gbps = gbps;
        const std::string label = fmt::format("{} {} {}G", model->name, FabricName(k), gbps);
        o.progress = [&](double f) { progress.Show(label, f); };
        const auto t0 = std::chrono::steady_clock::now();
        auto r = Simulate(*model, o);
        progress.Done();
        if (!r.ok()) return Fail(r.status());
        const double wall =
            std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
        auto cost = NetworkCost(o.fabric, n_gpus, *prices);
        if (!cost.ok()) return Fail(cost.status());
        done[k] = {*r, cost->total()};
        const bool wanted = std::find(fabrics.begin(), fabrics.end(), k) != fabrics.end();
        if (!wanted) continue;
        const auto& ft = done[FabricKind::kFatTree];
        ResultRow row{.model = model->name,
                      .fabric = std::string(FabricName(k)),
                      .gpus = n_gpus,
                      .link_gbps = gbps,
                      .iteration_ms = r->iteration_s * 1e3,
                      .cost_usd = cost->total(),
                      .perf_per_dollar_vs_fattree = PerfPerDollarVsFatTree(
                          r->iteration_s, cost->total(), ft.first.iteration_s, ft.second),
                      .a2a_ms = r->a2a_s * 1e3,
                      .switch_ms = r->switch_s * 1e3,
                      .compute_ms = r->compute_s * 1e3,
                      .dp_ms = r->dp_s * 1e3,
                      .pp_ms = r->pp_s * 1e3,
                      .reconfigurations = r->reconfigurations,
                      .switch_rounds = r->switch_rounds,
                      .warmup_reconfigurations = r->warmup_reconfigurations,
                      .routing = r->routing,
                      .wall_s = wall};
        if (json) std::cout << ToJsonLine(row) << std::endl;
        rows.push_back(row);
      }
    }
  }
  if (!json) WriteTable(rows, std::cout);
  if (!csv_path.empty()) {
    std::ofstream out(csv_path);
    if (!out) return Fail(absl::InternalError("cannot write " + csv_path));
    WriteCsv(rows, out);
  }
  if (!plot_dir.empty()) {
    bool made_png = false;
    auto st = WritePlots(rows, plot_dir, made_png);
    if (!st.ok()) return Fail(st);
    if (!made_png)
      std::fprintf(stderr,
                   "mixnet_fabricsim: gnuplot not found; wrote %s/plots.gp and data, no PNGs\n",
                   plot_dir.c_str());
  }
  return 0;
}
