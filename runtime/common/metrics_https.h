// MetricsHttps: the /metrics endpoint of a daemon whose gRPC API has mTLS
// (mixnet-ocsd, mixnet-controller with --tls-cert/--tls-key/--tls-client-ca):
// HTTPS with the daemon's own certificate and key, and every scraper shows a
// client certificate that the same client CA signed (no certificate, or one
// of another CA: the TLS handshake fails) whose common name or a DNS subject
// alternative name is one of `allow` (--metrics-allow-client); any other
// certificate gets 403 and no metrics. Served by cpp-httplib (Debian's
// libcpp-httplib, built on OpenSSL 3), since civetweb's TLS in Debian 12
// calls OpenSSL 1.1 functions that OpenSSL 3 no longer has.
//
// Threading: Start and the destructor from the owner's thread; requests on
// the server's own thread "mx-metrics-tls" and its worker pool, which read
// the registry while the daemon updates it (prometheus-cpp is thread-safe).
#pragma once

#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "absl/status/statusor.h"
#include "runtime/common/grpc_tls.h"

namespace httplib {
class SSLServer;
}  // namespace httplib
namespace prometheus {
class Registry;
}  // namespace prometheus

namespace mixnet {

class MetricsHttps {
 public:
  // Binds `host`:`port` (port 0: a free one) and serves `registry` at
  // /metrics. InvalidArgument for an empty `allow` or unreadable files,
  // Unavailable naming the address when it cannot bind.
  static absl::StatusOr<std::unique_ptr<MetricsHttps>> Start(
      const std::string& host, int port, const TlsServerOptions& tls,
      std::vector<std::string> allow, std::shared_ptr<prometheus::Registry> registry);
  ~MetricsHttps();  // stops the server and joins its thread
  MetricsHttps(const MetricsHttps&) = delete;
  MetricsHttps& operator=(const MetricsHttps&) = delete;

  int port() const { return port_; }

 private:
  MetricsHttps() = default;
  std::shared_ptr<prometheus::Registry> registry_;
  std::vector<std::string> allow_;
  std::unique_ptr<httplib::SSLServer> server_;
  std::thread thread_;
  int port_ = 0;
};

}  // namespace mixnet
