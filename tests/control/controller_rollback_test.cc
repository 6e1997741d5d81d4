// A round whose switch change fails part-way (label cpu): one region of
// eight hosts, h0-h3 on switch ocs0 and h4-h7 on ocs1 (ports 1-4 each), both
// FakeSwitches, eight fake workers on an in-process controller. The
// controller changes ocs0 first, then ocs1; ocs1 fails. Whatever happens,
// the workers end on a topology whose every circuit its switch holds, and
// no switch holds a circuit the workers were not told of:
//  - ocs1 answers the put-back: both switches back, ABORT;
//  - ocs1 fails the put-back too: COMMIT of the old topology without ocs1's
//    circuits, and the next round re-drives ocs1;
//  - ocs1 refuses the epoch as stale (fenced): ocs0 back, ABORT.
// And with real WorkerAgents and recording followers (one switch, four
// hosts): a switch that fails its change and its put-back leaves every
// follower on the topology without its circuits; the next round re-drives
// it and the followers install its circuits again.
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/control/agent_rig.h"
#include "tests/control/controller_test_util.h"

namespace mixnet::testing {
namespace {

using ::testing::HasSubstr;

constexpr int kHosts = 8;

std::string Host(int i) { return absl::StrCat("h", i); }

std::string SpecYaml() {
  std::string y =
      "name: rollback\nocs_switches:\n"
      "  - {name: ocs0, ports: 16, switch_ms: 1}\n"
      "  - {name: ocs1, ports: 16, switch_ms: 1}\nhosts:\n";
  for (int i = 0; i < kHosts; ++i) {
    absl::StrAppend(&y, "  - name: ", Host(i), "\n    nics:\n",
                    "      - {name: eps0, role: eps, address: 10.10.0.", i + 1, "/16, gbps: 0.1}\n",
                    "      - {name: ocs0, role: ocs, address: 10.20.0.", i + 1,
                    "/16, gbps: 100, switch: ocs", i / 4, ", port: ", i % 4 + 1, "}\n");
  }
  y += "regions:\n  - {name: r0, hosts: [";
  for (int i = 0; i < kHosts; ++i) absl::StrAppend(&y, i ? ", " : "", Host(i));
  return y + "]}\n";
}

// Heavy pairs within each half: ocs0 ports = hosts 0-3 + 1, ocs1's = 4-7 - 3.
const Pairs kFirst = {{0, 1}, {2, 3}, {4, 5}, {6, 7}};
const Pairs kSecond = {{0, 2}, {1, 3}, {4, 6}, {5, 7}};
const Pairs kFirstPorts = {{1, 2}, {3, 4}};
const Pairs kSecondPorts = {{1, 3}, {2, 4}};

class ControllerRollbackTest : public ::testing::Test {
 protected:
  void SetUp() override {
    ASSERT_FALSE(dir_.path().empty());
    setup_.drivers["ocs0"] = ocs0_;
    setup_.drivers["ocs1"] = ocs1_;
    setup_.spec_yaml = SpecYaml();
    setup_.state_dir = dir_.path() + "/ctl";
    setup_.listen = "unix:" + dir_.path() + "/ctl.sock";
    auto server = StartController(setup_);
    ASSERT_TRUE(server.ok()) << server.status();
    server_ = std::move(*server);
    channel_ = Connect(server_->address());
    stub_ = cv1::Controller::NewStub(channel_);
    for (int i = 0; i < kHosts; ++i) {
      auto w = std::make_unique<FakeWorker>(channel_, Host(i) + "/w", Host(i));
      ASSERT_TRUE(w->Register().ok());
      w->StartWatch();
      std::optional<cv1::TopologyEvent> snap = w->Next();
      ASSERT_TRUE(snap.has_value() && snap->kind() == cv1::TopologyEvent::SNAPSHOT);
      workers_.push_back(std::move(w));
    }
    // Epoch 2: kFirst on both switches.
    Report(0, kFirst);
    Expect(cv1::TopologyEvent::PREPARE, 2);
    cv1::TopologyEvent commit = Expect(cv1::TopologyEvent::COMMIT, 2);
    ASSERT_EQ(OnSwitch(commit.topology(), "ocs0"), kFirstPorts);
    ASSERT_EQ(OnSwitch(commit.topology(), "ocs1"), kFirstPorts);
    ASSERT_EQ(ocs0_->applies(), 2);  // the claim at start, epoch 2
    ASSERT_EQ(ocs1_->applies(), 2);
  }

  void TearDown() override {
    workers_.clear();
    if (server_) server_->Shutdown(absl::Seconds(1));
  }

  void Report(int64_t iteration, const Pairs& pairs) {
    std::vector<std::string> hosts;
    for (int i = 0; i < kHosts; ++i) hosts.push_back(Host(i));
    for (int i = 0; i < kHosts; ++i) {
      grpc::Status s =
          SendReport(*stub_, Host(i) + "/w", Host(i), iteration, 0, hosts, Row(kHosts, i, pairs));
      ASSERT_TRUE(s.ok()) << s.error_message();
    }
  }

  // Every worker sees `kind` at `epoch` next, the same event; returns it.
  cv1::TopologyEvent Expect(cv1::TopologyEvent::Kind kind, uint64_t epoch) {
    cv1::TopologyEvent first;
    for (size_t i = 0; i < workers_.size(); ++i) {
      std::optional<cv1::TopologyEvent> ev = workers_[i]->Next(absl::Seconds(10));
      EXPECT_TRUE(ev.has_value()) << Host(i) << ": no event";
      if (!ev) continue;
      EXPECT_EQ(ev->kind(), kind) << Host(i) << ": " << ev->DebugString();
      EXPECT_EQ(ev->topology().epoch(), epoch) << Host(i);
      if (i == 0) first = *ev;
      EXPECT_EQ(CircuitPairs(ev->topology()), CircuitPairs(first.topology())) << Host(i);
    }
    return first;
  }

  static Pairs OnSwitch(const cv1::Topology& t, const std::string& sw) {
    Pairs p;
    for (const cv1::Circuit& c : t.circuits()) {
      if (c.ocs_switch() == sw) p.emplace_back(c.port_a(), c.port_b());
    }
    std::sort(p.begin(), p.end());
    return p;
  }

  static Pairs Sorted(Pairs p) {
    std::sort(p.begin(), p.end());
    return p;
  }

  TempDir dir_;
  std::shared_ptr<FakeSwitch> ocs0_ = std::make_shared<FakeSwitch>();
  std::shared_ptr<FakeSwitch> ocs1_ = std::make_shared<FakeSwitch>();
  ControllerSetup setup_;
  std::unique_ptr<control::ControllerServer> server_;
  std::shared_ptr<grpc::Channel> channel_;
  std::unique_ptr<cv1::Controller::Stub> stub_;
  std::vector<std::unique_ptr<FakeWorker>> workers_;
};

TEST_F(ControllerRollbackTest, ASwitchFailingMidRoundIsPutBackWithTheOthersAndTheRoundAborts) {
  ocs1_->FailNext(absl::UnavailableError("fake: mirror stuck"));
  Report(1, kSecond);
  cv1::TopologyEvent prep = Expect(cv1::TopologyEvent::PREPARE, 3);
  EXPECT_EQ(OnSwitch(prep.topology(), "ocs0"), kSecondPorts);
  cv1::TopologyEvent abort = Expect(cv1::TopologyEvent::ABORT, 3);
  EXPECT_THAT(abort.reason(), HasSubstr("ocs1"));
  EXPECT_THAT(abort.reason(), HasSubstr("mirror stuck"));
  EXPECT_THAT(abort.reason(), HasSubstr("put back to epoch 2's circuits: ocs0, ocs1"));
  // ocs0 took epoch 3 (version 3), then went back at epoch 3, version 4.
  std::vector<FakeSwitch::Applied> a0 = ocs0_->accepted();
  ASSERT_EQ(a0.size(), 4u);
  EXPECT_EQ(Sorted(a0[2].circuits), kSecondPorts);
  EXPECT_EQ(a0[2].epoch, 3u);
  EXPECT_EQ(a0[3].epoch, 3u);
  EXPECT_EQ(a0[3].version, 4u);
  // Both switches hold the committed topology, which the workers keep.
  cv1::ControllerStatus st = Status(*stub_);
  EXPECT_EQ(st.topology().epoch(), 2u);
  EXPECT_EQ(Sorted(ocs0_->state().first), OnSwitch(st.topology(), "ocs0"));
  EXPECT_EQ(Sorted(ocs1_->state().first), OnSwitch(st.topology(), "ocs1"));
  EXPECT_EQ(OnSwitch(st.topology(), "ocs1"), kFirstPorts);
  EXPECT_EQ(st.regions(0).rounds_aborted(), 1u);
  EXPECT_TRUE(st.fenced().empty());
  // Nothing is left dirty: the same traffic makes an ordinary round.
  Report(2, kSecond);
  Expect(cv1::TopologyEvent::PREPARE, 4);
  cv1::TopologyEvent commit = Expect(cv1::TopologyEvent::COMMIT, 4);
  EXPECT_EQ(OnSwitch(commit.topology(), "ocs1"), kSecondPorts);
  EXPECT_EQ(Sorted(ocs0_->state().first), kSecondPorts);
  EXPECT_EQ(Sorted(ocs1_->state().first), kSecondPorts);
}

TEST_F(ControllerRollbackTest, ASwitchThatCannotBePutBackLeavesTheTopologyUntilARoundReDrivesIt) {
  ocs1_->FailNext(absl::DeadlineExceededError("fake: no answer"), 2);
  Report(1, kSecond);
  Expect(cv1::TopologyEvent::PREPARE, 3);
  // Released onto what is known: ocs0's old circuits, none of ocs1's.
  cv1::TopologyEvent commit = Expect(cv1::TopologyEvent::COMMIT, 3);
  EXPECT_EQ(OnSwitch(commit.topology(), "ocs0"), kFirstPorts);
  EXPECT_TRUE(OnSwitch(commit.topology(), "ocs1").empty());
  EXPECT_THAT(commit.reason(), HasSubstr("no answer"));
  EXPECT_THAT(commit.reason(), HasSubstr("put back to epoch 2's circuits: ocs0"));
  EXPECT_THAT(commit.reason(), HasSubstr("not put back: ocs1"));
  EXPECT_EQ(Sorted(ocs0_->state().first), kFirstPorts);
  EXPECT_EQ(ocs1_->applies(), 4);  // epoch 3, its put-back
  ASSERT_TRUE(WaitUntil([&] { return Status(*stub_).regions(0).rounds_aborted() == 1; }));
  cv1::ControllerStatus st = Status(*stub_);
  EXPECT_EQ(st.topology().epoch(), 3u);
  EXPECT_EQ(OnSwitch(st.topology(), "ocs0"), kFirstPorts);
  EXPECT_TRUE(OnSwitch(st.topology(), "ocs1").empty());
  EXPECT_EQ(st.regions(0).rounds_committed(), 1u);  // epoch 2 only
  // The traffic of epoch 2 again: ocs0 is as planned, ocs1 is re-driven.
  Report(2, kFirst);
  Expect(cv1::TopologyEvent::PREPARE, 4);
  commit = Expect(cv1::TopologyEvent::COMMIT, 4);
  EXPECT_EQ(OnSwitch(commit.topology(), "ocs0"), kFirstPorts);
  EXPECT_EQ(OnSwitch(commit.topology(), "ocs1"), kFirstPorts);
  EXPECT_EQ(ocs0_->applies(), 4);  // unchanged: not asked
  EXPECT_EQ(ocs1_->applies(), 5);
  EXPECT_EQ(ocs1_->state(), std::make_pair(kFirstPorts, uint64_t{4}));
}

TEST_F(ControllerRollbackTest, AStaleEpochOnTheSecondSwitchPutsTheFirstBackAndFences) {
  ocs1_->FailNext(absl::FailedPreconditionError("stale epoch 3: the highest accepted is 9"));
  Report(1, kSecond);
  Expect(cv1::TopologyEvent::PREPARE, 3);
  cv1::TopologyEvent abort = Expect(cv1::TopologyEvent::ABORT, 3);
  EXPECT_THAT(abort.reason(), HasSubstr("put back to epoch 2's circuits: ocs0"));
  EXPECT_EQ(Sorted(ocs0_->state().first), kFirstPorts);
  // ocs1 belongs to the newer controller: not asked again.
  EXPECT_EQ(ocs1_->applies(), 3);
  EXPECT_THAT(Status(*stub_).fenced(), HasSubstr("ocs1"));
}

TEST(ControllerRollbackAgentTest, TheFollowersDropTheCircuitsOfASwitchLeftUncertain) {
  auto fake = std::make_shared<FakeSwitch>();
  AgentRig rig;
  ASSERT_NO_FATAL_FAILURE(rig.Start(/*warm_paths=*/false, fake));
  ASSERT_NO_FATAL_FAILURE(rig.WaitAllWatching());
  rig.Report(0, {{0, 1}, {2, 3}});
  for (auto& f : rig.followers) EXPECT_TRUE(f->WaitFor("commit 2 circuits 2")) << f->Calls();
  fake->FailNext(absl::UnavailableError("fake: controller card down"), 2);
  rig.Report(1, {{0, 2}, {1, 3}});
  for (auto& f : rig.followers) {
    EXPECT_TRUE(f->WaitFor("prepare 3")) << f->Calls();
    EXPECT_TRUE(f->WaitFor("commit 3 circuits 0")) << f->Calls();
  }
  rig.Report(2, {{0, 1}, {2, 3}});
  for (auto& f : rig.followers) EXPECT_TRUE(f->WaitFor("commit 4 circuits 2")) << f->Calls();
  EXPECT_EQ(fake->state(), std::make_pair(Pairs{{1, 2}, {3, 4}}, uint64_t{4}));
}

}  // namespace
}  // namespace mixnet::testing
