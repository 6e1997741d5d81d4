// mixnet_relay_bench run small (label cpu: three rank processes on
// loopback). Hand-worked expectation for the relay mode: the spec's EPS
// runs at E = 0.01 Gbit/s and each circuit at c = 100 Gbit/s, the relay
// stores and forwards chunks of q = 256 KiB, so the plan relays
// x = (c D - E q) / (E + c) of D = 1 MiB: a share of
// (100 - 0.01 / 4) / 100.01 = 0.99988; the origin cuts relay pieces to whole
// 4 KiB pages, round(256 x 0.99988) = 256 of the 256 pages, so h1 forwards
// every byte of every timed call; EPS and the one-circuit mode relay
// nothing, and h1 spends more CPU forwarding than waiting. Every
// call's bytes are checked by the bench itself (it exits non-zero on a
// wrong byte). Bad input fails at once, naming the flag. Test thread only
// (the ranks are child processes).
#include <map>
#include <string>

#include "absl/strings/str_split.h"
#include "gtest/gtest.h"
#include "mixnet_build_paths.h"  // MIXNET_RELAY_BENCH_BINARY
#include "nlohmann/json.hpp"
#include "tests/common/run_binary.h"

namespace mixnet::testing {
namespace {

const char* const kBench = MIXNET_RELAY_BENCH_BINARY;

TEST(RelayBench, RelaysThePlansShareAndReportsItsCost) {
  const BinaryRun r = RunBinary(kBench, "--sizes 1M --iters 5 --warmup 1 --rounds 1 --json", 120);
  ASSERT_EQ(r.exit_code, 0) << "stdout:\n" << r.out << "\nstderr:\n" << r.err;
  std::map<std::string, nlohmann::json> modes;
  nlohmann::json summary;
  for (absl::string_view line : absl::StrSplit(r.out, '\n', absl::SkipWhitespace())) {
    if (line.empty() || line[0] != '{') continue;
    nlohmann::json j = nlohmann::json::parse(line);
    EXPECT_EQ(j["bytes"], 1 << 20) << line;
    if (j.contains("summary")) {
      summary = j;
    } else {
      modes[j["mode"].get<std::string>()] = j;
    }
  }
  ASSERT_EQ(modes.size(), 3u) << r.out;
  EXPECT_EQ(modes["relay"]["relayed_share"].get<double>(), 1.0);
  EXPECT_EQ(modes["eps"]["relayed_share"].get<double>(), 0.0);
  EXPECT_EQ(modes["circuit"]["relayed_share"].get<double>(), 0.0);
  for (const auto& [name, j] : modes) {
    EXPECT_GT(j["time_ms"].get<double>(), 0) << name;
    EXPECT_NEAR(j["GB"].get<double>(), 5.0 * (1 << 20) / 1e9, 1e-12) << name;
    for (const char* k : {"origin_cpu_s_per_GB", "relay_host_cpu_s_per_GB", "dest_cpu_s_per_GB"}) {
      EXPECT_GE(j[k].get<double>(), 0) << name << " " << k;
    }
  }
  ASSERT_TRUE(summary.is_object()) << r.out;
  EXPECT_EQ(summary["summary"], "relay_cost");
  EXPECT_TRUE(summary.contains("relay_host_cpu_s_per_GB_forwarded")) << summary.dump();
  // h1 receives and sends every byte in the relay mode and only waits in the
  // others: forwarding 5 MiB costs it CPU that waiting does not.
  EXPECT_GT(modes["relay"]["relay_host_cpu_s_per_GB"].get<double>(),
            modes["eps"]["relay_host_cpu_s_per_GB"].get<double>())
      << r.out;
  EXPECT_GT(summary["relay_host_cpu_s_per_GB_forwarded"].get<double>(), 0) << summary.dump();
}

TEST(RelayBench, TheTableNamesEveryModeAndTheCost) {
  const BinaryRun r = RunBinary(kBench, "--sizes 256K --iters 2 --warmup 0 --rounds 1", 120);
  ASSERT_EQ(r.exit_code, 0) << "stdout:\n" << r.out << "\nstderr:\n" << r.err;
  for (const char* s : {"h1 s/GB", "  eps ", "  relay ", "  circuit ", "CPU s per GB it forwards",
                        "relay chunk 262144 bytes"}) {
    EXPECT_NE(r.out.find(s), std::string::npos) << s << " not in:\n" << r.out;
  }
}

TEST(RelayBench, BadInputFailsNamingTheFlag) {
  BinaryRun r = RunBinary(kBench, "--sizes 12Q", 30);
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_NE(r.err.find("--sizes"), std::string::npos) << r.err;
  r = RunBinary(kBench, "--rounds 0", 30);
  EXPECT_NE(r.exit_code, 0);
  EXPECT_NE(r.err.find("--rounds"), std::string::npos) << r.err;
}

}  // namespace
}  // namespace mixnet::testing
