// The iteration loop of the fabric simulator (see simulator.h). Main thread.
#include "sim/simulator.h"

#include <algorithm>

#include "absl/strings/str_cat.h"
#include "runtime/locality/predictor.h"
#include "sim/workload.h"

namespace mixnet::sim {
namespace {

struct PassTimes {
  double fwd = 0, bwd = 0, a2a = 0, sw = 0, compute = 0;
  int reconfigurations = 0;
};

std::vector<TrafficMatrix> Transposed(const std::vector<TrafficMatrix>& m) {
  std::vector<TrafficMatrix> out;
  out.reserve(m.size());
  for (const auto& x : m) out.push_back(x.Transposed());
  return out;
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
        flows.push_back({ring[i], ring[(i + 1) % ring.size()], bytes});
    }
    // Expert parameters: a ring over the DP replicas of each expert shard.
    if (l.dp > 1 && moe_layers > 0) {
      const double expert_gpu =
          moe_layers * (static_cast<double>(m.experts) / m.ep) * 3 * h * m.ffn_hidden * b / m.tp;
      const double bytes = kGpusPerServer * 2.0 * (l.dp - 1) / l.dp * expert_gpu;
      for (int d = 0; d < l.dp; ++d)
        for (int k = 0; k < n; ++k)
          flows.push_back(
              {l.region_of(d, p) * n + k, l.region_of((d + 1) % l.dp, p) * n + k, bytes});
    }
  }
  return flows;
}

}  // namespace

absl::StatusOr<SimResult> Simulate(const ModelConfig& m, const SimOptions& o) {
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
  const int passes = mixnet ? 2 : 1;  // mixnet: a warm pass sets the live circuits
  const double total_phases = static_cast<double>(o.iterations) * passes * Lps * 4;
  double phases_done = 0;

  SimResult res;
  res.servers = l.servers;
  res.regions = l.regions;
  const double pp_one = fab.Transfer(PipelineFlows(m, l));
  const double dp_s = fab.Transfer(AllReduceFlows(m, l));
  const int slots = m.micro_batches + l.pp - 1;

  auto observe = [&](const std::vector<std::vector<RegionTraffic>>& traffic) -> absl::Status {
    for (int x = 0; x < Lps; ++x)
      for (int r = 0; r < l.regions; ++r) {
        const int layer = r * m.layers + l.stage_of_region(r) * Lps + x;
        auto st = (*predictor)->Observe(layer, Direction::kDispatch, traffic[x][r].hosts);
        if (!st.ok()) return st;
      }
    return absl::OkStatus();
  };
  auto load = [&](int it, std::vector<std::vector<RegionTraffic>>& traffic) -> absl::Status {
    auto st = (*workload).SetIteration(it);
    if (!st.ok()) return st;
    traffic.resize(Lps);
    for (int x = 0; x < Lps; ++x) traffic[x] = (*workload).StageLayer(x);
    return absl::OkStatus();
  };

  std::vector<std::vector<RegionTraffic>> traffic;
  // Warm-up iteration: the predictor's first observation; topoopt's one-shot plan.
  if (auto st = load(0, traffic); !st.ok()) return st;
  if (auto st = observe(traffic); !st.ok()) return st;
  {
    std::vector<TrafficMatrix> mean(l.regions);
    for (int r = 0; r < l.regions; ++r) {
      mean[r] = TrafficMatrix(l.region_servers);
      for (int x = 0; x < Lps; ++x) {
        const TrafficMatrix& d = traffic[x][r].hosts;
        for (int i = 0; i < l.region_servers; ++i)
          for (int j = 0; j < l.region_servers; ++j)
            mean[r].Add(i, j, (d.at(i, j) + d.at(j, i)) / (2.0 * Lps));
      }
    }
    if (auto st = fab.Prepare(mean); !st.ok()) return st;
  }

  PassTimes total;
  for (int it = 1; it <= o.iterations; ++it) {
    if (auto st = load(it, traffic); !st.ok()) return st;
    std::vector<std::vector<TrafficMatrix>> actual(Lps), predicted(Lps);
    std::vector<double> expert_fwd(Lps), other_fwd(Lps);
    for (int x = 0; x < Lps; ++x) {
      double ex = 0, other = 0;
      for (int r = 0; r < l.regions; ++r) {
        const RegionTraffic& t = traffic[x][r];
        actual[x].push_back(t.hosts);
        const int layer = r * m.layers + l.stage_of_region(r) * Lps + x;
        auto p = (*predictor)->Predict(layer, Direction::kDispatch);
        predicted[x].push_back(p.ok() ? *p : t.hosts);
        if (t.moe) {
          ex = std::max(ex, ExpertForward(ct, t.max_assignments));
        } else {
          other = std::max(other, ct.dense_ffn_fwd);
        }
      }
      expert_fwd[x] = ex;
      other_fwd[x] = other;
    }
    PassTimes pass;
    for (int ps = 0; ps < passes; ++ps) {
      pass = {};
      for (int x = 0; x < Lps; ++x) {  // forward
        const double attn = ct.attn_fwd + other_fwd[x];
        A2AOptions a{.plan = true, .overlap_s = o.forward_ahead ? attn : 0, .uses = o.decide_uses};
        auto d = fab.AllToAll(actual[x], predicted[x], a);
        if (!d.ok()) return d.status();
        a.plan = false;
        auto c = fab.AllToAll(Transposed(actual[x]), Transposed(predicted[x]), a);
        if (!c.ok()) return c.status();
        pass.a2a += d->seconds + c->seconds;
        pass.sw += d->switch_s + c->switch_s;
        pass.reconfigurations += d->reconfigured_regions;
        pass.compute += attn + expert_fwd[x];
        pass.fwd += attn + expert_fwd[x] + d->seconds + c->seconds;
        if (o.progress) o.progress((phases_done += 2) / total_phases);
      }
      for (int x = Lps - 1; x >= 0; --x) {  // backward: the matrices are known now
        const double attn = 2 * (ct.attn_fwd + other_fwd[x]);
        const double window = o.backward_window_layer ? attn + 2 * expert_fwd[x] : attn;
        A2AOptions a{
            .plan = true, .overlap_s = o.hide_backward ? window : 0, .uses = o.decide_uses};
        auto cg = fab.AllToAll(actual[x], actual[x], a);
        if (!cg.ok()) return cg.status();
        a.plan = false;
        const auto at = Transposed(actual[x]);
        auto dg = fab.AllToAll(at, at, a);
        if (!dg.ok()) return dg.status();
        pass.a2a += cg->seconds + dg->seconds;
        pass.sw += cg->switch_s + dg->switch_s;
        pass.reconfigurations += cg->reconfigured_regions;
        pass.compute += attn + 2 * expert_fwd[x];
        pass.bwd += attn + 2 * expert_fwd[x] + cg->seconds + dg->seconds;
        if (o.progress) o.progress((phases_done += 2) / total_phases);
      }
    }
    total.fwd += pass.fwd;
    total.bwd += pass.bwd;
    total.a2a += pass.a2a;
    total.sw += pass.sw;
    total.compute += pass.compute;
    total.reconfigurations += pass.reconfigurations;
    if (auto st = observe(traffic); !st.ok()) return st;
  }
  const double n = o.iterations;
  res.pp_s = slots * 2 * pp_one;
  res.dp_s = dp_s;
  res.a2a_s = slots * total.a2a / n;
  res.switch_s = slots * total.sw / n;
  res.compute_s = slots * total.compute / n;
  res.reconfigurations = static_cast<int>(total.reconfigurations / n);
  res.iteration_s = slots * ((total.fwd + total.bwd) / n + 2 * pp_one) + dp_s;
  return res;
}

}  // namespace mixnet::sim
