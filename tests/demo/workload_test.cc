// Unit tests of the demo's workload generator, trace reader, payload check,
// fabric specs and run config (apps/demo). Label cpu; single thread.
#include "apps/demo/workload.h"

#include <unistd.h>

#include <cstdio>
#include <fstream>
#include <set>

#include "apps/demo/fabric_spec.h"
#include "apps/demo/run_config.h"
#include "gtest/gtest.h"
#include "runtime/cluster/cluster_spec.h"

namespace mixnet::demo {
namespace {

WorkloadOptions Small() {
  WorkloadOptions o;
  o.hosts = 8;
  o.layers = 3;
  o.experts_per_host = 4;
  o.tokens = 512;
  o.token_bytes = 1024;
  o.seed = 42;
  return o;
}

TEST(DemoWorkload, DeterministicFromSeed) {
  auto a = Workload::Create(Small());
  auto b = Workload::Create(Small());
  ASSERT_TRUE(a.ok()) << a.status();
  ASSERT_TRUE(b.ok());
  WorkloadOptions other = Small();
  other.seed = 43;
  auto c = Workload::Create(other);
  ASSERT_TRUE(c.ok());
  for (int64_t it = 0; it < 12; ++it) {
    for (int l = 0; l < 3; ++l) {
      EXPECT_EQ(a->Counts(it, l), b->Counts(it, l));
      EXPECT_EQ(a->DispatchBytes(it, l), b->DispatchBytes(it, l));
    }
  }
  EXPECT_NE(a->Counts(0, 0), c->Counts(0, 0));
}

TEST(DemoWorkload, RowsSumToTokensAndBytesMatchMatrix) {
  auto w = Workload::Create(Small());
  ASSERT_TRUE(w.ok());
  for (int64_t it = 0; it < 6; ++it) {
    for (int l = 0; l < 3; ++l) {
      const TokenCounts c = w->Counts(it, l);
      ASSERT_TRUE(c.Validate().ok());
      ASSERT_EQ(c.num_ranks, 8);
      ASSERT_EQ(c.num_experts, 32);
      for (int s = 0; s < 8; ++s) {
        int64_t row = 0;
        for (int e = 0; e < 32; ++e) row += c.at(s, e);
        EXPECT_EQ(row, 512) << "rank " << s;
      }
      const std::vector<size_t> bytes = w->DispatchBytes(it, l);
      const TrafficMatrix m = w->DispatchMatrix(it, l);
      size_t total = 0;
      for (int s = 0; s < 8; ++s) {
        for (int d = 0; d < 8; ++d) {
          EXPECT_EQ(static_cast<double>(bytes[s * 8 + d]), m.at(s, d));
          total += bytes[s * 8 + d];
        }
      }
      EXPECT_EQ(total, size_t{8} * 512 * 1024);
    }
  }
}

TEST(DemoWorkload, SkewedTowardsAffineHostWhichIsADerangement) {
  auto w = Workload::Create(Small());
  ASSERT_TRUE(w.ok());
  for (int l = 0; l < 3; ++l) {
    const std::vector<int> a = w->Affinity(0, l);
    ASSERT_EQ(a.size(), 8u);
    EXPECT_EQ(std::set<int>(a.begin(), a.end()).size(), 8u) << "a permutation";
    const std::vector<size_t> bytes = w->DispatchBytes(0, l);
    for (int s = 0; s < 8; ++s) {
      EXPECT_NE(a[s], s) << "no host is its own affine host";
      EXPECT_EQ(a[a[s]], s) << "an even number of hosts is paired";
      size_t row = 0;
      for (int d = 0; d < 8; ++d) row += bytes[s * 8 + d];
      // 75% + the Zipf share of that host's experts, minus jitter.
      EXPECT_GT(static_cast<double>(bytes[s * 8 + a[s]]), 0.7 * static_cast<double>(row))
          << "host " << s;
    }
  }
}

TEST(DemoWorkload, AffinityDriftsEveryFewIterationsAndDiffersByLayer) {
  WorkloadOptions o = Small();
  o.drift_every = 4;
  auto w = Workload::Create(o);
  ASSERT_TRUE(w.ok());
  EXPECT_EQ(w->Affinity(0, 0), w->Affinity(3, 0));
  bool drifted = false, layers_differ = false;
  for (int64_t e = 1; e < 6; ++e) drifted |= w->Affinity(4 * e, 0) != w->Affinity(0, 0);
  for (int l = 1; l < 3; ++l) layers_differ |= w->Affinity(0, l) != w->Affinity(0, 0);
  EXPECT_TRUE(drifted);
  EXPECT_TRUE(layers_differ);
  // Within an epoch the counts still change a little (jitter).
  EXPECT_NE(w->Counts(0, 0), w->Counts(1, 0));
}

TEST(DemoWorkload, OddHostCountGetsACycle) {
  WorkloadOptions o = Small();
  o.hosts = 5;
  auto w = Workload::Create(o);
  ASSERT_TRUE(w.ok());
  const std::vector<int> a = w->Affinity(0, 0);
  std::vector<bool> seen(5, false);
  int s = 0;
  for (int i = 0; i < 5; ++i, s = a[s]) {
    EXPECT_FALSE(seen[s]) << "one cycle through all hosts";
    seen[s] = true;
  }
  EXPECT_EQ(s, 0);
}

TEST(DemoWorkload, BadOptions) {
  WorkloadOptions o = Small();
  o.hosts = 1;
  EXPECT_EQ(Workload::Create(o).status().code(), absl::StatusCode::kInvalidArgument);
  o = Small();
  o.affine_share = 1.5;
  EXPECT_EQ(Workload::Create(o).status().code(), absl::StatusCode::kInvalidArgument);
  o = Small();
  o.trace = "/nonexistent/mixnet-demo-trace.jsonl";
  EXPECT_EQ(Workload::Create(o).status().code(), absl::StatusCode::kNotFound);
}

std::string TempPath(const char* name) {
  return std::string("/tmp/") + name + std::to_string(getpid());
}

TEST(DemoWorkload, TraceIsReplayedInACycle) {
  const std::string path = TempPath("demo_trace_");
  {
    std::ofstream out(path);
    for (int64_t it = 0; it < 2; ++it) {
      TrafficReport r;
      r.iteration = it;
      for (int l = 0; l < 2; ++l) {
        TokenCounts c = TokenCounts::Zero({.layer = l}, 4, 8);
        for (int s = 0; s < 4; ++s) c.at(s, (s + 1 + l + it) % 8) = 10 * (s + 1);
        r.entries.push_back(c);
        // A combine entry is ignored.
        TokenCounts comb = TokenCounts::Zero({.layer = l, .direction = Direction::kCombine}, 4, 8);
        comb.at(0, 0) = 99;
        r.entries.push_back(comb);
      }
      out << r.ToJson() << "\n";
    }
  }
  WorkloadOptions o = Small();
  o.hosts = 4;
  o.trace = path;
  o.token_bytes = 100;
  auto w = Workload::Create(o);
  ASSERT_TRUE(w.ok()) << w.status();
  EXPECT_EQ(w->layers(), 2);
  EXPECT_EQ(w->options().experts_per_host, 2);
  EXPECT_EQ(w->Counts(1, 1).at(2, (2 + 1 + 1 + 1) % 8), 30);
  EXPECT_EQ(w->Counts(3, 1), w->Counts(1, 1));
  EXPECT_EQ(w->Counts(2, 0), w->Counts(0, 0));
  // Expert e lives on host e % 4: rank 0 of iteration 0 layer 0 sends 10 tokens to expert 1 (host
  // 1).
  EXPECT_EQ(w->DispatchBytes(0, 0)[0 * 4 + 1], 1000u);
  EXPECT_TRUE(w->Affinity(0, 0).empty());

  o.hosts = 8;  // the trace has 4 ranks
  EXPECT_EQ(Workload::Create(o).status().code(), absl::StatusCode::kInvalidArgument);
  std::remove(path.c_str());
}

TEST(DemoPayload, FillVerifies) {
  BlockId id{.seed = 1, .iteration = 2, .layer = 3, .direction = 0, .src = 4, .dst = 5};
  std::vector<uint8_t> b(1003);
  FillBlock(id, b.data(), b.size());
  EXPECT_EQ(VerifyBlock(id, b.data(), b.size()), 0u);
  b[17] ^= 1;
  EXPECT_EQ(VerifyBlock(id, b.data(), b.size()), 8u);
  b[17] ^= 1;
  b[1001] ^= 0x80;  // in the tail
  EXPECT_EQ(VerifyBlock(id, b.data(), b.size()), 3u);
  b[1001] ^= 0x80;
  BlockId other = id;
  other.direction = 1;
  EXPECT_EQ(VerifyBlock(other, b.data(), b.size()), b.size());
}

TEST(DemoFabricSpec, AllKindsParse) {
  for (bool loopback : {false, true}) {
    FabricShape s{.hosts = 8, .ocs_nics = 3, .gbps = 0.2, .switch_ms = 10, .loopback = loopback};
    for (FabricKind k : {FabricKind::kEps, FabricKind::kMixnet, FabricKind::kStatic,
                         FabricKind::kNonblocking, FabricKind::kOversub}) {
      auto spec = cluster::ClusterSpec::Parse(FabricSpecYaml(k, s), std::string(FabricName(k)));
      ASSERT_TRUE(spec.ok()) << spec.status() << "\n" << FabricSpecYaml(k, s);
      ASSERT_EQ(spec->hosts.size(), 8u);
      int eps = 0, ocs = 0;
      for (const auto& n : spec->hosts[5].nics) (n.role == cluster::NicRole::kEps ? eps : ocs)++;
      if (k == FabricKind::kNonblocking || k == FabricKind::kOversub) {
        EXPECT_EQ(eps, 4);
        EXPECT_EQ(ocs, 0);
        EXPECT_TRUE(spec->ocs_switches.empty());
      } else {
        EXPECT_EQ(eps, 1);
        EXPECT_EQ(ocs, 3);
        ASSERT_EQ(spec->ocs_switches.size(), 1u);
        EXPECT_EQ(spec->ocs_switches[0].ports, 24);
        EXPECT_EQ(spec->ocs_switches[0].switch_ms, 10);
        EXPECT_TRUE(spec->circuits.empty());
      }
      ASSERT_EQ(spec->regions.size(), 1u);
      EXPECT_EQ(spec->regions[0].hosts.size(), 8u);
    }
  }
}

TEST(DemoRunConfig, JsonRoundTrip) {
  RunConfig c;
  c.workload = Small();
  c.workload.trace = "t.jsonl";
  c.fabric = "mixnet";
  c.iterations = 7;
  c.compute.head_ms = 12.5;
  c.uplink_netns = "p-eps";
  c.uplinks = {"up0", "up1"};
  c.spec_path = "/x/spec.yaml";
  c.store = "file:/x/store";
  c.controller = "unix:/x/ctl.sock";
  c.results_dir = "/x/results";
  c.replan_combine = true;
  c.plan_windows = false;  // not the default
  auto back = RunConfig::FromJson(c.ToJson());
  ASSERT_TRUE(back.ok()) << back.status();
  EXPECT_EQ(back->ToJson(), c.ToJson());
  EXPECT_EQ(back->ResultFile(3), "/x/results/rank3.jsonl");
  EXPECT_FALSE(RunConfig::FromJson("{}").ok());
  EXPECT_FALSE(RunConfig::FromJson("nope").ok());
}

}  // namespace
}  // namespace mixnet::demo
