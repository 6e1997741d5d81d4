// The controller learns each switch's real Apply time (label cpu): the
// OcsSwitchDriver reads what an in-process sim mixnet-ocsd measured; the
// controller, with a fake switch reporting chosen times, plans with the
// measured median (a reconfiguration that pays at the spec's 1 ms is skipped
// once the switch is known to take 10 s) and gives a slow switch's Apply a
// deadline of 4 x its slowest measured Apply; GetStatus times the committed
// rounds (a switch whose Apply takes 300 ms over a spec switch_ms of 1 ms
// shows a round of at least 301 ms, 300 ms of it over the nominal
// switching); after three rounds whose workers ack 400 ms late, Decide
// skips a gain that the switching alone would pay for. Test thread plus the fake workers' watch
// threads.
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/control/controller_test_util.h"

namespace mixnet::testing {
namespace {

const RegionDef kR0{"r0", "h", 4, "ocs0", 1};

control::SwitchApplyTiming Timing(uint32_t samples, absl::Duration median, absl::Duration max) {
  control::SwitchApplyTiming t;
  t.samples = samples;
  t.median = median;
  t.p90 = max;
  t.max = max;
  return t;
}

// A switch in memory whose measured Apply times the test sets; it records
// the time each Apply was given.
class TimedSwitch final : public control::SwitchDriver {
 public:
  std::string target() const override { return "fake-timed"; }
  absl::StatusOr<control::SwitchCircuits> GetCircuits(absl::Time) override {
    absl::MutexLock lock(&mu_);
    control::SwitchCircuits c;
    c.circuits = circuits_;
    c.highest_epoch = c.config_version = epoch_;
    c.apply_timing = timing_;
    return c;
  }
  absl::StatusOr<control::SwitchApplyTiming> GetApplyTiming(absl::Time) override {
    absl::MutexLock lock(&mu_);
    ++timing_reads_;
    return timing_;
  }
  absl::StatusOr<control::SwitchApplyResult> Apply(uint64_t epoch, uint64_t,
                                                   const std::vector<control::PortPair>& circuits,
                                                   absl::Time deadline) override {
    absl::SleepFor(apply_delay_);
    absl::MutexLock lock(&mu_);
    given_.push_back(deadline - absl::Now());
    circuits_ = circuits;
    epoch_ = epoch;
    control::SwitchApplyResult r;
    r.highest_epoch = epoch;
    r.actual = circuits;
    return r;
  }
  // Before Start: every Apply takes this long (backend_time stays 0).
  void set_apply_delay(absl::Duration d) { apply_delay_ = d; }
  void set_timing(const control::SwitchApplyTiming& t) {
    absl::MutexLock lock(&mu_);
    timing_ = t;
  }
  std::vector<absl::Duration> given() {
    absl::MutexLock lock(&mu_);
    return given_;
  }
  int timing_reads() {
    absl::MutexLock lock(&mu_);
    return timing_reads_;
  }

 private:
  absl::Mutex mu_;
  absl::Duration apply_delay_ = absl::ZeroDuration();
  std::vector<control::PortPair> circuits_ ABSL_GUARDED_BY(mu_);
  uint64_t epoch_ ABSL_GUARDED_BY(mu_) = 0;
  control::SwitchApplyTiming timing_ ABSL_GUARDED_BY(mu_);
  std::vector<absl::Duration> given_ ABSL_GUARDED_BY(mu_);
  int timing_reads_ ABSL_GUARDED_BY(mu_) = 0;
};

class SwitchTimeTest : public ::testing::Test {
 protected:
  // One region of 4 hosts on the fake switch (spec switch_ms 1, EPS NICs
  // 0.1 Gbit/s, OCS NICs 100 Gbit/s; --switch-timeout 5 s).
  void Start() {
    setup_.spec_yaml = MakeSpecYaml({kR0}, {"ocs0"}, 16, /*switch_ms=*/1);
    setup_.state_dir = dir_.path() + "/ctl";
    setup_.listen = "unix:" + dir_.path() + "/ctl.sock";
    setup_.drivers["ocs0"] = fake_;
    auto server = StartController(setup_);
    ASSERT_TRUE(server.ok()) << server.status();
    server_ = std::move(*server);
    channel_ = Connect(server_->address());
    stub_ = cv1::Controller::NewStub(channel_);
    for (int i = 0; i < kR0.hosts; ++i) {
      const std::string host = absl::StrCat(kR0.prefix, i);
      auto w = std::make_unique<FakeWorker>(channel_, host + "/w", host);
      ASSERT_TRUE(w->Register().ok());
      w->StartWatch();
      ASSERT_TRUE(w->Next().has_value());  // SNAPSHOT
      hosts_.push_back(host);
      workers_.push_back(std::move(w));
    }
  }
  void TearDown() override {
    workers_.clear();
    if (server_) server_->Shutdown(absl::Seconds(1));
  }

  // Every host reports: 1e6 bytes to its partner in `pairs`, 1e3 to the
  // others. On EPS alone a host needs about (1e6 + 2e3) B x 8 / 0.1 Gbit/s =
  // 80 ms, so two uses (dispatch + combine) gain at most ~160 ms from
  // circuits: more than 1 ms, far less than 10 s.
  void Report(int64_t iteration, const Pairs& pairs) {
    for (int i = 0; i < kR0.hosts; ++i) {
      grpc::Status s = SendReport(*stub_, hosts_[i] + "/w", hosts_[i], iteration, 0, hosts_,
                                  Row(kR0.hosts, i, pairs, 1e6, 1e3));
      ASSERT_TRUE(s.ok()) << s.error_message();
    }
  }
  std::optional<cv1::TopologyEvent> Next(absl::Duration timeout = absl::Seconds(10)) {
    return workers_[0]->Next(timeout);
  }

  TempDir dir_;
  std::shared_ptr<TimedSwitch> fake_ = std::make_shared<TimedSwitch>();
  ControllerSetup setup_;
  std::unique_ptr<control::ControllerServer> server_;
  std::shared_ptr<grpc::Channel> channel_;
  std::unique_ptr<cv1::Controller::Stub> stub_;
  std::vector<std::string> hosts_;
  std::vector<std::unique_ptr<FakeWorker>> workers_;
};

TEST_F(SwitchTimeTest, DecideUsesTheMeasuredApplyTimeOnceThereIsOne) {
  Start();
  // Nothing measured yet: the spec's 1 ms, so switching pays.
  fake_->set_timing(Timing(5, absl::Seconds(10), absl::Seconds(11)));  // read after the round
  Report(0, {{0, 1}, {2, 3}});
  std::optional<cv1::TopologyEvent> ev = Next();
  ASSERT_TRUE(ev.has_value());
  EXPECT_EQ(ev->kind(), cv1::TopologyEvent::PREPARE);
  ev = Next();
  ASSERT_TRUE(ev.has_value());
  EXPECT_EQ(ev->kind(), cv1::TopologyEvent::COMMIT);
  EXPECT_TRUE(WaitUntil([&] { return fake_->timing_reads() >= 1; }))
      << "the controller did not read the switch's Apply time after the round";

  // Known to take 10 s: a gain of at most ~160 ms does not pay.
  Report(1, {{0, 2}, {1, 3}});
  ASSERT_TRUE(WaitUntil([&] { return Status(*stub_).regions(0).rounds_skipped() == 1; }))
      << Status(*stub_).DebugString();
  EXPECT_FALSE(Next(absl::Milliseconds(300)).has_value()) << "a round ran at 10 s per switch";
  EXPECT_EQ(Status(*stub_).regions(0).rounds_committed(), 1u);
  EXPECT_EQ(fake_->given().size(), 2u);  // the claim at start, the round
}

TEST_F(SwitchTimeTest, SpecTimeStaysTheFloorForAFastSwitch) {
  // Measured faster than the spec's 1 ms: the 1 ms the round settles to
  // still counts, and switching pays.
  fake_->set_timing(Timing(3, absl::Microseconds(100), absl::Microseconds(200)));
  Start();
  Report(0, {{0, 1}, {2, 3}});
  std::optional<cv1::TopologyEvent> ev = Next();
  ASSERT_TRUE(ev.has_value());
  EXPECT_EQ(ev->kind(), cv1::TopologyEvent::PREPARE);
}

TEST_F(SwitchTimeTest, ApplyDeadlineCoversTheSlowestMeasuredApply) {
  // Median fast enough to switch, but one Apply took 3 s: the Apply gets
  // 4 x 3 s = 12 s instead of the 5 s switch timeout.
  fake_->set_timing(Timing(4, absl::Microseconds(500), absl::Seconds(3)));
  Start();
  Report(0, {{0, 1}, {2, 3}});
  // given()[0]: the epoch claimed at start (the switch timeout).
  ASSERT_TRUE(WaitUntil([&] { return fake_->given().size() == 2; }));
  absl::Duration given = fake_->given()[1];
  EXPECT_GT(given, absl::Seconds(11.5));
  EXPECT_LE(given, absl::Seconds(12));

  // Slowest 1 s: 4 s is under the 5 s timeout, which stays the floor.
  ASSERT_TRUE(WaitUntil([&] { return fake_->timing_reads() >= 1; }));
  fake_->set_timing(Timing(4, absl::Microseconds(500), absl::Seconds(1)));
  Report(1, {{0, 2}, {1, 3}});  // the round after this one reads the new time
  ASSERT_TRUE(WaitUntil([&] { return fake_->given().size() == 3; }));
  Report(2, {{0, 3}, {1, 2}});
  ASSERT_TRUE(WaitUntil([&] { return fake_->given().size() == 4; }));
  given = fake_->given()[3];
  EXPECT_GT(given, absl::Seconds(4.5));
  EXPECT_LE(given, absl::Seconds(5));
}

TEST_F(SwitchTimeTest, StatusTimesTheCommittedRounds) {
  fake_->set_apply_delay(absl::Milliseconds(300));
  Start();
  fake_->set_timing(Timing(5, absl::Seconds(10), absl::Seconds(11)));  // read after the round
  cv1::RegionStatus before = Status(*stub_).regions(0);
  EXPECT_EQ(before.round_samples(), 0u);
  EXPECT_EQ(before.round_ms_p50(), 0);
  Report(0, {{0, 1}, {2, 3}});
  ASSERT_TRUE(WaitUntil([&] { return Status(*stub_).regions(0).round_samples() == 1; }))
      << Status(*stub_).DebugString();
  const cv1::RegionStatus r = Status(*stub_).regions(0);
  EXPECT_EQ(r.rounds_committed(), 1u);
  // Apply 300 ms, then the settle to the spec's 1 ms (backend_time 0), then
  // COMMIT and the acks: at least 301 ms, the overhead 1 ms less.
  EXPECT_GE(r.round_ms_p50(), 301);
  EXPECT_LT(r.round_ms_p50(), 5000);  // only a sanity bound
  EXPECT_DOUBLE_EQ(r.round_overhead_ms_p50(), r.round_ms_p50() - 1);
  // Phase by phase: the Apply holds the 300 ms; the settle is the 1 ms the
  // spec asks for beyond the Apply's backend time (0 here); the phases add
  // up to the round (one sample each: the medians are the samples).
  ASSERT_EQ(r.round_phases_size(), 6);
  const std::vector<std::string> names = {"decide", "persist", "prepare",
                                          "apply",  "settle",  "commit"};
  double sum = 0;
  for (int p = 0; p < 6; ++p) {
    const cv1::RoundPhase& ph = r.round_phases(p);
    EXPECT_EQ(ph.name(), names[p]);
    EXPECT_EQ(ph.samples(), 1u) << ph.name();
    EXPECT_GE(ph.p50_ms(), 0) << ph.name();
    EXPECT_DOUBLE_EQ(ph.p99_ms(), ph.p50_ms()) << ph.name();
    sum += ph.p50_ms();
  }
  EXPECT_GE(r.round_phases(3).p50_ms(), 300);
  EXPECT_LT(r.round_phases(3).p50_ms(), 5000);
  EXPECT_GE(r.round_phases(4).p50_ms(), 1);
  EXPECT_LT(r.round_phases(4).p50_ms(), 300);
  EXPECT_NEAR(sum, r.round_ms_p50(), 0.01);

  // A decision not to switch (the switch now known to take 10 s) is no
  // round: the samples stay.
  ASSERT_TRUE(WaitUntil([&] { return fake_->timing_reads() >= 1; }));
  Report(1, {{0, 2}, {1, 3}});
  ASSERT_TRUE(WaitUntil([&] { return Status(*stub_).regions(0).rounds_skipped() == 1; }));
  EXPECT_EQ(Status(*stub_).regions(0).round_samples(), 1u);
}

TEST_F(SwitchTimeTest, DecideChargesTheMeasuredProtocolTime) {
  Start();
  // One worker acks PREPARE 400 ms late: each round's protocol (not its
  // switching, 1 ms) takes >= 400 ms. The first three rounds run anyway
  // (Decide trusts the protocol's median from the third sample on).
  workers_[0]->set_auto_ack(false);
  const std::vector<Pairs> pairings = {{{0, 1}, {2, 3}}, {{0, 2}, {1, 3}}, {{0, 3}, {1, 2}}};
  for (int64_t i = 0; i < 3; ++i) {
    Report(i, pairings[i]);
    std::optional<cv1::TopologyEvent> ev = Next();
    ASSERT_TRUE(ev.has_value()) << "round " << i;
    ASSERT_EQ(ev->kind(), cv1::TopologyEvent::PREPARE);
    absl::SleepFor(absl::Milliseconds(400));
    ASSERT_TRUE(workers_[0]->Ack(ev->topology().epoch(), true).ok());
    ev = Next();
    ASSERT_TRUE(ev.has_value());
    ASSERT_EQ(ev->kind(), cv1::TopologyEvent::COMMIT);
    ASSERT_TRUE(workers_[0]->Ack(ev->topology().epoch(), false).ok());
    ASSERT_TRUE(WaitUntil([&] { return Status(*stub_).regions(0).round_samples() == i + 1; }));
  }
  EXPECT_GE(Status(*stub_).regions(0).round_overhead_ms_p50(), 400);
  // The phase that holds it: PREPARE out to the last PREPARED.
  const cv1::RegionStatus st = Status(*stub_).regions(0);
  ASSERT_EQ(st.round_phases_size(), 6);
  EXPECT_EQ(st.round_phases(2).name(), "prepare");
  EXPECT_EQ(st.round_phases(2).samples(), 3u);
  EXPECT_GE(st.round_phases(2).p50_ms(), 400);
  EXPECT_GE(st.round_phases(2).p99_ms(), st.round_phases(2).p50_ms());
  EXPECT_LT(st.round_phases(3).p50_ms(), 400) << "apply";

  // The switch is still known to take 1 ms, but the gain of at most ~160 ms
  // does not pay for 1 + >= 400 ms: no fourth round.
  Report(3, pairings[0]);
  ASSERT_TRUE(WaitUntil([&] { return Status(*stub_).regions(0).rounds_skipped() == 1; }))
      << Status(*stub_).DebugString();
  EXPECT_FALSE(Next(absl::Milliseconds(300)).has_value()) << "a round ran despite its protocol";
  EXPECT_EQ(Status(*stub_).regions(0).rounds_committed(), 3u);
}

// The real chain: a sim mixnet-ocsd sleeping 30 ms per change measures its
// Applies, and OcsSwitchDriver reports them.
TEST(OcsSwitchDriverTimingTest, ReadsTheDaemonsMeasuredApplyTime) {
  TempDir dir;
  absl::StatusOr<SimSwitch> sw = StartSimSwitch(dir.path(), "ocs0", 8, absl::Milliseconds(30));
  ASSERT_TRUE(sw.ok()) << sw.status();
  ocs::OcsClientOptions co;
  co.target = sw->address;
  auto driver = ocs::OcsSwitchDriver::Create(co, "ctl-test");
  ASSERT_TRUE(driver.ok()) << driver.status();
  const absl::Time deadline = absl::Now() + absl::Seconds(10);
  absl::StatusOr<control::SwitchApplyTiming> t = (*driver)->GetApplyTiming(deadline);
  ASSERT_TRUE(t.ok()) << t.status();
  EXPECT_EQ(t->samples, 0u);
  ASSERT_TRUE((*driver)->Apply(1, 1, {{1, 2}}, deadline).ok());
  ASSERT_TRUE((*driver)->Apply(2, 2, {{3, 4}}, deadline).ok());
  t = (*driver)->GetApplyTiming(deadline);
  ASSERT_TRUE(t.ok()) << t.status();
  EXPECT_EQ(t->samples, 2u);
  EXPECT_GE(t->median, absl::Milliseconds(30));
  EXPECT_GE(t->max, t->median);
  absl::StatusOr<control::SwitchCircuits> c = (*driver)->GetCircuits(deadline);
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_EQ(c->apply_timing.samples, 2u);
  EXPECT_EQ(c->apply_timing.max, t->max);
}

}  // namespace
}  // namespace mixnet::testing
