// MetricsExposer: serves one prometheus::Registry as Prometheus text at
// HOST:PORT/metrics, for mixnet-ocsd and mixnet-controller
// (--metrics-listen). Without the daemon's mTLS: plain HTTP without
// authentication, read-only (prometheus-cpp's civetweb Exposer), so only on
// a loopback address unless the operator passed --metrics-allow-remote. With
// it (MetricsTls): HTTPS with the daemon's certificate, for the client
// certificates --metrics-allow-client names (metrics_https.h), on any
// address. HOST is an IPv4 literal or "localhost" (= 127.0.0.1); port 0
// picks a free port, address() gives the bound one. Nothing listens unless
// Start is called.
//
// Threading: Start and the destructor from the owner's thread; scrapes are
// served on the server's threads (civetweb's num_threads, default 2; or
// MetricsHttps'), which collect the registry while the daemon updates it
// (prometheus-cpp metrics are thread-safe).
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "runtime/common/grpc_tls.h"
#include "runtime/common/metrics_https.h"

namespace prometheus {
class Exposer;
class Registry;
}  // namespace prometheus

namespace mixnet {

// The daemon's mTLS, when its gRPC API has it: /metrics is then served over
// HTTPS to the client certificates `allow` names (metrics_https.h).
struct MetricsTls {
  TlsServerOptions files;          // the daemon's --tls-cert/--tls-key/--tls-client-ca
  std::vector<std::string> allow;  // --metrics-allow-client: CN or DNS SAN
  bool Active() const { return files.Active(); }
};

// OK when `listen` ("HOST:PORT") may serve metrics under the policy above.
// InvalidArgument for a malformed address (naming the flag), PermissionDenied
// for a non-loopback one without `tls` or `allow_remote`.
absl::Status CheckMetricsListen(const std::string& listen, bool tls, bool allow_remote);
// CheckMetricsListen, and the allow list: required with TLS (deny by
// default), refused without it. InvalidArgument naming the flag.
absl::Status CheckMetricsOptions(const std::string& listen, const MetricsTls& tls,
                                 bool allow_remote);

class MetricsExposer {
 public:
  // Checks the policy, binds and starts serving `registry` at /metrics.
  // Unavailable naming the address when it cannot bind.
  static absl::StatusOr<std::unique_ptr<MetricsExposer>> Start(
      const std::string& listen, const MetricsTls& tls, bool allow_remote,
      std::shared_ptr<prometheus::Registry> registry);
  ~MetricsExposer();  // stops serving (joins civetweb's threads)
  MetricsExposer(const MetricsExposer&) = delete;
  MetricsExposer& operator=(const MetricsExposer&) = delete;

  // "127.0.0.1:41234": the bound address, port resolved.
  const std::string& address() const { return address_; }

 private:
  MetricsExposer() = default;
  std::shared_ptr<prometheus::Registry> registry_;
  std::unique_ptr<prometheus::Exposer> exposer_;  // plain HTTP
  std::unique_ptr<MetricsHttps> https_;           // with the daemon's mTLS
  std::string address_;
};

}  // namespace mixnet
