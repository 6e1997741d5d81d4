// OcsdMetrics: the Prometheus metrics of one mixnet-ocsd (README "Metrics"),
// recorded by OcsService and served by the daemon's MetricsExposer when
// --metrics-listen is given (the registry exists either way; recording costs
// a few atomic adds per call).
//
//   mixnet_ocsd_applies_total{outcome}      ApplyCrossConnects calls: "ok"
//                                           (the switch was changed), "noop",
//                                           "failed" (any error)
//   mixnet_ocsd_apply_failures_total{code}  failed Applies by gRPC status code
//                                           (INVALID_ARGUMENT, FAILED_PRECONDITION, ...)
//   mixnet_ocsd_port_failures_total{code,port}  circuits that failed in an Apply
//                                           (per circuit result), counted on
//                                           both of their ports (1..ports)
//   mixnet_ocsd_apply_latency_seconds       histogram: Applies that changed the
//                                           switch, device taken to result
//                                           (what GetInfo's Apply times report)
//   mixnet_ocsd_circuits                    circuits the switch holds (last read)
//   mixnet_ocsd_ports                       duplex ports of the switch
//   mixnet_ocsd_epoch, mixnet_ocsd_config_version  highest accepted epoch and
//                                           its config version (persisted)
//   mixnet_ocsd_device_connected            1 when the last read of the switch
//                                           succeeded, 0 when it failed
//
// Threading: any thread (prometheus-cpp metrics are thread-safe).
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>

#include "absl/status/status.h"
#include "absl/time/time.h"
#include "prometheus/counter.h"
#include "prometheus/family.h"
#include "prometheus/gauge.h"
#include "prometheus/histogram.h"
#include "prometheus/registry.h"

namespace mixnet::ocs {

class OcsdMetrics {
 public:
  explicit OcsdMetrics(int ports);

  std::shared_ptr<prometheus::Registry> registry() const { return registry_; }

  // One ApplyCrossConnects call ended with `status`; `noop`: it changed nothing.
  void Apply(absl::StatusCode status, bool noop);
  // An Apply that changed the switch took `d`.
  void ApplyLatency(absl::Duration d);
  // Circuit a-b failed with `code` in an Apply.
  void CircuitFailed(absl::StatusCode code, int a, int b);
  void Circuits(size_t n);
  void Epoch(uint64_t epoch, uint64_t config_version);
  void DeviceConnected(bool connected);

 private:
  const int ports_;
  std::shared_ptr<prometheus::Registry> registry_;
  prometheus::Family<prometheus::Counter>& applies_;
  prometheus::Counter& applies_ok_;
  prometheus::Counter& applies_noop_;
  prometheus::Counter& applies_failed_;
  prometheus::Family<prometheus::Counter>& apply_failures_;
  prometheus::Family<prometheus::Counter>& port_failures_;
  prometheus::Histogram& latency_;
  prometheus::Gauge& circuits_;
  prometheus::Gauge& epoch_;
  prometheus::Gauge& config_version_;
  prometheus::Gauge& connected_;
};

}  // namespace mixnet::ocs
