// The mixnet-ocsd server: an OcsService behind a gRPC server with the standard
// health service (grpc.health.v1) and server reflection, listening on TCP or a
// unix socket ("unix:/path"), optionally with mTLS (client certificates
// required and verified against --tls-client-ca; allow_clients must then name
// who may change the switch: there is no allow-all). Without TLS it refuses
// to listen on anything but loopback or a unix socket unless
// insecure_listen_any.
// After the server listens, the actual address ("127.0.0.1:41234",
// "unix:/path") is written atomically to ready_file when one is given (a
// stale one is removed at start, and the file is removed at clean shutdown).
// With metrics_listen, the service's Prometheus metrics (ocsd_metrics.h) are
// served at http://<metrics_listen>/metrics (runtime/common/metrics_exposer.h:
// loopback unless TLS or metrics_allow_remote; with TLS over HTTPS to the
// certificates metrics_allow_clients names), up before the ready file.
//
// Health (grpc.health.v1, "" and mixnet.ocs.v1.OcsDriver) is SERVING while
// the switch answers: a prober thread ("mx-ocsd-probe") reads it every
// health_probe (holding the device for that one read) and turns health
// NOT_SERVING while the reads fail, SERVING again once one succeeds.
//
// Threading: Start/Shutdown/Wait from the main thread; the service runs on
// gRPC's threads; the prober on its own.
#pragma once

#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/notification.h"
#include "absl/time/time.h"
#include "grpcpp/server.h"
#include "ocs_driver/backend.h"
#include "ocs_driver/service/ocs_service.h"
#include "ocs_driver/service/state_store.h"
#include "runtime/common/metrics_exposer.h"

namespace mixnet::ocs {

struct DaemonOptions {
  std::string listen = "127.0.0.1:50551";  // host:port (port 0: ephemeral) or unix:/path
  std::string tls_cert;                    // PEM files; all three or none
  std::string tls_key;
  std::string tls_client_ca;
  std::vector<std::string> allow_clients;  // subjects / CNs allowed to Apply (needs TLS)
  bool insecure_listen_any = false;
  std::string ready_file;
  int max_receive_bytes = 4 * 1024 * 1024;         // gRPC's limit (RESOURCE_EXHAUSTED beyond)
  std::string metrics_listen;                      // HOST:PORT (port 0: ephemeral); empty: none
  bool metrics_allow_remote = false;               // a non-loopback metrics_listen without TLS
  std::vector<std::string> metrics_allow_clients;  // with TLS: who may scrape (CN or DNS SAN)
  // Every this long the switch is read (ProbeDevice); health is NOT_SERVING
  // while it does not answer. Zero: no probe (health SERVING while up).
  absl::Duration health_probe = absl::Seconds(5);
};

class Daemon {
 public:
  // Opens the service over `backend` (reads the switch, loads the state) and
  // starts listening. Nothing on the switch changes.
  static absl::StatusOr<std::unique_ptr<Daemon>> Start(std::unique_ptr<OcsBackend> backend,
                                                       StateStore store,
                                                       const DaemonOptions& options);
  ~Daemon();

  // The address the server listens on, port resolved.
  const std::string& address() const { return address_; }
  // "127.0.0.1:41234" where /metrics is served; empty without metrics_listen.
  std::string metrics_address() const { return metrics_ ? metrics_->address() : std::string(); }

  // Ends Watch streams, marks health NOT_SERVING, and stops the server,
  // cancelling calls still running after `grace`. Idempotent.
  void Shutdown(absl::Duration grace = absl::Seconds(2));

 private:
  Daemon() = default;
  // The prober thread ("mx-ocsd-probe"): reads the switch every
  // health_probe and sets health to match, until Shutdown.
  void Probe(absl::Duration period);

  std::unique_ptr<OcsService> service_;
  std::unique_ptr<grpc::Server> server_;
  std::unique_ptr<MetricsExposer> metrics_;
  std::string address_;
  std::string ready_file_;  // removed again at shutdown
  bool stopped_ = false;
  absl::Notification stop_probe_;
  std::thread prober_;
};

}  // namespace mixnet::ocs
