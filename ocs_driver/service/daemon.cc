// mixnet-ocsd's gRPC server (see daemon.h). Main thread.
#include "ocs_driver/service/daemon.h"

#include <fcntl.h>
#include <pthread.h>
#include <unistd.h>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "grpcpp/ext/proto_server_reflection_plugin.h"
#include "grpcpp/grpcpp.h"
#include "grpcpp/health_check_service_interface.h"
#include "grpcpp/security/server_credentials.h"
#include "runtime/common/grpc_server_limits.h"
#include "runtime/common/grpc_tls.h"
#include "runtime/common/log.h"
#include "runtime/common/status.h"

namespace mixnet::ocs {
namespace {

constexpr char kServiceName[] = "mixnet.ocs.v1.OcsDriver";

absl::Status WriteFileAtomically(const std::string& path, const std::string& data) {
  const std::string tmp = absl::StrCat(path, ".tmp", getpid());
  int fd = open(tmp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd < 0) return ErrnoStatus(tmp, "open");
  const bool ok =
      write(fd, data.data(), data.size()) == static_cast<ssize_t>(data.size()) && fsync(fd) == 0;
  const int err = errno;
  close(fd);
  if (!ok) return ErrnoStatus(tmp, "write", err);
  if (rename(tmp.c_str(), path.c_str()) != 0) return ErrnoStatus(path, "rename");
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<std::unique_ptr<Daemon>> Daemon::Start(std::unique_ptr<OcsBackend> backend,
                                                      StateStore store,
                                                      const DaemonOptions& options) {
  const TlsServerOptions tls_files{options.tls_cert, options.tls_key, options.tls_client_ca};
  if (tls_files.given() != 0 && !tls_files.Active()) {
    return absl::InvalidArgumentError(
        "mTLS needs all of --tls-cert, --tls-key and --tls-client-ca");
  }
  const bool tls = tls_files.Active();
  if (!tls && !options.allow_clients.empty()) {
    return absl::InvalidArgumentError("--allow-client needs TLS (--tls-cert ...)");
  }
  if (tls && options.allow_clients.empty()) {
    // Deny by default: every certificate the CA signs (workers, tools,
    // observers) would otherwise be able to change the switch.
    return absl::InvalidArgumentError(
        "mTLS needs --allow-client: name the certificates allowed to change the switch (the "
        "controllers'); without it every certificate --tls-client-ca signed could");
  }
  RETURN_IF_ERROR(ClientAllowList::Create(options.allow_clients).status());
  RETURN_IF_ERROR(CheckPlaintextListen(options.listen, tls, options.insecure_listen_any));
  const MetricsTls metrics_tls{tls_files, options.metrics_allow_clients};
  if (!options.metrics_listen.empty()) {
    RETURN_IF_ERROR(
        CheckMetricsOptions(options.metrics_listen, metrics_tls, options.metrics_allow_remote));
  }
  if (!options.ready_file.empty() && unlink(options.ready_file.c_str()) != 0 && errno != ENOENT) {
    return ErrnoStatus(absl::StrCat("--ready-file ", options.ready_file), "unlink");
  }

  ASSIGN_OR_RETURN(std::shared_ptr<grpc::ServerCredentials> creds, ServerCredentials(tls_files));

  ServiceOptions service_options;
  service_options.tls = tls;
  service_options.allow_clients = options.allow_clients;
  auto daemon = std::unique_ptr<Daemon>(new Daemon());
  daemon->ready_file_ = options.ready_file;
  ASSIGN_OR_RETURN(daemon->service_,
                   OcsService::Create(std::move(backend), std::move(store), service_options));
  if (!options.metrics_listen.empty()) {
    ASSIGN_OR_RETURN(
        daemon->metrics_,
        MetricsExposer::Start(options.metrics_listen, metrics_tls, options.metrics_allow_remote,
                              daemon->service_->metrics().registry()));
    log::Info("mixnet-ocsd: metrics on {}://{}/metrics", tls ? "https" : "http",
              daemon->metrics_->address());
  }

  grpc::EnableDefaultHealthCheckService(true);
  grpc::reflection::InitProtoReflectionServerBuilderPlugin();
  grpc::ServerBuilder builder;
  int selected_port = 0;
  builder.AddListeningPort(options.listen, creds, &selected_port);
  builder.RegisterService(daemon->service_.get());
  builder.SetMaxReceiveMessageSize(options.max_receive_bytes);
  ApplyServerLimits(builder);  // metadata limit, malformed bodies (grpc_server_limits.h)
  daemon->server_ = builder.BuildAndStart();
  if (daemon->server_ == nullptr || selected_port == 0) {
    daemon->server_.reset();
    return absl::UnavailableError(absl::StrCat("cannot listen on ", options.listen,
                                               " (address in use, bad path, or no permission)"));
  }
  if (absl::StartsWith(options.listen, "unix:")) {
    daemon->address_ = options.listen;
  } else {
    std::string host;
    int port = 0;
    RETURN_IF_ERROR(SplitHostPort(options.listen, host, port));
    daemon->address_ =
        absl::StrCat(options.listen.substr(0, options.listen.rfind(':')), ":", selected_port);
  }
  grpc::HealthCheckServiceInterface* health = daemon->server_->GetHealthCheckService();
  if (health != nullptr) {
    health->SetServingStatus(true);
    health->SetServingStatus(kServiceName, true);
  }
  if (options.health_probe > absl::ZeroDuration()) {
    Daemon* d = daemon.get();
    daemon->prober_ = std::thread([d, period = options.health_probe] { d->Probe(period); });
  }
  const BackendInfo& info = daemon->service_->info();
  log::Info("mixnet-ocsd: {} backend ({} {}), {} ports, switching time {}; listening on {}{}",
            info.backend, info.vendor, info.model, info.ports,
            absl::FormatDuration(info.switching_time), daemon->address_, tls ? " (mTLS)" : "");
  if (!options.ready_file.empty()) {
    RETURN_IF_ERROR(WriteFileAtomically(options.ready_file, daemon->address_ + "\n"));
  }
  return daemon;
}

Daemon::~Daemon() { Shutdown(absl::Seconds(1)); }

void Daemon::Probe(absl::Duration period) {
  pthread_setname_np(pthread_self(), "mx-ocsd-probe");
  grpc::HealthCheckServiceInterface* health = server_->GetHealthCheckService();
  bool serving = true;
  while (!stop_probe_.WaitForNotificationWithTimeout(period)) {
    const absl::Status s = service_->ProbeDevice(absl::Now() + period);
    // A call that held the device all along says nothing about the switch.
    if (absl::IsDeadlineExceeded(s) || stop_probe_.HasBeenNotified()) continue;
    if (s.ok() == serving) continue;
    serving = s.ok();
    if (serving) {
      log::Info("mixnet-ocsd: the switch answers again; health SERVING");
    } else {
      log::Warn("mixnet-ocsd: the switch does not answer ({}); health NOT_SERVING", s.ToString());
    }
    if (health != nullptr) {
      health->SetServingStatus(serving);
      health->SetServingStatus(kServiceName, serving);
    }
  }
}

void Daemon::Shutdown(absl::Duration grace) {
  if (stopped_ || server_ == nullptr) return;
  stopped_ = true;
  stop_probe_.Notify();
  if (prober_.joinable()) prober_.join();
  if (grpc::HealthCheckServiceInterface* health = server_->GetHealthCheckService()) {
    health->Shutdown();
  }
  service_->Shutdown();
  // Let running calls (an Apply driving the switch) finish within the grace
  // period, then stop at once: gRPC's own graceful shutdown would also wait
  // for idle client connections to go away.
  const absl::Time deadline = absl::Now() + grace;
  while (service_->InFlight() > 0 && absl::Now() < deadline) {
    absl::SleepFor(absl::Milliseconds(5));
  }
  if (service_->InFlight() > 0) {
    log::Warn("mixnet-ocsd: {} calls still running after {}; cancelling them", service_->InFlight(),
              absl::FormatDuration(grace));
  }
  server_->Shutdown(absl::ToChronoTime(absl::Now()));
  server_->Wait();
  metrics_.reset();
  if (!ready_file_.empty()) unlink(ready_file_.c_str());
  log::Info("mixnet-ocsd: server stopped");
}

}  // namespace mixnet::ocs
