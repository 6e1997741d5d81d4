// mixnetctl end to end against a real mixnet-ocsd (sim backend, a process):
// info / get / apply / watch / health with human and --json output, circuits
// from flags and from a file, the partial-failure report, and the exit codes
// and messages of errors (unreachable daemon, stale epoch, bad input).
// Test thread; mixnetctl runs as a child process with a timeout.
#include <atomic>
#include <fstream>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "mixnet_build_paths.h"  // MIXNETCTL_BIN
#include "nlohmann/json.hpp"
#include "ocs_driver/client/ocs_client.h"
#include "tests/ocs_driver/client/client_test_util.h"
#include "tests/ocs_driver/client/command_runner.h"

namespace mixnet::ocs {
namespace {

using ::mixnet::testing::ChildCommand;
using ::mixnet::testing::CommandResult;
using ::mixnet::testing::DaemonProcess;
using ::mixnet::testing::MakeApply;
using ::mixnet::testing::RunCommand;
using ::mixnet::testing::StartSimDaemon;
using ::testing::HasSubstr;

std::vector<std::string> Ctl(std::vector<std::string> args) {
  args.insert(args.begin(), MIXNETCTL_BIN);
  return args;
}

// Parses stdout as one JSON document; a null document (failing the caller's
// checks) when it is not JSON.
nlohmann::json Json(const CommandResult& r) {
  try {
    return nlohmann::json::parse(r.out);
  } catch (const nlohmann::json::exception& e) {
    ADD_FAILURE() << "not JSON (" << e.what() << "): " << r.out << "\nstderr: " << r.err;
    return nullptr;
  }
}

std::string Describe(const CommandResult& r) {
  return absl::StrCat(r.command, "\nrc=", r.rc, "\nstdout:\n", r.out, "\nstderr:\n", r.err);
}

class MixnetctlTest : public ::testing::Test {
 protected:
  void SetUp() override {
    absl::StatusOr<std::unique_ptr<DaemonProcess>> d =
        StartSimDaemon(16, 0, {"--sim-fail-ports", "15"});
    ASSERT_TRUE(d.ok()) << d.status();
    daemon_ = *std::move(d);
    target_ = daemon_->address();
  }

  // mixnetctl ocs <cmd> --target <daemon> args...
  CommandResult Ocs(const std::string& cmd, std::vector<std::string> args = {}) {
    std::vector<std::string> argv = {"ocs", cmd, "--target", target_};
    argv.insert(argv.end(), args.begin(), args.end());
    return RunCommand(Ctl(argv), absl::Seconds(20));
  }

  std::unique_ptr<DaemonProcess> daemon_;
  std::string target_;
};

TEST_F(MixnetctlTest, InfoHumanAndJson) {
  CommandResult r = Ocs("info");
  ASSERT_EQ(r.rc, 0) << Describe(r);
  EXPECT_THAT(r.out, HasSubstr("backend          sim"));
  EXPECT_THAT(r.out, HasSubstr("ports            16"));
  EXPECT_THAT(r.out, HasSubstr(target_));

  r = Ocs("info", {"--json"});
  ASSERT_EQ(r.rc, 0) << Describe(r);
  nlohmann::json j = Json(r);
  EXPECT_EQ(j.value("backend", ""), "sim");
  EXPECT_EQ(j.value("port_count", 0), 16);
  EXPECT_EQ(j.value("target", ""), target_);
  EXPECT_TRUE(j.contains("switching_time_us"));
  EXPECT_TRUE(j.contains("highest_epoch"));
}

TEST_F(MixnetctlTest, InfoShowsTheMeasuredApplyTime) {
  CommandResult r = Ocs("info");
  ASSERT_EQ(r.rc, 0) << Describe(r);
  EXPECT_THAT(r.out, HasSubstr("apply time       none measured yet"));
  ASSERT_EQ(Ocs("apply", {"--epoch", "1", "--version", "1", "--circuit", "1-2"}).rc, 0);
  r = Ocs("info");
  ASSERT_EQ(r.rc, 0) << Describe(r);
  EXPECT_THAT(r.out, HasSubstr("apply time       median "));
  EXPECT_THAT(r.out, HasSubstr("(last 1 changes)"));
  r = Ocs("info", {"--json"});
  ASSERT_EQ(r.rc, 0) << Describe(r);
  nlohmann::json j = Json(r);
  EXPECT_EQ(j.value("apply_samples", 0), 1);
  EXPECT_GT(j.value("apply_median_us", 0), 0);
  EXPECT_EQ(j.value("apply_median_us", 0), j.value("apply_max_us", -1));  // one sample
  EXPECT_EQ(j.value("apply_p90_us", 0), j.value("apply_max_us", -1));
}

TEST_F(MixnetctlTest, ApplyFromFlagsFileAndClearThenGet) {
  CommandResult r =
      Ocs("apply", {"--epoch", "1", "--version", "1", "--circuit", "3-4", "--circuit", "1-2"});
  ASSERT_EQ(r.rc, 0) << Describe(r);
  EXPECT_THAT(r.out, HasSubstr("applied epoch 1 version 1: 4 ports changed"));

  r = Ocs("get", {"--json"});
  ASSERT_EQ(r.rc, 0) << Describe(r);
  nlohmann::json j = Json(r);
  EXPECT_EQ(j["actual"], nlohmann::json::parse("[[1,2],[3,4]]"));
  EXPECT_EQ(j["desired"], nlohmann::json::parse("[[1,2],[3,4]]"));
  EXPECT_EQ(j.value("in_sync", false), true);
  EXPECT_EQ(j.value("epoch", 0), 1);

  r = Ocs("get");
  ASSERT_EQ(r.rc, 0) << Describe(r);
  EXPECT_THAT(r.out, HasSubstr("in sync"));
  EXPECT_THAT(r.out, HasSubstr("1-2 3-4"));

  mixnet::testing::TempDir dir;
  std::string file = dir.path() + "/circuits.json";
  std::ofstream(file) << R"({"circuits": [[5, 6], {"port_a": 8, "port_b": 7}]})";
  r = Ocs("apply", {"--epoch", "1", "--version", "2", "--file", file, "--json"});
  ASSERT_EQ(r.rc, 0) << Describe(r);
  j = Json(r);
  EXPECT_EQ(j.value("ok", false), true);
  EXPECT_EQ(j.value("code", ""), "OK");
  EXPECT_EQ(j.value("noop", true), false);
  EXPECT_EQ(j.value("ports_changed", 0), 8);
  EXPECT_EQ(j["actual"], nlohmann::json::parse("[[5,6],[7,8]]"));
  EXPECT_TRUE(j.contains("latency_us"));

  // The same request again: a successful no-op.
  r = Ocs("apply", {"--epoch", "1", "--version", "2", "--file", file});
  ASSERT_EQ(r.rc, 0) << Describe(r);
  EXPECT_THAT(r.out, HasSubstr("no-op"));

  // `get --json` output fed back as a circuits file.
  r = Ocs("get", {"--json"});
  ASSERT_EQ(r.rc, 0);
  std::string saved = dir.path() + "/saved.json";
  std::ofstream(saved) << r.out;

  r = Ocs("apply", {"--epoch", "2", "--version", "3", "--clear"});
  ASSERT_EQ(r.rc, 0) << Describe(r);
  r = Ocs("get", {"--json"});
  ASSERT_EQ(r.rc, 0);
  EXPECT_EQ(Json(r)["actual"], nlohmann::json::array());

  r = Ocs("apply", {"--epoch", "2", "--version", "4", "--file", saved});
  ASSERT_EQ(r.rc, 0) << Describe(r);
  r = Ocs("get", {"--json"});
  EXPECT_EQ(Json(r)["actual"], nlohmann::json::parse("[[5,6],[7,8]]"));
}

TEST_F(MixnetctlTest, ErrorsExitNonZeroNamingTargetAndCode) {
  ASSERT_EQ(Ocs("apply", {"--epoch", "5", "--version", "1", "--circuit", "1-2"}).rc, 0);

  // Stale epoch: refused by the daemon.
  CommandResult r = Ocs("apply", {"--epoch", "4", "--version", "2", "--circuit", "3-4"});
  EXPECT_EQ(r.rc, 1) << Describe(r);
  EXPECT_THAT(r.err, HasSubstr("FAILED_PRECONDITION"));
  EXPECT_THAT(r.err, HasSubstr(target_));
  r = Ocs("apply", {"--epoch", "4", "--version", "2", "--circuit", "3-4", "--json"});
  EXPECT_EQ(r.rc, 1);
  EXPECT_EQ(Json(r).value("code", ""), "FAILED_PRECONDITION");

  // Port out of range and a port twice: the daemon's INVALID_ARGUMENT.
  r = Ocs("apply", {"--epoch", "5", "--version", "2", "--circuit", "1-99"});
  EXPECT_EQ(r.rc, 1) << Describe(r);
  EXPECT_THAT(r.err, HasSubstr("INVALID_ARGUMENT"));
  r = Ocs("apply", {"--epoch", "5", "--version", "2", "--circuit", "1-2", "--circuit", "2-3"});
  EXPECT_EQ(r.rc, 1) << Describe(r);

  // Bad input caught before any call: exit 2.
  for (std::vector<std::string> args : std::vector<std::vector<std::string>>{
           {"--epoch", "5", "--version", "2", "--circuit", "1-x"},
           {"--epoch", "5", "--version", "2"},
           {"--epoch", "5", "--version", "2", "--circuit", "1-2", "--clear"},
           {"--version", "2", "--clear"},
           {"--epoch", "5", "--version", "2", "--file", "/nonexistent/c.json"}}) {
    r = Ocs("apply", args);
    EXPECT_EQ(r.rc, 2) << Describe(r);
    EXPECT_FALSE(r.err.empty()) << Describe(r);
  }
  r = RunCommand(Ctl({"ocs", "info"}));
  EXPECT_EQ(r.rc, 2) << Describe(r);
  EXPECT_THAT(r.err, HasSubstr("--target"));
  r = RunCommand(Ctl({"ocs", "info", "--target", "nohost"}));
  EXPECT_EQ(r.rc, 2) << Describe(r);
  EXPECT_THAT(r.err, HasSubstr("nohost"));

  // Nothing changed on the switch.
  r = Ocs("get", {"--json"});
  EXPECT_EQ(Json(r)["actual"], nlohmann::json::parse("[[1,2]]"));

  // An unreachable daemon.
  std::string dead = target_;
  ASSERT_TRUE(daemon_->Kill(SIGKILL).ok());
  ASSERT_TRUE(daemon_->Wait().ok());
  r = RunCommand(Ctl({"ocs", "get", "--target", dead, "--timeout-ms", "2000"}));
  EXPECT_EQ(r.rc, 1) << Describe(r);
  EXPECT_THAT(r.err, HasSubstr("UNAVAILABLE"));
  EXPECT_THAT(r.err, HasSubstr(dead));
  r = RunCommand(Ctl({"ocs", "health", "--target", dead, "--timeout-ms", "2000", "--json"}));
  EXPECT_EQ(r.rc, 1) << Describe(r);
  EXPECT_EQ(Json(r)["error"].value("code", ""), "UNAVAILABLE");
}

TEST_F(MixnetctlTest, PartialFailureShowsPerCircuitResults) {
  CommandResult r =
      Ocs("apply", {"--epoch", "1", "--version", "1", "--circuit", "1-2", "--circuit", "15-16"});
  EXPECT_EQ(r.rc, 1) << Describe(r);
  EXPECT_THAT(r.out, HasSubstr("apply FAILED"));
  EXPECT_THAT(r.out, HasSubstr("add 15-16: "));
  EXPECT_THAT(r.out, HasSubstr("actual (1 circuits): 1-2"));
  EXPECT_THAT(r.err, HasSubstr(target_));

  r = Ocs("apply",
          {"--epoch", "1", "--version", "2", "--circuit", "3-4", "--circuit", "15-16", "--json"});
  EXPECT_EQ(r.rc, 1) << Describe(r);
  nlohmann::json j = Json(r);
  EXPECT_EQ(j.value("ok", true), false);
  EXPECT_NE(j.value("code", "OK"), "OK");
  ASSERT_TRUE(j.contains("results")) << j.dump();
  bool failed = false;
  for (const nlohmann::json& cr : j["results"]) {
    if (cr["circuit"] == nlohmann::json::parse("[15,16]")) {
      failed = cr.value("code", "OK") != "OK";
      EXPECT_EQ(cr.value("op", ""), "add");
    }
  }
  EXPECT_TRUE(failed) << j.dump();
  EXPECT_EQ(j["actual"], nlohmann::json::parse("[[3,4]]"));
}

TEST_F(MixnetctlTest, WatchPrintsSnapshotThenChanges) {
  ChildCommand watch(Ctl({"ocs", "watch", "--target", target_, "--json", "--count", "3"}));
  // Keep applying new versions until the watcher has seen enough and exited.
  OcsClientOptions o;
  o.target = target_;
  absl::StatusOr<std::unique_ptr<OcsClient>> client = OcsClient::Create(o);
  ASSERT_TRUE(client.ok());
  std::atomic<bool> stop{false};
  std::thread applier([&] {
    for (uint64_t v = 1; !stop.load() && v < 400; ++v) {
      (*client)->Apply(MakeApply(1, v, {{1, static_cast<int>(2 + v % 2)}}));
      absl::SleepFor(absl::Milliseconds(50));
    }
  });
  CommandResult r = watch.Finish(absl::Seconds(20));
  stop = true;
  applier.join();
  ASSERT_EQ(r.rc, 0) << Describe(r);
  std::vector<std::string> lines = absl::StrSplit(r.out, '\n', absl::SkipEmpty());
  ASSERT_EQ(lines.size(), 3u) << r.out;
  std::vector<nlohmann::json> events;
  for (const std::string& line : lines) events.push_back(nlohmann::json::parse(line));
  EXPECT_EQ(events[0].value("kind", ""), "snapshot");
  EXPECT_EQ(events[1].value("kind", ""), "change");
  EXPECT_EQ(events[2].value("kind", ""), "change");
  EXPECT_EQ(events[2].value("config_version", 0), events[1].value("config_version", 0) + 1);
  EXPECT_EQ(events[2]["circuits"].size(), 1u);

  // Human output, bounded by time: just the snapshot.
  r = Ocs("watch", {"--for-ms", "300"});
  ASSERT_EQ(r.rc, 0) << Describe(r);
  lines = absl::StrSplit(r.out, '\n', absl::SkipEmpty());
  ASSERT_EQ(lines.size(), 1u) << r.out;
  EXPECT_THAT(lines[0], HasSubstr("snapshot epoch 1"));
}

TEST_F(MixnetctlTest, HealthAndUnixSocket) {
  CommandResult r = Ocs("health");
  ASSERT_EQ(r.rc, 0) << Describe(r);
  EXPECT_EQ(r.out, "SERVING\n");
  r = Ocs("health", {"--json"});
  ASSERT_EQ(r.rc, 0) << Describe(r);
  EXPECT_EQ(Json(r).value("status", ""), "SERVING");

  mixnet::testing::TempDir dir;
  absl::StatusOr<std::unique_ptr<DaemonProcess>> d =
      StartSimDaemon(8, 0, {}, absl::StrCat("unix:", dir.path(), "/ocsd.sock"));
  ASSERT_TRUE(d.ok()) << d.status();
  r = RunCommand(Ctl({"ocs", "info", "--json", "--target", (*d)->address()}));
  ASSERT_EQ(r.rc, 0) << Describe(r);
  EXPECT_EQ(Json(r).value("port_count", 0), 8);
}

}  // namespace
}  // namespace mixnet::ocs
