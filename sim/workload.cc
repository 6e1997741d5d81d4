// Workload generation and the compute roofline (see workload.h). Main thread.
#include "sim/workload.h"

#include <algorithm>
#include <cmath>
#include <fstream>
#include <numeric>
#include <set>
#include <sstream>

#include "absl/strings/str_cat.h"
#include "runtime/locality/token_counts.h"

namespace mixnet::sim {

absl::StatusOr<Layout> MakeLayout(const ModelConfig& m, int gpus) {
  Layout l;
  const long per_replica = static_cast<long>(m.ep) * m.tp * m.pp;
  if (gpus < 1 || gpus % per_replica != 0)
    return absl::InvalidArgumentError(absl::StrCat(
        "model ", m.name, ": ", gpus, " GPUs is not a multiple of EP x TP x PP = ", per_replica));
  l.gpus = gpus;
  l.servers = gpus / kGpusPerServer;
  l.dp = static_cast<int>(gpus / per_replica);
  l.tp = m.tp;
  l.pp = m.pp;
  l.ep = m.ep;
  l.region_servers = m.ep * m.tp / kGpusPerServer;
  l.regions = l.dp * l.pp;
  l.layers_per_stage = m.layers / m.pp;
  return l;
}

ComputeTimes Roofline(const ModelConfig& m) {
  const double flops_s = m.gpu.peak_tflops * 1e12 * m.gpu.efficiency;
  const double hbm = m.gpu.hbm_GBps * 1e9;
  const double T = static_cast<double>(m.micro_batch) * m.seq_len;  // tokens per rank
  const double h = m.hidden, f = m.ffn_hidden, tp = m.tp, b = m.dtype_bytes;
  const double attn_params = 2 * h * h + 2 * h * h * m.kv_heads / m.heads;
  auto roof = [&](double flops, double bytes) { return std::max(flops / flops_s, bytes / hbm); };
  ComputeTimes c;
  // Attention: projections (2 flops per MAC) and causal scores / values.
  c.attn_fwd = roof(T * (2 * attn_params + 2 * m.seq_len * h) / tp, attn_params * b / tp);
  // Two TP all-reduces of the activations per layer over NVLink (ring).
  if (m.tp > 1) c.attn_fwd += 2 * T * h * b * 2 * (tp - 1) / tp / tp / (m.gpu.nvlink_GBps * 1e9);
  const double expert_flops = 6 * h * f;  // three matrices, 2 flops per MAC
  if (m.shared_experts > 0)
    c.attn_fwd +=
        roof(T * m.shared_experts * expert_flops / tp, m.shared_experts * 3 * h * f * b / tp);
  c.dense_ffn_fwd = roof(T * m.top_k * expert_flops / tp, m.top_k * 3 * h * f * b / tp);
  c.expert_per_assignment = expert_flops / tp / flops_s;
  c.expert_weights = (static_cast<double>(m.experts) / m.ep) * 3 * h * f * b / tp / hbm;
  return c;
}

double ExpertForward(const ComputeTimes& c, double assignments) {
  return std::max(assignments * c.expert_per_assignment, c.expert_weights);
}

absl::StatusOr<Workload> Workload::Create(const ModelConfig& m, const Layout& layout) {
  Workload w(m, layout);
  w.drift_rng_.seed(m.skew.seed * 7919u + 17u);
  const std::string& k = m.skew.kind;
  if (k != "zipf" && k != "uniform" && k != "fixed" && k != "trace")
    return absl::InvalidArgumentError(
        absl::StrCat("model ", m.name, ": skew kind '", k, "' (zipf, uniform, fixed or trace)"));
  w.log_weight_.assign(m.layers, std::vector<double>(m.experts, 0.0));
  for (int layer = 0; layer < m.layers; ++layer) {
    auto& lw = w.log_weight_[layer];
    if (k == "zipf") {
      std::vector<int> order(m.experts);
      std::iota(order.begin(), order.end(), 0);
      std::shuffle(order.begin(), order.end(), w.drift_rng_);
      for (int r = 0; r < m.experts; ++r) lw[order[r]] = -m.skew.zipf_s * std::log(r + 1.0);
    } else if (k == "fixed") {
      if (m.skew.shares.empty())
        return absl::InvalidArgumentError(
            absl::StrCat("model ", m.name, ": skew 'fixed' needs shares"));
      for (int e = 0; e < m.experts; ++e) {
        const double s = m.skew.shares[e % m.skew.shares.size()];
        if (!(s > 0))
          return absl::InvalidArgumentError(absl::StrCat("model ", m.name, ": share ", e, " <= 0"));
        lw[e] = std::log(s);
      }
    }
  }
  if (k == "trace") {
    auto st = w.LoadTrace();
    if (!st.ok()) return st;
  }
  return w;
}

absl::Status Workload::LoadTrace() {
  std::ifstream in(m_.skew.trace);
  if (!in)
    return absl::NotFoundError(absl::StrCat("cannot open token-count trace ", m_.skew.trace));
  std::stringstream all;
  all << in.rdbuf();
  std::vector<TrafficReport> reports;
  std::string line;
  std::istringstream lines(all.str());
  int lineno = 0;
  while (std::getline(lines, line)) {
    ++lineno;
    if (line.find_first_not_of(" \t\r") == std::string::npos) continue;
    auto r = TrafficReport::FromJson(line);
    if (!r.ok())
      return absl::InvalidArgumentError(
          absl::StrCat(m_.skew.trace, ":", lineno, ": ", r.status().message()));
    reports.push_back(std::move(*r));
  }
  std::set<int64_t> iterations;
  for (const auto& r : reports) iterations.insert(r.iteration);
  std::map<int64_t, int> iter_index;
  for (int64_t it : iterations) iter_index[it] = static_cast<int>(iter_index.size());
  const bool round_robin = m_.skew.placement == "round_robin";
  const int E = m_.experts, per_rank = E / m_.ep;
  for (const auto& r : reports) {
    for (const TokenCounts& c : r.entries) {
      if (c.key.direction != Direction::kDispatch) continue;
      const int R = c.num_ranks, Et = c.num_experts;
      // The trace's expert e lived on rank q(e): its tokens go to the model's
      // expert of the same number (same expert count; round_robin renumbered
      // so that rank q's experts form block q), else (same rank count) spread
      // evenly over the experts of the model's rank q.
      const bool same_experts = Et == E;
      if (R < 1 || Et % R != 0 || (!same_experts && R != m_.ep))
        return absl::InvalidArgumentError(
            absl::StrCat(m_.skew.trace, ": ", KeyString(c.key), " has ", Et, " experts over ", R,
                         " ranks; model ", m_.name, " has ", E, " experts over EP ", m_.ep,
                         " ranks (need the same expert count, or the same rank count)"));
      if (trace_ranks_ == 0) trace_ranks_ = R;
      if (R != trace_ranks_)
        return absl::InvalidArgumentError(
            absl::StrCat(m_.skew.trace, ": rank count changes at ", KeyString(c.key)));
      const int per_t = Et / R;
      auto& v = trace_[{iter_index[r.iteration], c.key.layer}];
      v.resize(static_cast<size_t>(R) * E, 0.0);
      for (int row = 0; row < R; ++row)
        for (int e = 0; e < Et; ++e) {
          const double n = static_cast<double>(c.at(row, e));
          if (n == 0) continue;
          const int q = round_robin ? e % R : e / per_t;
          double* out = &v[static_cast<size_t>(row) * E];
          if (same_experts) {
            out[round_robin ? q * per_t + e / R : e] += n;
          } else {
            for (int k = 0; k < per_rank; ++k) out[q * per_rank + k] += n / per_rank;
          }
        }
      trace_layers_ = std::max(trace_layers_, c.key.layer + 1);
    }
  }
  trace_iterations_ = static_cast<int>(iter_index.size());
  if (trace_.empty())
    return absl::InvalidArgumentError(absl::StrCat(m_.skew.trace, ": no dispatch token counts"));
  return absl::OkStatus();
}

absl::Status Workload::SetIteration(int it) {
  if (it < iteration_)
    return absl::InvalidArgumentError(absl::StrCat("iteration ", it, " is before ", iteration_));
  std::normal_distribution<double> step(0.0, m_.skew.drift);
  for (; iteration_ < it; ++iteration_) {
    if (m_.skew.kind != "zipf" || m_.skew.drift <= 0) continue;
    for (auto& lw : log_weight_)
      for (double& x : lw) x += step(drift_rng_);
  }
  return absl::OkStatus();
}

std::vector<double> Workload::Popularity(int layer) const {
  const auto& lw = log_weight_[layer];
  std::vector<double> p(lw.size());
  const double mx = *std::max_element(lw.begin(), lw.end());
  double sum = 0;
  for (size_t e = 0; e < lw.size(); ++e) sum += p[e] = std::exp(lw[e] - mx);
  for (double& x : p) x /= sum;
  return p;
}

void Workload::SourceShares(int layer, int region, int rank, std::mt19937_64& rng,
                            std::vector<double>& out) const {
  const int E = m_.experts;
  out.assign(E, 0.0);
  if (m_.skew.kind == "trace") {
    const int ti = trace_iterations_ > 0 ? iteration_ % trace_iterations_ : 0;
    auto it = trace_.find({ti, layer % std::max(1, trace_layers_)});
    if (it == trace_.end()) it = trace_.begin();
    const int row = (rank + region * m_.ep) % trace_ranks_;
    for (int e = 0; e < E; ++e) out[e] = it->second[static_cast<size_t>(row) * E + e];
  } else {
    out = Popularity(layer);
    if (m_.skew.noise > 0) {
      std::uniform_real_distribution<double> u(-m_.skew.noise, m_.skew.noise);
      for (double& x : out) x *= 1 + u(rng);
    }
  }
  double sum = std::accumulate(out.begin(), out.end(), 0.0);
  if (!(sum > 0)) {
    std::fill(out.begin(), out.end(), 1.0 / E);
    return;
  }
  for (double& x : out) x /= sum;
}

double Workload::RankDispatchBytes() const {
  return static_cast<double>(m_.micro_batch) * m_.seq_len * m_.top_k * m_.hidden * m_.dtype_bytes;
}

std::vector<RegionTraffic> Workload::StageLayer(int local_layer) const {
  std::vector<RegionTraffic> out(l_.regions);
  const int E = m_.experts, EP = m_.ep, TP = m_.tp, n = l_.region_servers;
  const int per_rank = E / EP;
  const double assignments = static_cast<double>(m_.micro_batch) * m_.seq_len * m_.top_k;
  const double bytes_per_assignment = static_cast<double>(m_.hidden) * m_.dtype_bytes;
  std::vector<double> shares, rank_bytes(static_cast<size_t>(EP) * EP), received(EP);
  for (int r = 0; r < l_.regions; ++r) {
    const int layer = l_.stage_of_region(r) * l_.layers_per_stage + local_layer;
    RegionTraffic& rt = out[r];
    rt.hosts = TrafficMatrix(n);
    rt.ranks = TrafficMatrix(EP);
    if (layer < m_.dense_layers) {
      rt.moe = false;
      continue;
    }
    std::mt19937_64 rng((static_cast<uint64_t>(m_.skew.seed) << 40) ^
                        (static_cast<uint64_t>(iteration_) << 24) ^
                        (static_cast<uint64_t>(layer) << 16) ^ static_cast<uint64_t>(r));
    std::fill(received.begin(), received.end(), 0.0);
    for (int i = 0; i < EP; ++i) {
      SourceShares(layer, r, i, rng, shares);
      for (int j = 0; j < EP; ++j) {
        double s = 0;
        for (int e = j * per_rank; e < (j + 1) * per_rank; ++e) s += shares[e];
        rank_bytes[static_cast<size_t>(i) * EP + j] = s * assignments;
        received[j] += s * assignments;
      }
    }
    rt.max_assignments = *std::max_element(received.begin(), received.end());
    // Rank-aligned: GPU (i, t) sends its 1/TP of rank i's bytes to GPU (j, t).
    for (int i = 0; i < EP; ++i)
      for (int j = 0; j < EP; ++j) {
        const double rb = rank_bytes[static_cast<size_t>(i) * EP + j] * bytes_per_assignment;
        rt.ranks.Add(i, j, rb);
        const double b = rb / TP;
        for (int t = 0; t < TP; ++t) {
          const int si = (i * TP + t) / kGpusPerServer, sj = (j * TP + t) / kGpusPerServer;
          rt.hosts.Add(si, sj, b);
        }
      }
  }
  return out;
}

}  // namespace mixnet::sim
