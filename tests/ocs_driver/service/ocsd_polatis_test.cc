// mixnet-ocsd --backend polatis end to end: the daemon as a real process
// driving the fake SCPI Polatis switch of tests/ocs_driver/polatis over TCP.
// Checks the duplex mapping seen on the "hardware", that a start reads the
// switch and clears nothing, a hardware fault reported per circuit, and a
// connection dropped mid-apply. Label cpu. Test thread plus the fake's
// connection threads.
#include "absl/strings/match.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/ocs_driver/daemon_process.h"
#include "tests/ocs_driver/polatis/fake_polatis.h"
#include "tests/ocs_driver/service/ocsd_test_util.h"

namespace mixnet::testing {
namespace {

using ::testing::ElementsAre;
using ::testing::Pair;
using ::testing::UnorderedElementsAre;

class OcsdPolatisTest : public ::testing::Test {
 protected:
  void SetUp() override { ASSERT_TRUE(fake_.Start().ok()); }

  std::unique_ptr<DaemonProcess> Start(const std::string& state_dir) {
    auto d = DaemonProcess::Start(
        {"--backend", "polatis", "--device", absl::StrCat("127.0.0.1:", fake_.port()),
         "--pacing-ms", "0", "--timeout-ms", "2000", "--listen", "127.0.0.1:0"},
        {.state_dir = state_dir});
    EXPECT_TRUE(d.ok()) << d.status();
    return d.ok() ? std::move(*d) : nullptr;
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

}  // namespace
}  // namespace mixnet::testing
