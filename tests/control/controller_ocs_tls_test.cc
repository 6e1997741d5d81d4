// mixnet-controller to a mixnet-ocsd that requires mTLS (label cpu).
// Certificates are made at test time (test_certs.h): a CA, the daemon's
// server certificate, an allowed client ("controller-a"), a client the daemon
// does not allow ("observer") and one of another CA. A sim mixnet-ocsd with
// --tls-cert/--tls-key/--tls-client-ca and --allow-client controller-a; the
// mixnet-controller binary with --ocs-tls-ca/--ocs-tls-cert/--ocs-tls-key.
// With the allowed certificate the controller starts (it reads the switch
// and claims its epoch there) and the warm-up sweep of two real WorkerAgents
// commits its rounds through the switch (Apply over mTLS). With the
// certificate the daemon does not allow it reads the switch (open to every
// certificate of the CA) but its claim is refused, naming --allow-client: it
// does not start, and the switch's epoch does not move. Without a client
// certificate, or with one of another CA, it does not start, and its error
// names the switch.
// Test thread; the daemons are child processes; the agents run their threads.
#include <fstream>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "mixnet_build_paths.h"  // MIXNET_CONTROLLER_BIN, MIXNET_OCSD_BIN
#include "ocs_driver/client/ocs_client.h"
#include "runtime/control/worker_agent.h"
#include "tests/control/controller_test_util.h"
#include "tests/control/recording_follower.h"
#include "tests/ocs_driver/client/test_certs.h"

namespace mixnet::testing {
namespace {

using ::testing::HasSubstr;

const RegionDef kR0{"r0", "h", 2, "ocs0", 1};

class ControllerOcsTlsTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    certs_ = new TempDir();
    const std::string& d = certs_->path();
    setup_ = MakePki(d, {"ca", "rogue-ca"},
                     {{"server", "ca", "mixnet-ocsd", kLocalServerCertExt},
                      {"allowed", "ca", "controller-a", kClientCertExt},
                      {"observer", "ca", "observer", kClientCertExt},
                      {"rogue", "rogue-ca", "controller-a", kClientCertExt}});
  }
  static void TearDownTestSuite() {
    delete certs_;
    certs_ = nullptr;
  }
  static std::string Cert(const std::string& file) { return certs_->path() + "/" + file; }

  void SetUp() override {
    ASSERT_TRUE(setup_.ok()) << setup_;
    auto d = DaemonProcess::Start(
        {"--backend", "sim", "--ports", "8", "--switch-ms", "0", "--listen", "127.0.0.1:0",
         "--tls-cert", Cert("server.crt"), "--tls-key", Cert("server.key"), "--tls-client-ca",
         Cert("ca.crt"), "--allow-client", "controller-a"},
        DaemonProcess::Options{});
    ASSERT_TRUE(d.ok()) << d.status();
    ocsd_ = *std::move(d);
    spec_ = dir_.path() + "/spec.yaml";
    std::ofstream(spec_) << MakeSpecYaml({kR0}, {"ocs0"}, /*ports=*/8);
  }

  // mixnet-controller with the switch's CA and the client certificate
  // `client` ("": none) for its calls to ocs0.
  absl::StatusOr<std::unique_ptr<DaemonProcess>> StartControllerBinary(const std::string& client) {
    DaemonProcess::Options o;
    o.binary = MIXNET_CONTROLLER_BIN;
    o.state_dir = dir_.path() + "/ctl-" + (client.empty() ? "none" : client);
    std::vector<std::string> args = {"--spec",
                                     spec_,
                                     "--listen",
                                     "unix:" + o.state_dir + ".sock",
                                     "--ocs",
                                     "ocs0=" + ocsd_->address(),
                                     "--ocs-tls-ca",
                                     Cert("ca.crt"),
                                     "--switch-timeout-ms",
                                     "3000"};
    if (!client.empty()) {
      for (const std::string& a : {std::string("--ocs-tls-cert"), Cert(client + ".crt"),
                                   std::string("--ocs-tls-key"), Cert(client + ".key")}) {
        args.push_back(a);
      }
    }
    return DaemonProcess::Start(args, o);
  }

  // The switch's fencing epoch, read with the allowed certificate.
  uint64_t SwitchEpoch() {
    ocs::OcsClientOptions o;
    o.target = ocsd_->address();
    o.tls.ca_file = Cert("ca.crt");
    o.tls.cert_file = Cert("allowed.crt");
    o.tls.key_file = Cert("allowed.key");
    auto client = ocs::OcsClient::Create(o);
    EXPECT_TRUE(client.ok()) << client.status();
    if (!client.ok()) return 0;
    auto info = (*client)->GetInfo(absl::Seconds(5));
    EXPECT_TRUE(info.ok()) << info.status();
    return info.ok() ? info->highest_epoch() : 0;
  }

  // Both hosts' agents ask for the warm-up sweep; returns h0's outcome.
  control::WarmOutcome Sweep(const std::string& controller) {
    std::vector<std::unique_ptr<RecordingFollower>> followers;
    std::vector<std::unique_ptr<control::WorkerAgent>> agents;
    for (const char* h : {"h0", "h1"}) {
      control::WorkerAgentOptions o;
      o.controller = controller;
      o.worker_id = std::string(h) + "/agent";
      o.host = h;
      auto agent = control::WorkerAgent::Start(o);
      EXPECT_TRUE(agent.ok()) << agent.status();
      if (!agent.ok()) return {};
      followers.push_back(std::make_unique<RecordingFollower>());
      (*agent)->Follow(followers.back().get());
      agents.push_back(*std::move(agent));
    }
    control::WarmOutcome other;
    std::thread t([&] { other = agents[1]->WarmPaths(absl::Seconds(20)); });
    control::WarmOutcome mine = agents[0]->WarmPaths(absl::Seconds(20));
    t.join();
    EXPECT_EQ(other.complete, mine.complete);
    return mine;
  }

  static TempDir* certs_;
  static absl::Status setup_;
  TempDir dir_;
  std::string spec_;
  std::unique_ptr<DaemonProcess> ocsd_;
};

TempDir* ControllerOcsTlsTest::certs_ = nullptr;
absl::Status ControllerOcsTlsTest::setup_;

TEST_F(ControllerOcsTlsTest, TheAllowedCertificateDrivesTheSwitch) {
  auto ctl = StartControllerBinary("allowed");
  ASSERT_TRUE(ctl.ok()) << ctl.status();
  const uint64_t before = SwitchEpoch();
  const control::WarmOutcome o = Sweep((*ctl)->address());
  // K2's one matching, then the empty topology it had: two Apply calls.
  EXPECT_TRUE(o.complete) << o.reason << "\n" << (*ctl)->Log();
  EXPECT_EQ(o.rounds, 2u);
  EXPECT_GT(SwitchEpoch(), before);
}

TEST_F(ControllerOcsTlsTest, ACertificateTheSwitchDoesNotAllowChangesNothing) {
  const uint64_t before = SwitchEpoch();
  // It reads the switch (open to every certificate of the CA), but its claim
  // of the epoch at start is an Apply, which the daemon refuses.
  auto ctl = StartControllerBinary("observer");
  ASSERT_FALSE(ctl.ok()) << "started with a certificate the switch does not allow";
  EXPECT_THAT(std::string(ctl.status().message()), HasSubstr("--allow-client"));
  EXPECT_THAT(std::string(ctl.status().message()), HasSubstr("claiming epoch"));
  EXPECT_EQ(SwitchEpoch(), before);
}

TEST_F(ControllerOcsTlsTest, NoCertificateOrAnotherCasDoesNotStart) {
  for (const std::string client : {"", "rogue"}) {
    auto ctl = StartControllerBinary(client);
    ASSERT_FALSE(ctl.ok()) << "started with client certificate '" << client << "'";
    EXPECT_THAT(std::string(ctl.status().message()), HasSubstr("OCS switch ocs0")) << ctl.status();
  }
}

}  // namespace
}  // namespace mixnet::testing
