// The iteration loop of the fabric simulator: the warm-up, then each measured
// iteration's micro-batch passes with every switch charged (see simulator.h).
// Main thread.
#include "sim/simulator.h"

#include <algorithm>
#include <cmath>

#include "absl/strings/str_cat.h"
#include "runtime/locality/predictor.h"
#include "sim/workload.h"

namespace mixnet::sim {
namespace {

// Times and switches of one or more micro-batch passes.
struct PassTimes {
  double fwd = 0, bwd = 0, a2a = 0, sw = 0, compute = 0;
  double reconfigurations = 0, rounds = 0;

  void Add(const PassTimes& p, double times) {
    fwd += times * p.fwd;
    bwd += times * p.bwd;
    a2a += times * p.a2a;
    sw += times * p.sw;
    compute += times * p.compute;
    reconfigurations += times * p.reconfigurations;
    rounds += times * p.rounds;
  }
};

// What one iteration's micro-batches see, per stage-local layer x: every
// region's actual and predicted matrix (and their transposes), compute.
struct IterationInputs {
  std::vector<std::vector<TrafficMatrix>> actual, predicted, actual_t, predicted_t;
  std::vector<std::vector<TrafficMatrix>> ranks, ranks_t;  // EP x EP rank bytes (rail)
  std::vector<double> expert_fwd, other_fwd;
};

bool SameCircuits(const std::vector<std::vector<planner::PlannedCircuit>>& a,
                  const std::vector<std::vector<planner::PlannedCircuit>>& b) {
  if (a.size() != b.size()) return false;
  for (size_t r = 0; r < a.size(); ++r) {
    if (a[r].size() != b[r].size()) return false;
    for (size_t i = 0; i < a[r].size(); ++i)
      if (!(a[r][i].a == b[r][i].a) || !(a[r][i].b == b[r][i].b)) return false;
  }
  return true;
}

// One micro-batch on every stage: forward over the stage's layers, then
// backward. `forecast` false (the warm-up): forward keeps the live circuits.
absl::StatusOr<PassTimes> RunPass(Fabric& fab, const IterationInputs& in, const ComputeTimes& ct,
                                  const SimOptions& o, bool forecast) {
  const int Lps = static_cast<int>(in.actual.size());
  auto attn_fwd = [&](int x) { return ct.attn_fwd + in.other_fwd[x]; };
  auto attn_bwd = [&](int x) { return 2 * attn_fwd(x); };
  // The round before backward layer x runs during the previous backward
  // layer's attention backward (x + 1; the last layer: its own).
  auto bwd_window = [&](int x) {
    const int y = x + 1 < Lps ? x + 1 : x;
    return attn_bwd(y) + (o.backward_window_layer ? 2 * in.expert_fwd[y] : 0);
  };
  PassTimes pass;
  auto count = [&](const PhaseTime& t) {
    pass.sw += t.switch_s;
    pass.reconfigurations += t.reconfigured_regions;
    pass.rounds += t.reconfigured_regions > 0 ? 1 : 0;
  };
  for (int x = 0; x < Lps; ++x) {  // forward
    // The round for layer 0 starts after the last backward layer's
    // dispatch-grad: it also has that layer's attention backward.
    const double window = attn_fwd(x) + (x == 0 ? attn_bwd(0) : 0);
    A2AOptions a{.plan = forecast,
                 .overlap_s = o.forward_ahead ? window : 0,
                 .uses = o.decide_uses,
                 .ranks = &in.ranks[x]};
    auto d = fab.AllToAll(in.actual[x], in.predicted[x], a);
    if (!d.ok()) return d.status();
    a.plan = false;
    a.ranks = &in.ranks_t[x];
    auto c = fab.AllToAll(in.actual_t[x], in.predicted_t[x], a);
    if (!c.ok()) return c.status();
    count(*d);
    pass.a2a += d->seconds + c->seconds;
    pass.compute += attn_fwd(x) + in.expert_fwd[x];
    pass.fwd += attn_fwd(x) + in.expert_fwd[x] + d->seconds + c->seconds;
  }
  for (int x = Lps - 1; x >= 0; --x) {  // backward: the matrices are known now
    A2AOptions a{.plan = true,
                 .overlap_s = o.hide_backward ? bwd_window(x) : 0,
                 .uses = o.decide_uses,
                 .ranks = &in.ranks[x]};
    auto cg = fab.AllToAll(in.actual[x], in.actual[x], a);
    if (!cg.ok()) return cg.status();
    a.plan = false;
    a.ranks = &in.ranks_t[x];
    auto dg = fab.AllToAll(in.actual_t[x], in.actual_t[x], a);
    if (!dg.ok()) return dg.status();
    count(*cg);
    pass.a2a += cg->seconds + dg->seconds;
    pass.compute += attn_bwd(x) + 2 * in.expert_fwd[x];
    pass.bwd += attn_bwd(x) + 2 * in.expert_fwd[x] + cg->seconds + dg->seconds;
  }
  return pass;
}

// An iteration's `slots` micro-batch passes, each from the circuits the one
// before left. A pass depends only on the circuits it starts from, so once a
// pass ends where it started the rest repeat it and are not re-simulated.
// `passes` gets the number simulated.
absl::StatusOr<PassTimes> RunIteration(Fabric& fab, const IterationInputs& in,
                                       const ComputeTimes& ct, const SimOptions& o, int slots,
                                       int& passes) {
  PassTimes total;
  auto before = fab.LiveCircuits();
  for (passes = 1; passes <= slots; ++passes) {
    auto pass = RunPass(fab, in, ct, o, /*forecast=*/true);
    if (!pass.ok()) return pass.status();
    auto after = fab.LiveCircuits();
    if (SameCircuits(before, after)) {
      total.Add(*pass, slots - passes + 1);
      return total;
    }
    total.Add(*pass, 1);
    before = std::move(after);
  }
  passes = slots;
  return total;
}

// DP gradient all-reduce rings and pipeline sends as server flows.
std::vector<ServerFlow> PipelineFlows(const ModelConfig& m, const Layout& l) {
  std::vector<ServerFlow> flows;
  const double bytes = kGpusPerServer * static_cast<double>(m.micro_batch) * m.seq_len * m.hidden *
                       m.dtype_bytes / m.tp;
  const int n = l.region_servers;
  for (int d = 0; d < l.dp; ++d)
    for (int p = 0; p + 1 < l.pp; ++p)
      for (int k = 0; k < n; ++k)
        flows.push_back({l.region_of(d, p) * n + k, l.region_of(d, p + 1) * n + k, bytes});
  return flows;
}

// One hop of a bidirectional ring all-reduce: half the bytes each way (on a
// switched fabric the same load per NIC as one direction; on directed or
// duplex links it uses both directions).
void Ring(std::vector<ServerFlow>& flows, int a, int b, double bytes) {
  flows.push_back({a, b, bytes / 2});
  flows.push_back({b, a, bytes / 2});
}

std::vector<ServerFlow> AllReduceFlows(const ModelConfig& m, const Layout& l) {
  std::vector<ServerFlow> flows;
  const int n = l.region_servers;
  const double h = m.hidden, b = m.dtype_bytes;
  const double attn_params = 2 * h * h + 2 * h * h * m.kv_heads / m.heads;
  for (int p = 0; p < l.pp; ++p) {
    int moe_layers = 0;
    for (int x = 0; x < l.layers_per_stage; ++x)
      if (p * l.layers_per_stage + x >= m.dense_layers) ++moe_layers;
    // Dense parameters: a ring over the DP x EP ranks of the stage.
    const int ranks = l.dp * l.ep;
    const double dense_gpu = l.layers_per_stage * attn_params * b / m.tp;
    std::vector<int> ring;
    for (int d = 0; d < l.dp; ++d)
      for (int k = 0; k < n; ++k) ring.push_back(l.region_of(d, p) * n + k);
    if (ranks > 1 && ring.size() > 1) {
      const double bytes = std::min(kGpusPerServer, m.tp) * 2.0 * (ranks - 1) / ranks * dense_gpu;
      for (size_t i = 0; i < ring.size(); ++i)
        Ring(flows, ring[i], ring[(i + 1) % ring.size()], bytes);
    }
    // Expert parameters: a ring over the DP replicas of each expert shard.
    if (l.dp > 1 && moe_layers > 0) {
      const double expert_gpu =
          moe_layers * (static_cast<double>(m.experts) / m.ep) * 3 * h * m.ffn_hidden * b / m.tp;
      const double bytes = kGpusPerServer * 2.0 * (l.dp - 1) / l.dp * expert_gpu;
      for (int d = 0; d < l.dp; ++d)
        for (int k = 0; k < n; ++k)
          Ring(flows, l.region_of(d, p) * n + k, l.region_of((d + 1) % l.dp, p) * n + k, bytes);
    }
  }
  return flows;
}

}  // namespace

absl::StatusOr<SimResult> Simulate(const ModelConfig& m, const SimOptions& o) {
  if (o.iterations < 1)
    return absl::InvalidArgumentError(
        absl::StrCat("iterations ", o.iterations, ": at least one measured iteration"));
  auto layout = MakeLayout(m, o.gpus);
  if (!layout.ok()) return layout.status();
  const Layout& l = *layout;
  auto workload = Workload::Create(m, l);
  if (!workload.ok()) return workload.status();
  auto fabric = MakeFabric(o.fabric, l);
  if (!fabric.ok()) return fabric.status();
  Fabric& fab = **fabric;
  auto predictor = MakePredictor(o.predictor);
  if (!predictor.ok()) return predictor.status();
  const ComputeTimes ct = Roofline(m);
  const int Lps = l.layers_per_stage;
  const bool mixnet = o.fabric.kind == FabricKind::kMixNet;

  SimResult res;
  res.servers = l.servers;
  res.regions = l.regions;
  res.routing = fab.Routing();
  const int slots = m.micro_batches + l.pp - 1;

  auto global_layer = [&](int r, int x) { return r * m.layers + l.stage_of_region(r) * Lps + x; };
  std::vector<std::vector<RegionTraffic>> traffic(Lps);
  auto observe = [&]() -> absl::Status {
    for (int x = 0; x < Lps; ++x)
      for (int r = 0; r < l.regions; ++r) {
        auto st =
            (*predictor)->Observe(global_layer(r, x), Direction::kDispatch, traffic[x][r].hosts);
        if (!st.ok()) return st;
      }
    return absl::OkStatus();
  };
  // Loads iteration `it`: its matrices, the predictor's forecast (the actual
  // matrix where it has none) and compute.
  auto load = [&](int it, IterationInputs& in) -> absl::Status {
    auto st = (*workload).SetIteration(it);
    if (!st.ok()) return st;
    in = {};
    in.actual.resize(Lps);
    in.predicted.resize(Lps);
    in.actual_t.resize(Lps);
    in.predicted_t.resize(Lps);
    in.ranks.resize(Lps);
    in.ranks_t.resize(Lps);
    in.expert_fwd.assign(Lps, 0);
    in.other_fwd.assign(Lps, 0);
    for (int x = 0; x < Lps; ++x) {
      traffic[x] = (*workload).StageLayer(x);
      for (int r = 0; r < l.regions; ++r) {
        const RegionTraffic& t = traffic[x][r];
        in.actual[x].push_back(t.hosts);
        auto p = (*predictor)->Predict(global_layer(r, x), Direction::kDispatch);
        in.predicted[x].push_back(p.ok() ? *p : t.hosts);
        in.actual_t[x].push_back(t.hosts.Transposed());
        in.ranks[x].push_back(t.ranks);
        in.ranks_t[x].push_back(t.ranks.Transposed());
        in.predicted_t[x].push_back(in.predicted[x].back().Transposed());
        if (t.moe) {
          in.expert_fwd[x] = std::max(in.expert_fwd[x], ExpertForward(ct, t.max_assignments));
        } else {
          in.other_fwd[x] = std::max(in.other_fwd[x], ct.dense_ffn_fwd);
        }
      }
    }
    return absl::OkStatus();
  };

  // Warm-up, iteration 0: topoopt's and mixnet-static's one plan per job from
  // this iteration's traffic; for mixnet one micro-batch that re-plans only
  // backward (no forecast yet).
  IterationInputs in;
  if (auto st = load(0, in); !st.ok()) return st;
  const std::vector<ServerFlow> pp_flows = PipelineFlows(m, l), dp_flows = AllReduceFlows(m, l);
  {
    JobTraffic job;
    job.a2a_mean.resize(l.regions);
    job.a2a_phases = 4.0 * Lps * slots;  // dispatch, combine and their gradients
    for (int r = 0; r < l.regions; ++r) {
      job.a2a_mean[r] = TrafficMatrix(l.region_servers);
      for (int x = 0; x < Lps; ++x) {
        const TrafficMatrix& d = in.actual[x][r];
        for (int i = 0; i < l.region_servers; ++i)
          for (int j = 0; j < l.region_servers; ++j)
            job.a2a_mean[r].Add(i, j, (d.at(i, j) + d.at(j, i)) / (2.0 * Lps));
      }
    }
    job.other = dp_flows;
    for (const ServerFlow& f : pp_flows)  // forward and backward, every slot
      job.other.push_back({f.src, f.dst, f.bytes * 2 * slots});
    if (auto st = fab.Prepare(job); !st.ok()) return st;
  }
  const double pp_one = fab.Transfer(pp_flows);
  const double dp_s = fab.Transfer(dp_flows);
  if (mixnet) {
    auto warm = RunPass(fab, in, ct, o, /*forecast=*/false);
    if (!warm.ok()) return warm.status();
    res.warmup_reconfigurations = static_cast<int>(warm->reconfigurations);
  }
  if (auto st = observe(); !st.ok()) return st;
  if (o.progress) o.progress(1.0 / (o.iterations + 1));

  PassTimes total;
  int passes_sum = 0;
  for (int it = 1; it <= o.iterations; ++it) {
    if (auto st = load(it, in); !st.ok()) return st;
    int passes = 0;
    auto iteration = RunIteration(fab, in, ct, o, slots, passes);
    if (!iteration.ok()) return iteration.status();
    total.Add(*iteration, 1);
    passes_sum += passes;
    if (auto st = observe(); !st.ok()) return st;
    if (o.progress) o.progress(static_cast<double>(it + 1) / (o.iterations + 1));
  }
  const double n = o.iterations;
  res.pp_s = slots * 2 * pp_one;
  res.dp_s = dp_s;
  res.a2a_s = total.a2a / n;
  res.switch_s = total.sw / n;
  res.compute_s = total.compute / n;
  res.reconfigurations = total.reconfigurations / n;
  res.switch_rounds = total.rounds / n;
  res.passes = static_cast<int>(std::lround(passes_sum / n));
  res.iteration_s = (total.fwd + total.bwd) / n + res.pp_s + dp_s;
  return res;
}

}  // namespace mixnet::sim
