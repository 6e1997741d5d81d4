// Tests of the fake Polatis switch itself (its SCPI syntax, error queue and
// state rules, so the backend tests stand on a faithful fake), spoken to
// through LineClient, which these tests also cover (pacing-free round trips,
// reconnect rules, oversized replies). Test thread plus the fake's threads.
#include "tests/ocs_driver/polatis/fake_polatis.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <string>

#include "ocs_driver/polatis/line_client.h"

namespace mixnet::ocs {
namespace {

using testing::FakePolatis;
using testing::FakePolatisOptions;
using ::testing::HasSubstr;

class FakePolatisTest : public ::testing::Test {
 protected:
  void SetUp() override {
    ASSERT_TRUE(fake_.Start().ok());
    client_ = std::make_unique<LineClient>(LineClientOptions{
        .host = "127.0.0.1", .port = fake_.port(), .reply_timeout = absl::Milliseconds(300)});
  }
  std::string Q(const std::string& command) {
    client_->AllowReconnect();
    auto r = client_->Query(command);
    EXPECT_TRUE(r.ok()) << command << ": " << r.status();
    return r.ok() ? *r : "<error>";
  }
  void C(const std::string& command) {
    client_->AllowReconnect();
    ASSERT_TRUE(client_->Send(command).ok());
  }

  FakePolatis fake_{FakePolatisOptions{.size = 8}};
  std::unique_ptr<LineClient> client_;
};

TEST_F(FakePolatisTest, AnswersIdentitySizeAndEmptyState) {
  EXPECT_THAT(Q("*IDN?"), HasSubstr("Polatis,"));
  EXPECT_EQ(Q(":oxc:swit:size?"), "8,8");
  EXPECT_EQ(Q(":OXC:SWITch:SIZE?"), "8,8");
  EXPECT_EQ(Q(":oxc:swit:conn:stat?"), "(@),(@)");
  EXPECT_EQ(Q(":syst:err?"), "0,\"No error\"");
  EXPECT_EQ(Q("*OPC?"), "1");
}

TEST_F(FakePolatisTest, AddSubOnlyDiscAllAndPortQuery) {
  C(":oxc:swit:conn:add (@1,2),(@10,9)");
  C(":OXC:SWITCH:CONNECT:ADD (@3:4),(@11:12)");
  EXPECT_EQ(Q(":oxc:swit:conn:stat?"), "(@1,2,3,4),(@10,9,11,12)");
  EXPECT_EQ(Q(":oxc:swit:conn:port? 3"), "11");
  EXPECT_EQ(Q(":oxc:swit:conn:port? 11"), "3");
  EXPECT_EQ(Q(":oxc:swit:conn:port? 5"), "");
  C(":oxc:swit:conn:sub (@1),(@10)");
  EXPECT_EQ(Q(":oxc:swit:conn:stat?"), "(@2,3,4),(@9,11,12)");
  C(":oxc:swit:conn:only (@5),(@14)");
  EXPECT_EQ(Q(":oxc:swit:conn:stat?"), "(@5),(@14)");
  C(":oxc:swit:disc:all");
  EXPECT_EQ(Q(":oxc:swit:conn:stat?"), "(@),(@)");
  EXPECT_EQ(Q(":syst:err?"), "0,\"No error\"");
}

struct BadCommand {
  const char* command;
  int code;
  const char* text;
};

class FakeRejectsTest : public FakePolatisTest, public ::testing::WithParamInterface<BadCommand> {};

TEST_P(FakeRejectsTest, QueuesErrorAndKeepsState) {
  C(":oxc:swit:conn:add (@1,2),(@10,9)");
  C(GetParam().command);
  std::string err = Q(":syst:err?");
  EXPECT_THAT(err, HasSubstr(std::to_string(GetParam().code) + ",\""));
  EXPECT_THAT(err, HasSubstr(GetParam().text));
  EXPECT_EQ(Q(":syst:err?"), "0,\"No error\"");
  EXPECT_EQ(Q(":oxc:swit:conn:stat?"), "(@1,2),(@10,9)");
}

INSTANTIATE_TEST_SUITE_P(
    Commands, FakeRejectsTest,
    ::testing::Values(BadCommand{":oxc:swit:conn:add (@3),(@9)", -221, "port 9 already connected"},
                      BadCommand{":oxc:swit:conn:add (@1),(@12)", -221, "port 1 already connected"},
                      BadCommand{":oxc:swit:conn:add (@3,4),(@12,12)", -221, "port 12 used twice"},
                      BadCommand{":oxc:swit:conn:add (@9),(@12)", -222, "port 9"},
                      BadCommand{":oxc:swit:conn:add (@3),(@17)", -222, "port 17"},
                      BadCommand{":oxc:swit:conn:add (@3),(@4)", -222, "port 4"},
                      BadCommand{":oxc:swit:conn:add (@3,4),(@12)", -109, "differ"},
                      BadCommand{":oxc:swit:conn:add (@3),(@12", -102, "Syntax"},
                      BadCommand{":oxc:swit:conn:add 3,12", -102, "Syntax"},
                      BadCommand{":oxc:swit:conn:sub (@1),(@9)", -221, "not connected"},
                      BadCommand{":oxc:swit:conn:sub (@1,2),(@10,11)", -221, "port 2"},
                      BadCommand{":oxc:swit:connx:add (@3),(@12)", -113, "Undefined header"},
                      BadCommand{"hello", -113, "Undefined header"},
                      BadCommand{":oxc:boot:mode sometimes", -224, "Illegal"}));

TEST_F(FakePolatisTest, ErrorQueueAllAndCls) {
  fake_.QueueError(-100, "Command error");
  fake_.QueueError(-200, "Execution error");
  EXPECT_EQ(Q(":syst:err:all?"), "-100,\"Command error\",-200,\"Execution error\"");
  EXPECT_EQ(Q(":syst:err:all?"), "0,\"No error\"");
  fake_.QueueError(-100, "Command error");
  C("*CLS");
  EXPECT_EQ(Q(":SYSTem:ERRor:NEXT?"), "0,\"No error\"");
  C(":oxc:boot:mode RESTore");
  EXPECT_EQ(Q(":oxc:boot:mode?"), "RESTORE");
}

TEST_F(FakePolatisTest, ClientDoesNotReconnectMidOperation) {
  EXPECT_EQ(Q("*OPC?"), "1");
  fake_.DropAfterCommands(1);
  auto r = client_->Query("*IDN?");  // answered by closing the connection
  EXPECT_EQ(r.status().code(), absl::StatusCode::kUnavailable) << r.status();
  EXPECT_FALSE(client_->connected());
  // Same operation: no silent reconnect.
  absl::Status s = client_->Send("*OPC?");
  EXPECT_EQ(s.code(), absl::StatusCode::kUnavailable);
  EXPECT_THAT(s.message(), HasSubstr("not reconnecting"));
  EXPECT_EQ(fake_.accepted(), 1);
  // Next operation: reconnects.
  EXPECT_EQ(Q("*OPC?"), "1");
  EXPECT_EQ(fake_.accepted(), 2);
}

TEST_F(FakePolatisTest, IdleDropIsHealedByTheNextOperation) {
  EXPECT_EQ(Q("*OPC?"), "1");
  fake_.DropAfterCommands(1);
  C(":oxc:swit:disc:all");  // the fake closes after this one
  absl::SleepFor(absl::Milliseconds(50));
  EXPECT_EQ(Q(":oxc:swit:size?"), "8,8");
  EXPECT_EQ(fake_.accepted(), 2);
}

TEST_F(FakePolatisTest, OversizedReplyIsAnError) {
  client_ = std::make_unique<LineClient>(LineClientOptions{.host = "127.0.0.1",
                                                           .port = fake_.port(),
                                                           .reply_timeout = absl::Seconds(2),
                                                           .max_line_bytes = 16});
  auto r = client_->Query("*IDN?");
  EXPECT_EQ(r.status().code(), absl::StatusCode::kInternal) << r.status();
  EXPECT_THAT(r.status().message(), HasSubstr("exceeds 16 bytes"));
  EXPECT_FALSE(client_->connected());
}

TEST_F(FakePolatisTest, UnansweredQueryTimesOutNamingPeerAndCommand) {
  auto r = client_->Query(":oxc:swit:conn:port? 99");  // out of range: error, no answer
  EXPECT_EQ(r.status().code(), absl::StatusCode::kDeadlineExceeded) << r.status();
  EXPECT_THAT(r.status().message(), HasSubstr("127.0.0.1:" + std::to_string(fake_.port())));
  EXPECT_THAT(r.status().message(), HasSubstr("port? 99"));
  EXPECT_THAT(Q(":syst:err?"), HasSubstr("-222"));
}

TEST(ParseHostPort, Forms) {
  std::string host;
  int port = 0;
  ASSERT_TRUE(ParseHostPort("10.0.0.5", 5025, host, port).ok());
  EXPECT_EQ(host, "10.0.0.5");
  EXPECT_EQ(port, 5025);
  ASSERT_TRUE(ParseHostPort("ocs1.lab:3082", 5025, host, port).ok());
  EXPECT_EQ(host, "ocs1.lab");
  EXPECT_EQ(port, 3082);
  ASSERT_TRUE(ParseHostPort("[fe80::1]:6000", 5025, host, port).ok());
  EXPECT_EQ(host, "fe80::1");
  EXPECT_EQ(port, 6000);
  ASSERT_TRUE(ParseHostPort("fe80::1", 5025, host, port).ok());
  EXPECT_EQ(host, "fe80::1");
  EXPECT_EQ(port, 5025);
  for (const char* bad :
       {"", ":5025", "host:", "host:0", "host:70000", "host:x", "[::1", "[::1]x"}) {
    absl::Status s = ParseHostPort(bad, 5025, host, port);
    EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument) << bad;
  }
}

}  // namespace
}  // namespace mixnet::ocs
