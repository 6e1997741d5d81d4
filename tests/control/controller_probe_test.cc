// The mixnet-controller binary to standard tools (label cpu): grpc.health.v1
// (SERVING for "" and mixnet.control.v1.Controller, NOT_FOUND for others),
// server reflection listing the service, request metadata over the limit
// failing that call alone, and a malformed body answered INVALID_ARGUMENT. The controller runs as
// its own process (this test process serves health for its in-process sim switch, which must not
// stand in for the controller's), on a unix socket. Test thread.
#include <fstream>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "mixnet_build_paths.h"  // MIXNET_CONTROLLER_BIN
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

// One call with oversized metadata used to end the connection, and with it a
// worker's WatchTopology stream on the same channel.
TEST_F(ControllerProbeTest, OversizedMetadataFailsOnlyItsCall) {
  FakeWorker w(channel_, "h0/w", "h0");
  ASSERT_TRUE(w.Register().ok());
  w.StartWatch();
  ASSERT_TRUE(w.Next().has_value());  // SNAPSHOT
  auto stub = cv1::Controller::NewStub(channel_);
  for (int kib : {17, 64}) {
    grpc::ClientContext ctx;
    ctx.set_deadline(ProbeDeadline());
    ctx.AddMetadata("x-big", std::string(kib * 1024, 'a'));
    cv1::ControllerStatus st;
    grpc::Status s = stub->GetStatus(&ctx, cv1::GetStatusRequest(), &st);
    EXPECT_EQ(s.error_code(), grpc::StatusCode::RESOURCE_EXHAUSTED) << kib << " KiB";
    EXPECT_THAT(s.error_message(), HasSubstr("exceeds the limit of 16384 bytes"));
  }
  {
    grpc::ClientContext ctx;
    ctx.set_deadline(ProbeDeadline());
    ctx.AddMetadata("x-token", std::string(12 * 1024, 'a'));  // within the limit
    cv1::ControllerStatus st;
    EXPECT_TRUE(stub->GetStatus(&ctx, cv1::GetStatusRequest(), &st).ok());
  }
  absl::SleepFor(absl::Milliseconds(300));
  EXPECT_FALSE(w.ended()) << "the watch stream on the same connection ended";
  EXPECT_EQ(Status(*stub).regions(0).registered_workers_size(), 1);
}

TEST_F(ControllerProbeTest, MalformedBodyIsInvalidArgument) {
  for (const auto& [method, type] : std::vector<std::pair<std::string, std::string>>{
           {"/mixnet.control.v1.Controller/Register", "mixnet.control.v1.RegisterRequest"},
           {"/mixnet.control.v1.Controller/AckTopology", "mixnet.control.v1.AckTopologyRequest"},
           {"/mixnet.control.v1.Controller/WatchTopology",
            "mixnet.control.v1.WatchTopologyRequest"}}) {
    grpc::Status s = RawUnaryCall(channel_, method,
                                  std::string("\x0a\x05"
                                              "ab"));
    EXPECT_EQ(s.error_code(), grpc::StatusCode::INVALID_ARGUMENT)
        << method << ": " << s.error_code() << " " << s.error_message();
    EXPECT_THAT(s.error_message(), HasSubstr(type));
  }
}

// In the ReportTraffic client stream a row that is not a TrafficReport
// used to look like the end of the stream (the call ended OK); now it ends
// the stream with INVALID_ARGUMENT naming the row.
TEST_F(ControllerProbeTest, MalformedReportRowIsInvalidArgument) {
  FakeWorker w(channel_, "h0/w", "h0");
  ASSERT_TRUE(w.Register().ok());
  cv1::TrafficReport row;
  row.set_worker_id("h0/w");
  row.set_host("h0");
  row.set_direction(cv1::DISPATCH);
  for (int i = 0; i < kR0.hosts; ++i) {
    row.add_peer_hosts(absl::StrCat("h", i));
    row.add_bytes(i == 0 ? 0 : 100);
  }
  const std::string method = "/mixnet.control.v1.Controller/ReportTraffic";
  grpc::Status s = RawClientStreamCall(channel_, method, {row.SerializeAsString()});
  EXPECT_TRUE(s.ok()) << s.error_message();
  row.set_iteration(1);
  s = RawClientStreamCall(channel_, method,
                          {row.SerializeAsString(), std::string("\x0a\x05"
                                                                "ab")});
  EXPECT_EQ(s.error_code(), grpc::StatusCode::INVALID_ARGUMENT)
      << s.error_code() << " " << s.error_message();
  EXPECT_THAT(s.error_message(), HasSubstr("row 2"));
  EXPECT_THAT(s.error_message(), HasSubstr("mixnet.control.v1.TrafficReport"));
  EXPECT_THAT(s.error_message(), HasSubstr("1 rows accepted"));
}

}  // namespace
}  // namespace mixnet::testing
