// Controller restart and fencing tests (label cpu): a restarted controller
// resumes with a higher epoch; a second controller against the same sim OCS
// daemon claims the switch at start and the first is fenced at its next
// Apply (its health NOT_SERVING); and the mixnet-controller binary itself
// (flags, ready file, a round, clean SIGTERM shutdown).
#include <filesystem>
#include <fstream>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "mixnet_build_paths.h"  // MIXNET_CONTROLLER_BIN
#include "tests/common/grpc_probe.h"
#include "tests/control/controller_test_util.h"

namespace mixnet::testing {
namespace {

using ::testing::HasSubstr;
using Serving = grpc::health::v1::HealthCheckResponse;

const RegionDef kR0{"r0", "h", 4, "ocs0", 1};

std::vector<std::string> Hosts() { return {"h0", "h1", "h2", "h3"}; }

// Four auto-acking workers registered and watching (SNAPSHOT consumed).
std::vector<std::unique_ptr<FakeWorker>> Workers(std::shared_ptr<grpc::Channel> ch,
                                                 uint64_t* snapshot_epoch = nullptr,
                                                 Pairs* snapshot = nullptr) {
  std::vector<std::unique_ptr<FakeWorker>> ws;
  for (const std::string& h : Hosts()) {
    auto w = std::make_unique<FakeWorker>(ch, h + "/w", h);
    EXPECT_TRUE(w->Register().ok()) << h;
    w->StartWatch();
    std::optional<cv1::TopologyEvent> ev = w->Next();
    EXPECT_TRUE(ev.has_value() && ev->kind() == cv1::TopologyEvent::SNAPSHOT) << h;
    if (ev && snapshot_epoch != nullptr) *snapshot_epoch = ev->topology().epoch();
    if (ev && snapshot != nullptr) *snapshot = CircuitPairs(ev->topology());
    ws.push_back(std::move(w));
  }
  return ws;
}

// Reports `pairs` from every worker; each then sees `kind` (PREPARE /
// ABORT / COMMIT sequence checked by the caller) - returns worker 0's events
// until a COMMIT or ABORT.
std::vector<cv1::TopologyEvent> Round(cv1::Controller::Stub& stub,
                                      std::vector<std::unique_ptr<FakeWorker>>& ws,
                                      int64_t iteration, const Pairs& pairs) {
  for (int i = 0; i < 4; ++i) {
    grpc::Status s =
        SendReport(stub, Hosts()[i] + "/w", Hosts()[i], iteration, 0, Hosts(), Row(4, i, pairs));
    EXPECT_TRUE(s.ok()) << s.error_message();
  }
  std::vector<cv1::TopologyEvent> out;
  for (size_t i = 0; i < ws.size(); ++i) {
    while (true) {
      std::optional<cv1::TopologyEvent> ev = ws[i]->Next();
      if (!ev) {
        ADD_FAILURE() << "worker " << i << ": no event";
        return out;
      }
      if (i == 0) out.push_back(*ev);
      if (ev->kind() != cv1::TopologyEvent::PREPARE) break;
    }
  }
  return out;
}

class ControllerRestartTest : public ::testing::Test {
 protected:
  void SetUp() override {
    ASSERT_FALSE(dir_.path().empty());
    auto sw = StartSimSwitch(dir_.path(), "ocs0");
    ASSERT_TRUE(sw.ok()) << sw.status();
    sw_ = std::move(*sw);
    spec_ = MakeSpecYaml({kR0}, {"ocs0"});
  }
  ControllerSetup Setup(const std::string& state, const std::string& sock) {
    ControllerSetup s;
    s.spec_yaml = spec_;
    s.switches["ocs0"] = sw_.address;
    s.state_dir = dir_.path() + "/" + state;
    s.listen = "unix:" + dir_.path() + "/" + sock;
    return s;
  }
  // Starts a controller, commits one round (pairs 0-1, 2-3) and shuts it
  // down (within 3 s); `committed` gets the round's epoch.
  void OneRoundThenStop(const ControllerSetup& setup, uint64_t* committed) {
    auto server = StartController(setup);
    ASSERT_TRUE(server.ok()) << server.status();
    auto ch = Connect((*server)->address());
    auto stub = cv1::Controller::NewStub(ch);
    auto ws = Workers(ch);
    std::vector<cv1::TopologyEvent> evs = Round(*stub, ws, 0, {{0, 1}, {2, 3}});
    ASSERT_FALSE(evs.empty());
    ASSERT_EQ(evs.back().kind(), cv1::TopologyEvent::COMMIT);
    *committed = evs.back().topology().epoch();
    ws.clear();
    const absl::Time t = absl::Now();
    (*server)->Shutdown(absl::Seconds(2));
    EXPECT_LT(absl::Now() - t, absl::Seconds(3));
  }

  TempDir dir_;
  SimSwitch sw_;
  std::string spec_;
};

// Epochs persisted a block ahead (64, the default): the first controller
// starts at epoch 1 and saves 64, commits epoch 2 without saving; the
// restarted one starts above everything saved, at 65.
TEST_F(ControllerRestartTest, RestartStartsAboveTheSavedBlock) {
  ControllerSetup first = Setup("ctl", "a.sock");
  first.epoch_block = 64;
  uint64_t committed = 0;
  ASSERT_NO_FATAL_FAILURE(OneRoundThenStop(first, &committed));
  EXPECT_EQ(committed, 2u);
  ControllerSetup s = Setup("ctl", "b.sock");
  s.epoch_block = 64;
  auto server = StartController(s);
  ASSERT_TRUE(server.ok()) << server.status();
  EXPECT_EQ(Status(*cv1::Controller::NewStub(Connect((*server)->address()))).highest_epoch(), 65u);
  (*server)->Shutdown(absl::Seconds(2));
}

TEST_F(ControllerRestartTest, RestartResumesWithAHigherEpoch) {
  uint64_t committed = 0;
  ASSERT_NO_FATAL_FAILURE(OneRoundThenStop(Setup("ctl", "a.sock"), &committed));
  auto server = StartController(Setup("ctl", "b.sock"));
  ASSERT_TRUE(server.ok()) << server.status();
  auto ch = Connect((*server)->address());
  auto stub = cv1::Controller::NewStub(ch);
  cv1::ControllerStatus st = Status(*stub);
  EXPECT_GT(st.highest_epoch(), committed);
  uint64_t snap_epoch = 0;
  Pairs snap;
  auto ws = Workers(ch, &snap_epoch, &snap);
  EXPECT_EQ(snap_epoch, st.highest_epoch());
  EXPECT_EQ(snap, (Pairs{{1, 2}, {3, 4}}));  // what the switch holds
  // And it reconfigures with a still higher epoch.
  std::vector<cv1::TopologyEvent> evs = Round(*stub, ws, 1, {{0, 2}, {1, 3}});
  ASSERT_FALSE(evs.empty());
  EXPECT_EQ(evs.back().kind(), cv1::TopologyEvent::COMMIT);
  EXPECT_EQ(evs.back().topology().epoch(), snap_epoch + 1);
  auto sw = ReadSwitch(sw_.address);
  ASSERT_TRUE(sw.ok());
  EXPECT_EQ(sw->second, snap_epoch + 1);
  ws.clear();
  (*server)->Shutdown(absl::Seconds(1));
}

// A second controller, even one with a stale state dir, starts above the
// switch's epoch and claims it there before serving (the circuits kept), so
// the first is refused at its next Apply: fenced, NOT_SERVING, planning
// stopped, the switch as the second left it, which goes on with rounds.
TEST_F(ControllerRestartTest, ASecondControllerClaimsTheSwitchAndFencesTheFirst) {
  auto a = StartController(Setup("a", "a.sock"));
  ASSERT_TRUE(a.ok()) << a.status();
  auto ach = Connect((*a)->address());
  auto astub = cv1::Controller::NewStub(ach);
  auto aw = Workers(ach);
  ASSERT_EQ(Round(*astub, aw, 0, {{0, 1}, {2, 3}}).back().kind(), cv1::TopologyEvent::COMMIT);
  auto before = ReadSwitch(sw_.address);
  ASSERT_TRUE(before.ok());
  // B: a copy of A's state dir from an earlier time (epoch 1 persisted).
  std::filesystem::create_directories(dir_.path() + "/b");
  std::ofstream(dir_.path() + "/b/controller_epoch.json") << "{\"highest_epoch\": 1}\n";
  auto b = StartController(Setup("b", "b.sock"));
  ASSERT_TRUE(b.ok()) << b.status();
  auto bch = Connect((*b)->address());
  auto bstub = cv1::Controller::NewStub(bch);
  const uint64_t b_epoch = Status(*bstub).highest_epoch();
  EXPECT_EQ(b_epoch, before->second + 1);
  auto claimed = ReadSwitch(sw_.address);
  ASSERT_TRUE(claimed.ok());
  EXPECT_EQ(claimed->first, before->first) << "the claim changed circuits";
  EXPECT_EQ(claimed->second, b_epoch) << "B did not claim its epoch on the switch";

  // A's next round: refused at the switch, A is fenced.
  std::vector<cv1::TopologyEvent> evs = Round(*astub, aw, 1, {{0, 2}, {1, 3}});
  ASSERT_EQ(evs.size(), 2u);
  EXPECT_EQ(evs[0].kind(), cv1::TopologyEvent::PREPARE);
  EXPECT_EQ(evs[1].kind(), cv1::TopologyEvent::ABORT);
  EXPECT_THAT(evs[1].reason(), HasSubstr("held by controller"));
  cv1::ControllerStatus st = Status(*astub);
  EXPECT_THAT(st.fenced(), HasSubstr("refused epoch"));
  EXPECT_EQ(st.regions(0).rounds_aborted(), 1u);
  auto after = ReadSwitch(sw_.address);
  ASSERT_TRUE(after.ok());
  EXPECT_EQ(after->first, before->first);  // unchanged
  EXPECT_EQ(after->second, b_epoch);
  // Probes see that A plans no more; B, driving the switch, serves.
  for (const char* service : {"", "mixnet.control.v1.Controller"}) {
    auto health = HealthOf(ach, service);
    ASSERT_TRUE(health.ok()) << health.status();
    EXPECT_EQ(*health, Serving::NOT_SERVING) << "fenced controller, service '" << service << "'";
    health = HealthOf(bch, service);
    ASSERT_TRUE(health.ok()) << health.status();
    EXPECT_EQ(*health, Serving::SERVING) << "the controller driving the switch";
  }
  // A fenced controller plans no more.
  for (int i = 0; i < 4; ++i) {
    ASSERT_TRUE(SendReport(*astub, Hosts()[i] + "/w", Hosts()[i], 2, 0, Hosts(),
                           Row(4, i, {{0, 3}, {1, 2}}))
                    .ok());
  }
  absl::SleepFor(absl::Milliseconds(300));
  for (auto& w : aw) EXPECT_EQ(w->queued(), 0u);
  aw.clear();
  // B's rounds go on.
  auto bw = Workers(bch);
  ASSERT_EQ(Round(*bstub, bw, 0, {{0, 2}, {1, 3}}).back().kind(), cv1::TopologyEvent::COMMIT);
  auto driven = ReadSwitch(sw_.address);
  ASSERT_TRUE(driven.ok());
  EXPECT_EQ(driven->first, (Pairs{{1, 3}, {2, 4}}));
  EXPECT_GT(driven->second, b_epoch);
  bw.clear();
  (*b)->Shutdown(absl::Seconds(1));
  (*a)->Shutdown(absl::Seconds(1));
}

TEST_F(ControllerRestartTest, StartErrorsNameTheCause) {
  ControllerSetup s = Setup("ctl", "x.sock");
  s.listen = "unix:" + dir_.path() + "/no/such/dir/ctl.sock";
  auto bad_listen = StartController(s);
  ASSERT_FALSE(bad_listen.ok());
  EXPECT_THAT(std::string(bad_listen.status().message()), HasSubstr("cannot listen"));
  // The state dir is free again, and locked while a controller runs.
  auto ok = StartController(Setup("ctl", "a.sock"));
  ASSERT_TRUE(ok.ok()) << ok.status();
  auto second = StartController(Setup("ctl", "b.sock"));
  ASSERT_FALSE(second.ok());
  EXPECT_EQ(second.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(std::string(second.status().message()), HasSubstr("in use"));
  (*ok)->Shutdown(absl::Seconds(1));
  // A switch that cannot be reached.
  s = Setup("ctl2", "c.sock");
  s.switches["ocs0"] = "unix:" + dir_.path() + "/nobody.sock";
  auto unreachable = StartController(s);
  ASSERT_FALSE(unreachable.ok());
  EXPECT_THAT(std::string(unreachable.status().message()), HasSubstr("nobody.sock"));
}

TEST_F(ControllerRestartTest, BinaryServesARoundAndStopsOnSigterm) {
  const std::string spec_file = dir_.path() + "/spec.yaml";
  std::ofstream(spec_file) << spec_;
  DaemonProcess::Options o;
  o.binary = MIXNET_CONTROLLER_BIN;
  o.state_dir = dir_.path() + "/bin-state";
  auto p =
      DaemonProcess::Start({"--spec", spec_file, "--listen", "unix:" + dir_.path() + "/bin.sock",
                            "--ocs", "ocs0=" + sw_.address, "--predictor", "ewma", "--planner",
                            "greedy", "--prepare-deadline-ms", "1500", "--log-level", "debug"},
                           o);
  ASSERT_TRUE(p.ok()) << p.status();
  EXPECT_EQ((*p)->address(), "unix:" + dir_.path() + "/bin.sock");
  auto ch = Connect((*p)->address());
  auto stub = cv1::Controller::NewStub(ch);
  auto ws = Workers(ch);
  std::vector<cv1::TopologyEvent> evs = Round(*stub, ws, 0, {{0, 1}, {2, 3}});
  ASSERT_EQ(evs.size(), 2u);
  EXPECT_EQ(evs[0].deadline_ms(), 1500u);
  EXPECT_EQ(evs[1].kind(), cv1::TopologyEvent::COMMIT);
  // SIGTERM while streams are open: a clean, prompt exit.
  const absl::Time t = absl::Now();
  absl::Status s = (*p)->Stop(absl::Seconds(5));
  EXPECT_TRUE(s.ok()) << s;
  EXPECT_LT(absl::Now() - t, absl::Seconds(4));
  EXPECT_FALSE(std::filesystem::exists((*p)->run_dir() + "/ready"));
  ASSERT_TRUE(WaitUntil([&] { return ws[0]->ended(); }, absl::Seconds(5)));
  ws.clear();

  // Bad flags: no such switch in the spec.
  auto bad =
      DaemonProcess::Start({"--spec", spec_file, "--listen", "unix:" + dir_.path() + "/bad.sock",
                            "--ocs", "nosuch=" + sw_.address},
                           o);
  ASSERT_FALSE(bad.ok());
  EXPECT_THAT(std::string(bad.status().message()), HasSubstr("nosuch"));
  // A relay chunk below a page (the workers refuse such chunks in headers).
  auto small = DaemonProcess::Start(
      {"--spec", spec_file, "--listen", "unix:" + dir_.path() + "/small.sock", "--ocs",
       "ocs0=" + sw_.address, "--router", "v2", "--relay", "on", "--relay-chunk-bytes", "100"},
      o);
  ASSERT_FALSE(small.ok());
  EXPECT_THAT(std::string(small.status().message()), HasSubstr("--relay-chunk-bytes 100"));
  // A negative budget for the planner's routed search.
  auto negative = DaemonProcess::Start(
      {"--spec", spec_file, "--listen", "unix:" + dir_.path() + "/neg.sock", "--ocs",
       "ocs0=" + sw_.address, "--router", "v2", "--relay", "on", "--routed-search", "-1"},
      o);
  ASSERT_FALSE(negative.ok());
  EXPECT_THAT(std::string(negative.status().message()), HasSubstr("--routed-search -1"));
}

}  // namespace
}  // namespace mixnet::testing
