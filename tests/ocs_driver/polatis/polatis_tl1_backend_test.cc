// Tests of the polatis-tl1 OcsBackend against FakePolatisTl1 (a fake TL1
// switch on a real TCP socket) and of the TL1 text formats: login, Info,
// Read/Change round trips, removals before additions, DENY -> per-circuit
// failures, slow replies, dropped connections (with a fresh login), pacing,
// autonomous messages and garbage. Test thread plus the fake's threads.
#include "ocs_driver/polatis/polatis_tl1_backend.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <memory>
#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "ocs_driver/polatis/tl1_format.h"
#include "tests/ocs_driver/polatis/fake_polatis_tl1.h"

namespace mixnet::ocs {
namespace {

using ::testing::ElementsAre;
using testing::FakePolatisTl1;
using testing::FakePolatisTl1Options;
using ::testing::HasSubstr;
using ::testing::IsEmpty;

TEST(Tl1Format, CommandsAndBlocks) {
  EXPECT_EQ(tl1::FormatCommand("ENT-PATCH", "", "1,18", "7"), "ENT-PATCH::1,18:7:;");
  EXPECT_EQ(tl1::FormatCommand("ACT-USER", "", "admin", "1", "pw"), "ACT-USER::admin:1::pw;");
  tl1::Response r;
  auto k = tl1::ParseBlock({"SW 26-11-30 09:30:00", "M  12 COMPLD", "\"1,18\"", "\"2,17\""}, &r);
  ASSERT_TRUE(k.ok()) << k.status();
  EXPECT_EQ(*k, tl1::BlockKind::kResponse);
  EXPECT_EQ(r.ctag, "12");
  EXPECT_TRUE(r.completed());
  auto p = tl1::ParsePatches(r);
  ASSERT_TRUE(p.ok());
  EXPECT_THAT(*p, ElementsAre(std::make_pair(1, 18), std::make_pair(2, 17)));
  k = tl1::ParseBlock({"SW 26-11-30", "M  13 DENY", "SROF", "/* port 5", "failed */"}, &r);
  ASSERT_TRUE(k.ok());
  EXPECT_EQ(r.status, "DENY");
  EXPECT_EQ(r.code, "SROF");
  EXPECT_EQ(r.comment, "port 5 failed");
  EXPECT_EQ(*tl1::ParseBlock({"SW 26-11-30", "A  3 REPT EVT"}, &r), tl1::BlockKind::kAutonomous);
  EXPECT_EQ(*tl1::ParseBlock({"IP 14"}, &r), tl1::BlockKind::kAcknowledgement);
  EXPECT_FALSE(tl1::ParseBlock({"hello"}, &r).ok());
  EXPECT_FALSE(tl1::ParseBlock({"M 12"}, &r).ok());
  EXPECT_FALSE(tl1::ParseBlock({"M 12 COMPLD", "\"1,18"}, &r).ok());
  EXPECT_FALSE(tl1::ParseBlock({"M 12 COMPLD", "stray words"}, &r).ok());
  r.quoted = {"1;18"};
  EXPECT_FALSE(tl1::ParsePatches(r).ok());
  EXPECT_EQ(tl1::SizeFromModel("N-OST-48x48-HU1"), 48);
  EXPECT_EQ(tl1::SizeFromModel("N-OST-FAKE"), 0);
  EXPECT_EQ(tl1::SizeFromModel("8x16"), 0);
}

class Tl1Test : public ::testing::Test {
 protected:
  void SetUp() override {
    StartFake({});
    Open(Options());
  }
  void StartFake(FakePolatisTl1Options fo) {
    backend_.reset();
    fake_ = std::make_unique<FakePolatisTl1>(fo);
    ASSERT_TRUE(fake_->Start().ok());
  }
  PolatisTl1Options Options() const {
    PolatisTl1Options o;
    o.host = "127.0.0.1";
    o.port = fake_->port();
    o.user = "admin";
    o.password = "s3cret";
    o.command_pacing = absl::ZeroDuration();
    o.reply_timeout = absl::Milliseconds(500);
    o.completion_timeout = absl::Seconds(2);
    return o;
  }
  void Open(const PolatisTl1Options& o) {
    backend_.reset();
    auto b = OpenPolatisTl1Backend(o);
    ASSERT_TRUE(b.ok()) << b.status();
    backend_ = *std::move(b);
  }
  std::vector<Circuit> MustRead() {
    auto r = backend_->Read();
    EXPECT_TRUE(r.ok()) << r.status();
    return r.ok() ? *r : std::vector<Circuit>{};
  }
  int Count(const std::string& prefix) const {
    int n = 0;
    for (const auto& r : fake_->server().received()) n += absl::StartsWith(r.line, prefix);
    return n;
  }

  std::unique_ptr<FakePolatisTl1> fake_;
  std::unique_ptr<OcsBackend> backend_;
};

TEST_F(Tl1Test, LogsInAndReportsInfo) {
  auto info = backend_->Info();
  ASSERT_TRUE(info.ok()) << info.status();
  EXPECT_EQ(info->backend, "polatis-tl1");
  EXPECT_EQ(info->vendor, "HUBER+SUHNER Polatis");
  EXPECT_EQ(info->model, "N-OST-16x16-FAKE");
  EXPECT_EQ(info->firmware, "7.3.1");
  EXPECT_EQ(info->ports, 16);
  EXPECT_EQ(Count("ACT-USER::admin:"), 1);
}

TEST_F(Tl1Test, SizeFromOptionsWhenTheModelHasNone) {
  StartFake({.size = 8, .size_in_model = false});
  auto o = Options();
  EXPECT_EQ(OpenPolatisTl1Backend(o).status().code(), absl::StatusCode::kInvalidArgument);
  o.size = 8;
  Open(o);
  EXPECT_EQ(backend_->Info()->ports, 8);
}

TEST_F(Tl1Test, WrongPasswordIsPermissionDeniedWithoutLeakingIt) {
  auto o = Options();
  o.password = "wrong-pw";
  auto b = OpenPolatisTl1Backend(o);
  EXPECT_EQ(b.status().code(), absl::StatusCode::kPermissionDenied) << b.status();
  EXPECT_THAT(b.status().message(), HasSubstr("PIUI"));
  EXPECT_THAT(std::string(b.status().message()), ::testing::Not(HasSubstr("wrong-pw")));
}

TEST_F(Tl1Test, RoundTripRemovalsFirst) {
  ChangeReport rep;
  std::vector<CircuitOutcome>& out = rep.outcomes;
  absl::Status s = backend_->Change({}, {{1, 2}, {3, 9}}, rep);
  ASSERT_TRUE(s.ok()) << s;
  EXPECT_THAT(MustRead(), ElementsAre(Circuit{1, 2}, Circuit{3, 9}));
  auto conns = fake_->Connections();
  EXPECT_EQ(conns[1], 18);
  EXPECT_EQ(conns[2], 17);
  EXPECT_EQ(conns[3], 25);
  EXPECT_EQ(conns[9], 19);
  size_t before = fake_->server().received().size();
  s = backend_->Change({{1, 2}, {3, 9}}, {{1, 9}, {2, 3}}, rep);
  ASSERT_TRUE(s.ok()) << s;
  ASSERT_EQ(out.size(), 4u);
  auto r = fake_->server().received();
  int last_dlt = -1;
  int first_ent = -1;
  for (size_t i = before; i < r.size(); ++i) {
    if (absl::StartsWith(r[i].line, "DLT-PATCH")) last_dlt = static_cast<int>(i);
    if (absl::StartsWith(r[i].line, "ENT-PATCH") && first_ent < 0 && last_dlt >= 0 &&
        static_cast<int>(i) > last_dlt) {
      first_ent = static_cast<int>(i);
    }
  }
  EXPECT_GT(first_ent, last_dlt);
  EXPECT_THAT(MustRead(), ElementsAre(Circuit{1, 9}, Circuit{2, 3}));
}

TEST_F(Tl1Test, DenyBecomesThatCircuitsFailure) {
  fake_->FailPort(5);
  fake_->SetConnection(7, 24);  // one-way 7 -> 8, not a circuit
  ChangeReport rep;
  std::vector<CircuitOutcome>& out = rep.outcomes;
  absl::Status s = backend_->Change({}, {{1, 2}, {5, 6}}, rep);
  EXPECT_EQ(s.code(), absl::StatusCode::kInternal) << s;
  ASSERT_EQ(out.size(), 2u);
  EXPECT_TRUE(out[0].status.ok()) << out[0].status;
  EXPECT_THAT(out[1].status.message(), HasSubstr("DENY SROF (port 5 failed to switch)"));
  EXPECT_THAT(MustRead(), ElementsAre(Circuit{1, 2}));
}

// A half-made circuit (port 6 failed to switch) must not block the same
// change forever: its one-way leftover is deleted first and reported.
TEST_F(Tl1Test, OneWayLeftoverOnThePortsOfAChangeIsCleared) {
  fake_->FailPort(6);           // ENT-PATCH 6,21 is denied; 5,22 is made
  fake_->SetConnection(7, 24);  // one-way 7 -> 8 on other ports: left alone
  ChangeReport rep;
  EXPECT_FALSE(backend_->Change({}, {{5, 6}}, rep).ok());
  EXPECT_EQ(fake_->Connections().count(5), 1u);
  // The port works again: a fresh fake with the same map stands for it.
  StartFake({});
  fake_->SetConnection(5, 22);
  fake_->SetConnection(7, 24);
  Open(Options());
  absl::Status s = backend_->Change({}, {{5, 6}}, rep);
  ASSERT_TRUE(s.ok()) << s;
  EXPECT_THAT(rep.cleared, ElementsAre("ingress 5 -> egress 22 (duplex 5 -> 6, one-way)"));
  EXPECT_THAT(rep.after.value_or(std::vector<Circuit>{}), ElementsAre(Circuit{5, 6}));
  EXPECT_EQ(fake_->Connections().at(7), 24);
}

TEST_F(Tl1Test, DeniedRemovalSkipsTheAdds) {
  fake_->SetConnection(3, 20);  // half of {3,4}
  ChangeReport rep;
  std::vector<CircuitOutcome>& out = rep.outcomes;
  absl::Status s = backend_->Change({{3, 4}}, {{5, 6}}, rep);
  EXPECT_FALSE(s.ok());
  ASSERT_EQ(out.size(), 2u);
  // DLT-PATCH 3 removed 3 -> 20; DLT-PATCH 4 was denied, but the switch now
  // holds neither connection: the removal is done.
  EXPECT_TRUE(out[0].status.ok()) << out[0].status;
  EXPECT_EQ(out[1].status.code(), absl::StatusCode::kAborted) << out[1].status;
  EXPECT_EQ(Count("ENT-PATCH"), 0);
}

TEST_F(Tl1Test, AutonomousMessagesAreSkipped) {
  fake_->SendAutonomousBeforeNextResponse();
  ChangeReport rep;
  ASSERT_TRUE(backend_->Change({}, {{1, 2}}, rep).ok());
  fake_->SendAutonomousBeforeNextResponse();
  EXPECT_THAT(MustRead(), ElementsAre(Circuit{1, 2}));
}

TEST_F(Tl1Test, SlowReplyIsDeadlineExceededThenReconnectsAndLogsIn) {
  auto o = Options();
  o.reply_timeout = absl::Milliseconds(200);
  Open(o);
  fake_->server().SetReplyDelay(absl::Seconds(2), "RTRV-PATCH");
  absl::Time start = absl::Now();
  auto r = backend_->Read();
  EXPECT_EQ(r.status().code(), absl::StatusCode::kDeadlineExceeded) << r.status();
  EXPECT_THAT(r.status().message(), HasSubstr("RTRV-PATCH"));
  EXPECT_LT(absl::Now() - start, absl::Seconds(1));
  fake_->server().SetReplyDelay(absl::ZeroDuration());
  int logins = Count("ACT-USER");
  EXPECT_THAT(MustRead(), IsEmpty());
  EXPECT_EQ(Count("ACT-USER"), logins + 1);
}

// Drop right after the k-th command of Change({1,2}) -> {3,4} on a logged-in
// connection: 1 DLT 1, 2 DLT 2, 3 ENT 3,20, 4 ENT 4,19.
class Tl1DropTest : public Tl1Test, public ::testing::WithParamInterface<int> {};

TEST_P(Tl1DropTest, UnavailableThenReadReportsActualState) {
  const int k = GetParam();
  ChangeReport rep;
  std::vector<CircuitOutcome>& out = rep.outcomes;
  ASSERT_TRUE(backend_->Change({}, {{1, 2}}, rep).ok());
  fake_->server().DropAfterLines(k);
  absl::Status s = backend_->Change({{1, 2}}, {{3, 4}}, rep);
  if (k >= 4) {
    EXPECT_TRUE(s.ok()) << s;  // lost after the last command: the read-back shows it done
  } else {
    EXPECT_EQ(s.code(), absl::StatusCode::kUnavailable) << s;
  }
  ASSERT_EQ(out.size(), 2u);
  EXPECT_EQ(out[0].status.ok(), k >= 2) << out[0].status;
  EXPECT_EQ(out[1].status.ok(), k >= 4) << out[1].status;
  std::vector<Circuit> expect;
  if (k >= 4) expect.push_back({3, 4});
  EXPECT_EQ(MustRead(), expect);
  EXPECT_GE(Count("ACT-USER"), 2);  // logged in again on the new connection
  ASSERT_TRUE(backend_->Change(expect, {{9, 10}}, rep).ok());
  EXPECT_THAT(MustRead(), ElementsAre(Circuit{9, 10}));
}

INSTANTIATE_TEST_SUITE_P(AfterCommand, Tl1DropTest, ::testing::Values(1, 2, 3, 4));

TEST_F(Tl1Test, PacingHonoured) {
  auto o = Options();
  o.command_pacing = absl::Milliseconds(40);
  Open(o);
  size_t first = fake_->server().received().size();
  ChangeReport rep;
  ASSERT_TRUE(backend_->Change({}, {{1, 2}}, rep).ok());
  auto r = fake_->server().received();
  ASSERT_GE(r.size() - first, 3u);
  for (size_t i = first + 1; i < r.size(); ++i) {
    EXPECT_GE(r[i].at - r[i - 1].at, absl::Milliseconds(28)) << r[i].line;
  }
}

TEST_F(Tl1Test, GarbageIsACleanErrorThenRecovers) {
  fake_->server().SetGarbageReply("RTRV-PATCH", "what?\r\n;");
  auto r = backend_->Read();
  EXPECT_EQ(r.status().code(), absl::StatusCode::kInternal) << r.status();
  EXPECT_THAT(r.status().message(), HasSubstr("unexpected reply"));
  fake_->server().SetGarbageReply("", "");
  EXPECT_TRUE(backend_->Read().ok());
}

}  // namespace
}  // namespace mixnet::ocs
