// The demo's training step, its accounting and its result files (label
// cpu), against hand-worked cases: the order of one iteration's phases and
// plan requests, floors and utilisation of made-up link loads, the static
// fabric's circuits in its spec, and a phase's result files written by hand.
#include <filesystem>
#include <fstream>

#include "absl/strings/str_cat.h"
#include "apps/demo/accounting.h"
#include "apps/demo/fabric_spec.h"
#include "apps/demo/phase_result.h"
#include "apps/demo/run_config.h"
#include "apps/demo/step.h"
#include "gtest/gtest.h"
#include "nlohmann/json.hpp"

namespace mixnet::demo {
namespace {

using control::kBackwardPass;
using control::kForwardPass;
using Kind = StepItem::Kind;

std::string Describe(const StepItem& s) {
  switch (s.kind) {
    case Kind::kCompute:
      return absl::StrCat(s.name, s.layer);
    case Kind::kAlltoall:
      return absl::StrCat(s.name, s.layer, s.transpose ? "T" : "");
    case Kind::kAwaitPlan:
      return absl::StrCat("await(", s.plan.iteration, ",", s.plan.layer,
                          s.plan.pass == kBackwardPass ? ",b" : ",f",
                          s.plan.combine ? ",combine" : "", ")");
    case Kind::kReport:
      return absl::StrCat("report", s.layer, s.pass == kBackwardPass ? "b" : "f",
                          s.direction == Direction::kCombine ? "c" : "d", "->(", s.plan.iteration,
                          ",", s.plan.layer, s.plan.pass == kBackwardPass ? ",b" : ",f",
                          s.plan.combine ? ",combine" : "", s.plan.exact ? ",exact" : "", ")");
  }
  return "?";
}

std::vector<std::string> Names(int64_t it, int64_t iterations, int layers,
                               bool replan_combine = false) {
  std::vector<std::string> out;
  for (const StepItem& s :
       IterationSteps(it, iterations, layers, ComputeOptions{}, replan_combine)) {
    out.push_back(Describe(s));
  }
  return out;
}

TEST(DemoStep, TwoLayerIterationInOrder) {
  // Iteration 1 of 3, two layers: written out by hand from step.h.
  const std::vector<std::string> want = {
      "attention0",     "await(1,0,f)",    "dispatch0",
      "expert0",        "combine0T",       "report0fd->(1,1,f)",
      "attention1",     "await(1,1,f)",    "dispatch1",
      "expert1",        "combine1T",       "report1fd->(1,1,b,exact)",
      "head1",          "await(1,1,b)",    "combine-grad1",
      "expert-bwd1",    "dispatch-grad1T", "report0bd->(1,0,b,exact)",
      "attention-bwd1", "await(1,0,b)",    "combine-grad0",
      "expert-bwd0",    "dispatch-grad0T", "report0bc->(2,0,f)",
      "attention-bwd0"};
  EXPECT_EQ(Names(1, 3, 2), want);
}

TEST(DemoStep, ReplannedCombineAwaitsAPlanFromItsDispatch) {
  // Iteration 1 of 3, two layers, with the combine re-planned: written out by
  // hand from step.h. D_l's row goes right after the dispatch with the exact
  // request for the combine alone; the combine awaits it after the expert
  // compute; the combine's row (D_l transposed) carries the request that
  // D_l's row carried without re-planning. The backward pass is unchanged.
  const std::vector<std::string> want = {"attention0",      "await(1,0,f)",
                                         "dispatch0",       "report0fd->(1,0,f,combine,exact)",
                                         "expert0",         "await(1,0,f,combine)",
                                         "combine0T",       "report0fc->(1,1,f)",
                                         "attention1",      "await(1,1,f)",
                                         "dispatch1",       "report1fd->(1,1,f,combine,exact)",
                                         "expert1",         "await(1,1,f,combine)",
                                         "combine1T",       "report1fc->(1,1,b,exact)",
                                         "head1",           "await(1,1,b)",
                                         "combine-grad1",   "expert-bwd1",
                                         "dispatch-grad1T", "report0bd->(1,0,b,exact)",
                                         "attention-bwd1",  "await(1,0,b)",
                                         "combine-grad0",   "expert-bwd0",
                                         "dispatch-grad0T", "report0bc->(2,0,f)",
                                         "attention-bwd0"};
  EXPECT_EQ(Names(1, 3, 2, true), want);
  // The first iteration's combines are planned too (no forecast exists for
  // its dispatches, but their matrices are known once they ran).
  const std::vector<std::string> first = Names(0, 3, 2, true);
  EXPECT_EQ(first[1], "dispatch0");
  EXPECT_EQ(first[2], "report0fd->(0,0,f,combine,exact)");
  EXPECT_EQ(first[4], "await(0,0,f,combine)");
}

TEST(DemoStep, ReplannedCombineHidesItsRoundBehindTheExpertCompute) {
  // The combine's window is the expert compute (40 ms by default, 15 here);
  // the shortest window is the least of it and the others (20 by default).
  EXPECT_DOUBLE_EQ(ShortestPlanWindowMs(4, ComputeOptions{}, true), 20);
  ComputeOptions c;
  c.expert_fwd_ms = 15;
  EXPECT_DOUBLE_EQ(ShortestPlanWindowMs(4, c, false), 20);
  EXPECT_DOUBLE_EQ(ShortestPlanWindowMs(4, c, true), 15);
  PlanWindow window;
  std::vector<double> at_awaits;
  for (const StepItem& s : IterationSteps(1, 3, 1, c, true)) {
    window.Step(s);
    if (s.kind == Kind::kAwaitPlan) at_awaits.push_back(window.ms());
  }
  // One layer, the window counted from this iteration's start: forward layer
  // 0 awaits after the attention (20), its combine after the expert (15),
  // backward layer 0 after the head (20).
  EXPECT_EQ(at_awaits, (std::vector<double>{20, 15, 20}));
}

TEST(DemoStep, EachPlanRequestCarriesItsOwnWindow) {
  // Distinct compute times, so that each window names where it came from:
  // attention 3, expert 5, head 7, expert backward 11, attention backward 13.
  ComputeOptions c;
  c.attention_fwd_ms = 3;
  c.expert_fwd_ms = 5;
  c.head_ms = 7;
  c.expert_bwd_ms = 11;
  c.attention_bwd_ms = 13;
  std::vector<std::pair<std::string, double>> got;
  for (const StepItem& s : IterationSteps(1, 3, 2, c, true)) {
    if (s.kind != Kind::kReport) continue;
    got.emplace_back(
        absl::StrCat(s.layer, s.pass == control::kBackwardPass ? "b" : "f", s.transpose ? "c" : "d",
                     "->", s.plan.layer, s.plan.pass == control::kBackwardPass ? "b" : "f",
                     s.plan.combine ? "c" : ""),
        s.plan.window_ms);
  }
  // Written out from the step's order (step.h): a combine's request waits
  // out the expert compute, the next forward layer's the attention, the
  // first backward layer's the head, the other backward layers' the
  // attention backward, and the next iteration's first layer the attention
  // backward of layer 0 and its own attention (13 + 3).
  const std::vector<std::pair<std::string, double>> want = {{"0fd->0fc", 5}, {"0fc->1f", 3},
                                                            {"1fd->1fc", 5}, {"1fc->1b", 7},
                                                            {"0bd->0b", 13}, {"0bc->0f", 16}};
  EXPECT_EQ(got, want);
  // The last iteration asks for nothing after its last layer; without
  // re-planned combines the dispatch's row carries the next request.
  std::vector<double> windows;
  for (const StepItem& s : IterationSteps(2, 3, 2, c, false)) {
    if (s.kind == Kind::kReport) windows.push_back(s.plan.window_ms);
  }
  EXPECT_EQ(windows, (std::vector<double>{3, 7, 13}));
}

TEST(DemoStep, FirstAndLastIterations) {
  const std::vector<std::string> first = Names(0, 3, 2);
  // Nothing is known before the first dispatch: no wait there.
  EXPECT_EQ(first[1], "dispatch0");
  const std::vector<std::string> last = Names(2, 3, 2);
  // No request for an iteration that does not come.
  for (const std::string& n : last) EXPECT_EQ(n.find("->(3,"), std::string::npos) << n;
}

TEST(DemoStep, FourAlltoallsPerLayerAndComputeTotals) {
  ComputeOptions c;
  int a2a = 0;
  double ms = 0;
  for (const StepItem& s : IterationSteps(0, 1, 4, c)) {
    if (s.kind == Kind::kAlltoall) ++a2a;
    if (s.kind == Kind::kCompute) ms += s.compute_ms;
  }
  EXPECT_EQ(a2a, 16);
  // 4 x (20 + 40 + 80 + 40) + 20 (the documented defaults).
  EXPECT_DOUBLE_EQ(ms, 740);
  EXPECT_DOUBLE_EQ(c.PerIterationMs(4), 740);
  c.expert_bwd_ms = -1;
  EXPECT_FALSE(c.Validate().ok());
}

TEST(DemoStep, ShortestPlanWindowIsTheLeastComputeBetweenRequestAndAlltoall) {
  // Defaults: forward 20 (attention), the first backward layer 20 (head),
  // other backward layers 40 (attention backward), the next iteration's
  // first layer 40 + 20.
  EXPECT_DOUBLE_EQ(ShortestPlanWindowMs(4, ComputeOptions{}), 20);
  ComputeOptions c;
  c.attention_fwd_ms = 30;
  c.head_ms = 50;
  c.attention_bwd_ms = 10;
  // Windows 30, 50, 10 and 10 + 30: the backward layers' 10.
  EXPECT_DOUBLE_EQ(ShortestPlanWindowMs(4, c), 10);
  // One layer: no forward request within an iteration and no backward layer
  // after the first, so the head (50) and the next iteration's 10 + 30.
  EXPECT_DOUBLE_EQ(ShortestPlanWindowMs(1, c), 40);
}

TEST(DemoStep, ReportRowsCarryTheTimeOfTheirAlltoallWhenItRan) {
  // Iteration 1 of 3, two layers (the order above): the k-th all-to-all
  // takes 10 * k ms. Each report row describes the all-to-all of its layer,
  // pass and shape: report0fd is dispatch0's (1st), report1fd dispatch1's
  // (3rd), report0bd precedes combine-grad0 (none yet), report0bc is
  // dispatch-grad0T's (8th).
  AlltoallTimes times(2);
  std::vector<std::string> got;
  int k = 0;
  for (const StepItem& s : IterationSteps(1, 3, 2, ComputeOptions{})) {
    if (s.kind == Kind::kAlltoall) times.Record(s, 10.0 * ++k);
    if (s.kind == Kind::kReport) got.push_back(absl::StrCat(Describe(s), "=", times.For(s)));
  }
  const std::vector<std::string> want = {"report0fd->(1,1,f)=10", "report1fd->(1,1,b,exact)=30",
                                         "report0bd->(1,0,b,exact)=0", "report0bc->(2,0,f)=80"};
  EXPECT_EQ(got, want);
  // A new iteration starts with no times (nothing carried over).
  times.Clear();
  for (const StepItem& s : IterationSteps(2, 3, 2, ComputeOptions{})) {
    if (s.kind == Kind::kReport) {
      EXPECT_EQ(times.For(s), 0) << Describe(s);
    }
  }
}

TEST(DemoAccounting, FloorIsTheBusiestLinkDirection) {
  // By hand: h0/eps0 (1e6 B/s) rx 20 ms, tx 50 ms; h1/eps0 (2e6 B/s) rx
  // 40 ms, tx 5 ms; eps/up0 (1e6 B/s) rx 30 ms. Floor max = 50 ms, h0 tx.
  const std::vector<LinkLoad> links = {
      {"h0/eps0", 1e6, 0, 20'000, 50'000},
      {"h1/eps0", 2e6, 0, 80'000, 10'000},
      {"eps/up0", 1e6, 0, 30'000, 0},
      {"dark", 0, 0, 1'000'000, 1'000'000},  // no rate: ignored
  };
  const PhaseBound b = BoundPhase(links, 100);
  EXPECT_DOUBLE_EQ(b.floor_ms, 50);
  EXPECT_EQ(b.busiest, "h0/eps0 tx");
  EXPECT_DOUBLE_EQ(b.utilisation, 0.5);
  EXPECT_DOUBLE_EQ(BoundPhase(links, 0).utilisation, 0);
  FabricBound f;
  f.Add(b, 100);
  f.Add(BoundPhase({{"x", 1e6, 0, 90'000, 0}}, 100), 100);  // 90 ms in 100
  EXPECT_DOUBLE_EQ(f.utilisation(), (50.0 + 90.0) / 200.0);
}

TEST(DemoAccounting, TheBucketPassesAtOnce) {
  // 60,000 B through a 1e6 B/s link with a 10,000 B bucket: 50 ms at least;
  // a phase within one bucket has no floor.
  EXPECT_DOUBLE_EQ(BoundPhase({{"l", 1e6, 10'000, 60'000, 0}}, 100).floor_ms, 50);
  EXPECT_DOUBLE_EQ(BoundPhase({{"l", 1e6, 10'000, 9'000, 9'000}}, 100).floor_ms, 0);
}

TEST(DemoFabricSpec, StaticCarriesItsCircuits) {
  FabricShape s{.hosts = 4, .ocs_nics = 2, .gbps = 0.1, .switch_ms = 25, .loopback = false};
  const std::vector<cluster::CircuitSpec> c = {{"ocs0", 1, 3}, {"ocs0", 6, 8}};
  auto spec = cluster::ClusterSpec::Parse(FabricSpecYaml(FabricKind::kStatic, s, c), "static");
  ASSERT_TRUE(spec.ok()) << spec.status();
  ASSERT_EQ(spec->circuits.size(), 2u);
  EXPECT_EQ(spec->circuits[1].port_a, 6);
  EXPECT_EQ(spec->circuits[1].port_b, 8);
  // The same circuits are ignored for a fabric that has none.
  auto mix = cluster::ClusterSpec::Parse(FabricSpecYaml(FabricKind::kMixnet, s, c), "mixnet");
  ASSERT_TRUE(mix.ok());
  EXPECT_TRUE(mix->circuits.empty());
  EXPECT_EQ(ParseFabric("oversub"), FabricKind::kOversub);
  EXPECT_FALSE(ParseFabric("fattree").has_value());
}

class DemoResultsTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = std::filesystem::temp_directory_path() / absl::StrCat("mixnet-demo-results-", getpid());
    std::filesystem::create_directories(dir_);
    c_.fabric = "mixnet";
    c_.iterations = 1;
    c_.workload.hosts = 2;
    c_.workload.layers = 1;
    c_.results_dir = dir_.string();
    FabricShape s{.hosts = 2, .ocs_nics = 1, .gbps = 0.008, .switch_ms = 25, .loopback = false};
    auto spec = cluster::ClusterSpec::Parse(FabricSpecYaml(FabricKind::kMixnet, s), "t");
    ASSERT_TRUE(spec.ok()) << spec.status();
    spec_ = *spec;
  }
  void TearDown() override { std::filesystem::remove_all(dir_); }
  void Write(int rank, const std::vector<nlohmann::json>& lines) {
    std::ofstream out(c_.ResultFile(rank));
    for (const auto& j : lines) out << j.dump() << "\n";
  }
  std::filesystem::path dir_;
  RunConfig c_;
  cluster::ClusterSpec spec_;
};

TEST_F(DemoResultsTest, SlowestRankLongestWaitAndFloor) {
  // 0.008 Gbit/s = 1,000,000 B/s per NIC, bucket 4 frames = 6,056 B (1 ms
  // is less). One iteration, one layer: four all-to-alls; rank 1's eps0
  // receives 106,056 B in the first: (106,056 - 6,056) / 1e6 = 100 ms.
  auto a2a = [](int seq, double ms, uint64_t rx) {
    return nlohmann::json{{"type", "a2a"},
                          {"iteration", 0},
                          {"seq", seq},
                          {"ms", ms},
                          {"bytes_verified", 10},
                          {"bytes_bad", 0},
                          {"nics", {{"eps0", {rx, 0}}, {"ocs0", {0, 0}}}}};
  };
  auto wait = [](int pass, double ms, bool sw) {
    return nlohmann::json{{"type", "await"},   {"iteration", 0},  {"layer", 0},
                          {"pass", pass},      {"waited_ms", ms}, {"reconfigure", sw},
                          {"timed_out", false}};
  };
  auto iter = [](double wall) {
    return nlohmann::json{
        {"type", "iteration"}, {"iteration", 0}, {"wall_ms", wall}, {"compute_ms", 700}};
  };
  Write(0, {a2a(0, 120, 0),
            a2a(1, 50, 0),
            a2a(2, 50, 0),
            a2a(3, 50, 0),
            wait(1, 10, true),
            iter(1000),
            {{"type", "final"}, {"retransmits", 3}, {"tcp_opens", 2}, {"tcp_resets", 1}}});
  Write(1, {a2a(0, 150, 106'056),
            a2a(1, 40, 0),
            a2a(2, 60, 0),
            a2a(3, 50, 0),
            wait(1, 30, true),
            iter(1010),
            {{"type", "final"}, {"retransmits", 4}, {"tcp_opens", 5}}});
  PhaseResult r;
  ASSERT_TRUE(ReadResults(c_, spec_, 0, r).ok());
  ASSERT_EQ(r.iterations.size(), 1u);
  EXPECT_DOUBLE_EQ(r.iterations[0].alltoall_ms, 150 + 50 + 60 + 50);
  EXPECT_DOUBLE_EQ(r.iterations[0].loss_ms, 30);
  EXPECT_DOUBLE_EQ(r.iterations[0].wall_ms, 1010);
  EXPECT_DOUBLE_EQ(r.iterations[0].floor_ms, 100);
  EXPECT_DOUBLE_EQ(r.bound.utilisation(), 100.0 / 310.0);
  EXPECT_EQ(r.BusiestLink(), "h1/eps0 rx");
  EXPECT_EQ(r.retransmits, 7u);
  EXPECT_EQ(r.tcp_opens, 7u);  // summed over the hosts' ranks
  EXPECT_EQ(r.tcp_resets, 1u);
  EXPECT_EQ(r.bytes_verified, 80u);
  EXPECT_EQ(r.plan_waits, 1);
  EXPECT_EQ(r.plans_switched, 1);
  // One iteration: it is the first, and there is no steady one.
  EXPECT_DOUBLE_EQ(r.First(&IterationStats::wall_ms), 1010);
  EXPECT_FALSE(r.has_steady());
}

// The first iteration apart from the steady ones: 3000 ms, then 1000 and
// 2000 (mean 1500); floors 900, then 300 and 500 (mean 400).
TEST(DemoPhaseResult, AllToAllsAfterARoundAgainstTheOthers) {
  // Two iterations of three all-to-alls on epochs 1 1 2 | 2 3 3: the second
  // all-to-all of each epoch run is "later", the first on epochs 2 and 3
  // "after a round"; the run's first all-to-all is neither. Measured over
  // simulated, pooled: after a round (30 + 45) / (20 + 30) = 1.5, the
  // others (10 + 22 + 11) / (10 + 20 + 10) = 1.075.
  PhaseResult p;
  IterationStats a, b;
  a.each_alltoall_ms = {99, 10, 30};
  a.each_simulated_alltoall_ms = {1, 10, 20};
  b.each_alltoall_ms = {22, 45, 11};
  b.each_simulated_alltoall_ms = {20, 30, 10};
  p.iterations = {a, b};
  const std::vector<uint64_t> epochs = {1, 1, 2, 2, 3, 3};
  for (int i = 0; i < 6; ++i) p.routing[{i / 3, i % 3}].epoch = epochs[i];
  const PhaseResult::AfterRound r = p.AfterRoundAgainstLater();
  EXPECT_EQ(r.after_round_n, 2);
  EXPECT_EQ(r.later_n, 3);
  EXPECT_DOUBLE_EQ(r.after_round, 1.5);
  EXPECT_DOUBLE_EQ(r.later, 43.0 / 40.0);
  // No routing (a fabric without rounds): nothing counted.
  p.routing.clear();
  EXPECT_EQ(p.AfterRoundAgainstLater().after_round_n, 0);
}

TEST(DemoPhaseResult, FirstIterationApartFromTheSteadyOnes) {
  PhaseResult r;
  EXPECT_EQ(r.First(&IterationStats::wall_ms), 0);
  EXPECT_FALSE(r.has_steady());
  r.iterations.resize(3);
  r.iterations[0].wall_ms = 3000;
  r.iterations[1].wall_ms = 1000;
  r.iterations[2].wall_ms = 2000;
  r.iterations[0].floor_ms = 900;
  r.iterations[1].floor_ms = 300;
  r.iterations[2].floor_ms = 500;
  EXPECT_DOUBLE_EQ(r.First(&IterationStats::wall_ms), 3000);
  ASSERT_TRUE(r.has_steady());
  EXPECT_DOUBLE_EQ(r.Steady(&IterationStats::wall_ms), 1500);
  EXPECT_DOUBLE_EQ(r.Steady(&IterationStats::floor_ms), 400);
  EXPECT_DOUBLE_EQ(r.Mean(&IterationStats::wall_ms), 2000);
}

TEST_F(DemoResultsTest, MissingAlltoallIsDataLossAndFirstFailureIsTheEarliest) {
  Write(0, {{{"type", "iteration"}, {"iteration", 0}, {"wall_ms", 5}}});
  Write(1, {{{"type", "iteration"}, {"iteration", 0}, {"wall_ms", 5}}});
  PhaseResult r;
  EXPECT_TRUE(absl::IsDataLoss(ReadResults(c_, spec_, 0, r)));
  RecordWorkerError(c_.ResultFile(1), 1, absl::UnavailableError("link eps0 down"));
  RecordWorkerError(c_.ResultFile(0), 0, absl::UnavailableError("peer 1 closed"));
  const std::string f = FirstFailure(c_, 2);
  EXPECT_EQ(f.find("first failure: rank 1: UNAVAILABLE: link eps0 down"), 0u) << f;
  EXPECT_NE(f.find("then rank 0"), std::string::npos) << f;
}

}  // namespace
}  // namespace mixnet::demo
