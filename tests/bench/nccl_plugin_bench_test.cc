// mixnet_nccl_plugin_bench end to end (two processes on loopback): it prints
// one JSON object per size with the pair statistics, and when one end fails
// (here: the plugin cannot pin its progress thread) both exit with an error
// instead of waiting for each other.
#include <sys/wait.h>

#include <cstdio>
#include <sstream>
#include <string>
#include <vector>

#include "gtest/gtest.h"
#include "nlohmann/json.hpp"

namespace mixnet::bench {
namespace {

struct BenchRun {
  int exit_code = -1;
  std::string out;
};

// Runs the benchmark under `timeout` with `env` in front; stderr joins stdout.
BenchRun Bench(const std::string& env, const std::string& args) {
  const std::string cmd = env + " timeout 60 " + MIXNET_NCCL_PLUGIN_BENCH + " " + args + " 2>&1";
  BenchRun r;
  FILE* p = popen(cmd.c_str(), "r");
  if (p == nullptr) return r;
  char buf[4096];
  size_t n;
  while ((n = fread(buf, 1, sizeof(buf), p)) > 0) r.out.append(buf, n);
  const int status = pclose(p);
  r.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  return r;
}

TEST(NcclPluginBench, PrintsPairStatisticsPerSize) {
  BenchRun r =
      Bench("MIXNET_LOG_LEVEL=warn", "--sizes 4096 65536 --reps 3 --bytes-per-run 1048576 --json");
  ASSERT_EQ(r.exit_code, 0) << r.out;
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
  BenchRun r = Bench("MIXNET_PROGRESS_CPUS=1000", "--no-pin --sizes 4096 --reps 1");
  EXPECT_NE(r.exit_code, 0) << r.out;
  EXPECT_NE(r.exit_code, 124) << "timed out: " << r.out;
  EXPECT_NE(r.out.find("CPU 1000"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("the other process exited"), std::string::npos) << r.out;
}

}  // namespace
}  // namespace mixnet::bench
