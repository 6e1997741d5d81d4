// The OcsDriver gRPC service of mixnet-ocsd (synchronous gRPC API) over one
// OcsBackend. It owns the semantics of issue 3:
//   - validation (request_validation.h), then fencing: an epoch below the
//     highest accepted one is FAILED_PRECONDITION; within the same epoch the
//     config version may not go down, and the same version must carry the
//     same circuits;
//   - the same epoch, version and contents while the switch holds them is a
//     successful no-op;
//   - otherwise the difference to the switch's actual state (read back from
//     the device) is applied, removals first, after the new desired state was
//     persisted (StateStore); one device access at a time;
//   - on a partial failure the RPC fails with the backend's code and its
//     binary error details hold a google.rpc.Status whose details[0] is the
//     ApplyCrossConnectsResponse (a result per circuit, the state read back);
//   - GetInfo reports how long recent Applies took (apply_timing.h), and
//     metrics() counts outcomes, failures, latency and state for Prometheus
//     (ocsd_metrics.h; served by the daemon with --metrics-listen);
//   - Watch streams a snapshot and then one CHANGE per applied request; the
//     stream ends when the client cancels or Shutdown() is called;
//   - with TLS, only the allow list's client certificate subjects / common
//     names may call ApplyCrossConnects (matched as client_identity.h says: a
//     subject's attributes in any order); an empty list allows none.
// Waits for the device honour the call's deadline and cancellation.
//
// Threading: handlers run on gRPC's sync-server threads concurrently; state is
// guarded by mu_, the device by the busy flag (one holder at a time). A new
// epoch's state is saved on the StateSaver's thread while the Apply reads the
// switch; the change waits for it.
#pragma once

#include <atomic>
#include <cstdint>
#include <memory>
#include <set>
#include <string>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "mixnet/ocs/v1/ocs_driver.grpc.pb.h"
#include "ocs_driver/backend.h"
#include "ocs_driver/service/apply_timing.h"
#include "ocs_driver/service/client_identity.h"
#include "ocs_driver/service/ocsd_metrics.h"
#include "ocs_driver/service/state_saver.h"
#include "ocs_driver/service/state_store.h"

namespace mixnet::ocs {

struct ServiceOptions {
  bool tls = false;                        // peers authenticated by client certificates
  std::vector<std::string> allow_clients;  // subjects / CNs that may Apply (client_identity.h)
  absl::Duration max_device_wait = absl::Minutes(2);  // cap on waiting for the device
};

class OcsService final : public mixnet::ocs::v1::OcsDriver::Service {
 public:
  // Reads the backend's info and actual state and loads the persisted state.
  // Changes nothing on the device (circuits are never cleared at start).
  static absl::StatusOr<std::unique_ptr<OcsService>> Create(std::unique_ptr<OcsBackend> backend,
                                                            StateStore store,
                                                            ServiceOptions options);

  // Ends every Watch stream and refuses new calls with UNAVAILABLE. Call
  // before grpc::Server::Shutdown so that streams do not hold it up.
  void Shutdown();
  // Handlers running now (Watch streams included).
  int InFlight() const { return in_flight_.load(); }

  // Reads the switch for a health probe (the daemon's prober thread): OK when
  // it answered. Waits for the device at most until `deadline`:
  // DeadlineExceeded then means a call held it that long, not that the
  // switch is gone. Refreshes the state GetCrossConnects reports.
  absl::Status ProbeDevice(absl::Time deadline);

  const BackendInfo& info() const { return info_; }
  OcsdMetrics& metrics() const { return *metrics_; }

  grpc::Status GetInfo(grpc::ServerContext* context, const mixnet::ocs::v1::GetInfoRequest* request,
                       mixnet::ocs::v1::GetInfoResponse* response) override;
  grpc::Status GetCrossConnects(grpc::ServerContext* context,
                                const mixnet::ocs::v1::GetCrossConnectsRequest* request,
                                mixnet::ocs::v1::GetCrossConnectsResponse* response) override;
  grpc::Status ApplyCrossConnects(grpc::ServerContext* context,
                                  const mixnet::ocs::v1::ApplyCrossConnectsRequest* request,
                                  mixnet::ocs::v1::ApplyCrossConnectsResponse* response) override;
  grpc::Status Watch(grpc::ServerContext* context, const mixnet::ocs::v1::WatchRequest* request,
                     grpc::ServerWriter<mixnet::ocs::v1::WatchEvent>* writer) override;

 private:
  struct Subscriber;
  // Counts a running handler (InFlight) for its scope.
  class CallCounter {
   public:
    explicit CallCounter(std::atomic<int>& n) : n_(n) { n_.fetch_add(1); }
    ~CallCounter() { n_.fetch_sub(1); }

   private:
    std::atomic<int>& n_;
  };

  OcsService(std::unique_ptr<OcsBackend> backend, StateStore store, ServiceOptions options,
             BackendInfo info, PersistedState state, std::vector<Circuit> actual);

  // Takes the device (sets busy_) waiting at most until the call's deadline
  // (capped by max_device_wait); DeadlineExceeded / Cancelled / Unavailable.
  absl::Status AcquireDevice(grpc::ServerContext* context);
  // The same until `deadline`, for a call (`context`) or the prober (null).
  absl::Status AcquireDeviceUntil(absl::Time deadline, grpc::ServerContext* context);
  // Takes the device (AcquireDeviceUntil), reads the switch, counts the read
  // in metrics_ and caches what it holds (sorted); GetCrossConnects and
  // ProbeDevice.
  absl::StatusOr<std::vector<Circuit>> ReadSwitch(absl::Time deadline,
                                                  grpc::ServerContext* context);
  void ReleaseDevice();

  // PERMISSION_DENIED unless the peer may change the switch.
  grpc::Status CheckApplyAllowed(grpc::ServerContext* context) const;
  // The work of ApplyCrossConnects, which counts its outcome in metrics_.
  grpc::Status ApplyCall(grpc::ServerContext* context,
                         const mixnet::ocs::v1::ApplyCrossConnectsRequest* request,
                         mixnet::ocs::v1::ApplyCrossConnectsResponse* response);
  // The Apply work with the device held.
  grpc::Status ApplyLocked(const mixnet::ocs::v1::ApplyCrossConnectsRequest& request,
                           const std::vector<Circuit>& desired,
                           mixnet::ocs::v1::ApplyCrossConnectsResponse* response);
  void Publish(mixnet::ocs::v1::WatchEvent event) ABSL_LOCKS_EXCLUDED(mu_);

  const std::unique_ptr<OcsBackend> backend_;
  const StateStore store_;
  StateSaver saver_{&store_};  // saves store_'s state beside the read before a change
  const ServiceOptions options_;
  const BackendInfo info_;
  ClientAllowList allow_list_;  // set once in Create
  const std::unique_ptr<OcsdMetrics> metrics_;

  std::atomic<int> in_flight_{0};
  absl::Mutex mu_;
  bool busy_ ABSL_GUARDED_BY(mu_) = false;  // the device is in use
  bool shutdown_ ABSL_GUARDED_BY(mu_) = false;
  PersistedState state_ ABSL_GUARDED_BY(mu_);
  std::vector<Circuit> actual_ ABSL_GUARDED_BY(mu_);  // last read from the device
  bool actual_known_ ABSL_GUARDED_BY(mu_) = true;     // false: the last read-back failed
  std::set<Subscriber*> subscribers_ ABSL_GUARDED_BY(mu_);
  ApplyTimeWindow apply_times_ ABSL_GUARDED_BY(mu_);  // Applies that changed the switch
};

}  // namespace mixnet::ocs
