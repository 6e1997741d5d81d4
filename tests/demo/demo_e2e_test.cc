// End-to-end test of mixnet-demo on the emulated cluster (label netns, root):
// a short MixNet-only run (mixnet-ocsd netns backend, mixnet-controller, one
// worker per host) with continuous checksummed all-to-alls must commit at
// least 100 planned reconfigurations with zero bytes lost, duplicated or
// corrupted; and a run whose controller is killed and restarted mid-run loses
// nothing and resumes at a higher epoch. The test thread runs the binary and
// waits (bounded by `timeout`).
#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <fstream>
#include <sstream>
#include <string>

#include "absl/strings/str_cat.h"
#include "apps/demo/workload.h"
#include "emulation/emulated_fabric.h"
#include "gtest/gtest.h"
#include "nlohmann/json.hpp"
#include "tests/emulation/netns_test_util.h"

namespace mixnet::demo {
namespace {

struct DemoRun {
  int exit_code = -1;
  std::string out;
  std::string err;
};

DemoRun RunDemo(const std::string& args, int limit_s) {
  const std::string err_file = absl::StrCat("/tmp/mixnet_demo_e2e_", getpid(), ".err");
  const std::string cmd =
      absl::StrCat("timeout -k 5 ", limit_s, " ", MIXNET_DEMO_BINARY, " ", args, " 2>", err_file);
  DemoRun r;
  FILE* f = popen(cmd.c_str(), "r");
  if (f == nullptr) return r;
  char buf[4096];
  size_t n;
  while ((n = fread(buf, 1, sizeof(buf), f)) > 0) r.out.append(buf, n);
  const int st = pclose(f);
  r.exit_code = WIFEXITED(st) ? WEXITSTATUS(st) : -1;
  std::ifstream in(err_file);
  std::stringstream ss;
  ss << in.rdbuf();
  r.err = ss.str();
  std::remove(err_file.c_str());
  return r;
}

nlohmann::json LastLineJson(const std::string& out) {
  std::string s = out;
  while (!s.empty() && s.back() == '\n') s.pop_back();
  const size_t nl = s.rfind('\n');
  return nlohmann::json::parse(nl == std::string::npos ? s : s.substr(nl + 1), nullptr, false);
}

// Workload flags of a MixNet-only demo run.
std::string WorkloadArgs(const WorkloadOptions& w, int iterations) {
  return absl::StrCat("--fabrics mixnet --json --iterations ", iterations, " --hosts ", w.hosts,
                      " --layers ", w.layers, " --experts-per-host ", w.experts_per_host,
                      " --tokens ", w.tokens, " --token-bytes ", w.token_bytes, " --seed ", w.seed,
                      " --drift-every ", w.drift_every);
}

// Every byte of every dispatch and combine of the run, counted here
// independently of the demo.
uint64_t ExpectedBytes(const WorkloadOptions& w, int iterations) {
  auto workload = Workload::Create(w);
  EXPECT_TRUE(workload.ok()) << workload.status();
  if (!workload.ok()) return 0;
  uint64_t expected = 0;
  for (int it = 0; it < iterations; ++it) {
    for (int l = 0; l < w.layers; ++l) {
      for (size_t b : workload->DispatchBytes(it, l)) expected += 2 * b;
    }
  }
  return expected;
}

TEST(DemoE2E, HundredReconfigurationsUnderChecksummedAlltoallNothingLost) {
  MIXNET_SKIP_UNLESS_NETNS();
  const std::string prefix = testing::UniquePrefix("demo");
  WorkloadOptions w;
  w.hosts = 8;
  w.layers = 4;
  w.experts_per_host = 2;
  w.tokens = 32;
  w.token_bytes = 1024;
  w.seed = 7;
  w.drift_every = 3;
  const int iterations = 64;
  const std::string args =
      absl::StrCat(WorkloadArgs(w, iterations),
                   " --ocs-nics 3 --gbps 0.05 --switch-ms 5 --compute-ms 150 --prefix ", prefix,
                   " --timeout-s 80");
  const DemoRun r = RunDemo(args, 90);
  (void)emulation::EmulatedFabric::DownPrefix(prefix + "m");  // in case the demo was killed
  ASSERT_EQ(r.exit_code, 0) << "stdout:\n"
                            << r.out << "\nstderr (tail):\n"
                            << r.err.substr(r.err.size() > 6000 ? r.err.size() - 6000 : 0);
  const nlohmann::json j = LastLineJson(r.out);
  ASSERT_TRUE(j.is_object()) << r.out;
  std::printf("mixnet-demo result: %s\n", j.dump().c_str());
  for (const char* key : {"iterations", "eps_only_ms", "mixnet_ms", "nonblocking_ms",
                          "reconfigurations", "bytes_verified", "bytes_lost"}) {
    EXPECT_TRUE(j.contains(key)) << key;
  }
  EXPECT_EQ(j.size(), 7u);
  EXPECT_EQ(j["iterations"].get<int>(), iterations);
  EXPECT_GE(j["reconfigurations"].get<int64_t>(), 100) << r.out;
  EXPECT_EQ(j["bytes_lost"].get<uint64_t>(), 0u);
  EXPECT_EQ(j["bytes_verified"].get<uint64_t>(), ExpectedBytes(w, iterations));
  EXPECT_GT(j["mixnet_ms"].get<double>(), 0);
}

// The line before the last one (the fault summary with --kill-controller-after-s).
nlohmann::json LineBeforeLastJson(const std::string& out) {
  std::string s = out;
  while (!s.empty() && s.back() == '\n') s.pop_back();
  const size_t last = s.rfind('\n');
  if (last == std::string::npos) return nlohmann::json();
  s = s.substr(0, last);
  const size_t nl = s.rfind('\n');
  return nlohmann::json::parse(nl == std::string::npos ? s : s.substr(nl + 1), nullptr, false);
}

// Issue 5: the controller killed mid-run. The workers keep running on the
// topology they have (no byte lost), re-register when it returns, and the
// restarted controller resumes above every epoch it issued before.
TEST(DemoE2E, ControllerKilledMidRunWorkersContinueAndItResumesHigher) {
  MIXNET_SKIP_UNLESS_NETNS();
  const std::string prefix = testing::UniquePrefix("demo");
  WorkloadOptions w;
  w.hosts = 4;
  w.layers = 2;
  w.experts_per_host = 2;
  w.tokens = 32;
  w.token_bytes = 1024;
  w.seed = 11;
  w.drift_every = 2;
  const int iterations = 48;
  const std::string args = absl::StrCat(
      WorkloadArgs(w, iterations),
      " --ocs-nics 2 --gbps 0.05 --switch-ms 5 --compute-ms 100 --kill-controller-after-s 2",
      " --controller-down-s 2 --prefix ", prefix, " --timeout-s 60");
  const DemoRun r = RunDemo(args, 75);
  (void)emulation::EmulatedFabric::DownPrefix(prefix + "m");
  ASSERT_EQ(r.exit_code, 0) << "stdout:\n"
                            << r.out << "\nstderr (tail):\n"
                            << r.err.substr(r.err.size() > 6000 ? r.err.size() - 6000 : 0);
  const nlohmann::json j = LastLineJson(r.out);
  const nlohmann::json f = LineBeforeLastJson(r.out);
  ASSERT_TRUE(j.is_object()) << r.out;
  ASSERT_TRUE(f.is_object()) << r.out;
  std::printf("mixnet-demo result: %s\nfault: %s\n", j.dump().c_str(), f.dump().c_str());
  EXPECT_EQ(j["bytes_lost"].get<uint64_t>(), 0u);
  EXPECT_EQ(j["bytes_verified"].get<uint64_t>(), ExpectedBytes(w, iterations));
  EXPECT_TRUE(f["workers_ran_through_outage"].get<bool>());
  // Not merely alive: all-to-alls completed while no controller ran.
  EXPECT_GT(f["layers_during_outage"].get<int64_t>(), 0);
  const uint64_t before = f["controller_killed_at_epoch"].get<uint64_t>();
  const uint64_t after = f["controller_restarted_at_epoch"].get<uint64_t>();
  EXPECT_GT(before, 1u) << "no round before the kill";
  EXPECT_GT(after, before) << "the restarted controller must never reuse an epoch";
  EXPECT_GT(f["final_epoch"].get<uint64_t>(), after) << "no round after the restart";
}

TEST(DemoE2E, UnknownFabricIsRejected) {
  const DemoRun r = RunDemo("--fabrics nosuch", 20);
  EXPECT_EQ(r.exit_code, 2) << r.out << r.err;
}

}  // namespace
}  // namespace mixnet::demo
