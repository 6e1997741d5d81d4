// ControllerService / ControllerServer (see controller_service.h). Handlers
// run on gRPC's threads; Start/Shutdown on the owner's.
#include "runtime/control/controller_service.h"

#include <fcntl.h>
#include <unistd.h>

#include <algorithm>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "grpcpp/ext/proto_server_reflection_plugin.h"
#include "grpcpp/health_check_service_interface.h"
#include "grpcpp/security/server_credentials.h"
#include "grpcpp/server_builder.h"
#include "runtime/common/grpc_server_limits.h"
#include "runtime/common/log.h"
#include "runtime/common/status.h"

namespace mixnet::control {
namespace {

constexpr char kServiceName[] = "mixnet.control.v1.Controller";

grpc::Status ToGrpc(const absl::Status& s) {
  if (s.ok()) return grpc::Status::OK;
  return grpc::Status(static_cast<grpc::StatusCode>(s.code()), std::string(s.message()));
}

class CallCounter {
 public:
  explicit CallCounter(std::atomic<int>& n) : n_(n) { n_.fetch_add(1); }
  ~CallCounter() { n_.fetch_sub(1); }

 private:
  std::atomic<int>& n_;
};

absl::Status WriteFileAtomically(const std::string& path, const std::string& data) {
  const std::string tmp = path + ".tmp";
  const int fd = open(tmp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd < 0) return ErrnoStatus(absl::StrCat("--ready-file ", tmp), "open");
  const ssize_t n = write(fd, data.data(), data.size());
  const int err = errno;
  close(fd);
  if (n != static_cast<ssize_t>(data.size())) {
    return ErrnoStatus(absl::StrCat("--ready-file ", tmp), "write", err);
  }
  if (rename(tmp.c_str(), path.c_str()) != 0) {
    return ErrnoStatus(absl::StrCat("--ready-file ", path), "rename");
  }
  return absl::OkStatus();
}

}  // namespace

grpc::Status ControllerService::Register(grpc::ServerContext* context,
                                         const v1::RegisterRequest* request,
                                         v1::RegisterResponse* response) {
  CallCounter calls(in_flight_);
  if (grpc::Status s = CheckCallMetadata(*context); !s.ok()) return s;
  if (grpc::Status s = CheckHost(*context, request->host(), "Register"); !s.ok()) return s;
  // An id another host registered is not taken over (its watch stream).
  if (grpc::Status s = CheckWorker(*context, request->worker_id(), "Register"); !s.ok()) return s;
  absl::StatusOr<v1::RegisterResponse> r = c_->Register(*request);
  if (!r.ok()) return ToGrpc(r.status());
  *response = std::move(*r);
  return grpc::Status::OK;
}

grpc::Status ControllerService::CheckHost(const grpc::ServerContextBase& context,
                                          const std::string& host, const std::string& call) const {
  if (!tls_) return grpc::Status::OK;
  const std::vector<std::string> names = PeerCertificateNames(context);
  if (std::find(names.begin(), names.end(), host) != names.end()) return grpc::Status::OK;
  return grpc::Status(
      grpc::StatusCode::PERMISSION_DENIED,
      absl::StrCat(call, " from ", context.peer(), ": its certificate names ",
                   names.empty() ? "no host" : absl::StrJoin(names, ", "), ", not host '", host,
                   "' (a worker acts only as the host its certificate names: "
                   "its CN or a DNS subject alternative name)"));
}

grpc::Status ControllerService::CheckWorker(const grpc::ServerContextBase& context,
                                            const std::string& worker_id,
                                            const std::string& call) const {
  if (!tls_) return grpc::Status::OK;
  const std::optional<std::string> host = c_->HostOf(worker_id);
  if (!host) return grpc::Status::OK;
  return CheckHost(context, *host, absl::StrCat(call, " for worker ", worker_id));
}

void ControllerService::CancelStreams() {
  absl::MutexLock lock(&mu_);
  cancelled_ = true;
  for (grpc::ServerContextBase* ctx : report_streams_) ctx->TryCancel();
}

// One ReportTraffic stream (callback API, raw bytes): each row is parsed
// here, so a row that is not a TrafficReport ends the stream with
// INVALID_ARGUMENT instead of looking like the end of the stream.
class ControllerService::ReportReactor final : public grpc::ServerReadReactor<grpc::ByteBuffer> {
 public:
  ReportReactor(ControllerService* service, grpc::CallbackServerContext* context,
                grpc::ByteBuffer* response)
      : service_(service), context_(context), response_(response) {
    service_->in_flight_.fetch_add(1);
    if (grpc::Status s = CheckCallMetadata(*context_); !s.ok()) {
      Done(s);
      return;
    }
    {
      absl::MutexLock lock(&service_->mu_);
      if (service_->cancelled_) {
        registered_ = false;
      } else {
        service_->report_streams_.insert(context_);
        registered_ = true;
      }
    }
    if (!registered_) {
      Done(grpc::Status(grpc::StatusCode::UNAVAILABLE, "controller is shutting down"));
      return;
    }
    StartRead(&row_);
  }

  void OnReadDone(bool ok) override {
    if (!ok) {  // the client's end of the stream, or the call was cancelled
      Done(grpc::Status::OK);
      return;
    }
    v1::TrafficReport report;
    if (!grpc::SerializationTraits<v1::TrafficReport>::Deserialize(&row_, &report).ok()) {
      Done(grpc::Status(grpc::StatusCode::INVALID_ARGUMENT,
                        absl::StrCat("malformed request: row ", accepted_ + 1,
                                     " of /mixnet.control.v1.Controller/ReportTraffic is not a "
                                     "valid mixnet.control.v1.TrafficReport (protobuf parse "
                                     "failed); ",
                                     accepted_, " rows accepted before it")));
      return;
    }
    grpc::Status mine = service_->CheckHost(*context_, report.host(), "ReportTraffic");
    if (mine.ok()) mine = service_->CheckWorker(*context_, report.worker_id(), "ReportTraffic");
    if (!mine.ok()) {
      Done(mine);
      return;
    }
    if (absl::Status s = service_->c_->Report(report); !s.ok()) {
      Done(ToGrpc(s));
      return;
    }
    ++accepted_;
    StartRead(&row_);
  }

  void OnDone() override {
    if (registered_) {
      absl::MutexLock lock(&service_->mu_);
      service_->report_streams_.erase(context_);
    }
    service_->in_flight_.fetch_sub(1);
    delete this;
  }

 private:
  void Done(const grpc::Status& status) {
    v1::ReportTrafficResponse r;
    r.set_reports_accepted(accepted_);
    const std::string bytes = r.SerializeAsString();
    grpc::Slice slice(bytes);
    *response_ = grpc::ByteBuffer(&slice, 1);
    Finish(status);
  }

  ControllerService* const service_;
  grpc::CallbackServerContext* const context_;
  grpc::ByteBuffer* const response_;
  grpc::ByteBuffer row_;
  uint64_t accepted_ = 0;
  bool registered_ = false;
};

grpc::ServerReadReactor<grpc::ByteBuffer>* ControllerService::ReportTraffic(
    grpc::CallbackServerContext* context, grpc::ByteBuffer* response) {
  return new ReportReactor(this, context, response);
}

grpc::Status ControllerService::WatchTopology(grpc::ServerContext* context,
                                              const v1::WatchTopologyRequest* request,
                                              grpc::ServerWriter<v1::TopologyEvent>* writer) {
  CallCounter calls(in_flight_);
  if (grpc::Status s = CheckCallMetadata(*context); !s.ok()) return s;
  if (grpc::Status s = CheckWorker(*context, request->worker_id(), "WatchTopology"); !s.ok()) {
    return s;
  }
  absl::StatusOr<std::shared_ptr<Controller::Watch>> w = c_->StartWatch(request->worker_id());
  if (!w.ok()) return ToGrpc(w.status());
  v1::TopologyEvent ev;
  while (true) {
    const Controller::WatchResult r = c_->NextEvent(**w, &ev, absl::Milliseconds(100));
    if (r == Controller::WatchResult::kEnd) break;
    if (r == Controller::WatchResult::kEvent && !writer->Write(ev)) break;
    if (context->IsCancelled()) break;
  }
  c_->EndWatch(**w);
  return grpc::Status::OK;
}

grpc::Status ControllerService::AckTopology(grpc::ServerContext* context,
                                            const v1::AckTopologyRequest* request,
                                            v1::AckTopologyResponse*) {
  CallCounter calls(in_flight_);
  if (grpc::Status s = CheckCallMetadata(*context); !s.ok()) return s;
  if (grpc::Status s = CheckWorker(*context, request->worker_id(), "AckTopology"); !s.ok()) {
    return s;
  }
  return ToGrpc(c_->Ack(*request));
}

grpc::Status ControllerService::GetStatus(grpc::ServerContext* context, const v1::GetStatusRequest*,
                                          v1::ControllerStatus* response) {
  CallCounter calls(in_flight_);
  if (grpc::Status s = CheckCallMetadata(*context); !s.ok()) return s;
  *response = c_->GetStatus();
  return grpc::Status::OK;
}

grpc::Status ControllerService::WarmPaths(grpc::ServerContext* context,
                                          const v1::WarmPathsRequest* request,
                                          v1::WarmPathsResponse* response) {
  CallCounter calls(in_flight_);
  if (grpc::Status s = CheckCallMetadata(*context); !s.ok()) return s;
  if (grpc::Status s = CheckWorker(*context, request->worker_id(), "WarmPaths"); !s.ok()) return s;
  absl::StatusOr<v1::WarmPathsResponse> r = c_->WarmPaths(*request);
  if (!r.ok()) return ToGrpc(r.status());
  *response = *std::move(r);
  return grpc::Status::OK;
}

absl::StatusOr<std::unique_ptr<ControllerServer>> ControllerServer::Start(
    std::unique_ptr<Controller> controller, const ServerOptions& options) {
  if (options.listen.empty() || options.listen == "unix:") {
    return absl::InvalidArgumentError("--listen: expected HOST:PORT or unix:/path");
  }
  const bool tls = options.tls.Active();
  absl::StatusOr<std::shared_ptr<grpc::ServerCredentials>> creds = ServerCredentials(options.tls);
  absl::Status policy = creds.status();
  if (policy.ok()) policy = CheckPlaintextListen(options.listen, tls, options.insecure_listen_any);
  if (!policy.ok()) {
    controller->Shutdown();
    return policy;
  }
  if (!options.ready_file.empty() && unlink(options.ready_file.c_str()) != 0 && errno != ENOENT) {
    return ErrnoStatus(absl::StrCat("--ready-file ", options.ready_file), "unlink");
  }
  std::unique_ptr<ControllerServer> s(new ControllerServer());
  s->controller_ = std::move(controller);
  s->service_ = std::make_unique<ControllerService>(s->controller_.get(), tls);
  if (!options.metrics_listen.empty()) {
    absl::StatusOr<std::unique_ptr<MetricsExposer>> m = MetricsExposer::Start(
        options.metrics_listen, MetricsTls{options.tls, options.metrics_allow_clients},
        options.metrics_allow_remote, s->controller_->metrics().registry());
    if (!m.ok()) {
      s->controller_->Shutdown();
      return m.status();
    }
    s->metrics_ = std::move(*m);
    log::Info("mixnet-controller: metrics on {}://{}/metrics", tls ? "https" : "http",
              s->metrics_->address());
  }
  // Standard probes and tools: grpc.health.v1.Health ("" and the service)
  // and server reflection (grpcurl list / describe).
  grpc::EnableDefaultHealthCheckService(true);
  grpc::reflection::InitProtoReflectionServerBuilderPlugin();
  grpc::ServerBuilder builder;
  ApplyServerLimits(builder);  // metadata limit, malformed bodies (grpc_server_limits.h)
  int port = 0;
  builder.AddListeningPort(options.listen, *creds, &port);
  builder.RegisterService(s->service_.get());
  s->server_ = builder.BuildAndStart();
  if (s->server_ == nullptr || port == 0) {
    s->server_.reset();
    s->controller_->Shutdown();
    return absl::UnavailableError(absl::StrCat("mixnet-controller: cannot listen on ",
                                               options.listen,
                                               " (address in use, bad path, or no permission)"));
  }
  if (absl::StartsWith(options.listen, "unix:")) {
    s->address_ = options.listen;
  } else {
    s->address_ = absl::StrCat(options.listen.substr(0, options.listen.rfind(':')), ":", port);
  }
  if (grpc::HealthCheckServiceInterface* health = s->server_->GetHealthCheckService()) {
    health->SetServingStatus(true);
    health->SetServingStatus(kServiceName, true);
    // A fenced controller plans no more: probes see NOT_SERVING (GetStatus
    // says why).
    s->controller_->OnFenced([health](const std::string&) {
      health->SetServingStatus(false);
      health->SetServingStatus(kServiceName, false);
    });
  }
  log::Info("mixnet-controller {}: listening on {}{}", s->controller_->id(), s->address_,
            tls ? " (mTLS)" : "");
  if (!options.ready_file.empty()) {
    RETURN_IF_ERROR(WriteFileAtomically(options.ready_file, s->address_ + "\n"));
    s->ready_file_ = options.ready_file;
  }
  return s;
}

ControllerServer::~ControllerServer() { Shutdown(absl::Seconds(1)); }

void ControllerServer::Shutdown(absl::Duration grace) {
  if (stopped_) return;
  stopped_ = true;
  if (server_ != nullptr) {
    if (grpc::HealthCheckServiceInterface* health = server_->GetHealthCheckService()) {
      health->Shutdown();  // NOT_SERVING from now on
    }
  }
  controller_->Shutdown();
  if (server_ == nullptr) return;  // never listened
  service_->CancelStreams();
  // Watch streams end within their 100 ms poll; running unary calls get the
  // grace period. gRPC's own graceful shutdown would also wait for idle
  // client connections, so the server is then stopped at once.
  const absl::Time deadline = absl::Now() + grace;
  while (service_->InFlight() > 0 && absl::Now() < deadline) {
    absl::SleepFor(absl::Milliseconds(5));
  }
  if (service_->InFlight() > 0) {
    log::Warn("mixnet-controller: {} calls still running after {}; cancelling them",
              service_->InFlight(), absl::FormatDuration(grace));
  }
  server_->Shutdown(absl::ToChronoTime(absl::Now()));
  server_->Wait();
  metrics_.reset();
  if (!ready_file_.empty()) unlink(ready_file_.c_str());
  log::Info("mixnet-controller: server stopped");
}

}  // namespace mixnet::control
