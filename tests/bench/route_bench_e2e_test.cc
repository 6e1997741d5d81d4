// mixnet_route_bench end to end (label netns, needs root; skips with the
// reason otherwise): a tiny run (4 hosts, 2 OCS NICs each, two cases, one
// timed iteration, 256 KiB per host) whose JSON lines must parse and carry
// every field, with measured and floor times > 0, both routers per case, the
// summary last, and no namespace left behind. Bad input (no root needed,
// part "cpu"): exit code 2 with the culprit named. The test thread runs the
// binary and waits (bounded by `timeout`).
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "emulation/emulated_fabric.h"
#include "gtest/gtest.h"
#include "mixnet_build_paths.h"  // MIXNET_ROUTE_BENCH_BINARY
#include "nlohmann/json.hpp"
#include "ocs_driver/netns/netns.h"
#include "tests/common/run_binary.h"
#include "tests/emulation/netns_test_util.h"

namespace mixnet::bench {
namespace {

using BenchRun = testing::BinaryRun;

BenchRun RunBench(const std::string& args, int limit_s) {
  return testing::RunBinary(MIXNET_ROUTE_BENCH_BINARY, args, limit_s);
}

TEST(RouteBenchE2E, TinyRunPrintsEveryField) {
  MIXNET_SKIP_UNLESS_NETNS();
  const std::string prefix = testing::UniquePrefix("rbench");
  const BenchRun r = RunBench(absl::StrCat("--json --hosts 4 --ocs-nics 2 --gbps 0.05 --cases "
                                           "uniform,partner-0.75 --iters 1 --warmup 0 "
                                           "--bytes-per-host 262144 --case-timeout-s 60 --prefix ",
                                           prefix),
                              150);
  const std::vector<std::string> left =
      netns::ListNamespaces(prefix).value_or(std::vector<std::string>{});
  (void)emulation::EmulatedFabric::DownPrefix(prefix);  // in case the bench was killed
  ASSERT_EQ(r.exit_code, 0) << "stdout:\n" << r.out << "\nstderr:\n" << r.err;
  EXPECT_TRUE(left.empty()) << "namespaces left: " << left.front();
  std::vector<nlohmann::json> rows;
  nlohmann::json summary;
  std::stringstream ss(r.out);
  std::string line;
  while (std::getline(ss, line)) {
    const nlohmann::json j = nlohmann::json::parse(line, nullptr, false);
    ASSERT_TRUE(j.is_object()) << "not a JSON object: " << line;
    if (j.contains("summary")) {
      summary = j;
    } else {
      rows.push_back(j);
    }
  }
  ASSERT_EQ(rows.size(), 4u) << r.out;
  std::set<std::string> seen;
  for (const nlohmann::json& j : rows) {
    for (const char* k : {"case", "router", "measured_ms", "predicted_ms", "simulated_ms",
                          "floor_ms", "utilisation", "busiest", "link_bound", "wire_factor",
                          "circuits", "iterations_ms", "cold_ms", "cold_iterations_ms"}) {
      ASSERT_TRUE(j.contains(k)) << "no '" << k << "' in " << j.dump();
    }
    EXPECT_GT(j["measured_ms"].get<double>(), 0) << j.dump();
    // --iters 1: one timed iteration, which is the median.
    ASSERT_EQ(j["iterations_ms"].size(), 1u) << j.dump();
    EXPECT_DOUBLE_EQ(j["iterations_ms"][0].get<double>(), j["measured_ms"].get<double>())
        << j.dump();
    // ... and one cold call (the first of the router's pair).
    ASSERT_EQ(j["cold_iterations_ms"].size(), 1u) << j.dump();
    EXPECT_DOUBLE_EQ(j["cold_iterations_ms"][0].get<double>(), j["cold_ms"].get<double>())
        << j.dump();
    EXPECT_GT(j["cold_ms"].get<double>(), 0) << j.dump();
    EXPECT_GT(j["floor_ms"].get<double>(), 0) << j.dump();
    EXPECT_GT(j["predicted_ms"].get<double>(), 0) << j.dump();
    EXPECT_GT(j["simulated_ms"].get<double>(), 0) << j.dump();
    EXPECT_LE(j["floor_ms"].get<double>(), j["measured_ms"].get<double>() * 1.05) << j.dump();
    EXPECT_EQ(j.value("bytes_bad", 1), 0) << j.dump();
    seen.insert(j["case"].get<std::string>() + "/" + j["router"].get<std::string>());
  }
  EXPECT_EQ(seen, (std::set<std::string>{"uniform/v1", "uniform/v2", "partner-0.75/v1",
                                         "partner-0.75/v2"}));
  ASSERT_TRUE(summary.is_object()) << "no summary line:\n" << r.out;
  for (const char* k :
       {"link_bound", "cpu_bound", "v2_vs_v1", "gain_target", "model_target", "cold_calls"}) {
    EXPECT_TRUE(summary.contains(k)) << "no '" << k << "' in " << summary.dump();
  }
}

TEST(RouteBenchBadInput, ExitsTwoNamingTheCulprit) {
  for (const auto& [args, culprit] : std::vector<std::pair<std::string, std::string>>{
           {"--cases uniform,nope", "nope"},
           {"--cases partner-2", "partner-2"},
           {"--hosts 1", "--hosts"},
           {"--iters 0", "--iters"},
           {"--rto-min-ms 500", "--rto-min-ms"},
           {"--cases trace-l0 --trace /nonexistent.jsonl", "/nonexistent.jsonl"}}) {
    const BenchRun r = RunBench(args, 30);
    EXPECT_EQ(r.exit_code, 2) << args << "\n" << r.err;
    EXPECT_NE(r.err.find(culprit), std::string::npos) << args << ": " << r.err;
  }
}

}  // namespace
}  // namespace mixnet::bench
