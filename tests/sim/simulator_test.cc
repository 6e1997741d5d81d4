// Config loading, workload (skew generator, token-count traces) and whole
// iterations of the simulator against closed forms, among them MixNet's
// switches charged where they happen (hand-counted rounds x unhidden time).
#include "sim/simulator.h"

#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>

#include "gtest/gtest.h"
#include "mixnet_build_paths.h"  // MIXNET_SIM_DATA_DIR
#include "runtime/locality/token_counts.h"
#include "sim/workload.h"

namespace mixnet::sim {
namespace {

const std::string kData = MIXNET_SIM_DATA_DIR;

// What one rank of Tiny() dispatches per all-to-all, by hand: micro_batch 2 x
// seq_len 1024 tokens, each to top_k 2 experts, hidden 1024 x 2 bytes (bf16).
constexpr double kTinyRankBytes = 2.0 * 1024 * 2 * 1024 * 2;

// One region of 8 servers (EP8 TP8), two pipeline stages, 2 layers.
ModelConfig Tiny() {
  ModelConfig m;
  m.name = "tiny";
  m.layers = 4;
  m.hidden = 1024;
  m.ffn_hidden = 2048;
  m.heads = 8;
  m.kv_heads = 8;
  m.experts = 8;
  m.top_k = 2;
  m.seq_len = 1024;
  m.micro_batch = 2;
  m.micro_batches = 4;
  m.dp = 1;
  m.tp = 8;
  m.pp = 2;
  m.ep = 8;
  m.gpus = 128;
  m.skew.kind = "uniform";
  m.skew.noise = 0;
  return m;
}

// Tiny() with Zipf popularity of exponent `s` drifting by `drift`, no noise.
ModelConfig ZipfTiny(double s, double drift) {
  ModelConfig m = Tiny();
  m.skew.kind = "zipf";
  m.skew.zipf_s = s;
  m.skew.drift = drift;
  m.skew.noise = 0;
  return m;
}

TEST(SimConfigTest, EveryShippedModelLoads) {
  for (const std::string name :
       {"mixtral-8x7b", "mixtral-8x22b", "llama-moe", "qwen-moe", "deepseek-v3"}) {
    auto m = FindModel(name, kData + "/models");
    ASSERT_TRUE(m.ok()) << name << ": " << m.status();
    EXPECT_EQ(m->name, name);
    auto l = MakeLayout(*m, m->gpus);
    ASSERT_TRUE(l.ok()) << l.status();
    EXPECT_EQ(l->region_servers * 8, m->ep * m->tp);
  }
  auto m = FindModel("mixtral-8x22b", kData + "/models");
  ASSERT_TRUE(m.ok());
  EXPECT_EQ(m->layers, 56);
  EXPECT_EQ(m->gpu.name, "h100");
  auto l = MakeLayout(*m, 1024);
  ASSERT_TRUE(l.ok());
  EXPECT_EQ(l->regions, 16);  // the paper: 16 regions of 8 servers
  EXPECT_EQ(l->region_servers, 8);
  EXPECT_FALSE(MakeLayout(*m, 1000).ok());
  EXPECT_EQ(FindModel("gpt-5", kData + "/models").status().code(), absl::StatusCode::kNotFound);
}

TEST(SimConfigTest, BadModelNamesTheField) {
  const std::string path = ::testing::TempDir() + "/bad_model.yaml";
  std::ofstream(path)
      << "name: bad\nexperts: 6\nparallel: {dp: 1, tp: 8, pp: 1, ep: 4}\ngpus: 32\n";
  auto m = LoadModel(path);
  ASSERT_FALSE(m.ok());
  EXPECT_NE(m.status().message().find("experts 6 not divisible by ep 4"), std::string::npos)
      << m.status();
}

TEST(SimWorkloadTest, ZipfSkewAndDrift) {
  ModelConfig m = ZipfTiny(1.5, 0.3);
  auto l = MakeLayout(m, 128);
  ASSERT_TRUE(l.ok());
  auto w = Workload::Create(m, *l);
  ASSERT_TRUE(w.ok()) << w.status();
  auto p0 = w->Popularity(0);
  std::sort(p0.rbegin(), p0.rend());
  EXPECT_NEAR(p0[0] / p0[1], std::pow(2.0, 1.5), 1e-9);  // Zipf ratio of the top two
  const auto before = w->Popularity(2);
  ASSERT_TRUE(w->SetIteration(5).ok());
  EXPECT_NE(w->Popularity(2), before);  // hot experts drift
  // Rows: every source rank sends tokens x k x hidden x dtype in all.
  const auto t = w->StageLayer(0);
  double row = 0;
  for (int j = 0; j < 8; ++j) row += t[0].hosts.at(3, j);
  EXPECT_EQ(w->RankDispatchBytes(), kTinyRankBytes);
  EXPECT_NEAR(row, kTinyRankBytes, 1e-3);
}

TEST(SimWorkloadTest, TokenCountTraceDrivesTheMatrix) {
  ModelConfig m = Tiny();
  TrafficReport report;
  report.iteration = 7;
  TokenCounts c = TokenCounts::Zero({.layer = 0, .micro_batch = 0}, 8, 8);
  for (int r = 0; r < 8; ++r) c.at(r, 5) = 100;  // every rank sends only to expert 5
  report.entries.push_back(c);
  const std::string path = ::testing::TempDir() + "/trace.jsonl";
  std::ofstream(path) << report.ToJson() << "\n";
  m.skew.kind = "trace";
  m.skew.trace = path;
  auto l = MakeLayout(m, 128);
  ASSERT_TRUE(l.ok());
  auto w = Workload::Create(m, *l);
  ASSERT_TRUE(w.ok()) << w.status();
  const auto t = w->StageLayer(1);
  for (int i = 0; i < 8; ++i)
    for (int j = 0; j < 8; ++j)
      EXPECT_NEAR(t[0].hosts.at(i, j), j == 5 ? kTinyRankBytes : 0.0, 1e-6);
  // Neither the expert count nor the rank count matches: named.
  TrafficReport odd;
  odd.entries.push_back(TokenCounts::Zero({.layer = 0, .micro_batch = 0}, 6, 12));
  odd.entries.back().at(0, 0) = 1;
  std::ofstream(path) << odd.ToJson() << "\n";
  auto bad = Workload::Create(m, *l);
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.status().message().find("12 experts over 6 ranks"), std::string::npos)
      << bad.status();
}

TEST(SimulatorTest, UniformIterationOnFatTreeIsAnalytic) {
  const ModelConfig m = Tiny();
  SimOptions o;
  o.gpus = 128;
  o.fabric = {.kind = FabricKind::kFatTree, .link_gbps = 400};
  auto r = Simulate(m, o);
  ASSERT_TRUE(r.ok()) << r.status();
  // Per all-to-all each server sends 7/8 of its rank's bytes over 8 NICs.
  const double a2a = 7.0 / 8 * kTinyRankBytes / (8 * 400e9 / 8);
  const int slots = m.micro_batches + m.pp - 1;
  const int per_mb = 2 * 4;  // 2 layers per stage x (dispatch, combine, 2 backward)
  EXPECT_NEAR(r->a2a_s, slots * per_mb * a2a, 1e-9);
  EXPECT_GT(r->compute_s, 0);
  EXPECT_NEAR(r->iteration_s, r->a2a_s + r->compute_s + r->pp_s + r->dp_s, 1e-9);
}

TEST(SimulatorTest, FabricsOrderAsExpectedOnASkewedModel) {
  ModelConfig m = Tiny();
  m.skew.kind = "zipf";
  m.skew.zipf_s = 1.2;
  m.skew.drift = 0.05;
  m.skew.noise = 0.05;
  auto run = [&](FabricOptions f) {
    SimOptions o;
    o.gpus = 128;
    o.fabric = f;
    auto r = Simulate(m, o);
    EXPECT_TRUE(r.ok()) << r.status();
    return r.ok() ? *r : SimResult{};
  };
  const SimResult ft = run({.kind = FabricKind::kFatTree, .link_gbps = 100});
  const SimResult os = run({.kind = FabricKind::kOversub, .link_gbps = 100, .oversub = 8});
  const SimResult mix = run({.kind = FabricKind::kMixNet, .link_gbps = 100, .switch_s = 0.0});
  const SimResult topo = run({.kind = FabricKind::kTopoOpt, .link_gbps = 100});
  EXPECT_GT(os.a2a_s, ft.a2a_s);
  EXPECT_GE(mix.a2a_s, ft.a2a_s * (1 - 1e-9));  // the fat-tree gives every pair all 8 NICs
  EXPECT_EQ(mix.switch_s, 0);
  // Free switching re-plans from the random regular start; a switch slower
  // than anything it could gain never happens, so the start stays.
  const SimResult slow = run({.kind = FabricKind::kMixNet, .link_gbps = 100, .switch_s = 10});
  EXPECT_EQ(slow.reconfigurations, 0);
  EXPECT_EQ(slow.switch_s, 0);
  EXPECT_LT(mix.a2a_s, slow.a2a_s);
  EXPECT_GT(topo.a2a_s, 0);
}

// A token-count trace for Tiny(): per iteration (outer) and layer (inner),
// every rank r sends all its tokens to the expert on rank r ^ mask, so host r
// talks only to host r ^ mask: a perfect matching whose best topology (all 6
// circuits of each host to its partner) differs for every mask.
std::string XorTrace(const std::string& name, const std::vector<std::vector<int>>& masks) {
  const std::string path = ::testing::TempDir() + "/" + name + ".jsonl";
  std::ofstream out(path);
  for (size_t it = 0; it < masks.size(); ++it) {
    TrafficReport report;
    report.iteration = static_cast<int64_t>(it);
    for (size_t layer = 0; layer < masks[it].size(); ++layer) {
      TokenCounts c = TokenCounts::Zero({.layer = static_cast<int>(layer), .micro_batch = 0}, 8, 8);
      for (int r = 0; r < 8; ++r) c.at(r, r ^ masks[it][layer]) = 100;
      report.entries.push_back(c);
    }
    out << report.ToJson() << "\n";
  }
  return path;
}

// MixNet on Tiny() driven by `trace`, switching whenever a plan is better at
// all (uses 1e9: Decide's gain beats any cost, so the switches do not depend
// on the switching time).
SimResult MixNetOnTrace(const std::string& trace, double switch_s, bool hide, int iterations) {
  ModelConfig m = Tiny();
  m.skew.kind = "trace";
  m.skew.trace = trace;
  SimOptions o;
  o.gpus = 128;
  o.iterations = iterations;
  o.decide_uses = 1e9;
  o.forward_ahead = hide;
  o.hide_backward = hide;
  o.fabric = {.kind = FabricKind::kMixNet, .link_gbps = 100, .switch_s = switch_s};
  auto r = Simulate(m, o);
  EXPECT_TRUE(r.ok()) << r.status();
  return r.ok() ? *r : SimResult{};
}

// Layer 0 pairs hosts i, i^1 and layer 1 hosts i, i^2, every iteration (so
// the "last" prediction is exact). Per stage (2 layers, one region each) a
// micro-batch runs F0 F1 B1 B0. The warm-up ends on layer 0's topology T0, so
// every micro-batch: F0 keeps T0, F1 switches to T1 (round 1, hidden under
// attention forward a), B1 keeps T1, B0 switches to T0 (round 2, hidden under
// layer 1's attention backward 2a). 5 slots (4 micro-batches + PP 2 - 1):
// 10 rounds, 20 region switches per iteration. With S = 1.5 a, round 1 costs
// 0.5 a and round 2 nothing; not hidden, each costs S.
TEST(SimulatorTest, EverySwitchIsChargedWhereItHappens) {
  const std::string trace = XorTrace("xor_layers", {{1, 2}});
  const double a = Roofline(Tiny()).attn_fwd;
  ASSERT_GT(a, 0);
  const double S = 1.5 * a;
  const int slots = 5;
  const SimResult free_hidden = MixNetOnTrace(trace, 0, true, 1);
  const SimResult hidden = MixNetOnTrace(trace, S, true, 1);
  for (const SimResult* r : {&free_hidden, &hidden}) {
    EXPECT_EQ(r->routing, "v2");
    EXPECT_DOUBLE_EQ(r->switch_rounds, 2 * slots);
    EXPECT_DOUBLE_EQ(r->reconfigurations, 2 * 2 * slots);
    // Warm-up: forward keeps the random start; B1 and B0 switch both regions.
    EXPECT_EQ(r->warmup_reconfigurations, 4);
  }
  EXPECT_EQ(free_hidden.switch_s, 0);
  EXPECT_NEAR(hidden.switch_s, slots * 0.5 * a, 1e-12);
  EXPECT_NEAR(hidden.a2a_s, free_hidden.a2a_s + slots * 0.5 * a, 1e-9);
  EXPECT_NEAR(hidden.iteration_s, free_hidden.iteration_s + slots * 0.5 * a, 1e-9);

  const SimResult free_shown = MixNetOnTrace(trace, 0, false, 1);
  const SimResult shown = MixNetOnTrace(trace, S, false, 1);
  EXPECT_DOUBLE_EQ(shown.switch_rounds, 2 * slots);
  EXPECT_NEAR(shown.switch_s, 2 * slots * S, 1e-12);
  EXPECT_NEAR(shown.iteration_s, free_shown.iteration_s + 2 * slots * S, 1e-9);
  EXPECT_NEAR(free_shown.iteration_s, free_hidden.iteration_s, 1e-9);
}

// Every layer pairs i, i^1 (P) in iterations 0 and 2 and i, i^2 (Q) in 1: the
// forecast (last iteration's matrix) is always the other one. Warm-up: B1
// switches both regions to T_P. Iteration 1 (actual Q, forecast P), first
// micro-batch: F0 and F1 keep T_P, B1 switches to T_Q, B0 keeps it (1 round);
// every later one: F0 back to T_P, B1 to T_Q (2 rounds). Iteration 2 mirrors
// it. So 1 + 4 x 2 = 9 rounds (18 region switches) per iteration, each
// charged S unhidden: the first micro-batch's switch counts too.
TEST(SimulatorTest, TheFirstSwitchOfAnIterationIsCharged) {
  const std::string trace = XorTrace("xor_iterations", {{1}, {2}});
  const double S = 0.025;
  const SimResult free = MixNetOnTrace(trace, 0, false, 2);
  const SimResult charged = MixNetOnTrace(trace, S, false, 2);
  for (const SimResult* r : {&free, &charged}) {
    EXPECT_EQ(r->warmup_reconfigurations, 2);
    EXPECT_DOUBLE_EQ(r->switch_rounds, 9);
    EXPECT_DOUBLE_EQ(r->reconfigurations, 18);
  }
  EXPECT_NEAR(charged.switch_s, 9 * S, 1e-12);
  EXPECT_NEAR(charged.iteration_s, free.iteration_s + 9 * S, 1e-9);
  EXPECT_NEAR(charged.a2a_s, free.a2a_s + 9 * S, 1e-9);
}

// Every layer pairs hosts i, i^1 in every iteration. MixNet with free
// switching re-plans in the warm-up to the one best topology (each host's 6
// circuits to its partner) and never switches again: switching is disabled by
// its own decisions, which is mixnet-static's definition (one plan, no
// switching). Each phase moves B = kTinyRankBytes per pair over 6 circuits
// and 2 EPS NICs at 100G: B / 8R; an iteration has 5 slots x 2 layers x 4
// phases.
TEST(SimulatorTest, MixNetStaticIsMixNetWithoutSwitching) {
  const std::string trace = XorTrace("xor_static", {{1, 1}});
  const double R = 100e9 / 8;
  const double a2a = 5 * 2 * 4 * kTinyRankBytes / (8 * R);
  const SimResult mix = MixNetOnTrace(trace, 0, true, 2);
  ModelConfig m = Tiny();
  ASSERT_TRUE(UseTrace(m, trace, "contiguous").ok());
  SimOptions o;
  o.gpus = 128;
  o.iterations = 2;
  o.fabric = {.kind = FabricKind::kMixNetStatic, .link_gbps = 100, .switch_s = 0};
  auto stat = Simulate(m, o);
  ASSERT_TRUE(stat.ok()) << stat.status();
  EXPECT_EQ(mix.reconfigurations, 0);
  EXPECT_EQ(stat->reconfigurations, 0);
  EXPECT_EQ(stat->warmup_reconfigurations, 0);
  EXPECT_EQ(stat->routing, "v2");
  EXPECT_NEAR(stat->a2a_s, a2a, 1e-9);
  EXPECT_NEAR(mix.a2a_s, a2a, 1e-9);
  EXPECT_NEAR(stat->iteration_s, mix.iteration_s, 1e-9);
}

// A tiny trace as the demo records it (16 experts over 8 ranks, expert e on
// rank e % 8): rank r sends 60 tokens to expert r^1 and 40 to (r^1) + 8, both
// on rank r^1, so with round_robin placement each host talks only to its
// partner and mixnet-static's one plan gives the pair all 6 circuits: each
// phase B / 8R at 100G (as above). Read as contiguous (expert e on rank e / 2)
// the same counts pair nothing: r's tokens go to ranks (r^1) / 2 and
// (r^1) / 2 + 4, a different matrix and a slower plan.
TEST(SimulatorTest, ATraceDrivesThePlanner) {
  const std::string path = ::testing::TempDir() + "/demo_trace.jsonl";
  {
    std::ofstream out(path);
    for (int it = 0; it < 2; ++it) {
      TrafficReport report;
      report.iteration = it;
      for (int layer = 0; layer < 2; ++layer) {
        TokenCounts c = TokenCounts::Zero({.layer = layer, .micro_batch = 0}, 8, 16);
        for (int r = 0; r < 8; ++r) {
          c.at(r, r ^ 1) = 60;
          c.at(r, (r ^ 1) + 8) = 40;
        }
        report.entries.push_back(c);
      }
      out << report.ToJson() << "\n";
    }
  }
  auto run = [&](const std::string& placement) {
    ModelConfig m = Tiny();
    EXPECT_TRUE(UseTrace(m, path, placement).ok());
    SimOptions o;
    o.gpus = 128;
    o.fabric = {.kind = FabricKind::kMixNetStatic, .link_gbps = 100};
    auto r = Simulate(m, o);
    EXPECT_TRUE(r.ok()) << r.status();
    return r.ok() ? *r : SimResult{};
  };
  const double R = 100e9 / 8;
  const double a2a = 5 * 2 * 4 * kTinyRankBytes / (8 * R);
  EXPECT_NEAR(run("round_robin").a2a_s, a2a, 1e-9);
  EXPECT_GT(run("contiguous").a2a_s, 1.2 * a2a);
  ModelConfig m = Tiny();
  EXPECT_FALSE(UseTrace(m, path, "striped").ok());
}

// Zipf popularity over a random expert order per layer, drifting as a
// log-popularity random walk of std-dev s per iteration. Per layer: the
// layers' log-popularities are uncorrelated (mean Pearson correlation of
// adjacent layers near 0; its std-error over 55 pairs of 8 experts is about
// 0.05). Drift: after t iterations log(p_a / p_b) has moved by a normal of
// std-dev s sqrt(2 t); 56 layers x 4 disjoint pairs give 224 samples, whose
// std-dev is within 15 % (about 3 std-errors).
TEST(SimWorkloadTest, PopularityDiffersPerLayerAndDrifts) {
  ModelConfig m = ZipfTiny(1.0, 0.1);
  m.layers = 56;
  m.skew.seed = 7;
  auto l = MakeLayout(m, 128);
  ASSERT_TRUE(l.ok());
  auto w = Workload::Create(m, *l);
  ASSERT_TRUE(w.ok()) << w.status();
  auto logs = [&](int layer) {
    std::vector<double> x = w->Popularity(layer);
    for (double& v : x) v = std::log(v);
    return x;
  };
  auto corr = [](const std::vector<double>& a, const std::vector<double>& b) {
    const double n = static_cast<double>(a.size());
    double ma = 0, mb = 0;
    for (size_t i = 0; i < a.size(); ++i) ma += a[i] / n, mb += b[i] / n;
    double ab = 0, aa = 0, bb = 0;
    for (size_t i = 0; i < a.size(); ++i) {
      ab += (a[i] - ma) * (b[i] - mb);
      aa += (a[i] - ma) * (a[i] - ma);
      bb += (b[i] - mb) * (b[i] - mb);
    }
    return ab / std::sqrt(aa * bb);
  };
  double mean_corr = 0;
  for (int layer = 0; layer + 1 < 56; ++layer) mean_corr += corr(logs(layer), logs(layer + 1)) / 55;
  EXPECT_LT(std::abs(mean_corr), 0.15);
  std::vector<std::vector<double>> before(56);
  for (int layer = 0; layer < 56; ++layer) before[layer] = logs(layer);
  const int t = 25;
  ASSERT_TRUE(w->SetIteration(t).ok());
  double sq = 0;
  int samples = 0;
  for (int layer = 0; layer < 56; ++layer) {
    const auto after = logs(layer);
    for (int a = 0; a < 8; a += 2) {
      const double moved = (after[a] - after[a + 1]) - (before[layer][a] - before[layer][a + 1]);
      sq += moved * moved;
      ++samples;
    }
  }
  const double expected = 0.1 * std::sqrt(2.0 * t);
  EXPECT_NEAR(std::sqrt(sq / samples), expected, 0.15 * expected);
}

TEST(SimulatorTest, BadIterationCountIsRejected) {
  SimOptions o;
  o.gpus = 128;
  o.iterations = 0;
  auto r = Simulate(Tiny(), o);
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("iterations 0"), std::string::npos) << r.status();
}

}  // namespace
}  // namespace mixnet::sim
