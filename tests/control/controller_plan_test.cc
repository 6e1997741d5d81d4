// Plan requests (label cpu): reports that ask the controller to decide on a
// topology for a named coming all-to-all (mixnet.control.v1.PlanRequest),
// answered by one DECISION event per request before the round's PREPARE.
//   - THIS_MATRIX (the backward pass: the exact demand) switches to the
//     matrix's plan; DECISION carries the round's epoch and the fluid
//     model's estimates;
//   - PREDICTED without history is declined ("no forecast");
//   - PREDICTED from the previous iteration's forward matrix of that layer,
//     when those circuits are installed already, is declined without a round;
//   - backward rows do not feed the predictor;
//   - PlanTracker (the worker side) waits for the decision and the round's end;
//   - a v2 controller sends the planned demand with COMMIT and DECISION(keep);
//   - a combine's own plan (PlanKey.combine) comes from its dispatch's
//     observed row, switches when that beats the installed circuits, and is
//     answered under its own key;
//   - a request's window (the compute before its all-to-all) comes off a
//     round's cost; a negative or infinite one is refused.
// The test thread plus one watch reader thread per fake worker.
#include <limits>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "runtime/control/plan_tracker.h"
#include "tests/control/controller_test_util.h"

namespace mixnet::testing {
namespace {

using ::testing::HasSubstr;

const RegionDef kR0{"r0", "h", 4, "ocs0", 1};

class ControllerPlanTest : public ::testing::Test {
 protected:
  void SetUp() override {
    ASSERT_FALSE(dir_.path().empty());
    absl::StatusOr<SimSwitch> sw = StartSimSwitch(dir_.path(), "ocs0");
    ASSERT_TRUE(sw.ok()) << sw.status();
    setup_.switches["ocs0"] = sw->address;
    switch_ = std::move(*sw);
    setup_.spec_yaml = MakeSpecYaml({kR0}, {"ocs0"}, 16, SwitchMs());
    setup_.state_dir = dir_.path() + "/ctl";
    setup_.listen = "unix:" + dir_.path() + "/ctl.sock";
    setup_.router = Router();
    setup_.relay = Relay();
    auto server = StartController(setup_);
    ASSERT_TRUE(server.ok()) << server.status();
    server_ = std::move(*server);
    channel_ = Connect(server_->address());
    stub_ = cv1::Controller::NewStub(channel_);
    for (int i = 0; i < kR0.hosts; ++i) {
      const std::string host = absl::StrCat("h", i);
      hosts_.push_back(host);
      auto w = std::make_unique<FakeWorker>(channel_, host + "/w", host);
      grpc::Status s = w->Register();
      ASSERT_TRUE(s.ok()) << s.error_message();
      w->StartWatch();
      std::optional<cv1::TopologyEvent> snap = w->Next();
      ASSERT_TRUE(snap.has_value());
      ASSERT_EQ(snap->kind(), cv1::TopologyEvent::SNAPSHOT);
      workers_.push_back(std::move(w));
    }
  }
  virtual std::string Router() const { return "v1"; }
  virtual bool Relay() const { return false; }
  virtual double SwitchMs() const { return 1; }  // the spec's switch_ms
  void TearDown() override {
    workers_.clear();
    if (server_) server_->Shutdown(absl::Seconds(1));
  }

  // Every worker reports its row of `pairs` for (iteration, layer, pass),
  // with the plan request `plan` when given.
  void Report(int64_t iteration, int layer, cv1::Pass pass, const Pairs& pairs,
              const std::optional<cv1::PlanRequest>& plan, double heavy = 1e8) {
    for (int i = 0; i < kR0.hosts; ++i) {
      grpc::ClientContext ctx;
      ctx.set_deadline(absl::ToChronoTime(absl::Now() + absl::Seconds(5)));
      cv1::ReportTrafficResponse resp;
      auto writer = stub_->ReportTraffic(&ctx, &resp);
      cv1::TrafficReport r;
      r.set_worker_id(hosts_[i] + "/w");
      r.set_host(hosts_[i]);
      r.set_iteration(iteration);
      r.set_layer(layer);
      r.set_direction(cv1::DISPATCH);
      r.set_pass(pass);
      for (const std::string& h : hosts_) r.add_peer_hosts(h);
      for (double b : Row(kR0.hosts, i, pairs, heavy)) r.add_bytes(b);
      if (plan) *r.mutable_plan() = *plan;
      writer->Write(r);
      writer->WritesDone();
      grpc::Status s = writer->Finish();
      ASSERT_TRUE(s.ok()) << s.error_message();
    }
  }

  static cv1::PlanRequest Plan(int64_t iteration, int layer, cv1::Pass pass,
                               cv1::PlanRequest::Source source, bool combine = false) {
    cv1::PlanRequest p;
    p.mutable_target()->set_iteration(iteration);
    p.mutable_target()->set_layer(layer);
    p.mutable_target()->set_pass(pass);
    p.mutable_target()->set_combine(combine);
    p.set_source(source);
    return p;
  }

  // Worker h0's dispatch row of 1-byte flows, for requests the controller
  // checks before storing them.
  cv1::TrafficReport H0DispatchRow() const {
    cv1::TrafficReport r;
    r.set_worker_id("h0/w");
    r.set_host("h0");
    r.set_direction(cv1::DISPATCH);
    for (const std::string& h : hosts_) r.add_peer_hosts(h);
    for (int i = 0; i < kR0.hosts; ++i) r.add_bytes(1);
    return r;
  }

  // One report from worker h0 (the controller checks it before storing it).
  grpc::Status ReportOne(const cv1::TrafficReport& report) {
    grpc::ClientContext ctx;
    ctx.set_deadline(absl::ToChronoTime(absl::Now() + absl::Seconds(5)));
    cv1::ReportTrafficResponse resp;
    auto writer = stub_->ReportTraffic(&ctx, &resp);
    writer->Write(report);
    writer->WritesDone();
    return writer->Finish();
  }

  // Every worker's next event is `kind` at `epoch`; returns worker 0's.
  cv1::TopologyEvent ExpectAll(cv1::TopologyEvent::Kind kind, uint64_t epoch) {
    cv1::TopologyEvent first;
    for (size_t i = 0; i < workers_.size(); ++i) {
      std::optional<cv1::TopologyEvent> ev = workers_[i]->Next();
      EXPECT_TRUE(ev.has_value()) << hosts_[i] << ": no event";
      if (!ev) continue;
      EXPECT_EQ(ev->kind(), kind) << hosts_[i] << ": " << ev->DebugString();
      EXPECT_EQ(ev->topology().epoch(), epoch) << hosts_[i];
      if (i == 0) first = *ev;
    }
    return first;
  }

  TempDir dir_;
  ControllerSetup setup_;
  SimSwitch switch_;
  std::unique_ptr<control::ControllerServer> server_;
  std::shared_ptr<grpc::Channel> channel_;
  std::unique_ptr<cv1::Controller::Stub> stub_;
  std::vector<std::string> hosts_;
  std::vector<std::unique_ptr<FakeWorker>> workers_;
};

TEST_F(ControllerPlanTest, ExactRequestIsDecidedThenSwitched) {
  // Hosts 0-1 and 2-3 exchange 1e8 bytes, every other pair 1e5: one circuit
  // per heavy pair (ports 1-2, 3-4), epoch 2 (the fresh controller is at 1).
  Report(0, 1, cv1::BACKWARD, {{0, 1}, {2, 3}},
         Plan(0, 1, cv1::BACKWARD, cv1::PlanRequest::THIS_MATRIX));
  cv1::TopologyEvent d = ExpectAll(cv1::TopologyEvent::DECISION, 2);
  EXPECT_TRUE(d.reconfigure());
  EXPECT_EQ(d.plan().iteration(), 0);
  EXPECT_EQ(d.plan().layer(), 1);
  EXPECT_EQ(d.plan().pass(), cv1::BACKWARD);
  // With no circuits each heavy 1e8-byte flow crosses a 0.1 Gbit/s EPS NIC:
  // at least 1e8 * 8 / 0.1e9 = 8 s. On a 100 Gbit/s circuit it takes 8 ms plus
  // the light flows over EPS (two per host, 2e5 * 8 / 0.1e9 = 16 ms at most).
  EXPECT_GE(d.current_ms(), 8000);
  EXPECT_LT(d.predicted_ms(), 100);
  EXPECT_GT(d.predicted_ms(), 0);
  cv1::TopologyEvent prep = ExpectAll(cv1::TopologyEvent::PREPARE, 2);
  EXPECT_EQ(CircuitPairs(prep.topology()), (Pairs{{1, 2}, {3, 4}}));
  ExpectAll(cv1::TopologyEvent::COMMIT, 2);
  auto sw = ReadSwitch(switch_.address);
  ASSERT_TRUE(sw.ok()) << sw.status();
  EXPECT_EQ(sw->first, (Pairs{{1, 2}, {3, 4}}));
}

TEST_F(ControllerPlanTest, PredictedWithoutHistoryIsDeclined) {
  Report(0, 0, cv1::FORWARD, {{0, 1}, {2, 3}},
         Plan(0, 1, cv1::FORWARD, cv1::PlanRequest::PREDICTED));
  cv1::TopologyEvent d = ExpectAll(cv1::TopologyEvent::DECISION, 0);
  EXPECT_FALSE(d.reconfigure());
  EXPECT_THAT(d.reason(), HasSubstr("no forecast for layer 1"));
  absl::SleepFor(absl::Milliseconds(200));
  for (auto& w : workers_) EXPECT_EQ(w->queued(), 0u) << "no round expected";
  EXPECT_EQ(Status(*stub_).highest_epoch(), 1u);
}

TEST_F(ControllerPlanTest, PredictedFromTheLastIterationKeepsInstalledCircuits) {
  // Iteration 0, layer 1 forward: observed by the predictor, and its exact
  // backward plan installs circuits 1-2, 3-4.
  Report(0, 1, cv1::FORWARD, {{0, 1}, {2, 3}},
         Plan(0, 1, cv1::BACKWARD, cv1::PlanRequest::THIS_MATRIX));
  EXPECT_TRUE(ExpectAll(cv1::TopologyEvent::DECISION, 2).reconfigure());
  ExpectAll(cv1::TopologyEvent::PREPARE, 2);
  ExpectAll(cv1::TopologyEvent::COMMIT, 2);
  // Backward rows of another pattern must not reach the predictor.
  Report(0, 1, cv1::BACKWARD, {{0, 2}, {1, 3}}, std::nullopt);
  // Iteration 1, after layer 0: the forecast for layer 1 ("last") is the
  // forward pattern of iteration 0, which is installed: no round.
  Report(1, 0, cv1::FORWARD, {{0, 3}, {1, 2}},
         Plan(1, 1, cv1::FORWARD, cv1::PlanRequest::PREDICTED));
  cv1::TopologyEvent d = ExpectAll(cv1::TopologyEvent::DECISION, 0);
  EXPECT_FALSE(d.reconfigure()) << d.DebugString();
  EXPECT_THAT(d.reason(), HasSubstr("gain 0.000 ms"));  // the same circuits: nothing to gain
  EXPECT_EQ(d.plan().iteration(), 1);
  absl::SleepFor(absl::Milliseconds(200));
  for (auto& w : workers_) EXPECT_EQ(w->queued(), 0u) << "no round expected";
}

TEST_F(ControllerPlanTest, PlanRequestWithoutSourceIsRejected) {
  grpc::ClientContext ctx;
  ctx.set_deadline(absl::ToChronoTime(absl::Now() + absl::Seconds(5)));
  cv1::ReportTrafficResponse resp;
  auto writer = stub_->ReportTraffic(&ctx, &resp);
  cv1::TrafficReport r;
  r.set_worker_id("h0/w");
  r.set_host("h0");
  r.set_direction(cv1::DISPATCH);
  r.mutable_plan()->mutable_target()->set_layer(1);
  writer->Write(r);
  writer->WritesDone();
  grpc::Status s = writer->Finish();
  EXPECT_EQ(s.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_THAT(s.error_message(), HasSubstr("without a source"));
}

// A request's window (PlanRequest.window_ms: the compute its workers run
// before the all-to-all it plans) is what Decide takes off a round's cost;
// a request without one is charged the controller's --overlap-ms (0 here).
class ControllerPlanSlowSwitchTest : public ControllerPlanTest {
 protected:
  double SwitchMs() const override { return 50; }
};

TEST_F(ControllerPlanSlowSwitchTest, ARequestsWindowHidesItsRound) {
  // Pairs 0-1 and 2-3 exchange 2e5 bytes, every other pair 1e5. With no
  // circuits each host sends 4e5 bytes through its 0.1 Gbit/s EPS NIC
  // (32 ms); with circuits 1-2, 3-4 it sends 2e5 (16 ms): the combine reuses
  // the topology, so the gain is 2 x 16 = 32 ms, against a 50 ms switch and
  // no protocol time yet (fewer than 3 rounds measured).
  const Pairs pairs = {{0, 1}, {2, 3}};
  Report(0, 1, cv1::BACKWARD, pairs, Plan(0, 1, cv1::BACKWARD, cv1::PlanRequest::THIS_MATRIX), 2e5);
  cv1::TopologyEvent d = ExpectAll(cv1::TopologyEvent::DECISION, 0);
  EXPECT_FALSE(d.reconfigure()) << d.DebugString();
  EXPECT_THAT(d.reason(), HasSubstr("gain 32.000 ms <= cost 50.000 ms (switching 50.000 + "
                                    "protocol 0.000 - overlap 0.000)"));
  // The same all-to-all with 40 ms of compute before it: the round costs 10.
  cv1::PlanRequest windowed = Plan(1, 1, cv1::BACKWARD, cv1::PlanRequest::THIS_MATRIX);
  windowed.set_window_ms(40);
  Report(1, 1, cv1::BACKWARD, pairs, windowed, 2e5);
  d = ExpectAll(cv1::TopologyEvent::DECISION, 2);
  EXPECT_TRUE(d.reconfigure()) << d.DebugString();
  EXPECT_EQ(d.plan().iteration(), 1);
  cv1::TopologyEvent prep = ExpectAll(cv1::TopologyEvent::PREPARE, 2);
  EXPECT_EQ(CircuitPairs(prep.topology()), (Pairs{{1, 2}, {3, 4}}));
  ExpectAll(cv1::TopologyEvent::COMMIT, 2);
}

TEST_F(ControllerPlanTest, NegativeOrInfiniteWindowIsRejected) {
  cv1::TrafficReport r = H0DispatchRow();
  for (double w :
       {-1.0, std::numeric_limits<double>::infinity(), std::numeric_limits<double>::quiet_NaN()}) {
    *r.mutable_plan() = Plan(0, 1, cv1::BACKWARD, cv1::PlanRequest::THIS_MATRIX);
    r.mutable_plan()->set_window_ms(w);
    grpc::Status s = ReportOne(r);
    EXPECT_EQ(s.error_code(), grpc::StatusCode::INVALID_ARGUMENT) << w;
    EXPECT_THAT(s.error_message(), HasSubstr("window_ms")) << w;
  }
  r.mutable_plan()->set_window_ms(40);
  EXPECT_TRUE(ReportOne(r).ok());
}

// A plan for a combine alone comes from its dispatch's observed row, never
// from a forecast or a combine-shaped row.
TEST_F(ControllerPlanTest, CombinePlanNeedsItsDispatchRow) {
  cv1::TrafficReport r = H0DispatchRow();
  *r.mutable_plan() = Plan(0, 0, cv1::FORWARD, cv1::PlanRequest::PREDICTED, true);
  grpc::Status s = ReportOne(r);
  EXPECT_EQ(s.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_THAT(s.error_message(), HasSubstr("forward combine (predicted) alone must come"));
  *r.mutable_plan() = Plan(0, 0, cv1::FORWARD, cv1::PlanRequest::THIS_MATRIX, true);
  r.set_direction(cv1::COMBINE);
  s = ReportOne(r);
  EXPECT_EQ(s.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_THAT(s.error_message(), HasSubstr("direction DISPATCH"));
  r.set_direction(cv1::DISPATCH);
  EXPECT_TRUE(ReportOne(r).ok());
}

// A v1 controller sends no routing; GetStatus names the router and the
// latest decision's model times.
TEST_F(ControllerPlanTest, V1SendsNoRouting) {
  Report(0, 1, cv1::BACKWARD, {{0, 1}, {2, 3}},
         Plan(0, 1, cv1::BACKWARD, cv1::PlanRequest::THIS_MATRIX));
  cv1::TopologyEvent d = ExpectAll(cv1::TopologyEvent::DECISION, 2);
  ExpectAll(cv1::TopologyEvent::PREPARE, 2);
  cv1::TopologyEvent c = ExpectAll(cv1::TopologyEvent::COMMIT, 2);
  EXPECT_FALSE(c.has_routing());
  EXPECT_DOUBLE_EQ(c.predicted_ms(), d.predicted_ms());
  cv1::ControllerStatus st = Status(*stub_);
  EXPECT_EQ(st.router(), "v1");
  ASSERT_EQ(st.regions_size(), 1);
  EXPECT_DOUBLE_EQ(st.regions(0).last_predicted_ms(), d.predicted_ms());
  EXPECT_DOUBLE_EQ(st.regions(0).last_current_ms(), d.current_ms());
}

class ControllerPlanV2Test : public ControllerPlanTest {
 protected:
  std::string Router() const override { return "v2"; }
  // The routing's matrix must be the reported rows (Row() of `pairs`).
  void ExpectRouting(const cv1::TopologyEvent& ev, const Pairs& pairs) {
    ASSERT_TRUE(ev.has_routing()) << ev.DebugString();
    EXPECT_EQ(ev.routing().version(), 2u);
    EXPECT_EQ(ev.routing().relay(), Relay());
    ASSERT_EQ(ev.routing().hosts_size(), kR0.hosts);
    ASSERT_EQ(ev.routing().bytes_size(), kR0.hosts * kR0.hosts);
    for (int i = 0; i < kR0.hosts; ++i) {
      EXPECT_EQ(ev.routing().hosts(i), hosts_[i]);
      const std::vector<double> row = Row(kR0.hosts, i, pairs);
      for (int j = 0; j < kR0.hosts; ++j) {
        EXPECT_DOUBLE_EQ(ev.routing().bytes(i * kR0.hosts + j), row[j]) << i << "->" << j;
      }
    }
  }
};

// COMMIT carries the demand the plan was made for; a DECISION that keeps the
// installed topology carries the new demand (weights for that topology); a
// DECISION that switches carries none (its COMMIT will).
TEST_F(ControllerPlanV2Test, CommitAndKeepCarryTheDemand) {
  Report(0, 1, cv1::FORWARD, {{0, 1}, {2, 3}},
         Plan(0, 1, cv1::BACKWARD, cv1::PlanRequest::THIS_MATRIX));
  cv1::TopologyEvent d = ExpectAll(cv1::TopologyEvent::DECISION, 2);
  EXPECT_TRUE(d.reconfigure());
  EXPECT_FALSE(d.has_routing());
  ExpectAll(cv1::TopologyEvent::PREPARE, 2);
  cv1::TopologyEvent c = ExpectAll(cv1::TopologyEvent::COMMIT, 2);
  ExpectRouting(c, {{0, 1}, {2, 3}});
  EXPECT_GT(c.predicted_ms(), 0);
  // Iteration 1's forecast for layer 1 is iteration 0's matrix: installed
  // already, so DECISION(keep) with that demand.
  Report(1, 0, cv1::FORWARD, {{0, 3}, {1, 2}},
         Plan(1, 1, cv1::FORWARD, cv1::PlanRequest::PREDICTED));
  cv1::TopologyEvent keep = ExpectAll(cv1::TopologyEvent::DECISION, 0);
  EXPECT_FALSE(keep.reconfigure()) << keep.DebugString();
  ExpectRouting(keep, {{0, 1}, {2, 3}});
  EXPECT_EQ(Status(*stub_).router(), "v2");
}

// A forward dispatch ran on a forecast that missed: the combine's own plan,
// from the dispatch's observed matrix, switches to that matrix's circuits
// and routes by it; when the forecast held, the answer keeps the circuits and
// still carries the observed demand. Each answer is keyed as the combine's.
TEST_F(ControllerPlanV2Test, CombineIsReplannedFromItsDispatch) {
  // Iteration 0, layer 1: pairs 0-1 and 2-3, installed by the backward
  // pass's exact plan (ports 1-2, 3-4; epoch 2).
  Report(0, 1, cv1::FORWARD, {{0, 1}, {2, 3}},
         Plan(0, 1, cv1::BACKWARD, cv1::PlanRequest::THIS_MATRIX));
  EXPECT_TRUE(ExpectAll(cv1::TopologyEvent::DECISION, 2).reconfigure());
  ExpectAll(cv1::TopologyEvent::PREPARE, 2);
  ExpectAll(cv1::TopologyEvent::COMMIT, 2);
  // Iteration 1, layer 1's dispatch carried 0-2 and 1-3 instead (the
  // forecast, iteration 0's matrix, missed). On circuits 1-2, 3-4 each 1e8
  // byte flow crosses a 0.1 Gbit/s EPS NIC (8 s); on its own circuit 8 ms:
  // the combine's plan switches to ports 1-3, 2-4 (epoch 3).
  Report(1, 1, cv1::FORWARD, {{0, 2}, {1, 3}},
         Plan(1, 1, cv1::FORWARD, cv1::PlanRequest::THIS_MATRIX, true));
  cv1::TopologyEvent d = ExpectAll(cv1::TopologyEvent::DECISION, 3);
  EXPECT_TRUE(d.reconfigure()) << d.DebugString();
  EXPECT_EQ(d.plan().iteration(), 1);
  EXPECT_EQ(d.plan().layer(), 1);
  EXPECT_EQ(d.plan().pass(), cv1::FORWARD);
  EXPECT_TRUE(d.plan().combine());
  EXPECT_EQ(d.direction(), cv1::COMBINE);
  EXPECT_GE(d.current_ms(), 8000);
  EXPECT_LT(d.predicted_ms(), 100);
  cv1::TopologyEvent prep = ExpectAll(cv1::TopologyEvent::PREPARE, 3);
  EXPECT_EQ(CircuitPairs(prep.topology()), (Pairs{{1, 3}, {2, 4}}));
  ExpectRouting(ExpectAll(cv1::TopologyEvent::COMMIT, 3), {{0, 2}, {1, 3}});
  // Iteration 2, layer 1's dispatch carried 0-2 and 1-3 again: installed,
  // so the combine's answer keeps them, with the observed demand.
  Report(2, 1, cv1::FORWARD, {{0, 2}, {1, 3}},
         Plan(2, 1, cv1::FORWARD, cv1::PlanRequest::THIS_MATRIX, true));
  cv1::TopologyEvent keep = ExpectAll(cv1::TopologyEvent::DECISION, 0);
  EXPECT_FALSE(keep.reconfigure()) << keep.DebugString();
  EXPECT_TRUE(keep.plan().combine());
  EXPECT_EQ(keep.plan().iteration(), 2);
  ExpectRouting(keep, {{0, 2}, {1, 3}});
  absl::SleepFor(absl::Milliseconds(200));
  for (auto& w : workers_) EXPECT_EQ(w->queued(), 0u) << "no round expected";
}

// A controller with --relay on says so in the routing it sends.
class ControllerPlanRelayTest : public ControllerPlanV2Test {
 protected:
  bool Relay() const override { return true; }
};

TEST_F(ControllerPlanRelayTest, CommitSaysPlansMayRelay) {
  Report(0, 1, cv1::FORWARD, {{0, 1}, {2, 3}},
         Plan(0, 1, cv1::BACKWARD, cv1::PlanRequest::THIS_MATRIX));
  EXPECT_TRUE(ExpectAll(cv1::TopologyEvent::DECISION, 2).reconfigure());
  ExpectAll(cv1::TopologyEvent::PREPARE, 2);
  ExpectRouting(ExpectAll(cv1::TopologyEvent::COMMIT, 2), {{0, 1}, {2, 3}});
}

using control::PlanOutcome;
using control::PlanTarget;
using control::PlanTracker;

TEST(PlanTrackerTest, WaitsForTheDecisionAndTheRoundEnd) {
  PlanTracker t;
  const PlanTarget k{.iteration = 3, .layer = 1, .pass = control::kBackwardPass, .exact = true};
  // Nothing yet: times out, says so.
  PlanOutcome o = t.Await(k, absl::Milliseconds(20));
  EXPECT_TRUE(o.timed_out);
  EXPECT_FALSE(o.decided);
  EXPECT_THAT(o.reason, HasSubstr("no DECISION"));
  // A decision to switch at epoch 7: waits for the round.
  t.OnDecision(k, true, 7, "", 1.5, 9.0);
  o = t.Await(k, absl::Milliseconds(20));
  EXPECT_TRUE(o.timed_out);
  EXPECT_TRUE(o.decided);
  EXPECT_THAT(o.reason, HasSubstr("not ended"));
  std::thread ender([&] {
    absl::SleepFor(absl::Milliseconds(50));
    t.OnRoundEnd(7, true);
  });
  o = t.Await(k, absl::Seconds(5));
  ender.join();
  EXPECT_FALSE(o.timed_out);
  EXPECT_TRUE(o.committed);
  EXPECT_EQ(o.epoch, 7u);
  EXPECT_GE(o.waited, absl::Milliseconds(40));
  EXPECT_DOUBLE_EQ(o.predicted_ms, 1.5);
  // The exact flag is not part of the identity.
  PlanTarget same = k;
  same.exact = false;
  EXPECT_TRUE(t.Await(same, absl::Milliseconds(1)).committed);
  // The combine's own plan is another identity: not decided yet.
  PlanTarget combine = k;
  combine.combine = true;
  o = t.Await(combine, absl::Milliseconds(1));
  EXPECT_TRUE(o.timed_out);
  EXPECT_FALSE(o.decided);
  EXPECT_THAT(o.reason, HasSubstr("backward combine (exact)"));
  // A decision to keep: done at once.
  const PlanTarget k2{.iteration = 4, .layer = 0};
  t.OnDecision(k2, false, 0, "gain too small", 2, 2);
  o = t.Await(k2, absl::Seconds(5));
  EXPECT_FALSE(o.timed_out);
  EXPECT_FALSE(o.reconfigure);
  EXPECT_EQ(o.reason, "gain too small");
}

TEST(PlanTrackerTest, AbortedAndMissedRoundsEnd) {
  PlanTracker t;
  const PlanTarget a{.iteration = 1, .layer = 0}, b{.iteration = 1, .layer = 1};
  t.OnDecision(a, true, 5, "", 0, 0);
  t.OnDecision(b, true, 6, "", 0, 0);
  t.OnRoundEnd(5, false);
  PlanOutcome o = t.Await(a, absl::Seconds(1));
  EXPECT_FALSE(o.timed_out);
  EXPECT_FALSE(o.committed);
  EXPECT_THAT(o.reason, HasSubstr("aborted"));
  // Epoch 6's end was never seen, but 8 ended: rounds end in order.
  t.OnRoundEnd(8, true);
  o = t.Await(b, absl::Seconds(1));
  EXPECT_FALSE(o.timed_out);
  EXPECT_FALSE(o.committed);
  EXPECT_THAT(o.reason, HasSubstr("not seen"));
}

TEST(PlanTrackerTest, KeepsABoundedHistory) {
  PlanTracker t(4);
  for (int l = 0; l < 10; ++l) t.OnDecision(PlanTarget{.layer = l}, false, 0, "", 0, 0);
  EXPECT_TRUE(t.Await(PlanTarget{.layer = 0}, absl::Milliseconds(1)).timed_out);  // evicted
  EXPECT_FALSE(t.Await(PlanTarget{.layer = 9}, absl::Milliseconds(1)).timed_out);
}

}  // namespace
}  // namespace mixnet::testing
