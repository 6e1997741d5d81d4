// Controller limits (label cpu), in process with fake switch drivers: the
// start-up refusal when the next epoch would pass the maximum fencing epoch
// (2^53 - 1) instead of wrapping to 0.
#include <fstream>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/control/controller_test_util.h"

namespace mixnet::testing {
namespace {

using ::testing::HasSubstr;

constexpr uint64_t kTwoTo53Minus1 = 9007199254740991ull;  // documented maximum

const RegionDef kR0{"r0", "h", 4, "ocs0", 1};

// A switch in memory reporting a given highest epoch.
class EpochSwitch final : public control::SwitchDriver {
 public:
  explicit EpochSwitch(uint64_t highest) : highest_(highest) {}
  std::string target() const override { return "fake-epoch"; }
  absl::StatusOr<control::SwitchCircuits> GetCircuits(absl::Time) override {
    control::SwitchCircuits c;
    c.highest_epoch = highest_;
    c.config_version = highest_;
    return c;
  }
  absl::StatusOr<control::SwitchApplyResult> Apply(uint64_t epoch, uint64_t,
                                                   const std::vector<control::PortPair>& circuits,
                                                   absl::Time) override {
    control::SwitchApplyResult r;
    r.highest_epoch = epoch;
    r.actual = circuits;
    return r;
  }

 private:
  const uint64_t highest_;
};

absl::StatusOr<std::unique_ptr<control::ControllerServer>> StartWith(const TempDir& dir,
                                                                     uint64_t switch_epoch) {
  ControllerSetup s;
  s.spec_yaml = MakeSpecYaml({kR0}, {"ocs0"});
  s.state_dir = dir.path() + "/ctl";
  s.listen = "unix:" + dir.path() + "/ctl.sock";
  s.drivers["ocs0"] = std::make_shared<EpochSwitch>(switch_epoch);
  return StartController(s);
}

TEST(ControllerLimitsTest, RefusesToStartWhenTheNextEpochWouldPassTheMaximum) {
  for (uint64_t epoch : std::vector<uint64_t>{~0ull, kTwoTo53Minus1, kTwoTo53Minus1 + 1}) {
    TempDir dir;
    auto server = StartWith(dir, epoch);
    ASSERT_FALSE(server.ok())
        << "started against a switch at epoch " << epoch << ", epoch "
        << Status(*cv1::Controller::NewStub(Connect((*server)->address()))).highest_epoch();
    EXPECT_EQ(server.status().code(), absl::StatusCode::kFailedPrecondition);
    const std::string m(server.status().message());
    EXPECT_THAT(m, HasSubstr("OCS switch ocs0 at fake-epoch holds epoch " + std::to_string(epoch)));
    EXPECT_THAT(m, HasSubstr("maximum fencing epoch 9007199254740991"));
  }
  // One below: the controller runs at the maximum itself.
  TempDir dir;
  auto server = StartWith(dir, kTwoTo53Minus1 - 1);
  ASSERT_TRUE(server.ok()) << server.status();
  EXPECT_EQ(Status(*cv1::Controller::NewStub(Connect((*server)->address()))).highest_epoch(),
            kTwoTo53Minus1);
  (*server)->Shutdown(absl::Seconds(1));
}

TEST(ControllerLimitsTest, RefusesAPersistedEpochAtTheMaximum) {
  TempDir dir;
  {
    auto server = StartWith(dir, 5);  // creates the state dir
    ASSERT_TRUE(server.ok()) << server.status();
    (*server)->Shutdown(absl::Seconds(1));
  }
  std::ofstream(dir.path() + "/ctl/controller_epoch.json")
      << R"({"highest_epoch": 18446744073709551615, "controller_id": "old"})";
  auto server = StartWith(dir, 5);
  ASSERT_FALSE(server.ok());
  EXPECT_THAT(std::string(server.status().message()),
              HasSubstr("holds epoch 18446744073709551615: the next epoch would exceed"));
}

}  // namespace
}  // namespace mixnet::testing
