// The benchmark's report: medians over rounds and the ratio to the best TCP
// peer (Open MPI's shared-memory row is a reference, never the ratio's base).
#include "bench/alltoall_perf/peer_runner.h"

#include <sstream>
#include <string>

#include "gtest/gtest.h"
#include "nlohmann/json.hpp"

namespace mixnet::bench {
namespace {

peers::Result R(size_t bytes, double time_us, double busbw = 0) {
  peers::Result r;
  r.bytes_per_peer = bytes;
  r.ranks = 4;
  r.transport = "tcp";
  r.iters = 10;
  r.time_us = time_us;
  r.busbw_gbps = busbw;
  return r;
}

TEST(MeasuredResult, MeanAndSpreadOfTheIterations) {
  // Four iterations, one stalled: the mean moves, the median does not.
  peers::Result r = peers::MeasuredResult(1 << 20, 4, "tcp", 5, {0.001, 0.003, 0.002, 0.010});
  EXPECT_EQ(r.iters, 4);
  EXPECT_DOUBLE_EQ(r.time_us, 4000);
  EXPECT_DOUBLE_EQ(r.time_min_us, 1000);
  EXPECT_DOUBLE_EQ(r.time_p50_us, 2000);
  EXPECT_DOUBLE_EQ(r.time_max_us, 10000);
  // nccl-tests formulas on the mean: 4 MiB per rank in 4 ms.
  EXPECT_NEAR(r.algbw_gbps, 4.0 * (1 << 20) / 0.004 / 1e9, 1e-9);
  EXPECT_NEAR(r.busbw_gbps, r.algbw_gbps * 3 / 4, 1e-9);
  // The spread survives the JSON round trip the peers' results take.
  peers::Result back = peers::ResultFromJson(nlohmann::json::parse(peers::ResultToJson(r).dump()));
  EXPECT_DOUBLE_EQ(back.time_p50_us, 2000);
  EXPECT_DOUBLE_EQ(back.time_max_us, 10000);
  EXPECT_DOUBLE_EQ(back.time_min_us, 1000);

  peers::Result none = peers::MeasuredResult(8, 2, "tcp", 0, {});
  EXPECT_EQ(none.iters, 0);
  EXPECT_EQ(none.time_p50_us, 0);
}

TEST(MedianPerSize, TakesTheMiddleRunPerSizeInFirstSeenOrder) {
  // Three rounds; 1M is missing from one (a failed run).
  std::vector<std::vector<peers::Result>> rounds = {
      {R(8 << 20, 300), R(1 << 20, 50)},
      {R(8 << 20, 100), R(1 << 20, 70)},
      {R(8 << 20, 200)},
  };
  std::vector<peers::Result> m = MedianPerSize(rounds);
  ASSERT_EQ(m.size(), 2u);
  EXPECT_EQ(m[0].bytes_per_peer, 8u << 20);
  EXPECT_EQ(m[0].time_us, 200);
  // Two runs: the lower middle, a time that was measured.
  EXPECT_EQ(m[1].bytes_per_peer, 1u << 20);
  EXPECT_EQ(m[1].time_us, 50);
  EXPECT_TRUE(MedianPerSize({}).empty());
}

TEST(PrintReport, RatioIsAgainstTheBestTcpPeerAndRoundsAreReported) {
  std::vector<peers::Result> ours = {R(1 << 20, 100, 3.0)};
  std::map<std::string, std::vector<peers::Result>> peer_results = {
      {"gloo", {R(1 << 20, 400, 1.0)}},
      {"mpi", {R(1 << 20, 200, 1.5)}},
      {"mpi_shm", {R(1 << 20, 50, 6.0)}},
  };
  ::testing::internal::CaptureStdout();
  PrintReport(ours, peer_results, /*json=*/true, /*rounds=*/5);
  std::string out = ::testing::internal::GetCapturedStdout();
  nlohmann::json j = nlohmann::json::parse(out);
  EXPECT_EQ(j["rounds"], 5);
  EXPECT_DOUBLE_EQ(j["speedup_vs_best_peer"].get<double>(), 2.0);
  EXPECT_DOUBLE_EQ(j["speedup_vs_mpi_shm"].get<double>(), 0.5);
  EXPECT_DOUBLE_EQ(j["mpi_busbw_GBps"].get<double>(), 1.5);

  ::testing::internal::CaptureStdout();
  PrintReport(ours, peer_results, /*json=*/false, /*rounds=*/5);
  out = ::testing::internal::GetCapturedStdout();
  EXPECT_NE(out.find("median of 5 rounds"), std::string::npos) << out;
  EXPECT_NE(out.find("2.00x"), std::string::npos) << out;

  ::testing::internal::CaptureStdout();
  PrintReport(ours, {}, /*json=*/true);
  out = ::testing::internal::GetCapturedStdout();
  EXPECT_EQ(nlohmann::json::parse(out).count("rounds"), 0u) << out;
}

}  // namespace
}  // namespace mixnet::bench
