// mixnet_ocs_bench --backend netns with few ports and iterations (label
// netns, needs root): it builds its emulated OCS, drives mixnet-ocsd
// --backend netns through full re-wirings, reports figures, and removes
// every namespace it created. Skips with the reason when not root.
// Test thread; the bench (and its daemon) are child processes.
#include <algorithm>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "mixnet_build_paths.h"  // MIXNET_OCS_BENCH_BIN
#include "nlohmann/json.hpp"
#include "ocs_driver/netns/netns.h"
#include "tests/ocs_driver/client/command_runner.h"

namespace mixnet::ocs {
namespace {

using ::mixnet::testing::CommandResult;
using ::mixnet::testing::RunCommand;

TEST(OcsBenchNetnsTest, FullRewiringsOnTheEmulatedOcsAndCleanup) {
  if (!netns::HavePrivileges()) GTEST_SKIP() << "needs root for network namespaces";
  absl::StatusOr<std::vector<std::string>> before = netns::ListNamespaces("ocsbench");
  ASSERT_TRUE(before.ok()) << before.status();
  CommandResult r =
      RunCommand({MIXNET_OCS_BENCH_BIN, "--daemon", MIXNET_OCSD_BIN, "--backend", "netns",
                  "--ports", "8", "--iterations", "6", "--warmup", "1", "--json"},
                 absl::Seconds(90));
  ASSERT_EQ(r.rc, 0) << r.command << "\nstdout:\n" << r.out << "\nstderr:\n" << r.err;
  nlohmann::json j = nlohmann::json::parse(r.out, nullptr, false);
  ASSERT_FALSE(j.is_discarded()) << r.out;
  EXPECT_EQ(j.value("backend", ""), "netns");
  EXPECT_EQ(j.value("ports", 0), 8);
  EXPECT_EQ(j.value("iterations", 0), 6);
  EXPECT_GT(j.value("p50_us", 0), 0);
  EXPECT_GT(j.value("backend_p50_us", 0), 0);

  absl::StatusOr<std::vector<std::string>> after = netns::ListNamespaces("ocsbench");
  ASSERT_TRUE(after.ok()) << after.status();
  for (const std::string& ns : *after) {
    EXPECT_NE(std::find(before->begin(), before->end(), ns), before->end())
        << "namespace " << ns << " left behind";
  }
}

}  // namespace
}  // namespace mixnet::ocs
