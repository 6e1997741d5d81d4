// Tests for expert placement, the locality collector and traffic reports:
// hand-computed 2 hosts x 2 GPUs top-2 cases (int32 and int64), dispatch vs
// combine, regions, merging per-rank reports, serialisation and bad inputs.
// Single-threaded except the concurrent-record test.
#include "runtime/locality/locality_collector.h"

#include <cstdint>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace mixnet {
namespace {

using ::testing::HasSubstr;

// 2 hosts x 2 GPUs (ranks 0,1 on h0; 2,3 on h1), 8 experts, 2 per rank:
// experts 0-3 on h0, 4-7 on h1. Both hosts in region r0.
ExpertPlacement TwoByTwo() {
  PlacementTables t;
  t.hosts = {"h0", "h1"};
  t.host_region = {"r0", "r0"};
  t.rank_host = {0, 0, 1, 1};
  t.expert_rank = {0, 0, 1, 1, 2, 2, 3, 3};
  absl::StatusOr<ExpertPlacement> p = ExpertPlacement::Create(t);
  EXPECT_TRUE(p.ok()) << p.status();
  return *p;
}

std::unique_ptr<LocalityCollector> MakeCollector(ExpertPlacement p, int64_t hidden = 4,
                                                 int elem = 2) {
  auto c = LocalityCollector::Create(std::move(p), {.hidden = hidden, .element_bytes = elem});
  EXPECT_TRUE(c.ok()) << c.status();
  return std::move(*c);
}

ClusterPlacementOptions Opts(int experts, int ranks_per_host = 0,
                             std::vector<std::string> hosts = {}, std::string region = "") {
  ClusterPlacementOptions o;
  o.num_experts = experts;
  o.ranks_per_host = ranks_per_host;
  o.hosts = std::move(hosts);
  o.region = std::move(region);
  return o;
}

constexpr GateKey kL0{.layer = 0, .micro_batch = 0, .direction = Direction::kDispatch};

TEST(ExpertPlacementTest, FromClusterSpec) {
  absl::StatusOr<cluster::ClusterSpec> spec = cluster::ClusterSpec::Parse(R"(name: t
hosts:
  - {name: a, gpus: 2, nics: [{name: eps0, role: eps, address: 10.0.0.1, gbps: 1}]}
  - {name: b, gpus: 2, nics: [{name: eps0, role: eps, address: 10.0.0.2, gbps: 1}]}
  - {name: c, gpus: 2, nics: [{name: eps0, role: eps, address: 10.0.0.3, gbps: 1}]}
  - {name: d, gpus: 2, nics: [{name: eps0, role: eps, address: 10.0.0.4, gbps: 1}]}
regions:
  - {name: r0, hosts: [a, b]}
  - {name: r1, hosts: [d, c]}
)");
  ASSERT_TRUE(spec.ok()) << spec.status();

  absl::StatusOr<ExpertPlacement> all = ExpertPlacement::FromCluster(*spec, Opts(16));
  ASSERT_TRUE(all.ok()) << all.status();
  EXPECT_EQ(all->num_hosts(), 4);
  EXPECT_EQ(all->num_ranks(), 8);
  EXPECT_EQ(all->RankOfExpert(5), 2);
  EXPECT_EQ(all->HostOfExpert(5), 1);
  EXPECT_EQ(all->HostOfExpert(15), 3);
  ASSERT_EQ(all->num_regions(), 2);
  EXPECT_EQ(all->RegionName(1), "r1");
  EXPECT_EQ(all->RegionOfHost(2), 1);  // c
  EXPECT_EQ(all->LocalIndex(2), 0);    // first of r1 in placement order
  EXPECT_EQ(all->FindRegion("r0"), 0);
  EXPECT_EQ(all->FindRegion("nope"), -1);

  absl::StatusOr<ExpertPlacement> r1 = ExpertPlacement::FromCluster(*spec, Opts(8, 1, {}, "r1"));
  ASSERT_TRUE(r1.ok()) << r1.status();
  EXPECT_EQ(r1->num_ranks(), 2);
  EXPECT_EQ(r1->HostName(0), "d");  // region order
  EXPECT_EQ(r1->HostOfExpert(4), 1);

  auto uneven = ExpertPlacement::FromCluster(*spec, Opts(12));
  EXPECT_EQ(uneven.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(uneven.status().message()), HasSubstr("8 EP ranks"));
  auto unknown = ExpertPlacement::FromCluster(*spec, Opts(8, 0, {"a", "zz"}));
  EXPECT_THAT(std::string(unknown.status().message()), HasSubstr("hosts[1] 'zz'"));
  auto bad_region = ExpertPlacement::FromCluster(*spec, Opts(8, 0, {}, "r9"));
  EXPECT_EQ(bad_region.status().code(), absl::StatusCode::kInvalidArgument);
}

TEST(ExpertPlacementTest, RejectsBadTables) {
  PlacementTables t{
      .hosts = {"h0", "h1"}, .host_region = {}, .rank_host = {0, 2}, .expert_rank = {0}};
  auto p = ExpertPlacement::Create(t);
  EXPECT_THAT(std::string(p.status().message()), HasSubstr("rank_host[1] = 2"));
  t.rank_host = {0, 0};
  EXPECT_THAT(std::string(ExpertPlacement::Create(t).status().message()),
              HasSubstr("'h1' has no EP rank"));
  t.rank_host = {0, 1};
  t.expert_rank = {0, 1, 5};
  EXPECT_THAT(std::string(ExpertPlacement::Create(t).status().message()),
              HasSubstr("expert_rank[2] = 5"));
  t.expert_rank = {0, 1};
  t.hosts = {"h0", "h0"};
  EXPECT_THAT(std::string(ExpertPlacement::Create(t).status().message()), HasSubstr("repeats"));
}

// Hand-computed: rank 0 (h0) tokens {0,4} {1,5} {2,3}; rank 2 (h1) {4,5} {0,7}.
// Counts: rank0: e0..e5 = 1,1,1,1,1,1; rank2: e0 1, e4 1, e5 1, e7 1.
// Bytes per token 4 x 2 = 8. h0->h0: experts 0-3 from rank 0 = 4 tokens = 32;
// h0->h1: experts 4,5 = 2 tokens = 16; h1->h0: e0 = 8; h1->h1: e4,e5,e7 = 24.
TEST(LocalityCollectorTest, HandComputedTwoHostsTop2Int32AndInt64) {
  for (bool use64 : {false, true}) {
    SCOPED_TRACE(use64 ? "int64" : "int32");
    auto c = MakeCollector(TwoByTwo());
    const std::vector<int32_t> r0 = {0, 4, 1, 5, 2, 3};
    const std::vector<int32_t> r2 = {4, 5, 0, 7};
    if (use64) {
      const std::vector<int64_t> a(r0.begin(), r0.end()), b(r2.begin(), r2.end());
      ASSERT_TRUE(c->Record(kL0, 0, std::span<const int64_t>(a), 2).ok());
      ASSERT_TRUE(c->Record(kL0, 2, std::span<const int64_t>(b), 2).ok());
    } else {
      ASSERT_TRUE(c->Record(kL0, 0, std::span<const int32_t>(r0), 2).ok());
      ASSERT_TRUE(c->Record(kL0, 2, std::span<const int32_t>(r2), 2).ok());
    }
    absl::StatusOr<TokenCounts> counts = c->Counts(kL0);
    ASSERT_TRUE(counts.ok());
    EXPECT_EQ(counts->at(0, 5), 1);
    EXPECT_EQ(counts->at(0, 6), 0);
    EXPECT_EQ(counts->at(2, 7), 1);
    EXPECT_EQ(counts->at(1, 0), 0);
    EXPECT_EQ(counts->Total(), 10);
    EXPECT_EQ(counts->PerExpert(), (std::vector<int64_t>{2, 1, 1, 1, 2, 2, 0, 1}));

    absl::StatusOr<TrafficMatrix> m = c->RegionMatrix(kL0, 0);
    ASSERT_TRUE(m.ok()) << m.status();
    EXPECT_DOUBLE_EQ(m->at(0, 0), 32);
    EXPECT_DOUBLE_EQ(m->at(0, 1), 16);
    EXPECT_DOUBLE_EQ(m->at(1, 0), 8);
    EXPECT_DOUBLE_EQ(m->at(1, 1), 24);
    auto all = c->Matrices(kL0);
    ASSERT_TRUE(all.ok());
    EXPECT_EQ(all->cluster, *m);
    EXPECT_DOUBLE_EQ(all->cross_region_bytes, 0);
  }
}

TEST(LocalityCollectorTest, CombineIsTransposeOfDispatch) {
  auto c = MakeCollector(TwoByTwo(), 16, 2);
  std::mt19937 rng(7);
  const GateKey combine{.layer = 0, .micro_batch = 0, .direction = Direction::kCombine};
  for (int rank = 0; rank < 4; ++rank) {
    std::vector<int64_t> ids;
    for (int t = 0; t < 50; ++t) {
      const int a = static_cast<int>(rng() % 8);
      ids.push_back(a);
      ids.push_back((a + 1 + rng() % 7) % 8);
    }
    ASSERT_TRUE(c->Record(kL0, rank, std::span<const int64_t>(ids), 2).ok());
    ASSERT_TRUE(c->Record(combine, rank, std::span<const int64_t>(ids), 2).ok());
  }
  auto d = c->RegionMatrix(kL0, 0);
  auto b = c->RegionMatrix(combine, 0);
  ASSERT_TRUE(d.ok() && b.ok());
  EXPECT_EQ(*b, d->Transposed());
  EXPECT_NE(*b, *d);  // random traffic is not symmetric
  EXPECT_DOUBLE_EQ(d->OffDiagonalTotal() + d->at(0, 0) + d->at(1, 1), 4 * 50 * 2 * 32.0);
}

TEST(LocalityCollectorTest, RegionsAndCrossRegionBytes) {
  // 3 hosts, one rank each, 3 experts; h0,h1 in r0, h2 in no region.
  PlacementTables t{.hosts = {"h0", "h1", "h2"},
                    .host_region = {"r0", "r0", ""},
                    .rank_host = {0, 1, 2},
                    .expert_rank = {0, 1, 2}};
  auto p = ExpertPlacement::Create(t);
  ASSERT_TRUE(p.ok());
  auto c = MakeCollector(*p, 1, 1);
  const std::vector<int32_t> ids = {1, 2, 0, 1};  // top-1: rank 0 tokens -> e1 e2 e0 e1
  ASSERT_TRUE(c->Record(kL0, 0, std::span<const int32_t>(ids), 1).ok());
  auto m = c->Matrices(kL0);
  ASSERT_TRUE(m.ok());
  ASSERT_EQ(m->regions.size(), 1u);
  EXPECT_DOUBLE_EQ(m->regions[0].at(0, 0), 1);
  EXPECT_DOUBLE_EQ(m->regions[0].at(0, 1), 2);
  EXPECT_DOUBLE_EQ(m->cross_region_bytes, 1);
  EXPECT_DOUBLE_EQ(m->cluster.at(0, 2), 1);
  EXPECT_EQ(c->RegionMatrix(kL0, 1).status().code(), absl::StatusCode::kInvalidArgument);
}

TEST(LocalityCollectorTest, MergedRankReportsEqualOneCollector) {
  const ExpertPlacement p = TwoByTwo();
  auto whole = MakeCollector(p);
  auto controller = MakeCollector(p);
  std::mt19937 rng(11);
  for (int rank = 0; rank < 4; ++rank) {
    auto mine = MakeCollector(p);  // each rank sees only its own gate outputs
    for (int layer = 0; layer < 3; ++layer) {
      for (Direction d : {Direction::kDispatch, Direction::kCombine}) {
        std::vector<int32_t> ids;
        for (int t = 0; t < 40; ++t) {
          const int a = static_cast<int>(rng() % 8);
          ids.push_back(a);
          ids.push_back((a + 1 + rng() % 7) % 8);
        }
        const GateKey key{.layer = layer, .micro_batch = 1, .direction = d};
        ASSERT_TRUE(mine->Record(key, rank, std::span<const int32_t>(ids), 2).ok());
        ASSERT_TRUE(whole->Record(key, rank, std::span<const int32_t>(ids), 2).ok());
      }
    }
    TrafficReport report = mine->TakeReport(rank, 42);
    EXPECT_TRUE(mine->Keys().empty());
    EXPECT_EQ(report.entries.size(), 6u);
    // Through the wire format, alternating JSON and CBOR.
    absl::StatusOr<TrafficReport> back = rank % 2 == 0 ? TrafficReport::FromJson(report.ToJson())
                                                       : TrafficReport::FromCbor(report.ToCbor());
    ASSERT_TRUE(back.ok()) << back.status();
    EXPECT_EQ(*back, report);
    ASSERT_TRUE(controller->MergeReport(*back).ok());
  }
  EXPECT_EQ(controller->Keys(), whole->Keys());
  for (const GateKey& key : whole->Keys()) {
    EXPECT_EQ(*controller->Counts(key), *whole->Counts(key));
    EXPECT_EQ(*controller->RegionMatrix(key, 0), *whole->RegionMatrix(key, 0));
  }
}

TEST(LocalityCollectorTest, ReportJsonKeepsOnlyNonZeroRows) {
  auto c = MakeCollector(TwoByTwo());
  const std::vector<int32_t> ids = {0, 1};
  ASSERT_TRUE(c->Record(kL0, 3, std::span<const int32_t>(ids), 2).ok());
  const std::string json = c->TakeReport(3, 1).ToJson();
  EXPECT_THAT(json, HasSubstr(R"("rows":[{"counts":[1,1,0,0,0,0,0,0],"rank":3}])"));
}

TEST(LocalityCollectorTest, BadGateOutputsNameTheIndex) {
  auto c = MakeCollector(TwoByTwo());
  const std::vector<int32_t> out_of_range = {0, 1, 2, 8};
  absl::Status s = c->Record(kL0, 1, std::span<const int32_t>(out_of_range), 2);
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(s.message()), HasSubstr("token 1 slot 1 (index 3): expert id 8"));
  EXPECT_THAT(std::string(s.message()), HasSubstr("rank 1 layer 0 mb 0 dispatch"));

  const std::vector<int64_t> negative = {-1, 3};
  s = c->Record(kL0, 0, std::span<const int64_t>(negative), 2);
  EXPECT_THAT(std::string(s.message()), HasSubstr("index 0): expert id -1"));

  const std::vector<int32_t> repeated = {0, 1, 5, 5};
  s = c->Record(kL0, 0, std::span<const int32_t>(repeated), 2);
  EXPECT_THAT(std::string(s.message()), HasSubstr("index 3): expert 5 repeats slot 0"));

  const std::vector<int32_t> odd = {0, 1, 2};
  s = c->Record(kL0, 0, std::span<const int32_t>(odd), 2);
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(s.message()), HasSubstr("buffer holds 3 ids"));

  s = c->Record(kL0, 0, GateIds::Of(std::span<const int32_t>(out_of_range), 3, 2));
  EXPECT_THAT(std::string(s.message()), HasSubstr("expected tokens (3) x k (2) = 6"));
  s = c->Record(kL0, 0, std::span<const int32_t>(odd), 9);
  EXPECT_THAT(std::string(s.message()), HasSubstr("k = 9 outside [1, 8]"));
  s = c->Record(kL0, 0, std::span<const int32_t>(odd), 0);
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  s = c->Record(kL0, 4, std::span<const int32_t>(odd), 1);
  EXPECT_THAT(std::string(s.message()), HasSubstr("source rank out of range"));

  // Nothing of the failed records was counted.
  EXPECT_EQ(c->Counts(kL0).status().code(), absl::StatusCode::kNotFound);

  auto bad = LocalityCollector::Create(TwoByTwo(), {.hidden = 0});
  EXPECT_EQ(bad.status().code(), absl::StatusCode::kInvalidArgument);
}

TEST(LocalityCollectorTest, SkipsDroppedTokensWhenAsked) {
  auto c = LocalityCollector::Create(TwoByTwo(),
                                     {.hidden = 1, .element_bytes = 1, .skip_negative_ids = true});
  ASSERT_TRUE(c.ok());
  const std::vector<int32_t> ids = {-1, 4, 2, -1};
  ASSERT_TRUE((*c)->Record(kL0, 0, std::span<const int32_t>(ids), 2).ok());
  EXPECT_EQ((*c)->Counts(kL0)->Total(), 2);
}

TEST(LocalityCollectorTest, BadReportsAndMerges) {
  auto c = MakeCollector(TwoByTwo());
  EXPECT_EQ(TrafficReport::FromJson("{nope").status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(TrafficReport::FromCbor("\xff\x01").status().code(),
            absl::StatusCode::kInvalidArgument);
  auto missing = TrafficReport::FromJson(R"({"reporter_rank":1,"iteration":0})");
  EXPECT_EQ(missing.status().code(), absl::StatusCode::kInvalidArgument);
  auto bad_rank = TrafficReport::FromJson(
      R"({"reporter_rank":1,"iteration":0,"entries":[{"layer":0,"micro_batch":0,
      "direction":"dispatch","num_ranks":4,"num_experts":2,"rows":[{"rank":4,"counts":[1,2]}]}]})");
  EXPECT_THAT(std::string(bad_rank.status().message()), HasSubstr("entries[0].rows[0]: rank 4"));
  auto negative = TrafficReport::FromJson(
      R"({"reporter_rank":1,"iteration":0,"entries":[{"layer":0,"micro_batch":0,
      "direction":"combine","num_ranks":4,"num_experts":2,"rows":[{"rank":1,"counts":[1,-2]}]}]})");
  EXPECT_THAT(std::string(negative.status().message()), HasSubstr("rank 1 expert 1 count -2"));
  auto bad_dir = TrafficReport::FromJson(
      R"({"reporter_rank":1,"iteration":0,"entries":[{"layer":0,"micro_batch":0,
      "direction":"sideways","num_ranks":4,"num_experts":2,"rows":[]}]})");
  EXPECT_THAT(std::string(bad_dir.status().message()), HasSubstr("'sideways'"));

  // Shape mismatch with the placement: nothing merged.
  TrafficReport r;
  r.reporter_rank = 2;
  r.entries.push_back(TokenCounts::Zero(kL0, 4, 8));
  r.entries.push_back(TokenCounts::Zero({.layer = 1}, 4, 7));
  absl::Status s = c->MergeReport(r);
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(s.message()), HasSubstr("report from rank 2 entries[1]"));
  EXPECT_TRUE(c->Keys().empty());

  TokenCounts a = TokenCounts::Zero(kL0, 4, 8);
  EXPECT_EQ(a.Merge(TokenCounts::Zero({.layer = 3}, 4, 8)).code(),
            absl::StatusCode::kInvalidArgument);
}

TEST(LocalityCollectorTest, ConcurrentRecordsAllCount) {
  auto c = MakeCollector(TwoByTwo());
  std::vector<std::thread> threads;
  for (int rank = 0; rank < 4; ++rank) {
    threads.emplace_back([&c, rank] {
      const std::vector<int32_t> ids = {0, 7};
      for (int i = 0; i < 500; ++i) {
        EXPECT_TRUE(c->Record(kL0, rank, std::span<const int32_t>(ids), 2).ok());
      }
    });
  }
  for (auto& t : threads) t.join();
  EXPECT_EQ(c->Counts(kL0)->Total(), 4 * 500 * 2);
}

}  // namespace
}  // namespace mixnet
