// The mixnet.control.v1.Controller gRPC service over a Controller
// (controller.h), and ControllerServer: the service behind a gRPC server
// listening on host:port (port 0: ephemeral) or unix:/path, with mutual TLS
// (`tls`: every client shows a certificate the client CA signed, and a
// worker acts only as the host its certificate names: its CN or a DNS SAN
// is the host it registers as, and the calls naming a worker_id come from
// that worker's host) or plaintext on a unix socket or loopback only
// (anything else needs insecure_listen_any), with the
// standard health service (grpc.health.v1: "" and
// mixnet.control.v1.Controller, NOT_SERVING once shutting down) and server
// reflection. Once serving,
// the actual address is written atomically to ready_file when one is given;
// the file is removed at clean shutdown. With metrics_listen the
// controller's Prometheus metrics (controller_metrics.h) are served at
// <metrics_listen>/metrics (runtime/common/metrics_exposer.h: plain HTTP,
// loopback unless metrics_allow_remote; with TLS, HTTPS to the certificates
// metrics_allow_clients names), up before the ready file.
//
// Threading: Start/Shutdown from the owner's thread; handlers on gRPC's
// sync-server threads, ReportTraffic's reactor on gRPC's callback threads.
// Watch streams poll for events every 100 ms so they
// notice cancellation and shutdown; Shutdown never waits on a client.
#pragma once

#include <atomic>
#include <memory>
#include <set>
#include <string>

#include "absl/base/thread_annotations.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "grpcpp/server.h"
#include "mixnet/control/v1/controller.grpc.pb.h"
#include "runtime/common/grpc_tls.h"
#include "runtime/common/metrics_exposer.h"
#include "runtime/control/controller.h"

namespace mixnet::control {

// ReportTraffic uses gRPC's callback API on raw bytes (ReportReactor) so
// that a malformed row is told from the end of the stream; the other
// methods are synchronous.
class ControllerService final
    : public v1::Controller::WithRawCallbackMethod_ReportTraffic<v1::Controller::Service> {
 public:
  // `tls`: the callers are mTLS clients whose certificates name their hosts.
  ControllerService(Controller* controller, bool tls) : c_(controller), tls_(tls) {}
  int InFlight() const { return in_flight_.load(); }
  // Cancels the report streams running now and refuses new ones (at
  // shutdown: a worker's report stream stays open for its whole run).
  void CancelStreams();

  grpc::Status Register(grpc::ServerContext* context, const v1::RegisterRequest* request,
                        v1::RegisterResponse* response) override;
  grpc::ServerReadReactor<grpc::ByteBuffer>* ReportTraffic(grpc::CallbackServerContext* context,
                                                           grpc::ByteBuffer* response) override;
  grpc::Status WatchTopology(grpc::ServerContext* context, const v1::WatchTopologyRequest* request,
                             grpc::ServerWriter<v1::TopologyEvent>* writer) override;
  grpc::Status AckTopology(grpc::ServerContext* context, const v1::AckTopologyRequest* request,
                           v1::AckTopologyResponse* response) override;
  grpc::Status GetStatus(grpc::ServerContext* context, const v1::GetStatusRequest* request,
                         v1::ControllerStatus* response) override;
  grpc::Status WarmPaths(grpc::ServerContext* context, const v1::WarmPathsRequest* request,
                         v1::WarmPathsResponse* response) override;

  // With TLS: PermissionDenied unless the caller's certificate names
  // `host` (CheckHost), or the host `worker_id` registered as (CheckWorker;
  // OK for an unknown worker_id: the call itself answers that).
  grpc::Status CheckHost(const grpc::ServerContextBase& context, const std::string& host,
                         const std::string& call) const;
  grpc::Status CheckWorker(const grpc::ServerContextBase& context, const std::string& worker_id,
                           const std::string& call) const;

 private:
  Controller* const c_;
  const bool tls_;
  std::atomic<int> in_flight_{0};
  absl::Mutex mu_;
  bool cancelled_ ABSL_GUARDED_BY(mu_) = false;
  std::set<grpc::ServerContextBase*> report_streams_ ABSL_GUARDED_BY(mu_);
  class ReportReactor;
};

struct ServerOptions {
  std::string listen = "127.0.0.1:50561";  // host:port or unix:/path
  std::string ready_file;
  std::string metrics_listen;         // HOST:PORT (port 0: ephemeral); empty: none
  bool metrics_allow_remote = false;  // a non-loopback metrics_listen
  TlsServerOptions tls;               // --tls-cert/--tls-key/--tls-client-ca: all or none
  std::vector<std::string> metrics_allow_clients;  // with TLS: who may scrape (CN or DNS SAN)
  bool insecure_listen_any = false;                // plaintext on a non-loopback address
};

class ControllerServer {
 public:
  // Serves `controller` (owned from now on). Unavailable naming the address
  // when it cannot listen.
  static absl::StatusOr<std::unique_ptr<ControllerServer>> Start(
      std::unique_ptr<Controller> controller, const ServerOptions& options);
  ~ControllerServer();

  const std::string& address() const { return address_; }
  // "127.0.0.1:41234" where /metrics is served; empty without metrics_listen.
  std::string metrics_address() const { return metrics_ ? metrics_->address() : std::string(); }
  Controller& controller() { return *controller_; }

  // Stops the controller (streams end, a round in progress aborts), lets
  // running calls finish within `grace`, then stops the server. Idempotent.
  void Shutdown(absl::Duration grace = absl::Seconds(2));

 private:
  ControllerServer() = default;
  std::unique_ptr<Controller> controller_;
  std::unique_ptr<ControllerService> service_;
  std::unique_ptr<grpc::Server> server_;
  std::unique_ptr<MetricsExposer> metrics_;
  std::string address_;
  std::string ready_file_;
  bool stopped_ = false;
};

}  // namespace mixnet::control
