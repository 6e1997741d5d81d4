// Unit tests of mixnet_route_bench's pure logic (label cpu): the matrix
// normalisation, the partner matrix, the plan's circuits and fluid-model
// predictions, the per-router figures (floor, utilisation, wire factor,
// prediction) and the verdicts. Every expected value is worked out by hand
// in the comments, not computed by the code under test. Test thread only.
#include <cmath>

#include "apps/demo/fabric_spec.h"
#include "bench/route_bench/link_sampler.h"
#include "bench/route_bench/route_cases.h"
#include "bench/route_bench/route_plan.h"
#include "bench/route_bench/route_results.h"
#include "gtest/gtest.h"
#include "runtime/cluster/cluster_spec.h"

namespace mixnet::bench {
namespace {

TEST(RouteBenchCases, NormaliseGivesExactWholeBytes) {
  // Off-diagonal 1, 1, 2 (total 4; the diagonal's 100 is ignored); 3 hosts x
  // 10 bytes = 30: exact shares 7.5, 7.5, 15 -> floors 7, 7, 15 (29), the
  // last byte to the first of the two equal remainders (0.5 at (0,1)).
  TrafficMatrix m(3);
  m.at(0, 1) = 1;
  m.at(0, 2) = 1;
  m.at(1, 0) = 2;
  m.at(1, 1) = 100;
  const std::vector<size_t> want = {0, 8, 7, 15, 0, 0, 0, 0, 0};
  EXPECT_EQ(NormaliseToBytes(m, 10), want);
  EXPECT_EQ(NormaliseToBytes(TrafficMatrix(3), 10), std::vector<size_t>(9, 0));
}

TEST(RouteBenchCases, PartnerOneSendsEverythingToOnePartner) {
  // Share 1: every token of host s goes to the experts of its partner a(s)
  // (a perfect matching of 4 hosts), so each row has one entry, and all rows
  // are equal in total: 4 x 1000 bytes split evenly, 1000 each.
  CaseOptions o;
  o.hosts = 4;
  o.bytes_per_host = 1000;
  absl::StatusOr<BenchCase> c = MakeCase("partner-1", o);
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_EQ(c->OffDiagonalBytes(), 4000u);
  for (int s = 0; s < 4; ++s) {
    int partner = -1;
    for (int d = 0; d < 4; ++d) {
      if (c->bytes[s * 4 + d] == 0) continue;
      EXPECT_EQ(partner, -1) << "host " << s << " has two peers";
      EXPECT_EQ(c->bytes[s * 4 + d], 1000u);
      partner = d;
    }
    ASSERT_GE(partner, 0);
    EXPECT_NE(partner, s);
    EXPECT_GT(c->bytes[partner * 4 + s], 0u) << "partners are mutual";
  }
}

TEST(RouteBenchCases, BadNamesAreRefused) {
  EXPECT_TRUE(ParseCaseList("uniform, partner-0.5,trace-l3").ok());
  for (const char* bad : {"", "nope", "partner-1.5", "partner-x", "trace-l", "trace-l-1"}) {
    EXPECT_EQ(ParseCaseList(bad).status().code(), absl::StatusCode::kInvalidArgument) << bad;
  }
  CaseOptions o;
  o.hosts = 4;
  o.trace = "/nonexistent/trace.jsonl";
  EXPECT_EQ(MakeCase("trace-l0", o).status().code(), absl::StatusCode::kNotFound);
}

TEST(RouteBenchPlan, PartnerPairsGetCircuitsAndV2SplitsOverEps) {
  // 4 hosts, 1 EPS + 1 OCS NIC each at 0.008 Gbit/s = 1e6 bytes/s. Host s
  // sends D = 1e6 bytes to its partner only. The planner joins every
  // partner pair by a circuit (2 circuits). v1: everything on the circuit,
  // T = D / c = 1 s. v2: circuit and EPS share the bytes, T = D / (c + E) =
  // 0.5 s, which is also the lower bound (all NICs busy).
  demo::FabricShape shape;
  shape.hosts = 4;
  shape.ocs_nics = 1;
  shape.gbps = 0.008;
  absl::StatusOr<cluster::ClusterSpec> spec =
      cluster::ClusterSpec::Parse(demo::FabricSpecYaml(demo::FabricKind::kMixnet, shape));
  ASSERT_TRUE(spec.ok()) << spec.status();
  CaseOptions o;
  o.hosts = 4;
  o.bytes_per_host = 1e6;
  absl::StatusOr<BenchCase> c = MakeCase("partner-1", o);
  ASSERT_TRUE(c.ok()) << c.status();
  absl::StatusOr<CasePlan> p = PlanCase(*spec, c->Matrix(), false);
  ASSERT_TRUE(p.ok()) << p.status();
  EXPECT_EQ(p->circuits.size(), 2u);
  EXPECT_NEAR(p->v1_model_s, 1.0, 1e-6);
  EXPECT_NEAR(p->v2_model_s, 0.5, 1e-3);
  EXPECT_NEAR(p->lower_bound_s, 0.5, 1e-6);
  // The simulator's figures: each link direction carries one direction's
  // frames and the other's ACKs, (1514 + 33) / 1448 bytes per payload byte.
  EXPECT_NEAR(p->v1_sim_s, 1.0 * 1547 / 1448, 1e-6);
  EXPECT_NEAR(p->v2_sim_s, 0.5 * 1547 / 1448, 1e-3);
  EXPECT_EQ(p->v2_relayed_bytes, 0);
  // The oracle (payload bytes): on these circuits the best routing is v2's
  // split, D / (c + E) = 0.5 s; no circuit set does better (every NIC busy).
  EXPECT_NEAR(p->oracle_installed_s, 0.5, 1e-9);
  EXPECT_NEAR(p->oracle_dataplane_s, 0.5, 1e-9);  // no relay needed: the same paths
  EXPECT_NEAR(p->oracle_best_s, 0.5, 1e-9);
  EXPECT_NEAR(p->oracle_bound_s, 0.5, 1e-9);
}

RankRecord Rec(int rank, int it, double ms, uint64_t rx, uint64_t tx, bool warm = true) {
  RankRecord r;
  r.rank = rank;
  r.router = "v2";
  r.iteration = it;
  r.warm = warm;
  r.ms = ms;
  r.nics["eps0"] = {rx, tx};
  r.nics["lo"] = {999999, 999999};  // not a link of the fabric: ignored
  r.retransmits = 2;
  if (rank == 0) {  // rank 0 samples the machine's CPUs: 1 of 4 jiffies idle
    r.cpu_idle = 1;
    r.cpu_total = 4;
  }
  return r;
}

TEST(RouteBenchResults, FloorUtilisationAndPrediction) {
  // 2 hosts, eps0 at 1e6 bytes/s with a 1000-byte bucket. Iteration 0 is
  // warm-up. Timed iterations (slowest rank): 1 -> 120 ms, 2 -> 300 ms,
  // 3 -> 150 ms; the lower median is 150 ms (iteration 3).
  // Iteration 3: h0 rx 51000 (50 ms), tx 81000 (80 ms); h1 rx 81000 (80 ms,
  // not above), tx 51000: floor 80 ms at "h0/eps0 tx", utilisation 80 / 150.
  // Iterations 1 and 2 carry the same bytes: floors 80, utilisations
  // 80/120 and 80/300; median utilisation 80/150 = 0.5333.
  // Wire factor: (81000 + 51000) / 120000 payload = 1.1; model 0.1 s ->
  // 100 ms, predicted 110 ms. Retransmits: 2 per record, 6 timed records.
  // CPUs: rank 0's timed records, 3 x 1 idle of 3 x 4 jiffies = 25% idle.
  // The cold calls (first of each pair) count only in the cold figures:
  // iterations 1..3 slowest 500, 200, 400 ms -> lower median 400 ms; their
  // bytes, retransmits and CPU samples stay out of the warm figures.
  const auto cold = [](int rank, int it, double ms) { return Rec(rank, it, ms, 7, 7, false); };
  const std::vector<RankRecord> recs = {Rec(0, 0, 999, 1, 1),
                                        Rec(1, 0, 999, 1, 1),
                                        cold(0, 0, 999),
                                        cold(1, 0, 999),
                                        cold(0, 1, 500),
                                        cold(1, 1, 450),
                                        Rec(0, 1, 100, 51000, 81000),
                                        Rec(1, 1, 120, 81000, 51000),
                                        cold(0, 2, 200),
                                        cold(1, 2, 100),
                                        Rec(0, 2, 300, 51000, 81000),
                                        Rec(1, 2, 10, 81000, 51000),
                                        cold(0, 3, 10),
                                        cold(1, 3, 400),
                                        Rec(0, 3, 150, 51000, 81000),
                                        Rec(1, 3, 140, 81000, 51000)};
  const std::map<std::string, LinkRate> rates = {{"h0/eps0", {1e6, 1000}},
                                                 {"h1/eps0", {1e6, 1000}}};
  absl::StatusOr<RouterFigures> f = Summarise("c", "v2", recs, 1, {"h0", "h1"}, rates, 120000, 0.1);
  ASSERT_TRUE(f.ok()) << f.status();
  EXPECT_EQ(f->iterations, 3);
  EXPECT_DOUBLE_EQ(f->measured_ms, 150);
  EXPECT_DOUBLE_EQ(f->measured_min_ms, 120);
  EXPECT_DOUBLE_EQ(f->measured_max_ms, 300);
  EXPECT_EQ(f->iterations_ms, (std::vector<double>{120, 300, 150}));
  EXPECT_DOUBLE_EQ(f->floor_ms, 80);
  EXPECT_NEAR(f->utilisation, 80.0 / 150.0, 1e-12);
  EXPECT_EQ(f->busiest, "h0/eps0 tx");
  EXPECT_NEAR(f->wire_factor, 1.1, 1e-12);
  EXPECT_NEAR(f->model_ms, 100, 1e-9);
  EXPECT_NEAR(f->predicted_ms, 110, 1e-9);
  EXPECT_EQ(f->retransmits, 12u);
  EXPECT_DOUBLE_EQ(f->cpu_idle, 0.25);
  EXPECT_EQ(f->cold_iterations_ms, (std::vector<double>{500, 200, 400}));
  EXPECT_DOUBLE_EQ(f->cold_ms, 400);

  // A rank missing from a timed iteration is lost data, not a faster run.
  const std::vector<RankRecord> missing = {Rec(0, 1, 100, 1, 1)};
  EXPECT_EQ(Summarise("c", "v2", missing, 1, {"h0", "h1"}, rates, 1, 0.1).status().code(),
            absl::StatusCode::kDataLoss);
  // So is a rank missing from a cold call, and a run with cold calls only.
  const std::vector<RankRecord> cold_missing = {Rec(0, 1, 100, 1, 1), Rec(1, 1, 100, 1, 1),
                                                cold(0, 1, 100)};
  EXPECT_EQ(Summarise("c", "v2", cold_missing, 1, {"h0", "h1"}, rates, 1, 0.1).status().code(),
            absl::StatusCode::kDataLoss);
  EXPECT_EQ(Summarise("c", "v2", {cold(0, 1, 1), cold(1, 1, 1)}, 1, {"h0", "h1"}, rates, 1, 0.1)
                .status()
                .code(),
            absl::StatusCode::kDataLoss);
  EXPECT_DOUBLE_EQ(LowerMedian({4, 1, 3, 2}), 2);
}

TEST(RouteBenchResults, RecordsRoundTripAndBadOnesAreNamed) {
  const RankRecord r = Rec(0, 3, 12.5, 10, 20, false);
  absl::StatusOr<RankRecord> back = RecordFromJson(RecordToJson(r), 0);
  ASSERT_TRUE(back.ok()) << back.status();
  EXPECT_EQ(back->router, "v2");
  EXPECT_EQ(back->iteration, 3);
  EXPECT_FALSE(back->warm);
  EXPECT_EQ(back->nics.at("eps0").tx, 20u);
  EXPECT_EQ(back->cpu_total, 4u);
  nlohmann::json bad = RecordToJson(r);
  bad.erase("ms");
  EXPECT_NE(RecordFromJson(bad, 1).status().message().find("'ms'"), std::string::npos);
  nlohmann::json no_warm = RecordToJson(r);
  no_warm.erase("warm");
  EXPECT_NE(RecordFromJson(no_warm, 1).status().message().find("'warm'"), std::string::npos);
}

CaseFigures Fig(const std::string& name, double v1_ms, double v2_ms, double predicted_ms,
                double util) {
  CaseFigures c;
  c.case_name = name;
  for (RouterFigures* f : {&c.v1, &c.v2}) {
    f->router = f == &c.v1 ? "v1" : "v2";
    f->measured_ms = f == &c.v1 ? v1_ms : v2_ms;
    f->utilisation = util;
    f->predicted_ms = predicted_ms;
    f->cold_ms = 1.3 * f->measured_ms;
    f->cold_iterations_ms = {f->cold_ms};
  }
  return c;
}

TEST(RouteBenchResults, Verdicts) {
  // partner-0.5: 80 / 100 = 0.80 (<= 0.85); expert8: 90 / 100 = 0.90 (missed);
  // uniform 104 / 100 = 1.04 (> 1.03: a regression). Every prediction is
  // 100 ms, so the rows' errors are 0 (v1), -20% (partner-0.5 v2), -10%
  // (expert8 v2) and +4% (uniform v2): the worst is -20%, beyond 15%.
  // Utilisation 0.7 everywhere: neither link-bound (< 0.8) nor cpu-bound.
  const Verdicts v = Judge({Fig("partner-0.5", 100, 80, 100, 0.7),
                            Fig("expert8", 100, 90, 100, 0.7), Fig("uniform", 100, 104, 100, 0.7)});
  EXPECT_FALSE(v.gain_met);
  EXPECT_DOUBLE_EQ(v.gain_ratio.at("partner-0.5"), 0.8);
  EXPECT_DOUBLE_EQ(v.gain_ratio.at("expert8"), 0.9);
  EXPECT_FALSE(v.no_regression);
  EXPECT_DOUBLE_EQ(v.worst_ratio, 1.04);
  EXPECT_EQ(v.worst_case, "uniform");
  EXPECT_FALSE(v.model_met);
  EXPECT_NEAR(v.worst_model_error, -0.2, 1e-12);
  EXPECT_EQ(v.worst_model_row, "partner-0.5 v2");
  // Cold calls at 1.3 x measured: the farthest from its prediction is
  // uniform v2, 1.3 x 104 / 100 - 1 = +35.2%; not a target.
  EXPECT_NEAR(v.worst_cold_error, 0.352, 1e-12);
  EXPECT_EQ(v.worst_cold_row, "uniform v2");
  EXPECT_FALSE(v.link_bound);
  EXPECT_FALSE(v.cpu_bound);
  const Verdicts good = Judge({Fig("partner-0.5", 100, 84, 90, 0.9)});
  EXPECT_TRUE(good.gain_met && good.no_regression && good.link_bound && !good.cpu_bound);
  EXPECT_TRUE(good.model_met);  // 100 / 90 - 1 = +11%, 84 / 90 - 1 = -6.7% (cold: +44%)
}

// Samples at 0, 10, 20, 30 ms of a counter that moves 0, 100, 100, 200
// bytes: 1% (2 bytes) is crossed at 0.2 ms, 99% (198 bytes) at 29.8 ms; the
// other direction never moves.
TEST(RouteBenchLinkSampler, SpansInterpolateBetweenSamples) {
  const std::vector<double> t = {0, 10, 20, 30};
  std::vector<demo::ByteCounters> c(4);
  const uint64_t rx[] = {1000, 1100, 1200, 1200};  // 0, 100, 200, 200 moved
  const uint64_t tx[] = {500, 600, 600, 700};      // 0, 100, 100, 200 moved
  for (int i = 0; i < 4; ++i) c[i] = demo::ByteCounters{rx[i], tx[i]};
  const LinkEnd e = EndOf(t, c);
  EXPECT_NEAR(e.tx.start_ms, 0.2, 1e-9);
  EXPECT_NEAR(e.tx.end_ms, 29.8, 1e-9);
  EXPECT_EQ(e.tx.bytes, 200u);
  EXPECT_NEAR(e.rx.start_ms, 0.2, 1e-9);  // 2 of the 100 of the first 10 ms
  EXPECT_NEAR(e.rx.end_ms, 19.8, 1e-9);   // 198: 98 of the 100 of 10..20 ms
  EXPECT_EQ(e.rx.bytes, 200u);
  std::vector<demo::ByteCounters> idle(4, demo::ByteCounters{7, 7});
  const LinkEnd none = EndOf(t, idle);
  EXPECT_EQ(none.rx.end_ms, 0);
  EXPECT_EQ(none.tx.bytes, 0u);
  EXPECT_EQ(TimeOfShare({0}, {5}, 0.5), 0);  // one sample: nothing moved
}

}  // namespace
}  // namespace mixnet::bench
