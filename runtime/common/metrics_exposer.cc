// MetricsExposer (see metrics_exposer.h). Owner's thread.
#include "runtime/common/metrics_exposer.h"

#include <arpa/inet.h>

#include <exception>
#include <vector>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "prometheus/exposer.h"
#include "prometheus/registry.h"

namespace mixnet {
namespace {

// "HOST:PORT" -> IPv4 literal host ("localhost" -> 127.0.0.1) and port.
absl::Status Parse(const std::string& listen, std::string& host, int& port) {
  const size_t colon = listen.rfind(':');
  if (colon == std::string::npos || colon == 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("--metrics-listen ", listen, ": expected HOST:PORT, e.g. 127.0.0.1:9464"));
  }
  host = listen.substr(0, colon);
  if (!absl::SimpleAtoi(listen.substr(colon + 1), &port) || port < 0 || port > 65535) {
    return absl::InvalidArgumentError(absl::StrCat("--metrics-listen ", listen, ": bad port"));
  }
  if (host == "localhost") host = "127.0.0.1";
  in_addr a{};
  if (inet_pton(AF_INET, host.c_str(), &a) != 1) {
    return absl::InvalidArgumentError(absl::StrCat(
        "--metrics-listen ", listen,
        ": HOST must be an IPv4 address or localhost (the metrics endpoint has no IPv6 here)"));
  }
  return absl::OkStatus();
}

bool IsLoopback(const std::string& ipv4) { return ipv4.rfind("127.", 0) == 0; }

}  // namespace

absl::Status CheckMetricsListen(const std::string& listen, bool tls, bool allow_remote) {
  std::string host;
  int port = 0;
  if (absl::Status s = Parse(listen, host, port); !s.ok()) return s;
  if (IsLoopback(host) || tls || allow_remote) return absl::OkStatus();
  return absl::PermissionDeniedError(absl::StrCat(
      "refusing --metrics-listen ", listen,
      ": not a loopback address, and /metrics is plain HTTP without authentication; use "
      "127.0.0.1:PORT (scrape through a tunnel or a local agent), or give "
      "--metrics-allow-remote (or configure the daemon's mTLS: /metrics is then HTTPS for "
      "--metrics-allow-client)"));
}

absl::Status CheckMetricsOptions(const std::string& listen, const MetricsTls& tls,
                                 bool allow_remote) {
  if (absl::Status s = CheckMetricsListen(listen, tls.Active(), allow_remote); !s.ok()) return s;
  if (!tls.Active() && !tls.allow.empty()) {
    return absl::InvalidArgumentError(
        "--metrics-allow-client needs the daemon's mTLS (--tls-cert, --tls-key, --tls-client-ca)");
  }
  if (tls.Active() && tls.allow.empty()) {
    return absl::InvalidArgumentError(
        "with mTLS, /metrics is HTTPS for the certificates --metrics-allow-client names (CN or "
        "DNS SAN): give at least one, or no --metrics-listen");
  }
  return absl::OkStatus();
}

absl::StatusOr<std::unique_ptr<MetricsExposer>> MetricsExposer::Start(
    const std::string& listen, const MetricsTls& tls, bool allow_remote,
    std::shared_ptr<prometheus::Registry> registry) {
  if (absl::Status s = CheckMetricsOptions(listen, tls, allow_remote); !s.ok()) return s;
  std::string host;
  int port = 0;
  if (absl::Status s = Parse(listen, host, port); !s.ok()) return s;
  auto m = std::unique_ptr<MetricsExposer>(new MetricsExposer());
  m->registry_ = std::move(registry);
  if (tls.Active()) {
    absl::StatusOr<std::unique_ptr<MetricsHttps>> https =
        MetricsHttps::Start(host, port, tls.files, tls.allow, m->registry_);
    if (!https.ok()) return https.status();
    m->https_ = *std::move(https);
    m->address_ = absl::StrCat(host, ":", m->https_->port());
    return m;
  }
  try {
    // civetweb options: one listening socket, two serving threads.
    m->exposer_ = std::make_unique<prometheus::Exposer>(std::vector<std::string>{
        "listening_ports", absl::StrCat(host, ":", port), "num_threads", "2"});
  } catch (const std::exception& e) {
    return absl::UnavailableError(
        absl::StrCat("cannot listen for metrics on ", listen,
                     " (address in use or not on this host): ", e.what()));
  }
  const std::vector<int> ports = m->exposer_->GetListeningPorts();
  if (ports.size() != 1 || ports[0] <= 0) {
    return absl::InternalError(
        absl::StrCat("metrics endpoint on ", listen, ": civetweb reports no bound port"));
  }
  m->exposer_->RegisterCollectable(m->registry_);
  m->address_ = absl::StrCat(host, ":", ports[0]);
  return m;
}

MetricsExposer::~MetricsExposer() = default;

}  // namespace mixnet
