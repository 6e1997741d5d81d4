// The OcsDriver service of mixnet-ocsd (see ocs_service.h). Handlers run on
// gRPC sync-server threads.
#include "ocs_driver/service/ocs_service.h"

#include <algorithm>
#include <chrono>
#include <deque>
#include <iterator>
#include <optional>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/time/clock.h"
#include "google/rpc/status.pb.h"
#include "grpcpp/grpcpp.h"
#include "ocs_driver/service/request_validation.h"
#include "runtime/common/grpc_server_limits.h"
#include "runtime/common/log.h"
#include "runtime/common/status.h"

namespace mixnet::ocs {
namespace {

namespace v1 = ::mixnet::ocs::v1;

constexpr size_t kMaxQueuedEvents = 4096;  // per Watch stream

grpc::Status ToGrpc(const absl::Status& s) {
  if (s.ok()) return grpc::Status::OK;
  return grpc::Status(static_cast<grpc::StatusCode>(s.code()), std::string(s.message()));
}

void Fill(google::protobuf::RepeatedPtrField<v1::Circuit>* out, const std::vector<Circuit>& in) {
  for (const Circuit& c : in) {
    v1::Circuit* p = out->Add();
    p->set_port_a(static_cast<uint32_t>(c.a));
    p->set_port_b(static_cast<uint32_t>(c.b));
  }
}

std::vector<Circuit> Minus(const std::vector<Circuit>& x, const std::vector<Circuit>& y) {
  std::vector<Circuit> out;
  std::set_difference(x.begin(), x.end(), y.begin(), y.end(), std::back_inserter(out));
  return out;
}

std::string Describe(const std::vector<Circuit>& v) {
  return absl::StrJoin(
      v, " ", [](std::string* out, const Circuit& c) { absl::StrAppend(out, c.a, "-", c.b); });
}

absl::Time DeadlineOf(const grpc::ServerContext* context) {
  const auto d = context->deadline();
  if (d >= std::chrono::system_clock::time_point::max() - std::chrono::hours(24 * 365 * 100)) {
    return absl::InfiniteFuture();
  }
  return absl::FromChrono(d);
}

std::string PeerName(const grpc::ServerContext* context) {
  auto auth = context->auth_context();
  if (auth != nullptr) {
    for (const char* prop : {GRPC_X509_CN_PROPERTY_NAME, GRPC_X509_SUBJECT_PROPERTY_NAME}) {
      auto v = auth->FindPropertyValues(prop);
      if (!v.empty()) return std::string(v.front().data(), v.front().size());
    }
  }
  return context->peer();
}

}  // namespace

struct OcsService::Subscriber {
  std::deque<v1::WatchEvent> queue;
  bool overflow = false;
};

absl::StatusOr<std::unique_ptr<OcsService>> OcsService::Create(std::unique_ptr<OcsBackend> backend,
                                                               StateStore store,
                                                               ServiceOptions options) {
  ASSIGN_OR_RETURN(ClientAllowList allow_list, ClientAllowList::Create(options.allow_clients));
  ASSIGN_OR_RETURN(BackendInfo info, backend->Info());
  if (info.ports < 2) {
    return absl::FailedPreconditionError(
        absl::StrCat(info.backend, " backend reports ", info.ports, " ports"));
  }
  ASSIGN_OR_RETURN(std::vector<Circuit> actual, backend->Read());
  std::sort(actual.begin(), actual.end());
  ASSIGN_OR_RETURN(std::optional<PersistedState> saved, store.Load());
  PersistedState state;
  if (saved.has_value() && saved->epoch > kMaxEpoch) {
    // Left by a daemon that took any epoch: every epoch would be fenced.
    return absl::FailedPreconditionError(absl::StrCat(
        "state ", store.path(), " holds epoch ", saved->epoch, ", above the maximum ", kMaxEpoch,
        " (2^53-1) that this daemon accepts, so every controller would be fenced for good; "
        "remove that file to start afresh (the circuits on the switch are kept and adopted)"));
  }
  if (saved.has_value()) {
    state = *saved;
    log::Info("state {}: epoch {} version {}, {} desired circuits", store.path(), state.epoch,
              state.config_version, state.desired.size());
  } else {
    // Nothing saved yet: what the switch holds is what is wanted until the
    // first Apply (epoch 0, version 0; not persisted).
    state.desired = actual;
    log::Info("state {}: none saved yet; adopting the {} circuits the switch holds", store.path(),
              actual.size());
  }
  if (saved.has_value() && state.desired != actual) {
    log::Warn(
        "switch is out of sync with the desired state (actual [{}], desired [{}]); left as "
        "it is until the next ApplyCrossConnects",
        Describe(actual), Describe(state.desired));
  }
  auto service = std::unique_ptr<OcsService>(new OcsService(std::move(backend), std::move(store),
                                                            std::move(options), std::move(info),
                                                            std::move(state), std::move(actual)));
  service->allow_list_ = std::move(allow_list);
  {
    absl::MutexLock lock(&service->mu_);
    service->metrics_->Circuits(service->actual_.size());
    service->metrics_->Epoch(service->state_.epoch, service->state_.config_version);
    service->metrics_->DeviceConnected(true);
  }
  return service;
}

OcsService::OcsService(std::unique_ptr<OcsBackend> backend, StateStore store,
                       ServiceOptions options, BackendInfo info, PersistedState state,
                       std::vector<Circuit> actual)
    : backend_(std::move(backend)),
      store_(std::move(store)),
      options_(std::move(options)),
      info_(std::move(info)),
      metrics_(std::make_unique<OcsdMetrics>(info_.ports)),
      state_(std::move(state)),
      actual_(std::move(actual)) {}

void OcsService::Shutdown() {
  absl::MutexLock lock(&mu_);
  shutdown_ = true;
}

absl::Status OcsService::AcquireDevice(grpc::ServerContext* context) {
  return AcquireDeviceUntil(std::min(DeadlineOf(context), absl::Now() + options_.max_device_wait),
                            context);
}

absl::Status OcsService::AcquireDeviceUntil(absl::Time deadline, grpc::ServerContext* context) {
  auto device_free = [this]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) { return !busy_ || shutdown_; };
  absl::MutexLock lock(&mu_);
  while (true) {
    const absl::Time slice = std::min(deadline, absl::Now() + absl::Milliseconds(100));
    mu_.AwaitWithDeadline(absl::Condition(&device_free), slice);
    if (shutdown_) return absl::UnavailableError("mixnet-ocsd is shutting down");
    if (!busy_) break;
    if (context != nullptr && context->IsCancelled())
      return absl::CancelledError("call cancelled while waiting for the device");
    if (absl::Now() >= deadline) {
      return absl::DeadlineExceededError("deadline passed while another call held the switch");
    }
  }
  busy_ = true;
  return absl::OkStatus();
}

void OcsService::ReleaseDevice() {
  absl::MutexLock lock(&mu_);
  busy_ = false;
}

absl::StatusOr<std::vector<Circuit>> OcsService::ReadSwitch(absl::Time deadline,
                                                            grpc::ServerContext* context) {
  RETURN_IF_ERROR(AcquireDeviceUntil(deadline, context));
  absl::StatusOr<std::vector<Circuit>> actual = backend_->Read();
  metrics_->DeviceConnected(actual.ok());  // with the device held: in order with Applies
  if (actual.ok()) metrics_->Circuits(actual->size());
  ReleaseDevice();
  if (!actual.ok()) return Annotate(actual.status(), "reading the switch");
  std::sort(actual->begin(), actual->end());
  absl::MutexLock lock(&mu_);
  actual_ = *actual;
  actual_known_ = true;
  return actual;
}

absl::Status OcsService::ProbeDevice(absl::Time deadline) {
  return ReadSwitch(deadline, nullptr).status();
}

grpc::Status OcsService::GetInfo(grpc::ServerContext* context, const v1::GetInfoRequest* request,
                                 v1::GetInfoResponse* response) {
  CallCounter counted(in_flight_);
  if (grpc::Status s = CheckCallMetadata(*context); !s.ok()) return s;
  response->set_vendor(info_.vendor);
  response->set_model(info_.model);
  response->set_serial(info_.serial);
  response->set_firmware(info_.firmware);
  response->set_backend(info_.backend);
  response->set_port_count(static_cast<uint32_t>(info_.ports));
  response->set_switching_time_us(
      static_cast<uint32_t>(absl::ToInt64Microseconds(info_.switching_time)));
  absl::MutexLock lock(&mu_);
  response->set_highest_epoch(state_.epoch);
  response->set_config_version(state_.config_version);
  const ApplyTimeStats times = apply_times_.Stats();
  response->set_apply_samples(times.samples);
  response->set_apply_median_us(static_cast<uint64_t>(absl::ToInt64Microseconds(times.median)));
  response->set_apply_p90_us(static_cast<uint64_t>(absl::ToInt64Microseconds(times.p90)));
  response->set_apply_max_us(static_cast<uint64_t>(absl::ToInt64Microseconds(times.max)));
  return grpc::Status::OK;
}

grpc::Status OcsService::GetCrossConnects(grpc::ServerContext* context,
                                          const v1::GetCrossConnectsRequest* request,
                                          v1::GetCrossConnectsResponse* response) {
  CallCounter counted(in_flight_);
  if (grpc::Status s = CheckCallMetadata(*context); !s.ok()) return s;
  absl::StatusOr<std::vector<Circuit>> actual =
      ReadSwitch(std::min(DeadlineOf(context), absl::Now() + options_.max_device_wait), context);
  if (!actual.ok()) return ToGrpc(actual.status());
  absl::MutexLock lock(&mu_);
  Fill(response->mutable_actual(), *actual);
  Fill(response->mutable_desired(), state_.desired);
  response->set_epoch(state_.epoch);
  response->set_config_version(state_.config_version);
  response->set_in_sync(*actual == state_.desired);
  return grpc::Status::OK;
}

grpc::Status OcsService::CheckApplyAllowed(grpc::ServerContext* context) const {
  if (!options_.tls) return grpc::Status::OK;
  if (allow_list_.empty()) {  // the daemon refuses this at start; deny by default anyway
    return grpc::Status(grpc::StatusCode::PERMISSION_DENIED,
                        "no client is allowed to change the switch (no --allow-client)");
  }
  auto auth = context->auth_context();
  if (auth == nullptr || !auth->IsPeerAuthenticated()) {
    return grpc::Status(grpc::StatusCode::PERMISSION_DENIED, "client not authenticated");
  }
  std::string subject;
  for (const grpc::string_ref& v : auth->FindPropertyValues(GRPC_X509_SUBJECT_PROPERTY_NAME)) {
    subject.assign(v.data(), v.size());
  }
  std::vector<std::string> common_names;
  for (const grpc::string_ref& v : auth->FindPropertyValues(GRPC_X509_CN_PROPERTY_NAME)) {
    common_names.emplace_back(v.data(), v.size());
  }
  if (allow_list_.Allows(subject, common_names)) return grpc::Status::OK;
  return grpc::Status(grpc::StatusCode::PERMISSION_DENIED,
                      absl::StrCat("client certificate (subject '", subject, "', CN '",
                                   absl::StrJoin(common_names, "', '"),
                                   "') is not allowed to change the switch (--allow-client)"));
}

grpc::Status OcsService::ApplyCrossConnects(grpc::ServerContext* context,
                                            const v1::ApplyCrossConnectsRequest* request,
                                            v1::ApplyCrossConnectsResponse* response) {
  CallCounter counted(in_flight_);
  grpc::Status status = ApplyCall(context, request, response);
  metrics_->Apply(static_cast<absl::StatusCode>(status.error_code()), response->noop());
  return status;
}

grpc::Status OcsService::ApplyCall(grpc::ServerContext* context,
                                   const v1::ApplyCrossConnectsRequest* request,
                                   v1::ApplyCrossConnectsResponse* response) {
  if (grpc::Status s = CheckCallMetadata(*context); !s.ok()) return s;
  if (grpc::Status s = CheckApplyAllowed(context); !s.ok()) return s;
  absl::StatusOr<std::vector<Circuit>> desired = ValidateApplyRequest(*request, info_.ports);
  if (!desired.ok()) return ToGrpc(desired.status());
  if (absl::Status s = AcquireDevice(context); !s.ok()) return ToGrpc(s);
  grpc::Status status;
  if (context->IsCancelled() || absl::Now() >= DeadlineOf(context)) {
    // Gave up while waiting: do not change the switch behind the caller's back.
    status = grpc::Status(grpc::StatusCode::DEADLINE_EXCEEDED,
                          "call cancelled or past its deadline before the switch was free");
  } else {
    const absl::Time start = absl::Now();
    status = ApplyLocked(*request, *desired, response);
    if (status.ok() && !response->noop()) {
      const absl::Duration took = absl::Now() - start;
      metrics_->ApplyLatency(took);
      absl::MutexLock lock(&mu_);
      apply_times_.Add(took);
    }
  }
  ReleaseDevice();
  const std::string who =
      request->controller_id().empty() ? PeerName(context) : request->controller_id();
  if (status.ok()) {
    log::Info("apply from {}: epoch {} version {}: {} ({} ports changed, {} us)", who,
              request->epoch(), request->config_version(), response->noop() ? "no-op" : "done",
              response->ports_changed(), response->backend_us());
  } else {
    log::Warn("apply from {}: epoch {} version {}: {}", who, request->epoch(),
              request->config_version(), status.error_message());
  }
  return status;
}

grpc::Status OcsService::ApplyLocked(const v1::ApplyCrossConnectsRequest& request,
                                     const std::vector<Circuit>& desired,
                                     v1::ApplyCrossConnectsResponse* response) {
  PersistedState current;
  {
    absl::MutexLock lock(&mu_);
    current = state_;
  }
  const uint64_t epoch = request.epoch(), version = request.config_version();
  if (epoch < current.epoch) {
    return grpc::Status(grpc::StatusCode::FAILED_PRECONDITION,
                        absl::StrCat("stale epoch ", epoch, ": the highest accepted epoch is ",
                                     current.epoch, " (fenced)"));
  }
  if (epoch == current.epoch && !current.controller_id.empty() &&
      request.controller_id() != current.controller_id) {
    // Two controllers at one epoch: the first to apply holds it.
    return grpc::Status(grpc::StatusCode::FAILED_PRECONDITION,
                        absl::StrCat("epoch ", epoch, " is held by controller '",
                                     current.controller_id, "', not '", request.controller_id(),
                                     "': a controller takes over with a higher epoch (fenced)"));
  }
  if (epoch == current.epoch && version < current.config_version) {
    return grpc::Status(grpc::StatusCode::FAILED_PRECONDITION,
                        absl::StrCat("config_version ", version, " is below version ",
                                     current.config_version, " already applied in epoch ", epoch));
  }
  const bool same = epoch == current.epoch && version == current.config_version;
  if (same && desired != current.desired) {
    return grpc::Status(grpc::StatusCode::FAILED_PRECONDITION,
                        absl::StrCat("config_version ", version, " of epoch ", epoch,
                                     " was already applied with different circuits"));
  }
  PersistedState next{epoch, version, desired, request.controller_id()};
  // A new epoch or version is saved whatever the switch holds, so its save
  // (an fsync) runs beside the read below; nothing goes to the switch before
  // it is durable (write-ahead). The same version is saved, if at all, after
  // the read (a no-op saves nothing).
  const bool save_early = !same;
  if (save_early) saver_.Start(next);
  auto saved = [&]() -> absl::Status {
    absl::Status s = saver_.Wait();
    if (!s.ok()) return s;
    metrics_->Epoch(next.epoch, next.config_version);
    absl::MutexLock lock(&mu_);
    state_ = next;
    return s;
  };
  absl::StatusOr<std::vector<Circuit>> before = backend_->Read();
  metrics_->DeviceConnected(before.ok());
  if (!before.ok()) {
    // The new state is durable (or its save failed too); the switch is untouched.
    const bool kept = save_early && saved().ok();
    return ToGrpc(Annotate(
        before.status(),
        kept
            ? absl::StrCat("reading the switch before a change (the desired state of epoch ", epoch,
                           " version ", version, " is saved; the same request again applies it)")
            : std::string("reading the switch before a change")));
  }
  std::sort(before->begin(), before->end());
  metrics_->Circuits(before->size());
  {
    absl::MutexLock lock(&mu_);
    actual_ = *before;
    actual_known_ = true;
  }
  response->set_epoch(epoch);
  response->set_config_version(version);
  const std::vector<Circuit> remove = Minus(*before, desired);
  const std::vector<Circuit> add = Minus(desired, *before);
  if (same && remove.empty() && add.empty()) {
    response->set_noop(true);
    Fill(response->mutable_actual(), *before);
    return grpc::Status::OK;
  }

  // Persist first: after a crash from here on the daemon knows what it was doing.
  if (next != current) {
    if (!save_early) saver_.Start(next);
    if (absl::Status s = saved(); !s.ok()) {
      return ToGrpc(absl::InternalError(
          absl::StrCat("persisting the desired state failed, switch untouched: ", s.ToString())));
    }
  }

  ChangeReport report;
  absl::Status change;
  // What the switch holds afterwards; unset: unknown (it could not be read).
  std::optional<std::vector<Circuit>> after = *before;
  if (!remove.empty() || !add.empty()) {
    const absl::Time start = absl::Now();
    change = backend_->Change(remove, add, report);
    response->set_backend_us(static_cast<uint64_t>(absl::ToInt64Microseconds(absl::Now() - start)));
    // The backend's read-back (after the switch reported completion) is the
    // state: no second read, which could fail on its own and turn "unknown"
    // into "empty".
    after = report.after;
    if (after.has_value()) {
      std::sort(after->begin(), after->end());
    } else {
      log::Error("the switch's state after the change is unknown: {}",
                 (report.read_back.ok() ? change : report.read_back).ToString());
    }
    for (const std::string& c : report.cleared) log::Warn("cleared {}", c);
  } else {
    response->set_noop(true);  // new version, same circuits: nothing to drive
  }
  std::vector<char> changed(static_cast<size_t>(info_.ports) + 1, 0);
  uint32_t ports_changed = 0;
  for (const auto* list : {&remove, &add}) {
    for (const Circuit& c : *list) {
      for (int p : {c.a, c.b}) ports_changed += std::exchange(changed[p], 1) == 0 ? 1 : 0;
    }
  }
  response->set_ports_changed(ports_changed);
  // One result per changed circuit. The read-back decides it (an add is done
  // when the switch holds the circuit afterwards, a removal when it does
  // not); the backend's outcome gives the reason of a failure. Backends
  // report outcomes in request order (removals, then additions); look
  // further only when one does not.
  const std::vector<CircuitOutcome>& outcomes = report.outcomes;
  absl::Status first_failure;
  auto result_of = [&](const Circuit& c, bool is_add, size_t index) {
    v1::CircuitResult* r = response->add_results();
    r->mutable_circuit()->set_port_a(static_cast<uint32_t>(c.a));
    r->mutable_circuit()->set_port_b(static_cast<uint32_t>(c.b));
    r->set_op(is_add ? v1::CircuitResult::ADD : v1::CircuitResult::REMOVE);
    const CircuitOutcome* o = nullptr;
    if (index < outcomes.size() && outcomes[index].circuit == c && outcomes[index].add == is_add) {
      o = &outcomes[index];
    } else {
      for (const CircuitOutcome& x : outcomes) {
        if (x.circuit == c && x.add == is_add) o = &x;
      }
    }
    absl::Status said = o != nullptr ? o->status : change;
    absl::Status status;
    if (after.has_value()) {
      const bool present = std::binary_search(after->begin(), after->end(), c);
      if (present != is_add) {
        status = !said.ok()
                     ? said
                     : absl::InternalError(absl::StrCat(
                           is_add ? "add" : "remove", " circuit ", c.a, "-", c.b, ": the switch ",
                           present ? "still holds" : "does not hold", " it after the change"));
      } else if (!said.ok()) {
        log::Warn("{} circuit {}-{}: done by the read-back although the backend said: {}",
                  is_add ? "add" : "remove", c.a, c.b, said.ToString());
      }
    } else {
      status = !said.ok() ? said
                          : Annotate(report.read_back.ok() ? absl::UnknownError("state unknown")
                                                           : report.read_back,
                                     absl::StrCat("circuit ", c.a, "-", c.b,
                                                  " could not be verified (state unknown)"));
    }
    if (!status.ok()) {
      r->set_code(static_cast<int32_t>(status.code()));
      r->set_message(std::string(status.message()));
      metrics_->CircuitFailed(status.code(), c.a, c.b);
      if (first_failure.ok()) first_failure = status;
    }
  };
  response->mutable_results()->Reserve(static_cast<int>(remove.size() + add.size()));
  for (size_t i = 0; i < remove.size(); ++i) result_of(remove[i], false, i);
  for (size_t i = 0; i < add.size(); ++i) result_of(add[i], true, remove.size() + i);
  for (const std::string& c : report.cleared) response->add_cleared(c);

  // The outcome of the whole request: done when the read-back shows the
  // desired set, whatever went wrong on the way.
  absl::Status outcome;
  if (!after.has_value()) {
    response->set_actual_unknown(true);
    outcome = !change.ok()             ? change
              : !report.read_back.ok() ? report.read_back
                                       : absl::UnknownError("the switch could not be read back");
  } else {
    Fill(response->mutable_actual(), *after);
    if (!first_failure.ok()) {
      outcome = !change.ok() ? change : first_failure;
    } else if (*after != desired) {
      outcome = absl::InternalError(absl::StrCat("the switch holds [", Describe(*after),
                                                 "] after the change, not the desired [",
                                                 Describe(desired), "]"));
    } else if (!change.ok()) {
      log::Warn("change reported '{}' but the read-back shows the desired state",
                change.ToString());
    }
  }

  v1::WatchEvent event;
  event.set_kind(v1::WatchEvent::CHANGE);
  event.set_epoch(epoch);
  event.set_config_version(version);
  if (after.has_value()) {
    Fill(event.mutable_circuits(), *after);
    Fill(event.mutable_added(), Minus(*after, *before));
    Fill(event.mutable_removed(), Minus(*before, *after));
  } else {
    event.set_circuits_unknown(true);
  }
  if (!outcome.ok()) event.set_error(std::string(outcome.message()));
  if (!remove.empty() || !add.empty()) metrics_->DeviceConnected(after.has_value());
  if (after.has_value()) metrics_->Circuits(after->size());
  {
    absl::MutexLock lock(&mu_);
    actual_known_ = after.has_value();
    actual_ = after.value_or(std::vector<Circuit>{});
  }
  Publish(std::move(event));
  if (outcome.ok()) return grpc::Status::OK;

  google::rpc::Status details;
  details.set_code(static_cast<int32_t>(outcome.code()));
  details.set_message(absl::StrCat("apply failed in part: ", outcome.message()));
  details.add_details()->PackFrom(*response);
  return grpc::Status(static_cast<grpc::StatusCode>(outcome.code()), details.message(),
                      details.SerializeAsString());
}

void OcsService::Publish(v1::WatchEvent event) {
  absl::MutexLock lock(&mu_);
  for (Subscriber* s : subscribers_) {
    if (s->queue.size() >= kMaxQueuedEvents) {
      s->overflow = true;
    } else {
      s->queue.push_back(event);
    }
  }
}

grpc::Status OcsService::Watch(grpc::ServerContext* context, const v1::WatchRequest* request,
                               grpc::ServerWriter<v1::WatchEvent>* writer) {
  CallCounter counted(in_flight_);
  if (grpc::Status s = CheckCallMetadata(*context); !s.ok()) return s;
  Subscriber sub;
  {
    absl::MutexLock lock(&mu_);
    if (shutdown_)
      return grpc::Status(grpc::StatusCode::UNAVAILABLE, "mixnet-ocsd is shutting down");
    v1::WatchEvent snapshot;
    snapshot.set_kind(v1::WatchEvent::SNAPSHOT);
    snapshot.set_epoch(state_.epoch);
    snapshot.set_config_version(state_.config_version);
    Fill(snapshot.mutable_circuits(), actual_);
    snapshot.set_circuits_unknown(!actual_known_);
    sub.queue.push_back(std::move(snapshot));
    subscribers_.insert(&sub);
  }
  auto ready = [&]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    return !sub.queue.empty() || sub.overflow || shutdown_;
  };
  grpc::Status end;
  while (true) {
    std::deque<v1::WatchEvent> events;
    {
      absl::MutexLock lock(&mu_);
      mu_.AwaitWithTimeout(absl::Condition(&ready), absl::Milliseconds(100));
      events.swap(sub.queue);
      if (shutdown_) {
        end = grpc::Status(grpc::StatusCode::UNAVAILABLE, "mixnet-ocsd is shutting down");
      } else if (sub.overflow) {
        end = grpc::Status(grpc::StatusCode::RESOURCE_EXHAUSTED,
                           "watcher fell behind; watch again for a fresh snapshot");
      }
    }
    if (!end.ok()) break;
    if (context->IsCancelled()) {
      end = grpc::Status(grpc::StatusCode::CANCELLED, "watch cancelled");
      break;
    }
    bool written = true;
    for (const v1::WatchEvent& e : events) {
      if (!(written = writer->Write(e))) break;
    }
    if (!written) {
      end = grpc::Status(grpc::StatusCode::CANCELLED, "watcher went away");
      break;
    }
  }
  absl::MutexLock lock(&mu_);
  subscribers_.erase(&sub);
  return end;
}

}  // namespace mixnet::ocs
