// OcsClient and its helpers: target parsing, circuit arguments, the
// partial-failure details, and every call against a real mixnet-ocsd (sim
// backend, started as a process): GetInfo, GetCrossConnects, Apply (success,
// no-op, stale epoch, partial failure decoded), Watch with callback and
// cancel, Health, deadlines, an unreachable daemon, a slow one, a unix socket.
// Test thread, plus each OcsWatch's reader thread.
#include "ocs_driver/client/ocs_client.h"

#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"
#include "gmock/gmock.h"
#include "google/rpc/status.pb.h"
#include "gtest/gtest.h"
#include "ocs_driver/client/circuit_args.h"
#include "ocs_driver/client/grpc_status.h"
#include "ocs_driver/client/target.h"
#include "tests/ocs_driver/client/client_test_util.h"
#include "tests/ocs_driver/client/slow_proxy.h"

namespace mixnet::ocs {
namespace {

using ::mixnet::testing::CircuitPairs;
using ::mixnet::testing::DaemonProcess;
using ::mixnet::testing::MakeApply;
using ::mixnet::testing::PairsOf;
using ::mixnet::testing::StartSimDaemon;
using ::mixnet::testing::WaitUntil;
using ::testing::HasSubstr;

TEST(OcsTargetTest, AcceptsHostPortV6AndUnix) {
  absl::StatusOr<OcsTarget> t = ParseOcsTarget("127.0.0.1:50551");
  ASSERT_TRUE(t.ok()) << t.status();
  EXPECT_EQ(t->grpc_target, "127.0.0.1:50551");
  EXPECT_EQ(t->host, "127.0.0.1");
  EXPECT_EQ(t->port, 50551);
  EXPECT_FALSE(t->unix_socket);

  t = ParseOcsTarget("ocs-a.example:1");
  ASSERT_TRUE(t.ok()) << t.status();
  EXPECT_EQ(t->host, "ocs-a.example");

  t = ParseOcsTarget("[::1]:80");
  ASSERT_TRUE(t.ok()) << t.status();
  EXPECT_EQ(t->host, "::1");
  EXPECT_EQ(t->grpc_target, "[::1]:80");

  t = ParseOcsTarget("unix:/run/mixnet/ocsd.sock");
  ASSERT_TRUE(t.ok()) << t.status();
  EXPECT_TRUE(t->unix_socket);
  EXPECT_EQ(t->path, "/run/mixnet/ocsd.sock");
  EXPECT_EQ(t->grpc_target, "unix:/run/mixnet/ocsd.sock");

  t = ParseOcsTarget("unix:///tmp/x.sock");
  ASSERT_TRUE(t.ok()) << t.status();
  EXPECT_EQ(t->path, "/tmp/x.sock");
}

TEST(OcsTargetTest, RejectsMalformed) {
  for (const char* bad :
       {"", "host", ":80", "host:", "host:0", "host:65536", "host:8x", "host:+80", "::1:80",
        "[::1]80", "[::1", "unix:", "a b:1", "dns:///x:1", "host:80 "}) {
    absl::StatusOr<OcsTarget> t = ParseOcsTarget(bad);
    EXPECT_TRUE(absl::IsInvalidArgument(t.status())) << "'" << bad << "' gave " << t.status();
  }
  EXPECT_THAT(std::string(ParseOcsTarget("host").status().message()), HasSubstr("'host'"));
}

TEST(CircuitArgsTest, ParsesArgumentsAndJson) {
  absl::StatusOr<v1::Circuit> c = ParseCircuitArg("1-2");
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_EQ(c->port_a(), 1u);
  EXPECT_EQ(c->port_b(), 2u);
  c = ParseCircuitArg("20:10");
  ASSERT_TRUE(c.ok());
  EXPECT_EQ(c->port_a(), 20u);
  EXPECT_EQ(c->port_b(), 10u);
  for (const char* bad : {"", "1", "1-", "-2", "0-1", "a-b", "1-2-3", "1 - 2", "1--2"}) {
    EXPECT_TRUE(absl::IsInvalidArgument(ParseCircuitArg(bad).status())) << bad;
  }

  auto pairs = [](const absl::StatusOr<std::vector<v1::Circuit>>& v) {
    CircuitPairs out;
    for (const v1::Circuit& c : *v) out.emplace_back(c.port_a(), c.port_b());
    return out;
  };
  auto list = CircuitsFromJson(nlohmann::json::parse("[[1,2],[3,4]]"), "t");
  ASSERT_TRUE(list.ok()) << list.status();
  EXPECT_EQ(pairs(list), (CircuitPairs{{1, 2}, {3, 4}}));
  list = CircuitsFromJson(nlohmann::json::parse(R"({"circuits":[{"port_a":5,"port_b":6}]})"), "t");
  ASSERT_TRUE(list.ok()) << list.status();
  EXPECT_EQ(pairs(list), (CircuitPairs{{5, 6}}));
  list = CircuitsFromJson(nlohmann::json::parse(R"({"circuits":[]})"), "t");
  ASSERT_TRUE(list.ok()) << list.status();
  EXPECT_TRUE(list->empty());
  // `mixnetctl ocs get --json` output: its "desired" set.
  list = CircuitsFromJson(
      nlohmann::json::parse(R"({"actual":[[1,2]],"desired":[[7,8]],"epoch":1})"), "t");
  ASSERT_TRUE(list.ok()) << list.status();
  EXPECT_EQ(pairs(list), (CircuitPairs{{7, 8}}));
  for (const char* bad : {R"({"x":1})", "[[1]]", "[[0,1]]", R"([["1",2]])", R"("s")", "[[1,2,3]]",
                          "[[-1,2]]", "[[1.5,2]]", R"([{"port_a":1}])"}) {
    absl::StatusOr<std::vector<v1::Circuit>> r =
        CircuitsFromJson(nlohmann::json::parse(bad), "f.json");
    EXPECT_TRUE(absl::IsInvalidArgument(r.status())) << bad;
    EXPECT_THAT(std::string(r.status().message()), HasSubstr("f.json")) << bad;
  }
  EXPECT_TRUE(absl::IsInvalidArgument(LoadCircuitsFile("/nonexistent/c.json").status()));
}

TEST(ApplyDetailsTest, RoundTripAndMalformed) {
  v1::ApplyCrossConnectsResponse response;
  response.set_epoch(4);
  response.set_config_version(9);
  v1::CircuitResult* r = response.add_results();
  r->mutable_circuit()->set_port_a(3);
  r->mutable_circuit()->set_port_b(4);
  r->set_op(v1::CircuitResult::ADD);
  r->set_code(14);
  r->set_message("port 4 stuck");
  grpc::Status s = MakeApplyFailureStatus(grpc::StatusCode::UNAVAILABLE, "partial", response);
  absl::StatusOr<v1::ApplyCrossConnectsResponse> decoded =
      DecodeApplyFailureDetails(s.error_details());
  ASSERT_TRUE(decoded.ok()) << decoded.status();
  EXPECT_EQ(decoded->config_version(), 9u);
  ASSERT_EQ(decoded->results_size(), 1);
  EXPECT_EQ(decoded->results(0).message(), "port 4 stuck");

  EXPECT_TRUE(absl::IsNotFound(DecodeApplyFailureDetails("").status()));
  EXPECT_TRUE(absl::IsInvalidArgument(DecodeApplyFailureDetails("\xff\xff garbage").status()));
  google::rpc::Status other;
  other.set_code(14);
  other.add_details()->PackFrom(v1::GetInfoResponse());
  EXPECT_TRUE(
      absl::IsInvalidArgument(DecodeApplyFailureDetails(other.SerializeAsString()).status()));
  google::rpc::Status empty;
  empty.set_code(14);
  EXPECT_TRUE(absl::IsNotFound(DecodeApplyFailureDetails(empty.SerializeAsString()).status()));

  absl::Status converted = FromGrpcStatus(grpc::Status(grpc::StatusCode::PERMISSION_DENIED, "no"),
                                          "10.0.0.1:5", "ApplyCrossConnects");
  EXPECT_TRUE(absl::IsPermissionDenied(converted));
  EXPECT_EQ(converted.message(), "10.0.0.1:5: ApplyCrossConnects: no");
}

TEST(OcsClientCreateTest, RejectsBadTargetAndTlsFiles) {
  OcsClientOptions o;
  o.target = "nohost";
  EXPECT_TRUE(absl::IsInvalidArgument(OcsClient::Create(o).status()));
  o.target = "127.0.0.1:1";
  o.tls.ca_file = "/nonexistent/ca.pem";
  absl::Status s = OcsClient::Create(o).status();
  EXPECT_TRUE(absl::IsInvalidArgument(s)) << s;
  EXPECT_THAT(std::string(s.message()), HasSubstr("/nonexistent/ca.pem"));
  o.tls = {};
  o.tls.cert_file = "/etc/hostname";  // key missing
  EXPECT_TRUE(absl::IsInvalidArgument(OcsClient::Create(o).status()));
  o.tls = {};
  o.timeout = absl::ZeroDuration();
  EXPECT_TRUE(absl::IsInvalidArgument(OcsClient::Create(o).status()));
}

// A loopback port nobody listens on (bound, then closed).
int DeadPort() {
  int fd = socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  bind(fd, reinterpret_cast<sockaddr*>(&a), sizeof(a));
  socklen_t len = sizeof(a);
  getsockname(fd, reinterpret_cast<sockaddr*>(&a), &len);
  close(fd);
  return ntohs(a.sin_port);
}

TEST(OcsClientCreateTest, UnreachableDaemonFailsFastWithUnavailable) {
  OcsClientOptions o;
  o.target = absl::StrCat("127.0.0.1:", DeadPort());
  o.timeout = absl::Milliseconds(800);
  absl::StatusOr<std::unique_ptr<OcsClient>> client = OcsClient::Create(o);
  ASSERT_TRUE(client.ok()) << client.status();
  absl::Time start = absl::Now();
  absl::Status s = (*client)->GetInfo().status();
  EXPECT_TRUE(absl::IsUnavailable(s)) << s;
  EXPECT_THAT(std::string(s.message()), HasSubstr(o.target));
  EXPECT_THAT(std::string(s.message()), HasSubstr("GetInfo"));
  EXPECT_LT(absl::Now() - start, absl::Milliseconds(800));  // fails fast, not at the deadline
  EXPECT_TRUE(absl::IsUnavailable((*client)->WaitForConnected(absl::Milliseconds(200))));
  EXPECT_TRUE(
      absl::IsUnavailable((*client)->Watch([](const v1::WatchEvent&) { return true; }).status()));
}

class OcsClientDaemonTest : public ::testing::Test {
 protected:
  void SetUp() override {
    // Adds touching port 15 fail inside the sim: a partial hardware failure.
    absl::StatusOr<std::unique_ptr<DaemonProcess>> d =
        StartSimDaemon(16, 0, {"--sim-fail-ports", "15"});
    ASSERT_TRUE(d.ok()) << d.status();
    daemon_ = *std::move(d);
    OcsClientOptions o;
    o.target = daemon_->address();
    o.timeout = absl::Seconds(5);
    absl::StatusOr<std::unique_ptr<OcsClient>> c = OcsClient::Create(o);
    ASSERT_TRUE(c.ok()) << c.status();
    client_ = *std::move(c);
  }

  std::unique_ptr<DaemonProcess> daemon_;
  std::unique_ptr<OcsClient> client_;
};

TEST_F(OcsClientDaemonTest, InfoApplyGetNoopAndStaleEpoch) {
  absl::StatusOr<v1::GetInfoResponse> info = client_->GetInfo();
  ASSERT_TRUE(info.ok()) << info.status();
  EXPECT_EQ(info->backend(), "sim");
  EXPECT_EQ(info->port_count(), 16u);

  OcsApplyResult r = client_->Apply(MakeApply(2, 1, {{3, 4}, {1, 2}}));
  ASSERT_TRUE(r.ok()) << r.status;
  ASSERT_TRUE(r.has_response);
  EXPECT_FALSE(r.response.noop());
  EXPECT_EQ(r.response.ports_changed(), 4u);
  EXPECT_EQ(PairsOf(r.response.actual()), (CircuitPairs{{1, 2}, {3, 4}}));

  absl::StatusOr<v1::GetCrossConnectsResponse> cc = client_->GetCrossConnects();
  ASSERT_TRUE(cc.ok()) << cc.status();
  EXPECT_EQ(PairsOf(cc->actual()), (CircuitPairs{{1, 2}, {3, 4}}));
  EXPECT_EQ(PairsOf(cc->desired()), (CircuitPairs{{1, 2}, {3, 4}}));
  EXPECT_TRUE(cc->in_sync());
  EXPECT_EQ(cc->epoch(), 2u);
  EXPECT_EQ(cc->config_version(), 1u);

  r = client_->Apply(MakeApply(2, 1, {{1, 2}, {3, 4}}));
  ASSERT_TRUE(r.ok()) << r.status;
  EXPECT_TRUE(r.response.noop());

  r = client_->Apply(MakeApply(1, 2, {{5, 6}}));
  EXPECT_TRUE(absl::IsFailedPrecondition(r.status)) << r.status;
  EXPECT_THAT(std::string(r.status.message()), HasSubstr(daemon_->address()));
  EXPECT_THAT(std::string(r.status.message()), HasSubstr("ApplyCrossConnects"));
  cc = client_->GetCrossConnects();
  ASSERT_TRUE(cc.ok());
  EXPECT_EQ(PairsOf(cc->actual()), (CircuitPairs{{1, 2}, {3, 4}}));

  r = client_->Apply(MakeApply(2, 3, {{1, 1}}));
  EXPECT_TRUE(absl::IsInvalidArgument(r.status)) << r.status;
}

TEST_F(OcsClientDaemonTest, PartialFailureIsDecodedIntoTheResponse) {
  OcsApplyResult r = client_->Apply(MakeApply(1, 1, {{1, 2}, {15, 16}}));
  ASSERT_FALSE(r.ok());
  EXPECT_FALSE(absl::IsInvalidArgument(r.status)) << r.status;
  ASSERT_TRUE(r.has_response) << r.status;
  bool saw_failed = false;
  bool saw_done = false;
  for (const v1::CircuitResult& cr : r.response.results()) {
    CircuitPairs p = {{cr.circuit().port_a(), cr.circuit().port_b()}};
    if (p == CircuitPairs{{15, 16}}) {
      EXPECT_NE(cr.code(), 0);
      EXPECT_FALSE(cr.message().empty());
      saw_failed = true;
    }
    if (p == CircuitPairs{{1, 2}}) {
      EXPECT_EQ(cr.code(), 0);
      saw_done = true;
    }
  }
  EXPECT_TRUE(saw_failed && saw_done) << r.response.DebugString();
  EXPECT_EQ(PairsOf(r.response.actual()), (CircuitPairs{{1, 2}}));
}

TEST_F(OcsClientDaemonTest, WatchDeliversSnapshotThenChangesUntilCancelled) {
  absl::Mutex mu;
  std::vector<v1::WatchEvent> events;
  absl::StatusOr<std::unique_ptr<OcsWatch>> watch = client_->Watch([&](const v1::WatchEvent& e) {
    absl::MutexLock lock(&mu);
    events.push_back(e);
    return true;
  });
  ASSERT_TRUE(watch.ok()) << watch.status();
  auto count = [&] {
    absl::MutexLock lock(&mu);
    return events.size();
  };
  ASSERT_TRUE(WaitUntil([&] { return count() >= 1; }));
  ASSERT_TRUE(client_->Apply(MakeApply(1, 1, {{1, 2}})).ok());
  ASSERT_TRUE(client_->Apply(MakeApply(1, 2, {{1, 3}})).ok());
  ASSERT_TRUE(WaitUntil([&] { return count() >= 3; }));
  {
    absl::MutexLock lock(&mu);
    EXPECT_EQ(events[0].kind(), v1::WatchEvent::SNAPSHOT);
    EXPECT_EQ(events[1].kind(), v1::WatchEvent::CHANGE);
    EXPECT_EQ(events[1].config_version(), 1u);
    EXPECT_EQ(PairsOf(events[1].added()), (CircuitPairs{{1, 2}}));
    EXPECT_EQ(events[2].config_version(), 2u);
    EXPECT_EQ(PairsOf(events[2].removed()), (CircuitPairs{{1, 2}}));
    EXPECT_EQ(PairsOf(events[2].circuits()), (CircuitPairs{{1, 3}}));
  }
  EXPECT_FALSE((*watch)->done());
  (*watch)->Cancel();
  ASSERT_TRUE((*watch)->WaitFor(absl::Seconds(5)));
  EXPECT_TRUE((*watch)->status().ok()) << (*watch)->status();
  EXPECT_EQ((*watch)->events(), 3);
  ASSERT_TRUE(client_->Apply(MakeApply(1, 3, {})).ok());
  absl::SleepFor(absl::Milliseconds(100));
  EXPECT_EQ(count(), 3u);
}

TEST_F(OcsClientDaemonTest, WatchStopsWhenTheCallbackSaysSoAndWhenTheDaemonDies) {
  absl::StatusOr<std::unique_ptr<OcsWatch>> once =
      client_->Watch([](const v1::WatchEvent&) { return false; });
  ASSERT_TRUE(once.ok()) << once.status();
  ASSERT_TRUE((*once)->WaitFor(absl::Seconds(5)));
  EXPECT_TRUE((*once)->status().ok()) << (*once)->status();
  EXPECT_EQ((*once)->events(), 1);

  absl::StatusOr<std::unique_ptr<OcsWatch>> forever =
      client_->Watch([](const v1::WatchEvent&) { return true; });
  ASSERT_TRUE(forever.ok()) << forever.status();
  ASSERT_TRUE(WaitUntil([&] { return (*forever)->events() >= 1; }));
  ASSERT_TRUE(daemon_->Kill(SIGKILL).ok());
  ASSERT_TRUE((*forever)->WaitFor(absl::Seconds(5)));
  EXPECT_TRUE(absl::IsUnavailable((*forever)->status())) << (*forever)->status();
}

TEST_F(OcsClientDaemonTest, HealthIsServing) {
  absl::StatusOr<grpc::health::v1::HealthCheckResponse> h = client_->Health();
  ASSERT_TRUE(h.ok()) << h.status();
  EXPECT_EQ(h->status(), grpc::health::v1::HealthCheckResponse::SERVING);
}

TEST(OcsClientDeadlineTest, ApplyLongerThanTheDeadlineIsDeadlineExceeded) {
  // Every change takes 600 ms of switching time; the client waits 150 ms.
  absl::StatusOr<std::unique_ptr<DaemonProcess>> d = StartSimDaemon(8, 600);
  ASSERT_TRUE(d.ok()) << d.status();
  OcsClientOptions o;
  o.target = (*d)->address();
  o.timeout = absl::Milliseconds(150);
  absl::StatusOr<std::unique_ptr<OcsClient>> client = OcsClient::Create(o);
  ASSERT_TRUE(client.ok());
  ASSERT_TRUE((*client)->GetInfo(absl::Seconds(5)).ok());  // connected
  absl::Time start = absl::Now();
  OcsApplyResult r = (*client)->Apply(MakeApply(1, 1, {{1, 2}}));
  EXPECT_TRUE(absl::IsDeadlineExceeded(r.status)) << r.status;
  EXPECT_LT(absl::Now() - start, absl::Seconds(2));  // returned, not stuck behind the switch
  // A per-call timeout overrides the client's.
  r = (*client)->Apply(MakeApply(1, 2, {{3, 4}}), absl::Seconds(10));
  EXPECT_TRUE(r.ok()) << r.status;
}

// A daemon whose connection set-up replies come late (a slow or distant
// host: here a proxy holds them back 400 ms) is still reached. gRPC gives a
// connection attempt max(back-off, GRPC_ARG_MIN_RECONNECT_BACKOFF_MS); with
// the latter at 100 ms, every first attempt timed out "before receiving
// SETTINGS frame" and the call failed at once with Unavailable.
TEST(OcsClientSlowDaemonTest, ConnectsWhenTheHandshakeTakesLongerThanTheBackoff) {
  absl::StatusOr<std::unique_ptr<DaemonProcess>> d = StartSimDaemon(8, 0);
  ASSERT_TRUE(d.ok()) << d.status();
  absl::StatusOr<OcsTarget> daemon_target = ParseOcsTarget((*d)->address());
  ASSERT_TRUE(daemon_target.ok()) << daemon_target.status();
  mixnet::testing::SlowProxy proxy(daemon_target->port, absl::Milliseconds(400));
  ASSERT_NE(proxy.port(), 0);
  OcsClientOptions o;
  o.target = absl::StrCat("127.0.0.1:", proxy.port());
  o.timeout = absl::Seconds(10);
  absl::StatusOr<std::unique_ptr<OcsClient>> client = OcsClient::Create(o);
  ASSERT_TRUE(client.ok()) << client.status();
  absl::StatusOr<v1::GetInfoResponse> info = (*client)->GetInfo();
  ASSERT_TRUE(info.ok()) << info.status();
  EXPECT_EQ(info->port_count(), 8u);
  EXPECT_GE(proxy.connections(), 1);
}

TEST(OcsClientUnixTest, TalksOverAUnixSocket) {
  mixnet::testing::TempDir dir;
  ASSERT_FALSE(dir.path().empty());
  std::string listen = absl::StrCat("unix:", dir.path(), "/ocsd.sock");
  absl::StatusOr<std::unique_ptr<DaemonProcess>> d = StartSimDaemon(8, 0, {}, listen);
  ASSERT_TRUE(d.ok()) << d.status();
  OcsClientOptions o;
  o.target = (*d)->address();
  EXPECT_TRUE(absl::StartsWith(o.target, "unix:")) << o.target;
  absl::StatusOr<std::unique_ptr<OcsClient>> client = OcsClient::Create(o);
  ASSERT_TRUE(client.ok());
  absl::StatusOr<v1::GetInfoResponse> info = (*client)->GetInfo();
  ASSERT_TRUE(info.ok()) << info.status();
  EXPECT_EQ(info->port_count(), 8u);
  EXPECT_TRUE((*client)->Apply(MakeApply(1, 1, {{1, 8}})).ok());
}

}  // namespace
}  // namespace mixnet::ocs
