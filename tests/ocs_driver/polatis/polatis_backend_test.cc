// Tests of the polatis OcsBackend against FakePolatis, a fake SCPI switch on
// a real TCP socket: Info/Read/Change round trips, the duplex mapping, order
// of removals and additions, one-way leftovers, device errors, slow replies,
// dropped connections, pacing and garbage replies. The test thread drives the
// backend; the fake serves from its own threads.
#include "ocs_driver/polatis/polatis_backend.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <memory>
#include <set>
#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "tests/ocs_driver/polatis/fake_polatis.h"

namespace mixnet::ocs {
namespace {

using ::testing::ElementsAre;
using testing::FakePolatis;
using testing::FakePolatisOptions;
using ::testing::HasSubstr;
using ::testing::IsEmpty;

class PolatisTest : public ::testing::Test {
 protected:
  void StartFake(int size = 16) {
    fake_ = std::make_unique<FakePolatis>(FakePolatisOptions{.size = size});
    ASSERT_TRUE(fake_->Start().ok());
  }
  PolatisOptions Options() const {
    PolatisOptions o;
    o.host = "127.0.0.1";
    o.port = fake_->port();
    o.command_pacing = absl::ZeroDuration();
    o.reply_timeout = absl::Milliseconds(500);
    o.completion_timeout = absl::Seconds(2);
    return o;
  }
  void Open(PolatisOptions o) {
    auto b = OpenPolatisBackend(o);
    ASSERT_TRUE(b.ok()) << b.status();
    backend_ = *std::move(b);
  }
  void SetUp() override {
    StartFake();
    Open(Options());
  }
  // Index of the first received command starting with `prefix`, or -1.
  int IndexOf(const std::string& prefix) const {
    auto r = fake_->received();
    for (size_t i = 0; i < r.size(); ++i) {
      if (absl::StartsWith(r[i].line, prefix)) return static_cast<int>(i);
    }
    return -1;
  }
  std::vector<Circuit> MustRead() {
    auto r = backend_->Read();
    EXPECT_TRUE(r.ok()) << r.status();
    return r.ok() ? *r : std::vector<Circuit>{};
  }

  std::unique_ptr<FakePolatis> fake_;
  std::unique_ptr<OcsBackend> backend_;
};

TEST_F(PolatisTest, InfoReportsIdentityAndDuplexPorts) {
  auto info = backend_->Info();
  ASSERT_TRUE(info.ok()) << info.status();
  EXPECT_EQ(info->backend, "polatis");
  EXPECT_EQ(info->vendor, "HUBER+SUHNER Polatis");
  EXPECT_EQ(info->model, "N-OST-16x16-HU1-DMHNS-FAKE");
  EXPECT_EQ(info->serial, "FK000123");
  EXPECT_EQ(info->firmware, "7.3.1.4");
  EXPECT_EQ(info->ports, 16);
  EXPECT_GT(info->switching_time, absl::ZeroDuration());
}

TEST_F(PolatisTest, ChangeThenReadRoundTrip) {
  EXPECT_THAT(MustRead(), IsEmpty());
  ChangeReport rep;
  std::vector<CircuitOutcome>& out = rep.outcomes;
  absl::Status s = backend_->Change({}, {{1, 2}, {3, 9}}, rep);
  ASSERT_TRUE(s.ok()) << s;
  ASSERT_EQ(out.size(), 2u);
  for (const auto& o : out) EXPECT_TRUE(o.add && o.status.ok()) << o.status;
  EXPECT_THAT(MustRead(), ElementsAre(Circuit{1, 2}, Circuit{3, 9}));
  s = backend_->Change({{1, 2}}, {}, rep);
  ASSERT_TRUE(s.ok()) << s;
  ASSERT_EQ(out.size(), 1u);
  EXPECT_FALSE(out[0].add);
  EXPECT_THAT(MustRead(), ElementsAre(Circuit{3, 9}));
  // An empty change touches nothing.
  size_t before = fake_->received().size();
  EXPECT_TRUE(backend_->Change({}, {}, rep).ok());
  EXPECT_THAT(out, IsEmpty());
  EXPECT_EQ(fake_->received().size(), before);
}

// Every circuit is exactly two one-way connections, for several sizes.
class DuplexTest : public PolatisTest, public ::testing::WithParamInterface<int> {
 protected:
  void SetUp() override {
    StartFake(GetParam());
    Open(Options());
  }
};

TEST_P(DuplexTest, CircuitIsTwoConnections) {
  const int n = GetParam();
  std::vector<Circuit> add;
  for (int p = 1; p <= n / 2; ++p) add.push_back(Circuit::Of(p, n + 1 - p));
  ChangeReport rep;
  ASSERT_TRUE(backend_->Change({}, add, rep).ok());
  auto conns = fake_->Connections();
  ASSERT_EQ(conns.size(), 2 * add.size());
  for (const auto& c : add) {
    EXPECT_EQ(conns[c.a], n + c.b) << c.a;
    EXPECT_EQ(conns[c.b], n + c.a) << c.b;
  }
  EXPECT_EQ(MustRead(), add);
  auto info = backend_->Info();
  ASSERT_TRUE(info.ok());
  EXPECT_EQ(info->ports, n);
}

INSTANTIATE_TEST_SUITE_P(Sizes, DuplexTest, ::testing::Values(4, 16, 48, 192));

TEST_F(PolatisTest, RemovesBeforeAdding) {
  ChangeReport rep;
  std::vector<CircuitOutcome>& out = rep.outcomes;
  ASSERT_TRUE(backend_->Change({}, {{1, 2}, {5, 6}}, rep).ok());
  absl::Status s = backend_->Change({{1, 2}, {5, 6}}, {{1, 5}, {2, 6}}, rep);
  ASSERT_TRUE(s.ok()) << s;
  ASSERT_EQ(out.size(), 4u);
  EXPECT_FALSE(out[0].add);
  EXPECT_FALSE(out[1].add);
  EXPECT_TRUE(out[2].add);
  EXPECT_EQ(out[3].circuit, (Circuit{2, 6}));
  auto r = fake_->received();
  // The second change: one sub with both circuits' connections, then one add.
  int sub = IndexOf(":oxc:swit:conn:sub");
  ASSERT_GE(sub, 0);
  EXPECT_EQ(r[sub].line, ":oxc:swit:conn:sub (@1,2,5,6),(@18,17,22,21)");
  int add = -1;
  for (size_t i = sub; i < r.size(); ++i) {
    if (absl::StartsWith(r[i].line, ":oxc:swit:conn:add")) add = static_cast<int>(i);
  }
  ASSERT_GT(add, sub);
  EXPECT_EQ(r[add].line, ":oxc:swit:conn:add (@1,5,2,6),(@21,17,22,18)");
  EXPECT_EQ(r[sub + 1].line, "*OPC?");  // completion waited before the adds
  EXPECT_THAT(MustRead(), ElementsAre(Circuit{1, 5}, Circuit{2, 6}));
}

TEST_F(PolatisTest, OneWayLeftoverIsNotACircuit) {
  fake_->SetConnection(1, 18);   // {1,2} ...
  fake_->SetConnection(2, 17);   // ... complete
  fake_->SetConnection(5, 22);   // 5 -> 6 without 6 -> 5
  fake_->SetConnection(7, 23);   // loops port 7 to itself
  fake_->SetConnection(9, 28);   // 9 -> 12 ...
  fake_->SetConnection(12, 26);  // ... but 12 -> 10: crossed
  EXPECT_THAT(MustRead(), ElementsAre(Circuit{1, 2}));
  // Leftovers are left alone by a change on other ports.
  ChangeReport rep;
  ASSERT_TRUE(backend_->Change({{1, 2}}, {{3, 4}}, rep).ok());
  auto conns = fake_->Connections();
  EXPECT_EQ(conns[5], 22);
  EXPECT_EQ(conns[7], 23);
  EXPECT_THAT(MustRead(), ElementsAre(Circuit{3, 4}));
}

TEST_F(PolatisTest, FailedPortBecomesThatCircuitsFailure) {
  fake_->FailPort(5);
  ChangeReport rep;
  std::vector<CircuitOutcome>& out = rep.outcomes;
  absl::Status s = backend_->Change({}, {{1, 2}, {5, 6}, {7, 8}}, rep);
  EXPECT_EQ(s.code(), absl::StatusCode::kInternal) << s;
  ASSERT_EQ(out.size(), 3u);
  EXPECT_TRUE(out[0].status.ok()) << out[0].status;
  EXPECT_FALSE(out[1].status.ok());
  EXPECT_THAT(out[1].status.message(), HasSubstr("port 5 failed to switch"));
  EXPECT_THAT(out[1].status.message(), HasSubstr("1 of its 2 connections"));
  EXPECT_TRUE(out[2].status.ok()) << out[2].status;
  EXPECT_EQ(s, out[1].status);
  // Read reports what the switch holds: the half-made circuit is not one.
  EXPECT_THAT(MustRead(), ElementsAre(Circuit{1, 2}, Circuit{7, 8}));
}

TEST_F(PolatisTest, RejectedBatchFailsEveryCircuitOfIt) {
  ChangeReport rep;
  std::vector<CircuitOutcome>& out = rep.outcomes;
  ASSERT_TRUE(backend_->Change({}, {{1, 2}}, rep).ok());
  // Port 1 is in use (the service would not ask this): the switch rejects the
  // whole add command; the circuit it names and its batch mates fail.
  absl::Status s = backend_->Change({}, {{1, 3}, {7, 8}}, rep);
  EXPECT_FALSE(s.ok());
  ASSERT_EQ(out.size(), 2u);
  EXPECT_THAT(out[0].status.message(), HasSubstr("port 1 already connected"));
  EXPECT_FALSE(out[1].status.ok());
  EXPECT_THAT(out[1].status.message(), HasSubstr("-221"));
  EXPECT_THAT(MustRead(), ElementsAre(Circuit{1, 2}));
}

TEST_F(PolatisTest, FailedRemovalSkipsTheAdds) {
  fake_->SetConnection(3, 20);  // half of {3,4}: the sub of 4 -> 19 is rejected
  ChangeReport rep;
  std::vector<CircuitOutcome>& out = rep.outcomes;
  absl::Status s = backend_->Change({{3, 4}}, {{5, 6}}, rep);
  EXPECT_FALSE(s.ok());
  ASSERT_EQ(out.size(), 2u);
  EXPECT_THAT(out[0].status.message(), HasSubstr("not connected"));
  EXPECT_EQ(out[1].status.code(), absl::StatusCode::kAborted) << out[1].status;
  EXPECT_EQ(IndexOf(":oxc:swit:conn:add"), -1);
  EXPECT_THAT(MustRead(), IsEmpty());
}

TEST_F(PolatisTest, StaleErrorsAreNotBlamedOnTheChange) {
  fake_->QueueError(-100, "Command error; port 3");
  ChangeReport rep;
  absl::Status s = backend_->Change({}, {{3, 4}}, rep);
  EXPECT_TRUE(s.ok()) << s;
  EXPECT_THAT(fake_->ErrorQueue(), IsEmpty());
}

TEST_F(PolatisTest, WaitsForSwitchingToComplete) {
  fake_->SetSwitchingDelay(absl::Milliseconds(40));
  ChangeReport rep;
  absl::Time start = absl::Now();
  ASSERT_TRUE(backend_->Change({}, {{1, 2}, {3, 4}}, rep).ok());
  EXPECT_GE(absl::Now() - start, absl::Milliseconds(4 * 40 - 5));
}

TEST_F(PolatisTest, CompletionTimeoutIsDeadlineExceededAndTheStateUnknown) {
  fake_->SetSwitchingDelay(absl::Seconds(1));
  PolatisOptions o = Options();
  o.completion_timeout = absl::Milliseconds(300);
  Open(o);
  ChangeReport rep;
  absl::Time start = absl::Now();
  absl::Status s = backend_->Change({}, {{1, 2}}, rep);
  EXPECT_EQ(s.code(), absl::StatusCode::kDeadlineExceeded) << s;
  EXPECT_THAT(s.message(), HasSubstr("*OPC?"));
  EXPECT_LT(absl::Now() - start, absl::Seconds(2));
  // Still switching after the wait on a new connection too: the map is not
  // read while the switch moves, so the state is unknown (not "empty").
  EXPECT_FALSE(rep.after.has_value());
  EXPECT_FALSE(rep.read_back.ok());
  ASSERT_EQ(rep.outcomes.size(), 1u);
  EXPECT_THAT(rep.outcomes[0].status.message(), HasSubstr("state unknown"));
}

TEST_F(PolatisTest, ReadBackOnANewConnectionWaitsForCompletion) {
  // Two connections of 350 ms each: done 700 ms after the add. The first
  // *OPC? gives up at 500 ms; the read-back reconnects, waits for *OPC? and
  // then sees both connections.
  fake_->SetSwitchingDelay(absl::Milliseconds(350));
  PolatisOptions o = Options();
  o.completion_timeout = absl::Milliseconds(500);
  Open(o);
  ChangeReport rep;
  int accepted = fake_->accepted();
  absl::Status s = backend_->Change({}, {{1, 2}}, rep);
  EXPECT_TRUE(s.ok()) << s;
  EXPECT_EQ(fake_->accepted(), accepted + 1);
  ASSERT_TRUE(rep.after.has_value()) << rep.read_back;
  EXPECT_THAT(*rep.after, ElementsAre(Circuit{1, 2}));
  ASSERT_EQ(rep.outcomes.size(), 1u);
  EXPECT_TRUE(rep.outcomes[0].status.ok()) << rep.outcomes[0].status;
}

// --pacing-ms 0: the connection drops right after the add; the circuit is
// still switching (300 ms) when the backend reconnects. It must wait for
// *OPC? before reading the map, and then report the circuit done.
TEST_F(PolatisTest, DropAfterTheAddReadsBackOnlyOnceTheSwitchIsDone) {
  fake_->SetSwitchingTime(absl::Milliseconds(300));
  EXPECT_THAT(MustRead(), IsEmpty());
  fake_->DropAfterCommands(2);  // 1 :syst:err? (stale), 2 add (handled, then closed)
  ChangeReport rep;
  absl::Status s = backend_->Change({}, {{1, 2}}, rep);
  EXPECT_TRUE(s.ok()) << s;
  ASSERT_EQ(rep.outcomes.size(), 1u);
  EXPECT_TRUE(rep.outcomes[0].status.ok()) << rep.outcomes[0].status;
  ASSERT_TRUE(rep.after.has_value()) << rep.read_back;
  EXPECT_THAT(*rep.after, ElementsAre(Circuit{1, 2}));
}

TEST_F(PolatisTest, UnreadableStateIsUnknownNotEmpty) {
  EXPECT_THAT(MustRead(), IsEmpty());
  fake_->SetGarbageReply(":oxc:swit:conn:stat?", "(@1,2),(@18");
  ChangeReport rep;
  absl::Status s = backend_->Change({}, {{1, 2}}, rep);
  EXPECT_EQ(s.code(), absl::StatusCode::kInternal) << s;
  EXPECT_FALSE(rep.after.has_value());
  EXPECT_THAT(rep.read_back.message(), HasSubstr("unexpected reply"));
  ASSERT_EQ(rep.outcomes.size(), 1u);
  EXPECT_THAT(rep.outcomes[0].status.message(), HasSubstr("could not be verified"));
  fake_->SetGarbageReply("", "");
  EXPECT_THAT(MustRead(), ElementsAre(Circuit{1, 2}));  // the switch did make it
}

// A duplex circuit half made (one port failed to switch) leaves a one-way
// connection. Once the port works again, the same change must succeed: the
// leftover on the ports of the change is cleared first and reported.
TEST_F(PolatisTest, OneWayLeftoverOnThePortsOfAChangeIsCleared) {
  fake_->FailPort(3);           // ingress 3 -> egress 18 fails; ingress 2 -> egress 19 is made
  fake_->SetConnection(5, 22);  // a one-way leftover on other ports: left alone
  ChangeReport rep;
  absl::Status s = backend_->Change({}, {{2, 3}}, rep);
  EXPECT_FALSE(s.ok());
  EXPECT_THAT(fake_->Connections(), ::testing::Contains(::testing::Pair(2, 19)));
  EXPECT_THAT(MustRead(), IsEmpty());
  // Still broken: the retry clears the leftover, tries again, fails the same
  // way (not with "already connected").
  s = backend_->Change({}, {{2, 3}}, rep);
  EXPECT_FALSE(s.ok());
  EXPECT_THAT(s.message(), HasSubstr("port 3 failed to switch"));
  EXPECT_THAT(rep.cleared, ElementsAre("ingress 2 -> egress 19 (duplex 2 -> 3, one-way)"));
  fake_->RepairPorts();
  s = backend_->Change({}, {{2, 3}}, rep);
  ASSERT_TRUE(s.ok()) << s;
  EXPECT_THAT(rep.cleared, ElementsAre("ingress 2 -> egress 19 (duplex 2 -> 3, one-way)"));
  EXPECT_THAT(rep.after.value_or(std::vector<Circuit>{}), ElementsAre(Circuit{2, 3}));
  EXPECT_THAT(fake_->Connections(),
              ::testing::UnorderedElementsAre(::testing::Pair(2, 19), ::testing::Pair(3, 18),
                                              ::testing::Pair(5, 22)));
}

TEST_F(PolatisTest, LoopAndConnectionToAPortOfTheChangeAreCleared) {
  fake_->SetConnection(4, 20);  // loops duplex port 4 to itself
  fake_->SetConnection(7, 21);  // 7 -> 5, one-way: holds egress 21 of port 5
  MustRead();
  ChangeReport rep;
  absl::Status s = backend_->Change({}, {{4, 5}}, rep);
  ASSERT_TRUE(s.ok()) << s;
  EXPECT_THAT(rep.cleared, ElementsAre("ingress 4 -> egress 20 (loops duplex port 4 to itself)",
                                       "ingress 7 -> egress 21 (duplex 7 -> 5, one-way)"));
  EXPECT_THAT(MustRead(), ElementsAre(Circuit{4, 5}));
}

TEST_F(PolatisTest, ReadLostOnAnOldConnectionIsReadAgainOnANewOne) {
  EXPECT_THAT(MustRead(), IsEmpty());
  fake_->SetConnection(1, 18);
  fake_->SetConnection(2, 17);
  int accepted = fake_->accepted();
  fake_->DropAfterCommands(1);  // the switch closes the connection instead of answering
  EXPECT_THAT(MustRead(), ElementsAre(Circuit{1, 2}));
  EXPECT_EQ(fake_->accepted(), accepted + 1);
}

TEST_F(PolatisTest, SlowReplyIsDeadlineExceededThenRecovers) {
  PolatisOptions o = Options();
  o.reply_timeout = absl::Milliseconds(200);
  Open(o);
  fake_->SetReplyDelay(absl::Seconds(2), ":oxc:swit:conn:stat?");
  absl::Time start = absl::Now();
  auto r = backend_->Read();
  EXPECT_EQ(r.status().code(), absl::StatusCode::kDeadlineExceeded) << r.status();
  EXPECT_THAT(r.status().message(), HasSubstr(absl::StrCat("127.0.0.1:", fake_->port())));
  EXPECT_THAT(r.status().message(), HasSubstr(":oxc:swit:conn:stat?"));
  EXPECT_LT(absl::Now() - start, absl::Seconds(1));
  fake_->SetReplyDelay(absl::ZeroDuration());
  int accepted = fake_->accepted();
  EXPECT_THAT(MustRead(), IsEmpty());
  EXPECT_EQ(fake_->accepted(), accepted + 1);  // a fresh connection
}

// Dropping the connection right after the k-th command of a change.
// Commands: 1 :syst:err? (stale), 2 sub, 3 *OPC?, 4 :syst:err?, 5 add, 6 *OPC?.
class DropTest : public PolatisTest, public ::testing::WithParamInterface<int> {};

TEST_P(DropTest, ReadBackOnANewConnectionDecides) {
  const int k = GetParam();
  ChangeReport rep;
  std::vector<CircuitOutcome>& out = rep.outcomes;
  ASSERT_TRUE(backend_->Change({}, {{1, 2}}, rep).ok());
  int accepted = fake_->accepted();
  fake_->DropAfterCommands(k);
  absl::Status s = backend_->Change({{1, 2}}, {{3, 4}}, rep);
  const bool removed = k >= 2;
  const bool added = k >= 5;
  if (added) {
    // Lost after the add: the read-back on a new connection shows both
    // circuits done, so the change succeeded.
    EXPECT_TRUE(s.ok()) << s;
  } else {
    EXPECT_EQ(s.code(), absl::StatusCode::kUnavailable) << s;
    EXPECT_THAT(s.message(), HasSubstr(absl::StrCat("127.0.0.1:", fake_->port())));
  }
  ASSERT_EQ(out.size(), 2u);
  EXPECT_EQ(out[0].status.ok(), removed) << out[0].status;
  EXPECT_EQ(out[1].status.ok(), added) << out[1].status;
  std::vector<Circuit> expect;
  if (!removed) expect.push_back({1, 2});
  if (added) expect.push_back({3, 4});
  EXPECT_EQ(rep.after.value_or(std::vector<Circuit>{{99, 100}}), expect);
  EXPECT_EQ(MustRead(), expect);
  EXPECT_GT(fake_->accepted(), accepted);  // reconnected
  // And the backend keeps working.
  ASSERT_TRUE(backend_->Change(expect, {{9, 10}}, rep).ok());
  EXPECT_THAT(MustRead(), ElementsAre(Circuit{9, 10}));
}

INSTANTIATE_TEST_SUITE_P(AfterCommand, DropTest, ::testing::Values(1, 2, 3, 4, 5, 6));

class PacingTest : public PolatisTest, public ::testing::WithParamInterface<int> {};

// The gap is kept after a command the switch does not answer (add, sub);
// a command sent after the reply to the previous one is not delayed.
TEST_P(PacingTest, GapsAfterUnansweredCommandsOnly) {
  const absl::Duration pacing = absl::Milliseconds(GetParam());
  PolatisOptions o = Options();
  o.command_pacing = pacing;
  Open(o);
  size_t first = fake_->received().size();
  ChangeReport rep;
  ASSERT_TRUE(backend_->Change({}, {{1, 2}}, rep).ok());
  ASSERT_TRUE(backend_->Change({{1, 2}}, {{3, 4}}, rep).ok());
  ASSERT_TRUE(backend_->Read().ok());
  auto r = fake_->received();
  ASSERT_GE(r.size() - first, 10u);
  int paced = 0;
  for (size_t i = first + 1; i < r.size(); ++i) {
    const absl::Duration gap = r[i].at - r[i - 1].at;
    if (absl::StartsWith(r[i - 1].line, ":oxc:swit:conn:add") ||
        absl::StartsWith(r[i - 1].line, ":oxc:swit:conn:sub")) {
      // Arrival gaps jitter with scheduling; the client spaces sends exactly.
      EXPECT_GE(gap, pacing * 0.7) << r[i - 1].line << " -> " << r[i].line;
      ++paced;
    } else {
      EXPECT_LT(gap, pacing * 0.5) << r[i - 1].line << " -> " << r[i].line;
    }
  }
  EXPECT_EQ(paced, 3);  // add; sub, add
}

INSTANTIATE_TEST_SUITE_P(Millis, PacingTest, ::testing::Values(60, 100));

struct GarbageCase {
  const char* name;
  const char* prefix;  // command whose reply is garbage
  const char* reply;
  const char* call;  // "open", "info", "read" or "change"
};

class GarbageTest : public PolatisTest, public ::testing::WithParamInterface<GarbageCase> {};

TEST_P(GarbageTest, CleanErrorThenRecovers) {
  const GarbageCase& g = GetParam();
  fake_->SetGarbageReply(g.prefix, g.reply);
  absl::Status s;
  ChangeReport rep;
  if (std::string(g.call) == "open") {
    s = OpenPolatisBackend(Options()).status();
  } else if (std::string(g.call) == "info") {
    s = backend_->Info().status();
  } else if (std::string(g.call) == "read") {
    s = backend_->Read().status();
  } else {
    s = backend_->Change({}, {{1, 2}}, rep);
  }
  EXPECT_EQ(s.code(), absl::StatusCode::kInternal) << s;
  EXPECT_THAT(s.message(), HasSubstr("unexpected reply"));
  fake_->SetGarbageReply("", "");
  EXPECT_TRUE(backend_->Info().ok());
  EXPECT_TRUE(backend_->Read().ok());
}

INSTANTIATE_TEST_SUITE_P(
    Replies, GarbageTest,
    ::testing::Values(GarbageCase{"IdnEmpty", "*idn?", "", "info"},
                      GarbageCase{"SizeWords", ":oxc:swit:size?", "sixteen", "open"},
                      GarbageCase{"StatTruncated", ":oxc:swit:conn:stat?", "(@1,2),(@17", "read"},
                      GarbageCase{"StatUnequal", ":oxc:swit:conn:stat?", "(@1,2),(@17)", "read"},
                      GarbageCase{"StatBinary", ":oxc:swit:conn:stat?", "\x01\x02\xff", "read"},
                      GarbageCase{"OpcZero", "*opc?", "0", "change"},
                      GarbageCase{"ErrWords", ":syst:err?", "everything is fine", "change"}),
    [](const ::testing::TestParamInfo<GarbageCase>& info) { return info.param.name; });

TEST(PolatisOpen, RefusedConnectionNamesHostPortAndErrno) {
  FakePolatis fake;
  ASSERT_TRUE(fake.Start().ok());
  int port = fake.port();
  fake.Stop();  // nothing listens there any more
  PolatisOptions o;
  o.host = "127.0.0.1";
  o.port = port;
  o.reply_timeout = absl::Milliseconds(500);
  auto b = OpenPolatisBackend(o);
  ASSERT_FALSE(b.ok());
  EXPECT_EQ(b.status().code(), absl::StatusCode::kUnavailable) << b.status();
  EXPECT_THAT(b.status().message(), HasSubstr(absl::StrCat("127.0.0.1:", port)));
  EXPECT_THAT(b.status().message(), HasSubstr("errno"));
}

TEST(PolatisOpen, RejectsBadOptions) {
  PolatisOptions o;
  EXPECT_EQ(OpenPolatisBackend(o).status().code(), absl::StatusCode::kInvalidArgument);
  o.host = "127.0.0.1";
  o.port = 0;
  EXPECT_EQ(OpenPolatisBackend(o).status().code(), absl::StatusCode::kInvalidArgument);
  o.port = 5025;
  o.reply_timeout = absl::ZeroDuration();
  EXPECT_EQ(OpenPolatisBackend(o).status().code(), absl::StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace mixnet::ocs
