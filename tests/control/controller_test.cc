// Controller tests (label cpu): an in-process mixnet-controller on a unix
// socket, sim OCS daemons in-process, fake workers as plain gRPC clients.
// Rounds (PREPARE -> Apply -> COMMIT), PREPARE timeouts (ABORT), decision
// skips, two regions planned independently, report timeouts and bad input.
#include <dirent.h>

#include <algorithm>
#include <fstream>
#include <iterator>
#include <sstream>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "nlohmann/json.hpp"
#include "tests/control/controller_test_util.h"

namespace mixnet::testing {
namespace {

using ::testing::HasSubstr;

class ControllerTest : public ::testing::Test {
 protected:
  // Regions and switches; one sim daemon per switch; controller on a socket.
  void Start(std::vector<RegionDef> regions, std::vector<std::string> switches,
             absl::Duration prepare_deadline = absl::Seconds(2),
             absl::Duration report_timeout = absl::Seconds(2)) {
    ASSERT_FALSE(dir_.path().empty());
    regions_ = regions;
    for (const std::string& s : switches) {
      if (setup_.drivers.count(s) != 0) continue;  // a fake
      absl::StatusOr<SimSwitch> sw = StartSimSwitch(dir_.path(), s);
      ASSERT_TRUE(sw.ok()) << sw.status();
      setup_.switches[s] = sw->address;
      switches_[s] = std::move(*sw);
    }
    setup_.spec_yaml = MakeSpecYaml(regions, switches);
    setup_.state_dir = dir_.path() + "/ctl";
    setup_.listen = "unix:" + dir_.path() + "/ctl.sock";
    setup_.prepare_deadline = prepare_deadline;
    setup_.report_timeout = report_timeout;
    auto server = StartController(setup_);
    ASSERT_TRUE(server.ok()) << server.status();
    server_ = std::move(*server);
    channel_ = Connect(server_->address());
    stub_ = cv1::Controller::NewStub(channel_);
    for (const RegionDef& r : regions) {
      for (int i = 0; i < r.hosts; ++i) {
        const std::string host = absl::StrCat(r.prefix, i);
        auto w = std::make_unique<FakeWorker>(channel_, host + "/w", host);
        cv1::RegisterResponse resp;
        grpc::Status s = w->Register(&resp);
        ASSERT_TRUE(s.ok()) << s.error_message();
        EXPECT_EQ(resp.region(), r.name);
        w->StartWatch();
        std::optional<cv1::TopologyEvent> snap = w->Next();
        ASSERT_TRUE(snap.has_value());
        EXPECT_EQ(snap->kind(), cv1::TopologyEvent::SNAPSHOT);
        workers_[host] = std::move(w);
      }
    }
  }

  void TearDown() override {
    workers_.clear();
    if (server_) server_->Shutdown(absl::Seconds(1));
  }

  std::vector<std::string> Hosts(const RegionDef& r) {
    std::vector<std::string> h;
    for (int i = 0; i < r.hosts; ++i) h.push_back(absl::StrCat(r.prefix, i));
    return h;
  }

  // Every worker of `r` (but those in `skip`) reports its row of `pairs`.
  void Report(const RegionDef& r, int64_t iteration, const Pairs& pairs,
              const std::set<int>& skip = {}) {
    const std::vector<std::string> hosts = Hosts(r);
    for (int i = 0; i < r.hosts; ++i) {
      if (skip.count(i) != 0) continue;
      grpc::Status s = SendReport(*stub_, hosts[i] + "/w", hosts[i], iteration, 0, hosts,
                                  Row(r.hosts, i, pairs));
      ASSERT_TRUE(s.ok()) << s.error_message();
    }
  }

  // Every worker of `r` sees `kind` at `epoch` next; returns worker 0's.
  cv1::TopologyEvent ExpectAll(const RegionDef& r, cv1::TopologyEvent::Kind kind, uint64_t epoch,
                               absl::Duration timeout = absl::Seconds(10)) {
    cv1::TopologyEvent first;
    for (const std::string& h : Hosts(r)) {
      std::optional<cv1::TopologyEvent> ev = workers_[h]->Next(timeout);
      EXPECT_TRUE(ev.has_value()) << h << ": no event";
      if (!ev) continue;
      EXPECT_EQ(ev->kind(), kind) << h << ": " << ev->DebugString();
      EXPECT_EQ(ev->topology().epoch(), epoch) << h;
      if (h == Hosts(r)[0]) first = *ev;
    }
    return first;
  }

  uint64_t PersistedEpoch() {
    std::ifstream in(setup_.state_dir + "/controller_epoch.json");
    std::stringstream s;
    s << in.rdbuf();
    return nlohmann::json::parse(s.str())["highest_epoch"].get<uint64_t>();
  }

  TempDir dir_;
  std::vector<RegionDef> regions_;
  ControllerSetup setup_;
  std::map<std::string, SimSwitch> switches_;
  std::unique_ptr<control::ControllerServer> server_;
  std::shared_ptr<grpc::Channel> channel_;
  std::unique_ptr<cv1::Controller::Stub> stub_;
  std::map<std::string, std::unique_ptr<FakeWorker>> workers_;
};

const RegionDef kR0{"r0", "h", 4, "ocs0", 1};

// One switch (the cases with several: controller_rollback_test).
TEST_F(ControllerTest, SwitchFailureIsPutBackAndAbortsOrLeavesTheTopologyUntilReDriven) {
  auto fake = std::make_shared<FakeSwitch>();
  setup_.drivers["ocs0"] = fake;
  Start({kR0}, {"ocs0"});
  EXPECT_EQ(fake->applies(), 1);  // the epoch claimed at start
  fake->FailNext(absl::UnavailableError("fake: mirror stuck"));
  Report(kR0, 0, {{0, 1}, {2, 3}});
  ExpectAll(kR0, cv1::TopologyEvent::PREPARE, 2);
  cv1::TopologyEvent abort = ExpectAll(kR0, cv1::TopologyEvent::ABORT, 2);
  EXPECT_THAT(abort.reason(), HasSubstr("mirror stuck"));
  EXPECT_THAT(abort.reason(), HasSubstr("ocs0"));
  EXPECT_THAT(abort.reason(), HasSubstr("put back to epoch 1's circuits: ocs0"));
  // The failed Apply, then the put-back: epoch 2, config version 3, nothing.
  EXPECT_EQ(fake->applies(), 3);
  ASSERT_EQ(fake->accepted().size(), 2u);
  EXPECT_EQ(fake->accepted()[1].epoch, 2u);
  EXPECT_EQ(fake->accepted()[1].version, 3u);
  EXPECT_TRUE(fake->accepted()[1].circuits.empty());
  cv1::ControllerStatus st = Status(*stub_);
  EXPECT_TRUE(st.fenced().empty());  // not a stale epoch
  EXPECT_EQ(st.regions(0).rounds_aborted(), 1u);
  EXPECT_EQ(st.topology().epoch(), 1u);
  // The next round applies again and commits.
  Report(kR0, 1, {{0, 1}, {2, 3}});
  ExpectAll(kR0, cv1::TopologyEvent::PREPARE, 3);
  ExpectAll(kR0, cv1::TopologyEvent::COMMIT, 3);
  EXPECT_EQ(fake->state().first, (Pairs{{1, 2}, {3, 4}}));
  EXPECT_EQ(fake->state().second, 3u);
  // Same traffic again: skipped, the switch is not asked.
  Report(kR0, 2, {{0, 1}, {2, 3}});
  ASSERT_TRUE(WaitUntil([&] { return Status(*stub_).regions(0).rounds_skipped() == 1; }));
  EXPECT_EQ(fake->applies(), 4);
  // A switch that fails its put-back too is uncertain: the workers get the
  // committed topology without its circuits, at the round's epoch.
  fake->FailNext(absl::DeadlineExceededError("fake: no answer"), 2);
  Report(kR0, 3, {{0, 2}, {1, 3}});
  ExpectAll(kR0, cv1::TopologyEvent::PREPARE, 4);
  cv1::TopologyEvent commit = ExpectAll(kR0, cv1::TopologyEvent::COMMIT, 4);
  EXPECT_EQ(commit.topology().circuits_size(), 0);
  EXPECT_THAT(commit.reason(), HasSubstr("not put back: ocs0"));
  EXPECT_EQ(fake->applies(), 6);
  ASSERT_TRUE(WaitUntil([&] { return Status(*stub_).regions(0).rounds_aborted() == 2; }));
  st = Status(*stub_);
  EXPECT_EQ(st.topology().epoch(), 4u);
  EXPECT_EQ(st.topology().circuits_size(), 0);
  // The next round re-drives it, even with what it held before.
  Report(kR0, 4, {{0, 1}, {2, 3}});
  ExpectAll(kR0, cv1::TopologyEvent::PREPARE, 5);
  commit = ExpectAll(kR0, cv1::TopologyEvent::COMMIT, 5);
  EXPECT_EQ(CircuitPairs(commit.topology()), (Pairs{{1, 2}, {3, 4}}));
  EXPECT_EQ(fake->applies(), 7);
  EXPECT_EQ(fake->state(), std::make_pair(Pairs{{1, 2}, {3, 4}}, uint64_t{5}));
}

TEST_F(ControllerTest, ShutdownIsPromptWithOpenStreams) {
  Start({kR0}, {"ocs0"});
  // A report stream left open, as a worker's is for its whole run.
  grpc::ClientContext ctx;
  cv1::ReportTrafficResponse resp;
  auto writer = stub_->ReportTraffic(&ctx, &resp);
  cv1::TrafficReport r;
  r.set_worker_id("h0/w");
  r.set_host("h0");
  r.set_direction(cv1::DISPATCH);
  for (const std::string& h : Hosts(kR0)) {
    r.add_peer_hosts(h);
    r.add_bytes(1);
  }
  ASSERT_TRUE(writer->Write(r));
  ASSERT_TRUE(WaitUntil([&] { return server_->controller().GetStatus().highest_epoch() == 1; }));
  absl::SleepFor(absl::Milliseconds(50));
  const absl::Time t = absl::Now();
  server_->Shutdown(absl::Seconds(5));
  EXPECT_LT(absl::Now() - t, absl::Seconds(1));
  for (auto& [h, w] : workers_) {
    EXPECT_TRUE(WaitUntil([&] { return w->ended(); }, absl::Seconds(3))) << h;
  }
  writer->WritesDone();
  EXPECT_FALSE(writer->Finish().ok());
}

TEST_F(ControllerTest, FencedByAFakeSwitchStopsPlanning) {
  auto fake = std::make_shared<FakeSwitch>();
  setup_.drivers["ocs0"] = fake;
  Start({kR0}, {"ocs0"});
  fake->FailNext(absl::FailedPreconditionError("stale epoch 2: the highest accepted is 9"));
  Report(kR0, 0, {{0, 1}, {2, 3}});
  ExpectAll(kR0, cv1::TopologyEvent::PREPARE, 2);
  ExpectAll(kR0, cv1::TopologyEvent::ABORT, 2);
  EXPECT_THAT(Status(*stub_).fenced(), HasSubstr("epoch 2"));
  Report(kR0, 1, {{0, 2}, {1, 3}});
  absl::SleepFor(absl::Milliseconds(300));
  for (auto& [h, w] : workers_) EXPECT_EQ(w->queued(), 0u) << h;
  EXPECT_EQ(fake->applies(), 2);  // the claim at start, the round
}

TEST_F(ControllerTest, ReRegisteringReplacesTheWatchStream) {
  Start({kR0}, {"ocs0"});
  FakeWorker again(channel_, "h0/w", "h0");
  ASSERT_TRUE(again.Register().ok());
  ASSERT_TRUE(WaitUntil([&] { return workers_["h0"]->ended(); }, absl::Seconds(3)));
  again.StartWatch();
  std::optional<cv1::TopologyEvent> snap = again.Next();
  ASSERT_TRUE(snap.has_value());
  EXPECT_EQ(snap->kind(), cv1::TopologyEvent::SNAPSHOT);
  // The new stream takes part in rounds.
  Report(kR0, 0, {{0, 1}, {2, 3}});
  std::optional<cv1::TopologyEvent> prep = again.Next();
  ASSERT_TRUE(prep.has_value());
  EXPECT_EQ(prep->kind(), cv1::TopologyEvent::PREPARE);
  std::optional<cv1::TopologyEvent> commit = again.Next();
  ASSERT_TRUE(commit.has_value());
  EXPECT_EQ(commit->kind(), cv1::TopologyEvent::COMMIT);
}

TEST_F(ControllerTest, RoundPreparesAppliesCommitsAndPersistsEpoch) {
  Start({kR0}, {"ocs0"});
  cv1::ControllerStatus st = Status(*stub_);
  EXPECT_EQ(st.highest_epoch(), 1u);  // fresh switch and state dir
  EXPECT_EQ(PersistedEpoch(), 1u);

  Report(kR0, 0, {{0, 1}, {2, 3}});
  cv1::TopologyEvent prep = ExpectAll(kR0, cv1::TopologyEvent::PREPARE, 2);
  EXPECT_EQ(CircuitPairs(prep.topology()), (Pairs{{1, 2}, {3, 4}}));
  EXPECT_EQ(prep.added_size(), 2);
  EXPECT_EQ(prep.removed_size(), 0);
  EXPECT_EQ(prep.deadline_ms(), 2000u);
  EXPECT_EQ(prep.direction(), cv1::DISPATCH);
  cv1::TopologyEvent commit = ExpectAll(kR0, cv1::TopologyEvent::COMMIT, 2);
  EXPECT_EQ(CircuitPairs(commit.topology()), (Pairs{{1, 2}, {3, 4}}));
  auto sw = ReadSwitch(switches_["ocs0"].address);
  ASSERT_TRUE(sw.ok()) << sw.status();
  EXPECT_EQ(sw->first, (Pairs{{1, 2}, {3, 4}}));
  EXPECT_EQ(sw->second, 2u);
  EXPECT_EQ(PersistedEpoch(), 2u);

  // A different pattern: the next epoch, circuits re-pointed.
  Report(kR0, 1, {{0, 2}, {1, 3}});
  prep = ExpectAll(kR0, cv1::TopologyEvent::PREPARE, 3);
  EXPECT_EQ(prep.removed_size(), 2);
  EXPECT_EQ(prep.added_size(), 2);
  ExpectAll(kR0, cv1::TopologyEvent::COMMIT, 3);
  sw = ReadSwitch(switches_["ocs0"].address);
  ASSERT_TRUE(sw.ok()) << sw.status();
  EXPECT_EQ(sw->first, (Pairs{{1, 3}, {2, 4}}));
  EXPECT_EQ(sw->second, 3u);
  EXPECT_EQ(PersistedEpoch(), 3u);
  ASSERT_TRUE(WaitUntil([&] { return Status(*stub_).regions(0).rounds_committed() == 2; }));
  st = Status(*stub_);
  EXPECT_EQ(st.topology().epoch(), 3u);
  EXPECT_EQ(st.highest_epoch(), 3u);
  EXPECT_EQ(st.regions(0).rounds_aborted(), 0u);
  EXPECT_EQ(st.regions(0).registered_workers_size(), 4);
  EXPECT_TRUE(st.fenced().empty());
}

// This process's threads (/proc/self/task), by id.
std::set<std::string> ThreadIds() {
  std::set<std::string> out;
  DIR* d = opendir("/proc/self/task");
  if (d == nullptr) return out;
  while (dirent* e = readdir(d)) {
    if (e->d_name[0] != '.') out.insert(e->d_name);
  }
  closedir(d);
  return out;
}

// A round makes no thread: after the first rounds the threads of the
// process (the controller's and the switch daemon's servers, the workers'
// clients) are the ones the next rounds use. gRPC's synchronous servers kept
// at most two idle pollers, so the four workers' acks, arriving together,
// made threads that exited after their call (grpc_server_limits.h).
TEST_F(ControllerTest, RoundsMakeNoThreads) {
  Start({kR0}, {"ocs0"});
  const std::vector<Pairs> patterns = {{{0, 1}, {2, 3}}, {{0, 2}, {1, 3}}, {{0, 3}, {1, 2}}};
  auto round = [&](int64_t iteration) {
    Report(kR0, iteration, patterns[iteration % patterns.size()]);
    const uint64_t epoch = static_cast<uint64_t>(iteration) + 2;
    ExpectAll(kR0, cv1::TopologyEvent::PREPARE, epoch);
    ExpectAll(kR0, cv1::TopologyEvent::COMMIT, epoch);
    ASSERT_TRUE(WaitUntil([&] {
      return Status(*stub_).regions(0).rounds_committed() == static_cast<uint64_t>(iteration) + 1;
    }));
  };
  for (int64_t it = 0; it < 4; ++it) round(it);
  const std::set<std::string> before = ThreadIds();
  ASSERT_FALSE(before.empty());
  for (int64_t it = 4; it < 16; ++it) round(it);
  // No thread ended; a pool may still grow to a burst it had not met (a
  // busy machine spreads a round's calls over more pollers: 5 threads in
  // one CI run), never by a thread per round (12 rounds).
  const std::set<std::string> after = ThreadIds();
  std::vector<std::string> ended, made;
  std::set_difference(before.begin(), before.end(), after.begin(), after.end(),
                      std::back_inserter(ended));
  std::set_difference(after.begin(), after.end(), before.begin(), before.end(),
                      std::back_inserter(made));
  EXPECT_THAT(ended, ::testing::IsEmpty()) << "threads that ended during 12 rounds";
  EXPECT_LT(made.size(), 12u) << "threads made during 12 rounds";
}

// With a block of 3 epochs persisted ahead, the start saves 1 + 3 - 1 = 3;
// rounds at epochs 2 and 3 save nothing; the round at epoch 4 saves 6
// before its PREPARE. Every PREPARE's epoch is durable when it arrives.
TEST_F(ControllerTest, EpochsArePersistedABlockAhead) {
  setup_.epoch_block = 3;
  Start({kR0}, {"ocs0"});
  EXPECT_EQ(Status(*stub_).highest_epoch(), 1u);
  EXPECT_EQ(PersistedEpoch(), 3u);
  const std::vector<Pairs> pairings = {{{0, 1}, {2, 3}}, {{0, 2}, {1, 3}}, {{0, 3}, {1, 2}}};
  const std::vector<uint64_t> saved = {3, 3, 6};
  for (size_t i = 0; i < pairings.size(); ++i) {
    const uint64_t epoch = 2 + i;
    Report(kR0, static_cast<int64_t>(i), pairings[i]);
    ExpectAll(kR0, cv1::TopologyEvent::PREPARE, epoch);
    EXPECT_EQ(PersistedEpoch(), saved[i]) << "at epoch " << epoch;
    ExpectAll(kR0, cv1::TopologyEvent::COMMIT, epoch);
  }
  EXPECT_EQ(control::EpochBlockEnd(4, 3), 6u);
  EXPECT_EQ(control::EpochBlockEnd(control::kMaxFencingEpoch - 1, 3), control::kMaxFencingEpoch);
  EXPECT_EQ(control::EpochBlockEnd(5, 1), 5u);
}

TEST_F(ControllerTest, WorkerThatNeverAcksAbortsWithinDeadline) {
  Start({kR0}, {"ocs0"}, absl::Milliseconds(300));
  workers_["h3"]->set_auto_ack(false);
  const absl::Time start = absl::Now();
  Report(kR0, 0, {{0, 1}, {2, 3}});
  ExpectAll(kR0, cv1::TopologyEvent::PREPARE, 2);
  EXPECT_EQ(PersistedEpoch(), 2u);  // durable before anyone heard of it
  cv1::TopologyEvent abort = ExpectAll(kR0, cv1::TopologyEvent::ABORT, 2, absl::Seconds(3));
  const absl::Duration took = absl::Now() - start;
  EXPECT_GE(took, absl::Milliseconds(280));
  EXPECT_LE(took, absl::Milliseconds(300) + absl::Milliseconds(1500));
  EXPECT_THAT(abort.reason(), HasSubstr("h3/w"));
  EXPECT_THAT(abort.reason(), ::testing::Not(HasSubstr("h0/w")));
  // Switch untouched, epoch 2 never applied (1: the claim at start).
  auto sw = ReadSwitch(switches_["ocs0"].address);
  ASSERT_TRUE(sw.ok()) << sw.status();
  EXPECT_TRUE(sw->first.empty());
  EXPECT_EQ(sw->second, 1u);
  cv1::ControllerStatus st = Status(*stub_);
  EXPECT_EQ(st.topology().epoch(), 1u);
  EXPECT_EQ(st.regions(0).rounds_aborted(), 1u);
  EXPECT_EQ(st.regions(0).rounds_committed(), 0u);

  // Later rounds still work (with a fresh epoch).
  workers_["h3"]->set_auto_ack(true);
  Report(kR0, 1, {{0, 1}, {2, 3}});
  ExpectAll(kR0, cv1::TopologyEvent::PREPARE, 3);
  ExpectAll(kR0, cv1::TopologyEvent::COMMIT, 3);
  sw = ReadSwitch(switches_["ocs0"].address);
  ASSERT_TRUE(sw.ok()) << sw.status();
  EXPECT_EQ(sw->first, (Pairs{{1, 2}, {3, 4}}));
  EXPECT_EQ(sw->second, 3u);
}

TEST_F(ControllerTest, ErrorAckAbortsAtOnce) {
  Start({kR0}, {"ocs0"}, absl::Seconds(5));
  workers_["h2"]->set_auto_ack(false);
  const absl::Time start = absl::Now();
  Report(kR0, 0, {{0, 1}, {2, 3}});
  ExpectAll(kR0, cv1::TopologyEvent::PREPARE, 2);
  ASSERT_TRUE(workers_["h2"]->Ack(2, true, /*UNAVAILABLE*/ 14).ok());
  cv1::TopologyEvent abort = ExpectAll(kR0, cv1::TopologyEvent::ABORT, 2);
  EXPECT_LT(absl::Now() - start, absl::Seconds(3));  // well before the 5 s deadline
  EXPECT_THAT(abort.reason(), HasSubstr("h2/w"));
  auto sw = ReadSwitch(switches_["ocs0"].address);
  ASSERT_TRUE(sw.ok());
  EXPECT_TRUE(sw->first.empty());
}

TEST_F(ControllerTest, SkipsWhenThePlanEqualsTheCurrentCircuits) {
  Start({kR0}, {"ocs0"});
  Report(kR0, 0, {{0, 1}, {2, 3}});
  ExpectAll(kR0, cv1::TopologyEvent::PREPARE, 2);
  ExpectAll(kR0, cv1::TopologyEvent::COMMIT, 2);
  Report(kR0, 1, {{0, 1}, {2, 3}});
  ASSERT_TRUE(WaitUntil([&] { return Status(*stub_).regions(0).rounds_skipped() == 1; }));
  absl::SleepFor(absl::Milliseconds(100));
  for (auto& [h, w] : workers_) EXPECT_EQ(w->queued(), 0u) << h;
  cv1::ControllerStatus st = Status(*stub_);
  EXPECT_EQ(st.regions(0).rounds_committed(), 1u);
  EXPECT_EQ(st.highest_epoch(), 2u);  // no epoch spent on a skip
  auto sw = ReadSwitch(switches_["ocs0"].address);
  ASSERT_TRUE(sw.ok());
  EXPECT_EQ(sw->second, 2u);
}

TEST_F(ControllerTest, TwoRegionsArePlannedIndependently) {
  const RegionDef a{"ra", "a", 4, "ocs0", 1};
  const RegionDef b{"rb", "b", 4, "ocs1", 1};
  Start({a, b}, {"ocs0", "ocs1"});
  Report(a, 0, {{0, 1}, {2, 3}});
  ExpectAll(a, cv1::TopologyEvent::PREPARE, 2);
  ExpectAll(a, cv1::TopologyEvent::COMMIT, 2);
  absl::SleepFor(absl::Milliseconds(100));
  for (const std::string& h : Hosts(b)) EXPECT_EQ(workers_[h]->queued(), 0u) << h;
  auto s0 = ReadSwitch(switches_["ocs0"].address);
  auto s1 = ReadSwitch(switches_["ocs1"].address);
  ASSERT_TRUE(s0.ok() && s1.ok());
  EXPECT_EQ(s0->first, (Pairs{{1, 2}, {3, 4}}));
  EXPECT_TRUE(s1->first.empty());
  EXPECT_EQ(s1->second, 1u);  // never asked to change: the claim at start only

  Report(b, 0, {{0, 2}, {1, 3}});
  ExpectAll(b, cv1::TopologyEvent::PREPARE, 3);
  cv1::TopologyEvent commit = ExpectAll(b, cv1::TopologyEvent::COMMIT, 3);
  EXPECT_EQ(commit.topology().circuits_size(), 4);  // the whole fabric
  absl::SleepFor(absl::Milliseconds(100));
  for (const std::string& h : Hosts(a)) EXPECT_EQ(workers_[h]->queued(), 0u) << h;
  s0 = ReadSwitch(switches_["ocs0"].address);
  s1 = ReadSwitch(switches_["ocs1"].address);
  ASSERT_TRUE(s0.ok() && s1.ok());
  EXPECT_EQ(s0->second, 2u);  // unchanged switch not re-applied
  EXPECT_EQ(s1->first, (Pairs{{1, 3}, {2, 4}}));
  EXPECT_EQ(s1->second, 3u);
  cv1::ControllerStatus st = Status(*stub_);
  ASSERT_EQ(st.regions_size(), 2);
  EXPECT_EQ(st.regions(0).rounds_committed(), 1u);
  EXPECT_EQ(st.regions(1).rounds_committed(), 1u);
}

TEST_F(ControllerTest, MissingReportIsPlannedAfterTheReportTimeout) {
  Start({kR0}, {"ocs0"}, absl::Seconds(2), absl::Milliseconds(300));
  const absl::Time start = absl::Now();
  Report(kR0, 0, {{0, 1}, {2, 3}}, /*skip=*/{3});
  ExpectAll(kR0, cv1::TopologyEvent::PREPARE, 2);
  EXPECT_GE(absl::Now() - start, absl::Milliseconds(280));
  ExpectAll(kR0, cv1::TopologyEvent::COMMIT, 2);
}

TEST_F(ControllerTest, BadInputIsRejected) {
  Start({kR0}, {"ocs0"});
  FakeWorker stranger(channel_, "x/1", "nohost");
  grpc::Status s = stranger.Register();
  EXPECT_EQ(s.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_THAT(s.error_message(), HasSubstr("nohost"));
  FakeWorker noid(channel_, "", "h0");
  EXPECT_EQ(noid.Register().error_code(), grpc::StatusCode::INVALID_ARGUMENT);

  const std::vector<std::string> hosts = Hosts(kR0);
  // Wrong dimensions: 4 columns, 3 byte counts.
  s = SendReport(*stub_, "h0/w", "h0", 0, 0, hosts, {0, 1, 2});
  EXPECT_EQ(s.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_THAT(s.error_message(), HasSubstr("h0/w"));
  // Too many columns.
  s = SendReport(*stub_, "h0/w", "h0", 0, 0, {"h0", "h1", "h2", "h3", "h1"}, {0, 1, 2, 3, 4});
  EXPECT_EQ(s.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  // A peer outside the region.
  s = SendReport(*stub_, "h0/w", "h0", 0, 0, {"h0", "zz"}, {0, 1});
  EXPECT_EQ(s.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_THAT(s.error_message(), HasSubstr("zz"));
  // Negative bytes, wrong host, no direction, unregistered worker.
  s = SendReport(*stub_, "h0/w", "h0", 0, 0, hosts, {0, -1, 2, 3});
  EXPECT_EQ(s.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  s = SendReport(*stub_, "h0/w", "h1", 0, 0, hosts, {0, 1, 2, 3});
  EXPECT_EQ(s.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  s = SendReport(*stub_, "h0/w", "h0", 0, 0, hosts, {0, 1, 2, 3}, cv1::DIRECTION_UNSPECIFIED);
  EXPECT_EQ(s.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  s = SendReport(*stub_, "ghost", "h0", 0, 0, hosts, {0, 1, 2, 3});
  EXPECT_EQ(s.error_code(), grpc::StatusCode::NOT_FOUND);
  // Watching without registering.
  FakeWorker ghost(channel_, "ghost", "h0");
  ghost.StartWatch();
  ASSERT_TRUE(WaitUntil([&] { return ghost.ended(); }));
  EXPECT_EQ(ghost.queued(), 0u);
  // An ack with no phase.
  grpc::ClientContext ctx;
  cv1::AckTopologyRequest ack;
  ack.set_worker_id("h0/w");
  cv1::AckTopologyResponse resp;
  EXPECT_EQ(stub_->AckTopology(&ctx, ack, &resp).error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  // None of it started a round.
  EXPECT_EQ(Status(*stub_).highest_epoch(), 1u);
}

}  // namespace
}  // namespace mixnet::testing
