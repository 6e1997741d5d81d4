// MetricsExposer: serves one prometheus::Registry as Prometheus text at
// http://HOST:PORT/metrics (prometheus-cpp's civetweb Exposer), for
// mixnet-ocsd and mixnet-controller (--metrics-listen). The endpoint is plain
// HTTP without authentication and read-only, so the listen policy is the
// daemons' own: a loopback address always; anything else only when the
// daemon has TLS configured for its gRPC API (a deployment that serves the
// network on purpose) or the operator passed --metrics-allow-remote. HOST is
// an IPv4 literal or "localhost" (= 127.0.0.1); port 0 picks a free port,
// address() gives the bound one. Nothing listens unless Start is called.
//
// Threading: Start and the destructor from the owner's thread; scrapes are
// served on civetweb's threads (num_threads, default 2), which collect the
// registry while the daemon updates it (prometheus-cpp metrics are
// thread-safe).
#pragma once

#include <memory>
#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"

namespace prometheus {
class Exposer;
class Registry;
}  // namespace prometheus

namespace mixnet {

// OK when `listen` ("HOST:PORT") may serve metrics under the policy above.
// InvalidArgument for a malformed address (naming the flag), PermissionDenied
// for a non-loopback one without `tls` or `allow_remote`.
absl::Status CheckMetricsListen(const std::string& listen, bool tls, bool allow_remote);

class MetricsExposer {
 public:
  // Checks the policy, binds and starts serving `registry` at /metrics.
  // Unavailable naming the address when it cannot bind.
  static absl::StatusOr<std::unique_ptr<MetricsExposer>> Start(
      const std::string& listen, bool tls, bool allow_remote,
      std::shared_ptr<prometheus::Registry> registry);
  ~MetricsExposer();  // stops serving (joins civetweb's threads)
  MetricsExposer(const MetricsExposer&) = delete;
  MetricsExposer& operator=(const MetricsExposer&) = delete;

  // "127.0.0.1:41234": the bound address, port resolved.
  const std::string& address() const { return address_; }

 private:
  MetricsExposer() = default;
  std::shared_ptr<prometheus::Registry> registry_;
  std::unique_ptr<prometheus::Exposer> exposer_;
  std::string address_;
};

}  // namespace mixnet
