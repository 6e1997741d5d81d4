// mixnet_nccl_plugin_bench end to end (two processes on loopback): it prints
// one JSON object per size with the pair statistics, and when one end fails
// (here: the plugin cannot pin its progress thread) both exit with an error
// instead of waiting for each other.
#include <sstream>
#include <string>
#include <vector>

#include "absl/strings/str_split.h"
#include "absl/time/time.h"
#include "gtest/gtest.h"
#include "mixnet_build_paths.h"  // MIXNET_NCCL_PLUGIN_BENCH
#include "nlohmann/json.hpp"
#include "tests/ocs_driver/client/command_runner.h"

namespace mixnet::bench {
namespace {

using ::mixnet::testing::CommandResult;
using ::mixnet::testing::RunCommand;

// Runs the benchmark (killed after 60 s) with `env` ("NAME=value" entries).
CommandResult Bench(std::vector<std::string> env, const std::string& args) {
  std::vector<std::string> argv = {"/usr/bin/env"};
  argv.insert(argv.end(), env.begin(), env.end());
  argv.push_back(MIXNET_NCCL_PLUGIN_BENCH);
  for (absl::string_view a : absl::StrSplit(args, ' ', absl::SkipEmpty())) argv.emplace_back(a);
  return RunCommand(std::move(argv), absl::Seconds(60));
}

TEST(NcclPluginBench, PrintsPairStatisticsPerSize) {
  CommandResult r = Bench({"MIXNET_LOG_LEVEL=warn"},
                          "--sizes 4096 65536 --reps 3 --bytes-per-run 1048576 --json");
  ASSERT_EQ(r.rc, 0) << r.out << r.err;
  std::istringstream lines(r.out);
  std::string line;
  std::vector<nlohmann::json> rows;
  while (std::getline(lines, line)) {
    if (!line.empty() && line[0] == '{') rows.push_back(nlohmann::json::parse(line));
  }
  ASSERT_EQ(rows.size(), 2u) << r.out;
  for (const nlohmann::json& j : rows) {
    EXPECT_EQ(j.at("pairs"), 3);
    EXPECT_EQ(j.at("transport_runs_gbytes_per_s").size(), 3u);
    EXPECT_EQ(j.at("plugin_runs_gbytes_per_s").size(), 3u);
    EXPECT_GT(j.at("transport_gbytes_per_s").get<double>(), 0);
    EXPECT_GT(j.at("plugin_gbytes_per_s").get<double>(), 0);
    const double lo = j.at("plugin_over_transport_min"), mid = j.at("plugin_over_transport"),
                 hi = j.at("plugin_over_transport_max");
    EXPECT_LE(lo, mid);
    EXPECT_LE(mid, hi);
  }
  EXPECT_EQ(rows[0].at("bytes"), 4096);
  EXPECT_EQ(rows[1].at("bytes"), 65536);
}

TEST(NcclPluginBench, AFailingEndEndsBothWithAnError) {
  // CPU 1000 does not exist here, so the receiver's plugin cannot make its
  // device; before, the sender then waited on the pipe forever.
  CommandResult r = Bench({"MIXNET_PROGRESS_CPUS=1000"}, "--no-pin --sizes 4096 --reps 1");
  EXPECT_FALSE(r.timed_out) << r.out << r.err;
  EXPECT_NE(r.rc, 0) << r.out << r.err;
  EXPECT_NE(r.err.find("CPU 1000"), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("the other process exited"), std::string::npos) << r.err;
}

}  // namespace
}  // namespace mixnet::bench
