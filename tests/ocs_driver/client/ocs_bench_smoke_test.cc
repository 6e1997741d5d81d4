// Smoke test of mixnet_ocs_bench (sim backend, few iterations): it starts its
// own mixnet-ocsd, completes full re-wirings, prints the table or one JSON
// object per line with the documented keys, measures an external daemon with
// --target, and fails with a message on bad input.
// Test thread; the bench (and its daemon) are child processes.
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "mixnet_build_paths.h"  // MIXNET_OCS_BENCH_BIN
#include "nlohmann/json.hpp"
#include "tests/ocs_driver/client/client_test_util.h"
#include "tests/ocs_driver/client/command_runner.h"

namespace mixnet::ocs {
namespace {

using ::mixnet::testing::CommandResult;
using ::mixnet::testing::RunCommand;
using ::testing::HasSubstr;

std::string Describe(const CommandResult& r) {
  return absl::StrCat(r.command, "\nrc=", r.rc, "\nstdout:\n", r.out, "\nstderr:\n", r.err);
}

CommandResult Bench(std::vector<std::string> args) {
  args.insert(args.begin(), MIXNET_OCS_BENCH_BIN);
  args.push_back("--daemon");
  args.push_back(MIXNET_OCSD_BIN);
  return RunCommand(args, absl::Seconds(60));
}

void ExpectFigures(const nlohmann::json& j, const std::string& backend, int ports, int iterations) {
  EXPECT_EQ(j.value("backend", ""), backend);
  EXPECT_EQ(j.value("ports", 0), ports);
  EXPECT_EQ(j.value("iterations", 0), iterations);
  ASSERT_TRUE(j.contains("switch_ms"));
  ASSERT_TRUE(j["p50_us"].is_number_integer()) << j.dump();
  ASSERT_TRUE(j["p99_us"].is_number_integer()) << j.dump();
  EXPECT_GT(j["p50_us"].get<int64_t>(), 0);
  EXPECT_GE(j["p99_us"].get<int64_t>(), j["p50_us"].get<int64_t>());
}

TEST(OcsBenchSmokeTest, SimJsonAndTable) {
  CommandResult r =
      Bench({"--backend", "sim", "--ports", "16", "--iterations", "20", "--warmup", "2", "--json"});
  ASSERT_EQ(r.rc, 0) << Describe(r);
  std::vector<std::string> lines = absl::StrSplit(r.out, '\n', absl::SkipEmpty());
  ASSERT_EQ(lines.size(), 1u) << r.out;
  nlohmann::json j = nlohmann::json::parse(lines[0], nullptr, /*allow_exceptions=*/false);
  ASSERT_FALSE(j.is_discarded()) << lines[0];
  ExpectFigures(j, "sim", 16, 20);
  EXPECT_EQ(j.value("switch_ms", -1.0), 0.0);

  // With a switching time configured, the reported overhead is the latency
  // minus that time, and the latency includes it.
  r = Bench({"--backend", "sim", "--ports", "8", "--iterations", "4", "--warmup", "1",
             "--switch-ms", "20", "--json"});
  ASSERT_EQ(r.rc, 0) << Describe(r);
  j = nlohmann::json::parse(r.out, nullptr, false);
  ASSERT_FALSE(j.is_discarded()) << r.out;
  EXPECT_EQ(j.value("switch_ms", 0.0), 20.0);
  EXPECT_GE(j.value("latency_p50_us", 0), 20000);
  EXPECT_EQ(j.value("p50_us", 0), j.value("latency_p50_us", 0) - 20000);

  r = Bench({"--backend", "sim", "--ports", "8", "--iterations", "5", "--warmup", "0"});
  ASSERT_EQ(r.rc, 0) << Describe(r);
  EXPECT_THAT(r.out, HasSubstr("p99_us"));
  EXPECT_THAT(r.out, HasSubstr("sim"));
}

TEST(OcsBenchSmokeTest, ExternalTargetAndBadInput) {
  absl::StatusOr<std::unique_ptr<mixnet::testing::DaemonProcess>> d =
      mixnet::testing::StartSimDaemon(12, 0);
  ASSERT_TRUE(d.ok()) << d.status();
  CommandResult r =
      Bench({"--target", (*d)->address(), "--iterations", "6", "--warmup", "1", "--json"});
  ASSERT_EQ(r.rc, 0) << Describe(r);
  nlohmann::json j = nlohmann::json::parse(r.out, nullptr, false);
  ASSERT_FALSE(j.is_discarded()) << r.out;
  ExpectFigures(j, "sim", 12, 6);

  r = Bench({"--backend", "sim", "--ports", "7", "--iterations", "2"});
  EXPECT_EQ(r.rc, 1) << Describe(r);
  EXPECT_THAT(r.err, HasSubstr("even"));
}

}  // namespace
}  // namespace mixnet::ocs
