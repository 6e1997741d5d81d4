// mixnet-ocsd's Prometheus metrics (--metrics-listen), label cpu: the daemon
// in-process (sim backend) with its metrics on 127.0.0.1:0, Applies through
// the real client library, /metrics scraped over HTTP after each, and the
// counters, histogram count and gauges checked against hand-worked values;
// the mixnet-ocsd binary serving /metrics from its flags, and refusing a
// non-loopback --metrics-listen without TLS or --metrics-allow-remote.
// Test thread only (plus the daemons' own threads).
#include <memory>
#include <regex>
#include <string>

#include "absl/strings/str_cat.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "ocs_driver/client/ocs_client.h"
#include "ocs_driver/service/daemon.h"
#include "ocs_driver/service/state_store.h"
#include "ocs_driver/sim/sim_backend.h"
#include "tests/common/metrics_scrape.h"
#include "tests/ocs_driver/daemon_process.h"
#include "tests/ocs_driver/service/ocsd_test_util.h"

namespace mixnet::testing {
namespace {

using ::testing::HasSubstr;
using ::testing::Optional;

struct Ocsd {
  TempDir dir;
  std::unique_ptr<ocs::Daemon> daemon;
  std::unique_ptr<ocs::OcsClient> client;
};

// A 16-port sim switch with metrics on an ephemeral loopback port.
std::unique_ptr<Ocsd> StartOcsd(std::set<int> fail_ports = {}) {
  auto d = std::make_unique<Ocsd>();
  ocs::SimOptions so;
  so.ports = 16;
  so.switching_time = absl::Milliseconds(1);
  so.fail_ports = std::move(fail_ports);
  absl::StatusOr<std::unique_ptr<ocs::OcsBackend>> backend = ocs::OpenSimBackend(so);
  EXPECT_TRUE(backend.ok()) << backend.status();
  absl::StatusOr<ocs::StateStore> store = ocs::StateStore::Open(d->dir.path() + "/state");
  EXPECT_TRUE(store.ok()) << store.status();
  if (!backend.ok() || !store.ok()) return nullptr;
  ocs::DaemonOptions o;
  o.listen = "unix:" + d->dir.path() + "/ocsd.sock";
  o.metrics_listen = "127.0.0.1:0";
  absl::StatusOr<std::unique_ptr<ocs::Daemon>> daemon =
      ocs::Daemon::Start(std::move(*backend), std::move(*store), o);
  EXPECT_TRUE(daemon.ok()) << daemon.status();
  if (!daemon.ok()) return nullptr;
  d->daemon = std::move(*daemon);
  ocs::OcsClientOptions co;
  co.target = d->daemon->address();
  absl::StatusOr<std::unique_ptr<ocs::OcsClient>> client = ocs::OcsClient::Create(co);
  EXPECT_TRUE(client.ok()) << client.status();
  if (!client.ok()) return nullptr;
  d->client = std::move(*client);
  return d;
}

std::string ScrapeOrDie(const std::string& address) {
  absl::StatusOr<std::string> text = Scrape(address);
  EXPECT_TRUE(text.ok()) << text.status();
  return text.value_or("");
}

TEST(OcsdMetricsTest, AppliesMoveCountersHistogramAndGauges) {
  std::unique_ptr<Ocsd> d = StartOcsd();
  ASSERT_NE(d, nullptr);
  const std::string addr = d->daemon->metrics_address();
  EXPECT_THAT(addr, HasSubstr("127.0.0.1:"));
  EXPECT_NE(addr, "127.0.0.1:0");

  std::string m = ScrapeOrDie(addr);
  EXPECT_THAT(MetricValue(m, "mixnet_ocsd_ports"), Optional(16.0));
  EXPECT_THAT(MetricValue(m, "mixnet_ocsd_circuits"), Optional(0.0));
  EXPECT_THAT(MetricValue(m, "mixnet_ocsd_epoch"), Optional(0.0));
  EXPECT_THAT(MetricValue(m, "mixnet_ocsd_device_connected"), Optional(1.0));
  EXPECT_THAT(MetricValue(m, R"(mixnet_ocsd_applies_total{outcome="ok"})"), Optional(0.0));
  EXPECT_THAT(MetricValue(m, "mixnet_ocsd_apply_latency_seconds_count"), Optional(0.0));

  // One Apply of 3 circuits: the switch changes.
  ocs::OcsApplyResult r = d->client->Apply(Req(4, 2, {{1, 2}, {3, 4}, {5, 16}}));
  ASSERT_TRUE(r.ok()) << r.status;
  m = ScrapeOrDie(addr);
  EXPECT_THAT(MetricValue(m, "mixnet_ocsd_circuits"), Optional(3.0));
  EXPECT_THAT(MetricValue(m, "mixnet_ocsd_epoch"), Optional(4.0));
  EXPECT_THAT(MetricValue(m, "mixnet_ocsd_config_version"), Optional(2.0));
  EXPECT_THAT(MetricValue(m, R"(mixnet_ocsd_applies_total{outcome="ok"})"), Optional(1.0));
  EXPECT_THAT(MetricValue(m, R"(mixnet_ocsd_applies_total{outcome="failed"})"), Optional(0.0));
  EXPECT_THAT(MetricValue(m, "mixnet_ocsd_apply_latency_seconds_count"), Optional(1.0));
  // The sim waits its 1 ms switching time: the one sample is above 1 ms.
  EXPECT_THAT(MetricValue(m, R"(mixnet_ocsd_apply_latency_seconds_bucket{le="0.001"})"),
              Optional(0.0));
  EXPECT_GE(MetricValue(m, "mixnet_ocsd_apply_latency_seconds_sum").value_or(0), 0.001);

  // The same request again: a no-op, no latency sample.
  r = d->client->Apply(Req(4, 2, {{1, 2}, {3, 4}, {5, 16}}));
  ASSERT_TRUE(r.ok()) << r.status;
  EXPECT_TRUE(r.response.noop());
  m = ScrapeOrDie(addr);
  EXPECT_THAT(MetricValue(m, R"(mixnet_ocsd_applies_total{outcome="noop"})"), Optional(1.0));
  EXPECT_THAT(MetricValue(m, R"(mixnet_ocsd_applies_total{outcome="ok"})"), Optional(1.0));
  EXPECT_THAT(MetricValue(m, "mixnet_ocsd_apply_latency_seconds_count"), Optional(1.0));

  // Port 17 on a 16-port switch: refused before the device, nothing changes.
  r = d->client->Apply(Req(4, 3, {{1, 17}}));
  ASSERT_EQ(r.status.code(), absl::StatusCode::kInvalidArgument) << r.status;
  // A stale epoch: fenced.
  r = d->client->Apply(Req(3, 9, {{1, 2}}));
  ASSERT_EQ(r.status.code(), absl::StatusCode::kFailedPrecondition) << r.status;
  m = ScrapeOrDie(addr);
  EXPECT_THAT(MetricValue(m, R"(mixnet_ocsd_applies_total{outcome="failed"})"), Optional(2.0));
  EXPECT_THAT(MetricValue(m, R"(mixnet_ocsd_apply_failures_total{code="INVALID_ARGUMENT"})"),
              Optional(1.0));
  EXPECT_THAT(MetricValue(m, R"(mixnet_ocsd_apply_failures_total{code="FAILED_PRECONDITION"})"),
              Optional(1.0));
  EXPECT_THAT(MetricValue(m, "mixnet_ocsd_circuits"), Optional(3.0));
  EXPECT_THAT(MetricValue(m, "mixnet_ocsd_epoch"), Optional(4.0));
  EXPECT_THAT(MetricValue(m, "mixnet_ocsd_apply_latency_seconds_count"), Optional(1.0));
  // Request-level failures name no port.
  EXPECT_THAT(m, ::testing::Not(HasSubstr("mixnet_ocsd_port_failures_total{")));

  // Removing everything: circuits back to 0, a second latency sample.
  r = d->client->Apply(Req(5, 1, {}));
  ASSERT_TRUE(r.ok()) << r.status;
  m = ScrapeOrDie(addr);
  EXPECT_THAT(MetricValue(m, "mixnet_ocsd_circuits"), Optional(0.0));
  EXPECT_THAT(MetricValue(m, "mixnet_ocsd_epoch"), Optional(5.0));
  EXPECT_THAT(MetricValue(m, R"(mixnet_ocsd_applies_total{outcome="ok"})"), Optional(2.0));
  EXPECT_THAT(MetricValue(m, "mixnet_ocsd_apply_latency_seconds_count"), Optional(2.0));
  d->daemon->Shutdown();
  EXPECT_FALSE(Scrape(addr).ok()) << "metrics still served after Shutdown";
}

TEST(OcsdMetricsTest, CircuitFailureCountsOnBothPortsByCode) {
  std::unique_ptr<Ocsd> d = StartOcsd({7});  // the sim fails adds on port 7 (UNAVAILABLE)
  ASSERT_NE(d, nullptr);
  ocs::OcsApplyResult r = d->client->Apply(Req(1, 1, {{1, 2}, {7, 8}}));
  ASSERT_EQ(r.status.code(), absl::StatusCode::kUnavailable) << r.status;
  const std::string m = ScrapeOrDie(d->daemon->metrics_address());
  EXPECT_THAT(MetricValue(m, R"(mixnet_ocsd_port_failures_total{code="UNAVAILABLE",port="7"})"),
              Optional(1.0));
  EXPECT_THAT(MetricValue(m, R"(mixnet_ocsd_port_failures_total{code="UNAVAILABLE",port="8"})"),
              Optional(1.0));
  EXPECT_EQ(MetricValue(m, R"(mixnet_ocsd_port_failures_total{code="UNAVAILABLE",port="1"})"),
            std::nullopt);
  EXPECT_THAT(MetricValue(m, R"(mixnet_ocsd_apply_failures_total{code="UNAVAILABLE"})"),
              Optional(1.0));
  EXPECT_THAT(MetricValue(m, R"(mixnet_ocsd_applies_total{outcome="failed"})"), Optional(1.0));
  EXPECT_THAT(MetricValue(m, "mixnet_ocsd_circuits"), Optional(1.0));  // 1-2 was made
  EXPECT_THAT(MetricValue(m, "mixnet_ocsd_device_connected"), Optional(1.0));
}

TEST(OcsdMetricsTest, NothingListensWithoutTheFlag) {
  TempDir dir;
  ocs::SimOptions so;
  so.ports = 8;
  auto backend = ocs::OpenSimBackend(so);
  ASSERT_TRUE(backend.ok());
  auto store = ocs::StateStore::Open(dir.path() + "/state");
  ASSERT_TRUE(store.ok());
  ocs::DaemonOptions o;
  o.listen = "unix:" + dir.path() + "/ocsd.sock";
  auto daemon = ocs::Daemon::Start(std::move(*backend), std::move(*store), o);
  ASSERT_TRUE(daemon.ok()) << daemon.status();
  EXPECT_EQ((*daemon)->metrics_address(), "");
}

// The binary: the flags reach the daemon, the bound port is logged.
TEST(OcsdMetricsTest, BinaryServesMetricsAndRefusesRemoteWithoutTlsOrFlag) {
  auto d = DaemonProcess::Start(
      {"--ports", "8", "--listen", "127.0.0.1:0", "--metrics-listen", "127.0.0.1:0"}, {});
  ASSERT_TRUE(d.ok()) << d.status();
  std::smatch match;
  const std::string log = (*d)->Log();
  ASSERT_TRUE(
      std::regex_search(log, match, std::regex(R"(metrics on http://(127\.0\.0\.1:\d+)/metrics)")))
      << log;
  const std::string addr = match[1];
  auto stub = StubFor((*d)->address());
  ASSERT_TRUE(Apply(*stub, Req(1, 1, {{1, 2}, {3, 4}})).status.ok());
  const std::string m = ScrapeOrDie(addr);
  EXPECT_THAT(MetricValue(m, "mixnet_ocsd_circuits"), Optional(2.0));
  EXPECT_THAT(MetricValue(m, R"(mixnet_ocsd_applies_total{outcome="ok"})"), Optional(1.0));
  EXPECT_TRUE((*d)->Stop().ok());

  auto refused =
      DaemonProcess::Start({"--listen", "127.0.0.1:0", "--metrics-listen", "0.0.0.0:0"}, {});
  ASSERT_FALSE(refused.ok());
  EXPECT_THAT(std::string(refused.status().message()),
              HasSubstr("refusing --metrics-listen 0.0.0.0:0: not a loopback address"));
  EXPECT_THAT(std::string(refused.status().message()), HasSubstr("--metrics-allow-remote"));
  auto allowed = DaemonProcess::Start(
      {"--listen", "127.0.0.1:0", "--metrics-listen", "0.0.0.0:0", "--metrics-allow-remote"}, {});
  EXPECT_TRUE(allowed.ok()) << allowed.status();
  auto malformed =
      DaemonProcess::Start({"--listen", "127.0.0.1:0", "--metrics-listen", "[::1]:0"}, {});
  ASSERT_FALSE(malformed.ok());
  EXPECT_THAT(std::string(malformed.status().message()), HasSubstr("IPv4 address or localhost"));
}

TEST(OcsdMetricsTest, ListenPolicy) {
  EXPECT_TRUE(CheckMetricsListen("127.0.0.1:0", false, false).ok());
  EXPECT_TRUE(CheckMetricsListen("127.0.0.2:9464", false, false).ok());
  EXPECT_TRUE(CheckMetricsListen("localhost:9464", false, false).ok());
  EXPECT_EQ(CheckMetricsListen("10.0.0.1:9464", false, false).code(),
            absl::StatusCode::kPermissionDenied);
  EXPECT_EQ(CheckMetricsListen("0.0.0.0:9464", false, false).code(),
            absl::StatusCode::kPermissionDenied);
  EXPECT_TRUE(CheckMetricsListen("0.0.0.0:9464", /*tls=*/true, false).ok());
  EXPECT_TRUE(CheckMetricsListen("0.0.0.0:9464", false, /*allow_remote=*/true).ok());
  for (const char* bad : {"9464", ":9464", "127.0.0.1:65536", "127.0.0.1:x", "host.example:9464"}) {
    EXPECT_EQ(CheckMetricsListen(bad, false, false).code(), absl::StatusCode::kInvalidArgument)
        << bad;
  }
}

}  // namespace
}  // namespace mixnet::testing
