// mTLS between mixnetctl / OcsClient and mixnet-ocsd (issue 3). A CA, a
// server certificate (SAN 127.0.0.1 and localhost), an allowed client
// ("controller-a"), a not-allowed client ("observer") and a client of an
// unknown CA are made at test time (test_certs.h). Checks: without a client
// certificate nothing can be called; a not-allowed subject reads but gets
// PERMISSION_DENIED on Apply; the allowed one applies; the server name
// override; the daemon's refusal of TLS without --allow-client, and of an
// insecure non-loopback listen address unless --insecure-listen-any.
// Test thread; the daemon and mixnetctl are child processes.
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "mixnet_build_paths.h"  // MIXNETCTL_BIN
#include "nlohmann/json.hpp"
#include "ocs_driver/client/ocs_client.h"
#include "tests/ocs_driver/client/client_test_util.h"
#include "tests/ocs_driver/client/command_runner.h"
#include "tests/ocs_driver/client/test_certs.h"

namespace mixnet::ocs {
namespace {

using ::mixnet::testing::CommandResult;
using ::mixnet::testing::CurlGet;
using ::mixnet::testing::DaemonProcess;
using ::mixnet::testing::kClientCertExt;
using ::mixnet::testing::kLocalServerCertExt;
using ::mixnet::testing::MakeApply;
using ::mixnet::testing::MakeCa;
using ::mixnet::testing::MakeCert;
using ::mixnet::testing::RunCommand;
using ::mixnet::testing::StartSimDaemon;
using ::mixnet::testing::TempDir;
using ::testing::HasSubstr;

std::string Describe(const CommandResult& r) {
  return absl::StrCat(r.command, "\nrc=", r.rc, "\nstdout:\n", r.out, "\nstderr:\n", r.err);
}

class MtlsTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    dir_ = new TempDir();
    const std::string& d = dir_->path();
    const std::string client_ext = kClientCertExt;
    setup_ = MakeCa(d, "ca");
    if (setup_.ok()) setup_ = MakeCa(d, "rogue-ca");
    if (setup_.ok()) {
      setup_ = MakeCert(d, "ca", "server", "mixnet-ocsd", kLocalServerCertExt, 2);
    }
    if (setup_.ok()) setup_ = MakeCert(d, "ca", "allowed", "controller-a", client_ext, 3);
    if (setup_.ok()) setup_ = MakeCert(d, "ca", "other", "observer", client_ext, 4);
    if (setup_.ok()) setup_ = MakeCert(d, "rogue-ca", "rogue", "controller-a", client_ext, 5);
    // RDNs CN then O: gRPC reports the subject as "O=mixnet,CN=ctl-2".
    if (setup_.ok()) {
      setup_ = MakeCert(d, "ca", "ctl2", "ctl-2", client_ext, 6, "/CN=ctl-2/O=mixnet");
    }
  }
  static void TearDownTestSuite() {
    delete dir_;
    dir_ = nullptr;
  }

  void SetUp() override {
    ASSERT_TRUE(setup_.ok()) << setup_;
    StartDaemon("controller-a");
  }

  // (Re)starts the daemon with mTLS and `--allow-client allow`.
  void StartDaemon(const std::string& allow) {
    daemon_.reset();
    absl::StatusOr<std::unique_ptr<DaemonProcess>> d = StartTlsDaemon(allow);
    ASSERT_TRUE(d.ok()) << d.status();
    daemon_ = *std::move(d);
  }
  absl::StatusOr<std::unique_ptr<DaemonProcess>> StartTlsDaemon(const std::string& allow) {
    return StartSimDaemon(8, 0,
                          {"--tls-cert", Path("server.crt"), "--tls-key", Path("server.key"),
                           "--tls-client-ca", Path("ca.crt"), "--allow-client", allow});
  }

  static std::string Path(const std::string& file) { return dir_->path() + "/" + file; }

  // mixnetctl ocs <cmd> --target <daemon> --tls-ca ca.crt [client cert] args...
  CommandResult Ocs(const std::string& cmd, const std::string& client,
                    std::vector<std::string> args = {}) {
    std::vector<std::string> argv = {MIXNETCTL_BIN,      "ocs",          cmd,    "--target",
                                     daemon_->address(), "--timeout-ms", "3000", "--tls-ca",
                                     Path("ca.crt")};
    if (!client.empty()) {
      for (std::string a : {std::string("--tls-cert"), Path(client + ".crt"),
                            std::string("--tls-key"), Path(client + ".key")}) {
        argv.push_back(a);
      }
    }
    argv.insert(argv.end(), args.begin(), args.end());
    return RunCommand(argv, absl::Seconds(20));
  }

  // The actual circuits, read by the allowed client.
  nlohmann::json Actual() {
    CommandResult r = Ocs("get", "allowed", {"--json"});
    EXPECT_EQ(r.rc, 0) << Describe(r);
    try {
      return nlohmann::json::parse(r.out)["actual"];
    } catch (const nlohmann::json::exception& e) {
      ADD_FAILURE() << e.what() << "\n" << Describe(r);
      return nullptr;
    }
  }

  static TempDir* dir_;
  static absl::Status setup_;
  std::unique_ptr<DaemonProcess> daemon_;
};

TempDir* MtlsTest::dir_ = nullptr;
absl::Status MtlsTest::setup_;

const std::vector<std::string> kApply = {"--epoch", "1", "--version", "1", "--circuit", "1-2"};

TEST_F(MtlsTest, ClientWithoutCertificateCannotCallAnything) {
  for (const char* cmd : {"info", "get", "health"}) {
    CommandResult r = Ocs(cmd, "");
    EXPECT_EQ(r.rc, 1) << Describe(r);
    EXPECT_THAT(r.err, HasSubstr(daemon_->address())) << Describe(r);
  }
  CommandResult r = Ocs("apply", "", kApply);
  EXPECT_EQ(r.rc, 1) << Describe(r);
  // Plaintext against the TLS daemon.
  r = RunCommand({MIXNETCTL_BIN, "ocs", "apply", "--target", daemon_->address(), "--timeout-ms",
                  "3000", "--epoch", "1", "--version", "1", "--circuit", "1-2"});
  EXPECT_EQ(r.rc, 1) << Describe(r);
  // A certificate from a CA the daemon does not trust, with an allowed CN.
  r = Ocs("apply", "rogue", kApply);
  EXPECT_EQ(r.rc, 1) << Describe(r);
  EXPECT_EQ(Actual(), nlohmann::json::array());
}

TEST_F(MtlsTest, NotAllowedSubjectReadsButCannotApply) {
  CommandResult r = Ocs("info", "other", {"--json"});
  EXPECT_EQ(r.rc, 0) << Describe(r);
  EXPECT_EQ(Ocs("get", "other").rc, 0);
  EXPECT_EQ(Ocs("health", "other").rc, 0);
  r = Ocs("watch", "other", {"--count", "1"});
  EXPECT_EQ(r.rc, 0) << Describe(r);
  EXPECT_THAT(r.out, HasSubstr("snapshot"));

  r = Ocs("apply", "other", kApply);
  EXPECT_EQ(r.rc, 1) << Describe(r);
  EXPECT_THAT(r.err, HasSubstr("PERMISSION_DENIED"));
  EXPECT_THAT(r.err, HasSubstr(daemon_->address()));
  EXPECT_EQ(Actual(), nlohmann::json::array());
}

TEST_F(MtlsTest, AllowedSubjectApplies) {
  CommandResult r = Ocs("apply", "allowed", kApply);
  ASSERT_EQ(r.rc, 0) << Describe(r);
  EXPECT_EQ(Actual(), nlohmann::json::parse("[[1,2]]"));

  // The library with the same credentials, and the server name override.
  OcsClientOptions o;
  o.target = daemon_->address();
  o.tls.ca_file = Path("ca.crt");
  o.tls.cert_file = Path("allowed.crt");
  o.tls.key_file = Path("allowed.key");
  o.tls.server_name = "localhost";
  absl::StatusOr<std::unique_ptr<OcsClient>> client = OcsClient::Create(o);
  ASSERT_TRUE(client.ok()) << client.status();
  // Another controller id than mixnetctl's: a newer epoch (epoch 1 is
  // mixnetctl's now).
  OcsApplyResult a = (*client)->Apply(MakeApply(2, 1, {{3, 4}}));
  EXPECT_TRUE(a.ok()) << a.status;
  EXPECT_EQ(Actual(), nlohmann::json::parse("[[3,4]]"));

  r = Ocs("info", "allowed", {"--tls-server-name", "not-the-server.example"});
  EXPECT_EQ(r.rc, 1) << Describe(r);
  EXPECT_THAT(r.err, HasSubstr("UNAVAILABLE"));
}

// The README's form "CN=ctl-2,O=mixnet" and gRPC's RFC 2253 order
// "O=mixnet,CN=ctl-2" both name the certificate made with
// -subj /CN=ctl-2/O=mixnet; a different O or an extra attribute does not.
TEST_F(MtlsTest, AllowClientSubjectMatchesInEitherOrder) {
  for (const char* allow : {"CN=ctl-2,O=mixnet", "O=mixnet,CN=ctl-2"}) {
    StartDaemon(allow);  // a fresh daemon and state each time
    ASSERT_NE(daemon_, nullptr);
    CommandResult r = Ocs("apply", "ctl2", kApply);
    EXPECT_EQ(r.rc, 0) << "--allow-client " << allow << "\n" << Describe(r);
    r = Ocs("apply", "allowed", {"--epoch", "1", "--version", "99", "--circuit", "5-6"});
    EXPECT_EQ(r.rc, 1) << Describe(r);
    EXPECT_THAT(r.err, HasSubstr("PERMISSION_DENIED")) << Describe(r);
    EXPECT_THAT(r.err, HasSubstr("CN=controller-a")) << "the refusal names the subject";
  }
  for (const char* allow : {"CN=ctl-2,O=other", "CN=ctl-2", "CN=ctl-2,O=mixnet,OU=lab"}) {
    StartDaemon(allow);
    ASSERT_NE(daemon_, nullptr);
    CommandResult r = Ocs("apply", "ctl2", {"--epoch", "1", "--version", "50", "--circuit", "7-8"});
    EXPECT_EQ(r.rc, 1) << "--allow-client " << allow << "\n" << Describe(r);
    EXPECT_THAT(r.err, HasSubstr("PERMISSION_DENIED")) << Describe(r);
  }
  daemon_.reset();
  absl::StatusOr<std::unique_ptr<DaemonProcess>> bad = StartTlsDaemon("CN=ctl-2,O");
  ASSERT_FALSE(bad.ok()) << "a malformed --allow-client was accepted";
  EXPECT_THAT(std::string(bad.status().message()), HasSubstr("--allow-client"));
}

// TLS with no --allow-client would let every certificate of the CA (workers,
// tools) change the switch: the daemon refuses to start, saying so.
TEST_F(MtlsTest, TlsWithoutAllowClientDoesNotStart) {
  daemon_.reset();
  absl::StatusOr<std::unique_ptr<DaemonProcess>> d =
      StartSimDaemon(8, 0,
                     {"--tls-cert", Path("server.crt"), "--tls-key", Path("server.key"),
                      "--tls-client-ca", Path("ca.crt")});
  ASSERT_FALSE(d.ok()) << "mixnet-ocsd with mTLS and no --allow-client started at "
                       << (*d)->address();
  EXPECT_THAT(std::string(d.status().message()), HasSubstr("mTLS needs --allow-client"));
}

// With mTLS, /metrics is HTTPS for the --metrics-allow-client certificates
// only: "observer" (not allowed to Apply) scrapes; "controller-a" (allowed
// to Apply, not to scrape) gets 403; none, another CA's: no answer.
TEST_F(MtlsTest, MetricsOverHttpsOnlyForTheAllowedScraper) {
  daemon_.reset();
  const std::vector<std::string> tls = {
      "--tls-cert",   Path("server.crt"), "--tls-key",    Path("server.key"), "--tls-client-ca",
      Path("ca.crt"), "--allow-client",   "controller-a", "--metrics-listen", "127.0.0.1:0"};
  absl::StatusOr<std::unique_ptr<DaemonProcess>> refused = StartSimDaemon(8, 0, tls);
  ASSERT_FALSE(refused.ok());
  EXPECT_THAT(std::string(refused.status().message()), HasSubstr("--metrics-allow-client"));
  std::vector<std::string> args = tls;
  args.insert(args.end(), {"--metrics-allow-client", "observer"});
  absl::StatusOr<std::unique_ptr<DaemonProcess>> d = StartSimDaemon(8, 0, args);
  ASSERT_TRUE(d.ok()) << d.status();
  daemon_ = *std::move(d);
  const std::string log = daemon_->Log();
  const std::string mark = "metrics on https://";
  const size_t at = log.find(mark);
  ASSERT_NE(at, std::string::npos) << log;
  const size_t host = at + mark.size();
  const std::string url =
      absl::StrCat("https://", log.substr(host, log.find('/', host) - host), "/metrics");
  CommandResult ok = CurlGet(url, Path("ca.crt"), Path("other.crt"), Path("other.key"));
  EXPECT_EQ(ok.rc, 0) << Describe(ok);
  EXPECT_THAT(ok.out, HasSubstr("mixnet_ocsd_applies_total"));
  EXPECT_THAT(ok.out, HasSubstr("HTTP 200"));
  CommandResult writer = CurlGet(url, Path("ca.crt"), Path("allowed.crt"), Path("allowed.key"));
  EXPECT_THAT(writer.out, HasSubstr("HTTP 403")) << Describe(writer);
  EXPECT_THAT(writer.out, ::testing::Not(HasSubstr("mixnet_ocsd_")));
  for (const CommandResult& r :
       {CurlGet(url, Path("ca.crt"), "", ""),
        CurlGet(url, Path("ca.crt"), Path("rogue.crt"), Path("rogue.key"))}) {
    EXPECT_NE(r.rc, 0) << Describe(r);
    EXPECT_THAT(r.out, ::testing::Not(HasSubstr("mixnet_ocsd_"))) << Describe(r);
  }
}

TEST(ListenPolicyTest, InsecureNonLoopbackListenNeedsExplicitFlag) {
  absl::StatusOr<std::unique_ptr<DaemonProcess>> d = StartSimDaemon(8, 0, {}, "0.0.0.0:0");
  ASSERT_FALSE(d.ok()) << "mixnet-ocsd listened insecurely on 0.0.0.0 at " << (*d)->address();
  EXPECT_THAT(std::string(d.status().message()), HasSubstr("insecure-listen-any"));

  d = StartSimDaemon(8, 0, {"--insecure-listen-any"}, "0.0.0.0:0");
  ASSERT_TRUE(d.ok()) << d.status();
  std::vector<std::string> parts = absl::StrSplit((*d)->address(), ':');
  ASSERT_GE(parts.size(), 2u) << (*d)->address();
  CommandResult r =
      RunCommand({MIXNETCTL_BIN, "ocs", "health", "--target", "127.0.0.1:" + parts.back()});
  EXPECT_EQ(r.rc, 0) << Describe(r);
}

}  // namespace
}  // namespace mixnet::ocs
