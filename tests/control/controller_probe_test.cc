// The mixnet-controller binary to standard tools (label cpu): grpc.health.v1
// (SERVING for "" and mixnet.control.v1.Controller, NOT_FOUND for others)
// and server reflection listing the service. The controller runs as its own
// process (this test process serves health for its in-process sim switch,
// which must not stand in for the controller's), on a unix socket. Test
// thread.
#include <fstream>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/common/grpc_probe.h"
#include "tests/control/controller_test_util.h"

namespace mixnet::testing {
namespace {

using ::testing::HasSubstr;
using Serving = grpc::health::v1::HealthCheckResponse;

const RegionDef kR0{"r0", "h", 4, "ocs0", 1};

class ControllerProbeTest : public ::testing::Test {
 protected:
  void SetUp() override {
    absl::StatusOr<SimSwitch> sw = StartSimSwitch(dir_.path(), "ocs0");
    ASSERT_TRUE(sw.ok()) << sw.status();
    switch_ = std::move(*sw);
    const std::string spec_file = dir_.path() + "/spec.yaml";
    std::ofstream(spec_file) << MakeSpecYaml({kR0}, {"ocs0"});
    DaemonProcess::Options o;
    o.binary = MIXNET_CONTROLLER_BIN;
    o.state_dir = dir_.path() + "/ctl";
    auto p =
        DaemonProcess::Start({"--spec", spec_file, "--listen", "unix:" + dir_.path() + "/ctl.sock",
                              "--ocs", "ocs0=" + switch_.address},
                             o);
    ASSERT_TRUE(p.ok()) << p.status();
    controller_ = std::move(*p);
    channel_ = Connect(controller_->address());
  }

  TempDir dir_;
  SimSwitch switch_;
  std::unique_ptr<DaemonProcess> controller_;
  std::shared_ptr<grpc::Channel> channel_;
};

TEST_F(ControllerProbeTest, HealthServiceAnswers) {
  for (const char* service : {"", "mixnet.control.v1.Controller"}) {
    auto st = HealthOf(channel_, service);
    ASSERT_TRUE(st.ok()) << "'" << service << "': " << st.status();
    EXPECT_EQ(*st, Serving::SERVING) << service;
  }
  auto unknown = HealthOf(channel_, "no.such.Service");
  EXPECT_EQ(unknown.status().code(), absl::StatusCode::kNotFound) << unknown.status();
}

TEST_F(ControllerProbeTest, ServerReflectionListsTheService) {
  absl::StatusOr<std::string> reply = ReflectionListServices(channel_);
  ASSERT_TRUE(reply.ok()) << reply.status();
  EXPECT_THAT(*reply, HasSubstr("mixnet.control.v1.Controller"));
  EXPECT_THAT(*reply, HasSubstr("grpc.health.v1.Health"));
}

}  // namespace
}  // namespace mixnet::testing
