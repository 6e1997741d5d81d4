// mixnet-ocsd --backend polatis end to end: the daemon as a real process
// driving the fake SCPI Polatis switch of tests/ocs_driver/polatis over TCP.
// Checks the duplex mapping seen on the "hardware", that a start reads the
// switch and clears nothing, a hardware fault reported per circuit, and a
// connection dropped mid-apply. Label cpu. Test thread plus the fake's
// connection threads.
#include <algorithm>
#include <thread>

#include "absl/strings/match.h"
#include "absl/strings/str_join.h"
#include "absl/time/clock.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/ocs_driver/daemon_process.h"
#include "tests/ocs_driver/polatis/fake_polatis.h"
#include "tests/ocs_driver/service/ocsd_test_util.h"

namespace mixnet::testing {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::IsEmpty;
using ::testing::Pair;
using ::testing::UnorderedElementsAre;

class OcsdPolatisTest : public ::testing::Test {
 public:
  void SetUp() override { ASSERT_TRUE(fake_.Start().ok()); }

  // `pacing_ms` < 0: the daemon's default pacing.
  std::unique_ptr<DaemonProcess> Start(const std::string& state_dir, int pacing_ms = 0) {
    return StartOn(fake_, state_dir, pacing_ms);
  }
  static std::unique_ptr<DaemonProcess> StartOn(ocs::testing::FakePolatis& fake,
                                                const std::string& state_dir, int pacing_ms) {
    std::vector<std::string> args = {
        "--backend",    "polatis", "--device", absl::StrCat("127.0.0.1:", fake.port()),
        "--timeout-ms", "2000",    "--listen", "127.0.0.1:0"};
    if (pacing_ms >= 0) args.insert(args.end(), {"--pacing-ms", std::to_string(pacing_ms)});
    auto d = DaemonProcess::Start(args, {.state_dir = state_dir});
    EXPECT_TRUE(d.ok()) << d.status();
    return d.ok() ? std::move(*d) : nullptr;
  }

  // Every ADD result is done exactly when `actual` holds its circuit.
  static void ExpectResultsAgreeWithActual(const v1::ApplyCrossConnectsResponse& r) {
    const Pairs actual = PairsOf(r.actual());
    for (const auto& res : r.results()) {
      const std::pair<int, int> c(res.circuit().port_a(), res.circuit().port_b());
      const bool held = std::find(actual.begin(), actual.end(), c) != actual.end();
      const bool done = res.code() == 0;
      EXPECT_EQ(done, res.op() == v1::CircuitResult::ADD ? held : !held)
          << c.first << "-" << c.second << " code " << res.code() << " " << res.message();
    }
  }

  // Commands the fake received that change connections.
  int Changes() const {
    int n = 0;
    for (const auto& r : fake_.received()) {
      const std::string l = absl::AsciiStrToLower(r.line);
      if (absl::StrContains(l, "conn:add") || absl::StrContains(l, "conn:sub") ||
          absl::StrContains(l, "conn:only") || absl::StrContains(l, "disc")) {
        ++n;
      }
    }
    return n;
  }

  ocs::testing::FakePolatis fake_;  // 16 x 16: egress of duplex port p is 16 + p
};

TEST_F(OcsdPolatisTest, DrivesTheSwitchAndNeverClearsAtStart) {
  fake_.SetConnection(5, 22);  // an existing duplex circuit 5-6
  fake_.SetConnection(6, 21);
  TempDir state;
  auto d = Start(state.path());
  ASSERT_NE(d, nullptr);
  auto stub = StubFor(d->address());
  v1::GetInfoResponse info = Info(*stub);
  EXPECT_EQ(info.backend(), "polatis");
  EXPECT_EQ(info.port_count(), 16u);
  EXPECT_THAT(PairsOf(Get(*stub).actual()), ElementsAre(Pair(5, 6)));
  EXPECT_EQ(Changes(), 0) << "start must not touch the connections";

  ApplyOutcome r = Apply(*stub, Req(1, 1, {{1, 2}, {5, 6}}));
  ASSERT_TRUE(r.status.ok()) << r.status.error_message();
  EXPECT_THAT(PairsOf(r.response.actual()), ElementsAre(Pair(1, 2), Pair(5, 6)));
  EXPECT_THAT(fake_.Connections(),
              UnorderedElementsAre(Pair(1, 18), Pair(2, 17), Pair(5, 22), Pair(6, 21)));

  // A port that fails to switch: the RPC fails, the details say which circuit.
  fake_.FailPort(9);
  r = Apply(*stub, Req(1, 2, {{3, 4}, {9, 10}}));
  EXPECT_FALSE(r.status.ok());
  ASSERT_TRUE(r.has_details) << r.status.error_message();
  int failed = 0;
  for (const auto& res : r.response.results()) {
    if (res.code() != 0) {
      ++failed;
      EXPECT_EQ(res.circuit().port_a(), 9u);
    }
  }
  EXPECT_EQ(failed, 1);
  EXPECT_THAT(PairsOf(r.response.actual()), ElementsAre(Pair(3, 4)));

  // Restart: state and circuits come back; nothing is changed at start.
  ASSERT_TRUE(d->Stop().ok());
  const int changes = Changes();
  d = Start(state.path());
  ASSERT_NE(d, nullptr);
  stub = StubFor(d->address());
  v1::GetCrossConnectsResponse g = Get(*stub);
  EXPECT_THAT(PairsOf(g.actual()), ElementsAre(Pair(3, 4)));
  EXPECT_THAT(PairsOf(g.desired()), ElementsAre(Pair(3, 4), Pair(9, 10)));
  EXPECT_EQ(g.config_version(), 2u);
  EXPECT_EQ(Changes(), changes);
}

TEST_F(OcsdPolatisTest, DroppedConnectionMidApplyIsReportedAndRecovered) {
  auto d = Start("");
  ASSERT_NE(d, nullptr);
  auto stub = StubFor(d->address());
  fake_.DropAfterCommands(2);  // after the read and the first change
  ApplyOutcome r = Apply(*stub, Req(1, 1, {{1, 2}, {3, 4}}));
  EXPECT_FALSE(r.status.ok());
  EXPECT_TRUE(r.status.error_code() == grpc::StatusCode::UNAVAILABLE ||
              r.status.error_code() == grpc::StatusCode::DEADLINE_EXCEEDED)
      << r.status.error_code() << " " << r.status.error_message();
  fake_.DropAfterCommands(0);
  // The daemon reconnects; a retry of the same version completes the change.
  r = Apply(*stub, Req(1, 1, {{1, 2}, {3, 4}}));
  ASSERT_TRUE(r.status.ok()) << r.status.error_message();
  EXPECT_THAT(PairsOf(Get(*stub).actual()), ElementsAre(Pair(1, 2), Pair(3, 4)));
}

// A port that fails to switch leaves half of a duplex circuit (a one-way
// connection). Once the port works, the same request must go through: the
// daemon clears the leftover on the ports of the request and reports it.
TEST_F(OcsdPolatisTest, HalfMadeCircuitIsRepairedByTheSameApply) {
  auto d = Start("");
  ASSERT_NE(d, nullptr);
  auto stub = StubFor(d->address());
  fake_.FailPort(3);  // ingress 3 -> egress 18 fails, ingress 2 -> egress 19 is made
  ApplyOutcome r = Apply(*stub, Req(1, 1, {{2, 3}}));
  EXPECT_FALSE(r.status.ok());
  EXPECT_THAT(fake_.Connections(), ElementsAre(Pair(2, 19)));
  EXPECT_THAT(PairsOf(Get(*stub).actual()), IsEmpty());
  fake_.RepairPorts();
  r = Apply(*stub, Req(1, 1, {{2, 3}}));
  ASSERT_TRUE(r.status.ok()) << r.status.error_message();
  EXPECT_THAT(r.response.cleared(), ElementsAre("ingress 2 -> egress 19 (duplex 2 -> 3, one-way)"));
  EXPECT_THAT(PairsOf(r.response.actual()), ElementsAre(Pair(2, 3)));
  EXPECT_THAT(fake_.Connections(), ElementsAre(Pair(2, 19), Pair(3, 18)));
}

// The connection drops right after the read-back (on the next command):
// the reply and the Watch event still carry the state read back.
TEST_F(OcsdPolatisTest, DropAfterTheReadBackKeepsTheStateReadBack) {
  auto d = Start("");
  ASSERT_NE(d, nullptr);
  auto stub = StubFor(d->address());
  grpc::ClientContext wctx;
  auto watch = stub->Watch(&wctx, {});
  v1::WatchEvent e;
  ASSERT_TRUE(watch->Read(&e));  // snapshot
  // stat? (before), err?, add, *OPC?, err?, stat? (read-back), then the 7th.
  fake_.DropAfterCommands(7);
  ApplyOutcome r = Apply(*stub, Req(1, 1, {{1, 2}}));
  fake_.DropAfterCommands(0);
  ASSERT_TRUE(r.status.ok()) << r.status.error_message();
  EXPECT_THAT(PairsOf(r.response.actual()), ElementsAre(Pair(1, 2)));
  EXPECT_FALSE(r.response.actual_unknown());
  ASSERT_TRUE(watch->Read(&e));
  EXPECT_EQ(e.kind(), v1::WatchEvent::CHANGE);
  EXPECT_THAT(PairsOf(e.circuits()), ElementsAre(Pair(1, 2)));
  EXPECT_TRUE(e.error().empty()) << e.error();
  wctx.TryCancel();
}

// --pacing-ms 0, 300 ms switching, the connection lost right after the add:
// the daemon reconnects and reads back only once *OPC? says the switch is
// done, so the circuit that came up is reported done.
TEST_F(OcsdPolatisTest, ReconnectReadBackWaitsUntilTheSwitchIsDone) {
  auto d = Start("", 0);
  ASSERT_NE(d, nullptr);
  auto stub = StubFor(d->address());
  fake_.SetSwitchingTime(absl::Milliseconds(300));
  fake_.DropAfterCommands(3);  // stat? (before), err?, add: handled, then the connection closes
  ApplyOutcome r = Apply(*stub, Req(1, 1, {{1, 2}}));
  ASSERT_TRUE(r.status.ok()) << r.status.error_message();
  ASSERT_EQ(r.response.results_size(), 1);
  EXPECT_EQ(r.response.results(0).code(), 0) << r.response.results(0).message();
  EXPECT_THAT(PairsOf(r.response.actual()), ElementsAre(Pair(1, 2)));
  ExpectResultsAgreeWithActual(r.response);
}

// The read-back itself is lost: the per-circuit results and `actual` of the
// reply come from one read (a second one on a new connection), never
// contradicting each other.
TEST_F(OcsdPolatisTest, ResultsAgreeWithTheReadBackInTheSameReply) {
  auto d = Start("");
  ASSERT_NE(d, nullptr);
  auto stub = StubFor(d->address());
  fake_.DropAfterCommands(6);  // stat? (before), err?, add, *OPC?, err?, stat? (read-back)
  ApplyOutcome r = Apply(*stub, Req(1, 1, {{1, 2}, {5, 6}}));
  fake_.DropAfterCommands(0);
  ExpectResultsAgreeWithActual(r.response);
  ASSERT_TRUE(r.status.ok()) << r.status.error_message();
  EXPECT_THAT(PairsOf(r.response.actual()), ElementsAre(Pair(1, 2), Pair(5, 6)));
}

// When the switch cannot be read back, the reply and the Watch events say
// "unknown" (the RPC fails), never an empty switch.
TEST_F(OcsdPolatisTest, UnreadableStateIsReportedUnknownNotEmpty) {
  auto d = Start("");
  ASSERT_NE(d, nullptr);
  auto stub = StubFor(d->address());
  grpc::ClientContext wctx;
  auto watch = stub->Watch(&wctx, {});
  v1::WatchEvent e;
  ASSERT_TRUE(watch->Read(&e));  // snapshot
  // The read before the change is answered; every read after it is garbage.
  fake_.SetGarbageReply(":oxc:swit:conn:stat?", "(@1,2),(@18", 1);
  ApplyOutcome r = Apply(*stub, Req(1, 1, {{1, 2}}));
  EXPECT_FALSE(r.status.ok());
  ASSERT_TRUE(r.has_details) << r.status.error_message();
  EXPECT_TRUE(r.response.actual_unknown());
  EXPECT_THAT(r.response.actual(), IsEmpty());
  ASSERT_EQ(r.response.results_size(), 1);
  EXPECT_NE(r.response.results(0).code(), 0);
  EXPECT_THAT(r.response.results(0).message(), HasSubstr("could not be verified"));
  ASSERT_TRUE(watch->Read(&e));
  EXPECT_EQ(e.kind(), v1::WatchEvent::CHANGE);
  EXPECT_TRUE(e.circuits_unknown());
  EXPECT_FALSE(e.error().empty());
  {  // a new watcher learns that the state is unknown too
    grpc::ClientContext ctx;
    auto w2 = stub->Watch(&ctx, {});
    ASSERT_TRUE(w2->Read(&e));
    EXPECT_EQ(e.kind(), v1::WatchEvent::SNAPSHOT);
    EXPECT_TRUE(e.circuits_unknown());
    ctx.TryCancel();
  }
  fake_.SetGarbageReply("", "");
  EXPECT_THAT(PairsOf(Get(*stub).actual()), ElementsAre(Pair(1, 2)));  // the switch made it
  {
    grpc::ClientContext ctx;
    auto w3 = stub->Watch(&ctx, {});
    ASSERT_TRUE(w3->Read(&e));
    EXPECT_FALSE(e.circuits_unknown());
    EXPECT_THAT(PairsOf(e.circuits()), ElementsAre(Pair(1, 2)));
    ctx.TryCancel();
  }
  wctx.TryCancel();
}

// The commands the daemon sends at start-up and per Apply, against the SCPI
// model, at the default pacing (100 ms after a command the switch does not
// answer) and 25 ms switching: no command is sent twice for nothing, and the
// Apply time follows from the paced gaps (closed form below).
TEST(OcsdPolatisCommands, StartUpAndApplySendEachCommandOnce) {
  ocs::testing::FakePolatis fake({.size = 128, .idn = "Polatis,N-OST-128x128-FAKE,FK1,7.3"});
  ASSERT_TRUE(fake.Start().ok());
  fake.SetSwitchingTime(absl::Milliseconds(25));
  auto d = OcsdPolatisTest::StartOn(fake, "", -1);
  ASSERT_NE(d, nullptr);
  auto lines = [&](size_t from) {
    std::vector<std::string> out;
    auto r = fake.received();
    for (size_t i = from; i < r.size(); ++i) out.push_back(r[i].line);
    return out;
  };
  EXPECT_THAT(lines(0), ElementsAre(":oxc:swit:size?", "*IDN?", ":oxc:swit:conn:stat?"));
  auto stub = StubFor(d->address());
  const absl::Duration pacing = absl::Milliseconds(100), switching = absl::Milliseconds(25);
  // Paced gaps: one after each add/sub command (at most 64 connections each);
  // the switching (25 ms from the command) overlaps the gap before *OPC?.
  auto lower = [&](int paced) { return pacing * paced - absl::Milliseconds(5); };
  // Slack for gRPC, the fsync of the state file and scheduling (also under a
  // sanitizer): two gaps more, still far below one gap per command.
  auto upper = [&](int paced, int phases) { return pacing * (paced + 2) + switching * phases; };

  size_t from = fake.received().size();
  absl::Time start = absl::Now();
  ApplyOutcome r = Apply(*stub, Req(1, 1, {{1, 2}}));
  const absl::Duration one = absl::Now() - start;
  ASSERT_TRUE(r.status.ok()) << r.status.error_message();
  EXPECT_THAT(lines(from), ElementsAre(":oxc:swit:conn:stat?", ":syst:err?",
                                       ":oxc:swit:conn:add (@1,2),(@130,129)", "*OPC?",
                                       ":syst:err?", ":oxc:swit:conn:stat?"));

  Pairs m1, m2;  // two disjoint perfect matchings of the 128 ports
  for (int p = 1; p <= 128; p += 2) m1.push_back({p, p + 1});
  for (int p = 1; p <= 128; p += 2) m2.push_back({p, p == 127 ? 2 : p + 3});
  from = fake.received().size();
  start = absl::Now();
  r = Apply(*stub, Req(1, 2, m1));  // {1,2} stays, 63 circuits added
  const absl::Duration sixty_four = absl::Now() - start;
  ASSERT_TRUE(r.status.ok()) << r.status.error_message();
  auto l = lines(from);
  EXPECT_EQ(l.size(), 7u) << absl::StrJoin(l, " | ");  // stat? err? add add *OPC? err? stat?
  EXPECT_EQ(std::count(l.begin(), l.end(), ":oxc:swit:conn:stat?"), 2);

  from = fake.received().size();
  start = absl::Now();
  r = Apply(*stub, Req(1, 3, m2));  // every port re-wired: 64 -> 64
  const absl::Duration rewire = absl::Now() - start;
  ASSERT_TRUE(r.status.ok()) << r.status.error_message();
  l = lines(from);
  EXPECT_EQ(l.size(), 11u) << absl::StrJoin(l, " | ");  // + sub sub *OPC? err?
  EXPECT_EQ(std::count(l.begin(), l.end(), ":oxc:swit:conn:stat?"), 2);
  ASSERT_GE(l.size(), 2u);
  EXPECT_NE(l[l.size() - 2], l.back()) << "two reads in a row at the end";
  EXPECT_THAT(PairsOf(r.response.actual()), ::testing::SizeIs(64));

  std::printf(
      "polatis Apply at 100 ms pacing, 25 ms switching: 1 circuit %lld ms, "
      "64 circuits %lld ms, 64 -> 64 re-wiring %lld ms\n",
      static_cast<long long>(absl::ToInt64Milliseconds(one)),
      static_cast<long long>(absl::ToInt64Milliseconds(sixty_four)),
      static_cast<long long>(absl::ToInt64Milliseconds(rewire)));
  EXPECT_GE(one, lower(1));
  EXPECT_LT(one, upper(1, 1));
  EXPECT_GE(sixty_four, lower(2));
  EXPECT_LT(sixty_four, upper(2, 1));
  EXPECT_GE(rewire, lower(4));
  EXPECT_LT(rewire, upper(4, 2));
}

}  // namespace
}  // namespace mixnet::testing
