// mixnet-controller's Prometheus metrics (--metrics-listen), label cpu: the
// in-process controller server with its metrics on 127.0.0.1:0, an
// in-process sim switch and fake workers (controller_test_util.h); /metrics
// scraped over HTTP after a committed round, a skipped one and an aborted
// one, and checked against hand-worked counts and GetStatus; the binary
// refusing a non-loopback --metrics-listen before it touches anything, and
// serving /metrics from its flags. Test thread plus the fake workers'.
#include <fstream>
#include <regex>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "mixnet_build_paths.h"  // MIXNET_CONTROLLER_BIN
#include "tests/common/metrics_scrape.h"
#include "tests/control/controller_test_util.h"

namespace mixnet::testing {
namespace {

using ::testing::HasSubstr;
using ::testing::Optional;

const RegionDef kR0{"r0", "h", 4, "ocs0", 1};

class ControllerMetricsTest : public ::testing::Test {
 protected:
  void Start(absl::Duration prepare_deadline = absl::Seconds(2)) {
    ASSERT_FALSE(dir_.path().empty());
    absl::StatusOr<SimSwitch> sw = StartSimSwitch(dir_.path(), "ocs0");
    ASSERT_TRUE(sw.ok()) << sw.status();
    setup_.switches["ocs0"] = sw->address;
    switch_ = std::move(*sw);
    setup_.spec_yaml = MakeSpecYaml({kR0}, {"ocs0"});
    setup_.state_dir = dir_.path() + "/ctl";
    setup_.listen = "unix:" + dir_.path() + "/ctl.sock";
    setup_.prepare_deadline = prepare_deadline;
    setup_.metrics_listen = "127.0.0.1:0";
    auto server = StartController(setup_);
    ASSERT_TRUE(server.ok()) << server.status();
    server_ = std::move(*server);
    metrics_ = server_->metrics_address();
    ASSERT_THAT(metrics_, HasSubstr("127.0.0.1:"));
    channel_ = Connect(server_->address());
    stub_ = cv1::Controller::NewStub(channel_);
    for (int i = 0; i < kR0.hosts; ++i) {
      const std::string host = absl::StrCat(kR0.prefix, i);
      auto w = std::make_unique<FakeWorker>(channel_, host + "/w", host);
      grpc::Status s = w->Register();
      ASSERT_TRUE(s.ok()) << s.error_message();
      w->StartWatch();
      ASSERT_TRUE(w->Next().has_value());  // SNAPSHOT
      workers_.push_back(std::move(w));
    }
  }

  void TearDown() override {
    workers_.clear();
    if (server_) server_->Shutdown(absl::Seconds(1));
  }

  // Every worker reports its row of `pairs` for layer 0, dispatch.
  void Report(int64_t iteration, const Pairs& pairs) {
    std::vector<std::string> hosts;
    for (int i = 0; i < kR0.hosts; ++i) hosts.push_back(absl::StrCat(kR0.prefix, i));
    for (int i = 0; i < kR0.hosts; ++i) {
      grpc::Status s = SendReport(*stub_, hosts[i] + "/w", hosts[i], iteration, 0, hosts,
                                  Row(kR0.hosts, i, pairs));
      ASSERT_TRUE(s.ok()) << s.error_message();
    }
  }

  std::string Metrics() {
    absl::StatusOr<std::string> text = Scrape(metrics_);
    EXPECT_TRUE(text.ok()) << text.status();
    return text.value_or("");
  }
  double Value(const std::string& series) { return MetricValue(Metrics(), series).value_or(-1); }

  TempDir dir_;
  ControllerSetup setup_;
  SimSwitch switch_;
  std::unique_ptr<control::ControllerServer> server_;
  std::string metrics_;
  std::shared_ptr<grpc::Channel> channel_;
  std::unique_ptr<cv1::Controller::Stub> stub_;
  std::vector<std::unique_ptr<FakeWorker>> workers_;
};

constexpr char kCommitted[] = R"(mixnet_controller_rounds_total{outcome="committed"})";
constexpr char kAborted[] = R"(mixnet_controller_rounds_total{outcome="aborted"})";
constexpr char kReconfigure[] =
    R"(mixnet_controller_decide_total{outcome="reconfigure",region="r0"})";
constexpr char kKeep[] = R"(mixnet_controller_decide_total{outcome="keep",region="r0"})";
constexpr char kWorkers[] = R"(mixnet_controller_workers{region="r0"})";

TEST_F(ControllerMetricsTest, RoundsDecisionsPlannerAndWorkersMove) {
  Start();
  std::string m = Metrics();
  EXPECT_THAT(MetricValue(m, kWorkers), Optional(4.0));
  EXPECT_THAT(MetricValue(m, R"(mixnet_controller_workers{region=""})"), Optional(0.0));
  EXPECT_THAT(MetricValue(m, kCommitted), Optional(0.0));
  EXPECT_THAT(MetricValue(m, "mixnet_controller_planner_seconds_count"), Optional(0.0));
  EXPECT_THAT(MetricValue(m, "mixnet_controller_epoch"), Optional(1.0));  // fresh state
  EXPECT_THAT(MetricValue(m, "mixnet_controller_fenced"), Optional(0.0));

  // One matrix (4 rows) -> one planning pass, Decide: reconfigure -> one round.
  Report(0, {{0, 1}, {2, 3}});
  ASSERT_TRUE(WaitUntil([&] { return Value("mixnet_controller_round_seconds_count") == 1; }))
      << Metrics();
  m = Metrics();
  EXPECT_THAT(MetricValue(m, kCommitted), Optional(1.0));
  EXPECT_THAT(MetricValue(m, kAborted), Optional(0.0));
  EXPECT_THAT(MetricValue(m, "mixnet_controller_planner_seconds_count"), Optional(1.0));
  // The round's phases, one observation each.
  for (const char* phase : {"decide", "persist", "prepare", "apply", "settle", "commit"}) {
    EXPECT_THAT(
        MetricValue(m, absl::StrCat(R"(mixnet_controller_round_phase_seconds_count{phase=")", phase,
                                    R"("})")),
        Optional(1.0))
        << phase;
  }
  EXPECT_GT(MetricValue(m, "mixnet_controller_planner_seconds_sum").value_or(0), 0);
  EXPECT_THAT(MetricValue(m, kReconfigure), Optional(1.0));
  EXPECT_THAT(MetricValue(m, kKeep), Optional(0.0));
  EXPECT_THAT(MetricValue(m, "mixnet_controller_epoch"), Optional(2.0));
  EXPECT_THAT(MetricValue(m, "mixnet_controller_committed_epoch"), Optional(2.0));
  // The model's times are GetStatus' (ms there, s here); with the two heavy
  // pairs on circuits the predicted all-to-all is faster than on EPS alone.
  const cv1::ControllerStatus st = Status(*stub_);
  ASSERT_EQ(st.regions_size(), 1);
  ASSERT_GT(st.regions(0).last_predicted_ms(), 0);
  const double predicted =
      MetricValue(m, R"(mixnet_controller_predicted_completion_seconds{region="r0"})").value_or(-1);
  const double current =
      MetricValue(m, R"(mixnet_controller_current_completion_seconds{region="r0"})").value_or(-1);
  EXPECT_NEAR(predicted, st.regions(0).last_predicted_ms() / 1e3, 1e-9);
  EXPECT_NEAR(current, st.regions(0).last_current_ms() / 1e3, 1e-9);
  EXPECT_LT(predicted, current);

  // The same pattern again: the circuits are in, no gain, Decide keeps them.
  Report(1, {{0, 1}, {2, 3}});
  ASSERT_TRUE(WaitUntil([&] { return Value(kKeep) == 1; })) << Metrics();
  m = Metrics();
  EXPECT_THAT(MetricValue(m, "mixnet_controller_planner_seconds_count"), Optional(2.0));
  EXPECT_THAT(MetricValue(m, kCommitted), Optional(1.0));
  EXPECT_THAT(MetricValue(m, kReconfigure), Optional(1.0));
  EXPECT_THAT(MetricValue(m, "mixnet_controller_epoch"), Optional(2.0));  // no epoch for a keep

  // A worker leaves (its watch stream ends): 3 registered.
  workers_.back()->StopWatch();
  EXPECT_TRUE(WaitUntil([&] { return Value(kWorkers) == 3; })) << Metrics();
}

TEST_F(ControllerMetricsTest, AbortedRoundIsCounted) {
  Start(absl::Milliseconds(300));
  workers_.back()->set_auto_ack(false);  // never PREPARED: the round aborts at the deadline
  Report(0, {{0, 1}, {2, 3}});
  ASSERT_TRUE(WaitUntil([&] { return Value(kAborted) == 1; })) << Metrics();
  const std::string m = Metrics();
  EXPECT_THAT(MetricValue(m, kCommitted), Optional(0.0));
  EXPECT_THAT(MetricValue(m, "mixnet_controller_round_seconds_count"), Optional(0.0));
  EXPECT_THAT(MetricValue(m, R"(mixnet_controller_round_phase_seconds_count{phase="prepare"})"),
              Optional(0.0));
  EXPECT_THAT(MetricValue(m, "mixnet_controller_epoch"), Optional(2.0));  // spent
  EXPECT_THAT(MetricValue(m, "mixnet_controller_committed_epoch"), Optional(1.0));
}

// The observed completion of a matrix is its slowest worker's measured
// all-to-all call (TrafficReport.observed_ms); an unmeasured row (0) does not
// lower it, a matrix without measured rows leaves it, the next measured
// matrix replaces it.
TEST_F(ControllerMetricsTest, ObservedCompletionIsTheSlowestWorkersCall) {
  Start();
  constexpr char kObserved[] = R"(mixnet_controller_observed_completion_seconds{region="r0"})";
  EXPECT_THAT(MetricValue(Metrics(), kObserved), Optional(0.0));
  std::vector<std::string> hosts;
  for (int i = 0; i < kR0.hosts; ++i) hosts.push_back(absl::StrCat(kR0.prefix, i));
  const Pairs pairs = {{0, 1}, {2, 3}};
  auto report = [&](int64_t iteration, const std::vector<double>& observed_ms) {
    for (int i = 0; i < kR0.hosts; ++i) {
      grpc::Status s = SendReport(*stub_, hosts[i] + "/w", hosts[i], iteration, 0, hosts,
                                  Row(kR0.hosts, i, pairs), cv1::DISPATCH, observed_ms[i]);
      ASSERT_TRUE(s.ok()) << s.error_message();
    }
  };
  auto observed_ms = [&] {
    const cv1::ControllerStatus st = Status(*stub_);
    return st.regions_size() == 1 ? st.regions(0).last_observed_ms() : -1;
  };
  EXPECT_EQ(observed_ms(), 0);

  // Three workers measured 3, 7 and 5 ms, the fourth did not (0): 7 ms.
  report(0, {3, 7, 5, 0});
  ASSERT_TRUE(WaitUntil([&] { return observed_ms() == 7; })) << observed_ms();
  EXPECT_THAT(MetricValue(Metrics(), kObserved), Optional(0.007));

  // A matrix with no measured row leaves the latest observation.
  report(1, {0, 0, 0, 0});
  ASSERT_TRUE(WaitUntil([&] { return Value("mixnet_controller_planner_seconds_count") == 2; }))
      << Metrics();
  EXPECT_EQ(observed_ms(), 7);
  EXPECT_THAT(MetricValue(Metrics(), kObserved), Optional(0.007));

  // The next measured matrix replaces it (the latest, not the largest).
  report(2, {2, 1.5, 2, 2});
  ASSERT_TRUE(WaitUntil([&] { return observed_ms() == 2; })) << observed_ms();
  EXPECT_THAT(MetricValue(Metrics(), kObserved), Optional(0.002));

  // A negative or non-finite time is refused, naming the field.
  grpc::Status s = SendReport(*stub_, hosts[0] + "/w", hosts[0], 3, 0, hosts,
                              Row(kR0.hosts, 0, pairs), cv1::DISPATCH, -1);
  EXPECT_EQ(s.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_THAT(s.error_message(), HasSubstr("observed_ms is -1"));
}

TEST_F(ControllerMetricsTest, NothingListensWithoutTheFlag) {
  Start();
  EXPECT_FALSE(metrics_.empty());
  setup_.metrics_listen.clear();
  setup_.state_dir = dir_.path() + "/ctl2";
  setup_.listen = "unix:" + dir_.path() + "/ctl2.sock";
  auto plain = StartController(setup_);
  ASSERT_TRUE(plain.ok()) << plain.status();
  EXPECT_EQ((*plain)->metrics_address(), "");
  (*plain)->Shutdown(absl::Seconds(1));
}

// The binary: a refused address fails before the spec, switches or state
// dir are touched; an accepted one is served and logged.
TEST(ControllerMetricsBinaryTest, RefusesRemoteWithoutFlagAndServesLoopback) {
  TempDir dir;
  const std::string spec_file = dir.path() + "/spec.yaml";
  std::ofstream(spec_file) << MakeSpecYaml({kR0}, {"ocs0"});
  DaemonProcess::Options o;
  o.binary = MIXNET_CONTROLLER_BIN;
  o.state_dir = dir.path() + "/ctl";
  auto refused = DaemonProcess::Start(
      {"--spec", spec_file, "--listen", "127.0.0.1:0", "--ocs",
       "ocs0=unix:" + dir.path() + "/nothing.sock", "--metrics-listen", "0.0.0.0:0"},
      o);
  ASSERT_FALSE(refused.ok());
  EXPECT_THAT(std::string(refused.status().message()),
              HasSubstr("refusing --metrics-listen 0.0.0.0:0: not a loopback address"));
  EXPECT_FALSE(std::ifstream(o.state_dir + "/controller_epoch.json").good());

  absl::StatusOr<SimSwitch> sw = StartSimSwitch(dir.path(), "ocs0");
  ASSERT_TRUE(sw.ok()) << sw.status();
  auto served = DaemonProcess::Start({"--spec", spec_file, "--listen", "127.0.0.1:0", "--ocs",
                                      "ocs0=" + sw->address, "--metrics-listen", "127.0.0.1:0"},
                                     o);
  ASSERT_TRUE(served.ok()) << served.status();
  std::smatch match;
  const std::string log = (*served)->Log();
  ASSERT_TRUE(
      std::regex_search(log, match, std::regex(R"(metrics on http://(127\.0\.0\.1:\d+)/metrics)")))
      << log;
  absl::StatusOr<std::string> text = Scrape(match[1]);
  ASSERT_TRUE(text.ok()) << text.status();
  EXPECT_THAT(MetricValue(*text, kWorkers), Optional(0.0));
  EXPECT_THAT(MetricValue(*text, "mixnet_controller_epoch"), Optional(1.0));
  EXPECT_TRUE((*served)->Stop().ok());
}

}  // namespace
}  // namespace mixnet::testing
