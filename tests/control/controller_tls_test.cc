// The controller's API over mutual TLS (label cpu). Certificates are made at
// test time (test_certs.h): a CA, the controller's server certificate
// (127.0.0.1, localhost), worker certificates for hosts h0 (CN) and h1 (a DNS
// SAN under another CN), and one for h0 from another CA. An in-process
// controller with ServerOptions::tls on 127.0.0.1:0 over one sim switch.
//  - No client certificate, one of another CA, or plaintext: every call
//    fails, nothing registers.
//  - A worker acts only as its certificate's host: h1's certificate cannot
//    register as h0, take over h0's worker id, watch, ack or report for it,
//    or report rows of host h0; h0's registration and stream stay as they
//    were. The real WorkerAgent over mTLS registers with its host's
//    certificate, and one holding another host's certificate does not.
//  - A plaintext listen on a non-loopback address is refused unless
//    --insecure-listen-any; with TLS it is allowed.
// Test thread; the fake workers' and agents' own threads.
#include <algorithm>
#include <memory>
#include <string>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "runtime/control/controller_channel.h"
#include "runtime/control/worker_agent.h"
#include "tests/control/controller_test_util.h"
#include "tests/ocs_driver/client/test_certs.h"

namespace mixnet::testing {
namespace {

using ::testing::HasSubstr;

const RegionDef kR0{"r0", "h", 2, "ocs0", 1};

class ControllerTlsTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    certs_ = new TempDir();
    const std::string& d = certs_->path();
    setup_ =
        MakePki(d, {"ca", "rogue-ca"},
                {{"server", "ca", "mixnet-controller", kLocalServerCertExt},
                 {"h0", "ca", "h0", kClientCertExt},
                 {"h1", "ca", "worker-1", absl::StrCat("subjectAltName=DNS:h1\n", kClientCertExt)},
                 {"rogue", "rogue-ca", "h0", kClientCertExt},
                 {"prometheus", "ca", "prometheus", kClientCertExt}});
  }
  static void TearDownTestSuite() {
    delete certs_;
    certs_ = nullptr;
  }
  static std::string Cert(const std::string& file) { return certs_->path() + "/" + file; }

  void SetUp() override {
    ASSERT_TRUE(setup_.ok()) << setup_;
    absl::StatusOr<SimSwitch> sw = StartSimSwitch(dir_.path(), "ocs0");
    ASSERT_TRUE(sw.ok()) << sw.status();
    setup_ctl_.switches["ocs0"] = sw->address;
    switch_ = std::move(*sw);
    setup_ctl_.spec_yaml = MakeSpecYaml({kR0}, {"ocs0"});
    setup_ctl_.state_dir = dir_.path() + "/ctl";
    setup_ctl_.listen = "127.0.0.1:0";
    setup_ctl_.tls = {Cert("server.crt"), Cert("server.key"), Cert("ca.crt")};
    setup_ctl_.metrics_listen = "127.0.0.1:0";
    setup_ctl_.metrics_allow_clients = {"prometheus"};
    auto server = StartController(setup_ctl_);
    ASSERT_TRUE(server.ok()) << server.status();
    server_ = std::move(*server);
  }

  void TearDown() override {
    if (server_) server_->Shutdown(absl::Seconds(1));
  }

  // A client of the controller with the CA and the certificate `name`
  // ("": none).
  TlsClientOptions Client(const std::string& name) {
    TlsClientOptions t;
    t.ca_file = Cert("ca.crt");
    if (!name.empty()) {
      t.cert_file = Cert(name + ".crt");
      t.key_file = Cert(name + ".key");
    }
    return t;
  }
  std::shared_ptr<grpc::Channel> Channel(const std::string& cert) {
    absl::StatusOr<std::shared_ptr<grpc::Channel>> c =
        control::MakeControllerChannel(server_->address(), Client(cert));
    EXPECT_TRUE(c.ok()) << c.status();
    return c.ok() ? *c : nullptr;
  }

  // The registered workers, read with h0's certificate.
  std::vector<std::string> Registered() {
    auto stub = cv1::Controller::NewStub(Channel("h0"));
    grpc::ClientContext ctx;
    ctx.set_deadline(absl::ToChronoTime(absl::Now() + absl::Seconds(5)));
    cv1::ControllerStatus st;
    grpc::Status s = stub->GetStatus(&ctx, cv1::GetStatusRequest(), &st);
    EXPECT_TRUE(s.ok()) << s.error_message();
    std::vector<std::string> out;
    for (const auto& r : st.regions()) {
      for (const std::string& w : r.registered_workers()) out.push_back(w);
    }
    std::sort(out.begin(), out.end());
    return out;
  }

  static inline TempDir* certs_ = nullptr;
  static inline absl::Status setup_;
  TempDir dir_;
  SimSwitch switch_;
  ControllerSetup setup_ctl_;
  std::unique_ptr<control::ControllerServer> server_;
};

TEST_F(ControllerTlsTest, NoCertificateAnotherCaOrPlaintextIsRefused) {
  std::vector<std::pair<std::string, std::shared_ptr<grpc::Channel>>> clients = {
      {"plaintext", grpc::CreateChannel(server_->address(), grpc::InsecureChannelCredentials())},
      {"no client certificate", Channel("")},
  };
  TlsClientOptions rogue = Client("rogue");
  absl::StatusOr<std::shared_ptr<grpc::Channel>> r =
      control::MakeControllerChannel(server_->address(), rogue);
  ASSERT_TRUE(r.ok()) << r.status();
  clients.emplace_back("another CA", *r);
  for (auto& [what, channel] : clients) {
    FakeWorker w(channel, "h0/w", "h0");
    grpc::Status s = w.Register();
    EXPECT_FALSE(s.ok()) << what;
    auto stub = cv1::Controller::NewStub(channel);
    grpc::ClientContext ctx;
    ctx.set_deadline(absl::ToChronoTime(absl::Now() + absl::Seconds(5)));
    cv1::ControllerStatus st;
    EXPECT_FALSE(stub->GetStatus(&ctx, cv1::GetStatusRequest(), &st).ok()) << what;
  }
  EXPECT_TRUE(Registered().empty());
}

TEST_F(ControllerTlsTest, AWorkerActsOnlyAsTheHostItsCertificateNames) {
  auto h0 = Channel("h0");
  auto h1 = Channel("h1");
  // Registering as another host.
  cv1::RegisterResponse resp;
  grpc::Status s = FakeWorker(h1, "h0/w", "h0").Register(&resp);
  EXPECT_EQ(s.error_code(), grpc::StatusCode::PERMISSION_DENIED);
  EXPECT_THAT(s.error_message(), HasSubstr("names worker-1, h1, not host 'h0'"));
  EXPECT_TRUE(Registered().empty());
  // Its own host, named by a DNS SAN; h0 by its CN.
  FakeWorker own(h1, "h1/w", "h1");
  ASSERT_TRUE(own.Register().ok());
  FakeWorker w0(h0, "h0/w", "h0");
  ASSERT_TRUE(w0.Register().ok());
  w0.StartWatch();
  std::optional<cv1::TopologyEvent> snap = w0.Next();
  ASSERT_TRUE(snap.has_value() && snap->kind() == cv1::TopologyEvent::SNAPSHOT);
  // h1's certificate cannot act for h0's worker.
  EXPECT_EQ(FakeWorker(h1, "h0/w", "h1").Register().error_code(),
            grpc::StatusCode::PERMISSION_DENIED);
  auto stub1 = cv1::Controller::NewStub(h1);
  {
    grpc::ClientContext ctx;
    cv1::AckTopologyRequest ack;
    ack.set_worker_id("h0/w");
    ack.set_epoch(1);
    ack.set_phase(cv1::AckTopologyRequest::COMMITTED);
    cv1::AckTopologyResponse out;
    EXPECT_EQ(stub1->AckTopology(&ctx, ack, &out).error_code(),
              grpc::StatusCode::PERMISSION_DENIED);
  }
  {
    grpc::ClientContext ctx;
    ctx.set_deadline(absl::ToChronoTime(absl::Now() + absl::Seconds(5)));
    cv1::WatchTopologyRequest req;
    req.set_worker_id("h0/w");
    auto stream = stub1->WatchTopology(&ctx, req);
    cv1::TopologyEvent ev;
    EXPECT_FALSE(stream->Read(&ev));
    EXPECT_EQ(stream->Finish().error_code(), grpc::StatusCode::PERMISSION_DENIED);
  }
  {
    grpc::ClientContext ctx;
    cv1::WarmPathsRequest req;
    req.set_worker_id("h0/w");
    cv1::WarmPathsResponse out;
    EXPECT_EQ(stub1->WarmPaths(&ctx, req, &out).error_code(), grpc::StatusCode::PERMISSION_DENIED);
  }
  const std::vector<std::string> hosts = {"h0", "h1"};
  const std::vector<double> row = {0, 1e8};
  EXPECT_EQ(SendReport(*stub1, "h0/w", "h0", 0, 0, hosts, row).error_code(),
            grpc::StatusCode::PERMISSION_DENIED);
  EXPECT_EQ(SendReport(*stub1, "h1/w", "h0", 0, 0, hosts, row).error_code(),
            grpc::StatusCode::PERMISSION_DENIED);
  EXPECT_EQ(SendReport(*stub1, "h0/w", "h1", 0, 0, hosts, row).error_code(),
            grpc::StatusCode::PERMISSION_DENIED);
  // Unchanged: both registered, h0's stream still h0's (no round started:
  // no report was taken).
  EXPECT_EQ(Registered(), (std::vector<std::string>{"h0/w", "h1/w"}));
  EXPECT_FALSE(w0.ended());
  absl::SleepFor(absl::Milliseconds(200));
  EXPECT_EQ(w0.queued(), 0u);
  // Its own rows are taken.
  auto stub0 = cv1::Controller::NewStub(h0);
  EXPECT_TRUE(SendReport(*stub0, "h0/w", "h0", 0, 0, hosts, row).ok());
}

TEST_F(ControllerTlsTest, TheWorkerAgentRegistersWithItsHostsCertificateOnly) {
  auto agent = [&](const std::string& host, const std::string& cert) {
    control::WorkerAgentOptions o;
    o.controller = server_->address();
    o.host = host;
    o.worker_id = host + "/agent-" + cert;
    o.tls = Client(cert);
    return control::WorkerAgent::Start(std::move(o));
  };
  auto good = agent("h0", "h0");
  ASSERT_TRUE(good.ok()) << good.status();
  absl::StatusOr<router::Topology> t = (*good)->WaitRegistered(absl::Seconds(10));
  EXPECT_TRUE(t.ok()) << t.status();
  auto other = agent("h0", "h1");
  ASSERT_TRUE(other.ok()) << other.status();
  t = (*other)->WaitRegistered(absl::Seconds(1));
  ASSERT_FALSE(t.ok());
  EXPECT_THAT(t.status().message(), HasSubstr("not host 'h0'"));
  // A certificate without its key is refused before any call.
  control::WorkerAgentOptions o;
  o.controller = server_->address();
  o.host = "h0";
  o.tls.cert_file = Cert("h0.crt");
  absl::StatusOr<std::unique_ptr<control::WorkerAgent>> bad = control::WorkerAgent::Start(o);
  ASSERT_FALSE(bad.ok());
  EXPECT_THAT(bad.status().message(), HasSubstr("MIXNET_CONTROLLER_TLS_KEY"));
}

TEST_F(ControllerTlsTest, MetricsAreServedOverHttpsToTheAllowedCertificateOnly) {
  const std::string url = "https://" + server_->metrics_address() + "/metrics";
  CommandResult ok = CurlGet(url, Cert("ca.crt"), Cert("prometheus.crt"), Cert("prometheus.key"));
  EXPECT_EQ(ok.rc, 0) << ok.err;
  EXPECT_THAT(ok.out, HasSubstr("mixnet_controller_"));
  EXPECT_THAT(ok.out, HasSubstr("HTTP 200"));
  // A certificate of the CA that is not allowed: 403, no metrics.
  CommandResult other = CurlGet(url, Cert("ca.crt"), Cert("h0.crt"), Cert("h0.key"));
  EXPECT_THAT(other.out, HasSubstr("HTTP 403"));
  EXPECT_THAT(other.out, ::testing::Not(HasSubstr("mixnet_controller_")));
  // No certificate, another CA's, plain HTTP: no answer at all.
  const std::vector<std::pair<std::string, CommandResult>> refused = {
      {"no certificate", CurlGet(url, Cert("ca.crt"), "", "")},
      {"another CA", CurlGet(url, Cert("ca.crt"), Cert("rogue.crt"), Cert("rogue.key"))},
      {"plain HTTP",
       CurlGet("http://" + server_->metrics_address() + "/metrics", Cert("ca.crt"), "", "")}};
  for (const auto& [what, r] : refused) {
    EXPECT_NE(r.rc, 0) << what << ": " << r.out;
    EXPECT_THAT(r.out, ::testing::Not(HasSubstr("mixnet_controller_"))) << what;
  }
  // With mTLS the allow list is required; without mTLS it is refused.
  EXPECT_TRUE(absl::IsInvalidArgument(
      CheckMetricsOptions("127.0.0.1:0", MetricsTls{setup_ctl_.tls, {}}, false)));
  EXPECT_TRUE(absl::IsInvalidArgument(
      CheckMetricsOptions("127.0.0.1:0", MetricsTls{{}, {"prometheus"}}, false)));
}

TEST_F(ControllerTlsTest, APlaintextListenOnTheNetworkIsRefused) {
  ControllerSetup plain = setup_ctl_;
  plain.tls = {};
  plain.metrics_listen.clear();
  plain.metrics_allow_clients.clear();
  plain.state_dir = dir_.path() + "/plain";
  plain.listen = "0.0.0.0:0";
  absl::StatusOr<std::unique_ptr<control::ControllerServer>> s = StartController(plain);
  ASSERT_FALSE(s.ok());
  EXPECT_TRUE(absl::IsPermissionDenied(s.status())) << s.status();
  EXPECT_THAT(s.status().message(), HasSubstr("--insecure-listen-any"));
  for (const char* ok : {"127.0.0.1:0", "[::1]:0", "unix:/x", "localhost:1"}) {
    EXPECT_TRUE(CheckPlaintextListen(ok, false, false).ok()) << ok;
  }
  EXPECT_TRUE(CheckPlaintextListen("0.0.0.0:0", /*tls=*/true, false).ok());
  EXPECT_TRUE(CheckPlaintextListen("0.0.0.0:0", false, /*insecure_listen_any=*/true).ok());
  // Some of the TLS files only: refused, naming the three.
  plain.tls.cert_file = Cert("server.crt");
  plain.listen = "127.0.0.1:0";
  s = StartController(plain);
  ASSERT_FALSE(s.ok());
  EXPECT_THAT(s.status().message(), HasSubstr("--tls-client-ca"));
}

}  // namespace
}  // namespace mixnet::testing
