// OcsdMetrics (see ocsd_metrics.h). Any thread.
#include "ocs_driver/service/ocsd_metrics.h"

#include <string>

namespace mixnet::ocs {
namespace {

using prometheus::Counter;
using prometheus::Family;
using prometheus::Gauge;

Family<Counter>& Counters(prometheus::Registry& r, const char* name, const char* help) {
  return prometheus::BuildCounter().Name(name).Help(help).Register(r);
}

Gauge& OneGauge(prometheus::Registry& r, const char* name, const char* help) {
  return prometheus::BuildGauge().Name(name).Help(help).Register(r).Add({});
}

// Switching takes ~10-50 ms on MEMS switches, up to seconds with Polatis
// command pacing; the sim can take no time at all.
prometheus::Histogram::BucketBoundaries LatencyBuckets() {
  return {0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30};
}

std::string CodeName(absl::StatusCode code) { return absl::StatusCodeToString(code); }

}  // namespace

OcsdMetrics::OcsdMetrics(int ports)
    : ports_(ports),
      registry_(std::make_shared<prometheus::Registry>()),
      applies_(Counters(*registry_, "mixnet_ocsd_applies_total",
                        "ApplyCrossConnects calls by outcome (ok: the switch was changed)")),
      applies_ok_(applies_.Add({{"outcome", "ok"}})),
      applies_noop_(applies_.Add({{"outcome", "noop"}})),
      applies_failed_(applies_.Add({{"outcome", "failed"}})),
      apply_failures_(Counters(*registry_, "mixnet_ocsd_apply_failures_total",
                               "Failed ApplyCrossConnects calls by gRPC status code")),
      port_failures_(Counters(*registry_, "mixnet_ocsd_port_failures_total",
                              "Circuits that failed in an Apply, on each of their ports, by code")),
      latency_(prometheus::BuildHistogram()
                   .Name("mixnet_ocsd_apply_latency_seconds")
                   .Help("Time of the Applies that changed the switch (device held to result)")
                   .Register(*registry_)
                   .Add({}, LatencyBuckets())),
      circuits_(OneGauge(*registry_, "mixnet_ocsd_circuits",
                         "Circuits the switch holds (last read from the device)")),
      epoch_(OneGauge(*registry_, "mixnet_ocsd_epoch", "Highest accepted fencing epoch")),
      config_version_(OneGauge(*registry_, "mixnet_ocsd_config_version",
                               "Config version of the highest accepted epoch")),
      connected_(OneGauge(*registry_, "mixnet_ocsd_device_connected",
                          "1 when the last read of the switch succeeded, 0 when it failed")) {
  OneGauge(*registry_, "mixnet_ocsd_ports", "Duplex ports of the switch").Set(ports);
}

void OcsdMetrics::Apply(absl::StatusCode status, bool noop) {
  if (status != absl::StatusCode::kOk) {
    applies_failed_.Increment();
    apply_failures_.Add({{"code", CodeName(status)}}).Increment();
  } else {
    (noop ? applies_noop_ : applies_ok_).Increment();
  }
}

void OcsdMetrics::ApplyLatency(absl::Duration d) { latency_.Observe(absl::ToDoubleSeconds(d)); }

void OcsdMetrics::CircuitFailed(absl::StatusCode code, int a, int b) {
  for (int p : {a, b}) {
    if (p < 1 || p > ports_) continue;  // validated before; keeps the label set bounded
    port_failures_.Add({{"code", CodeName(code)}, {"port", std::to_string(p)}}).Increment();
  }
}

void OcsdMetrics::Circuits(size_t n) { circuits_.Set(static_cast<double>(n)); }

void OcsdMetrics::Epoch(uint64_t epoch, uint64_t config_version) {
  epoch_.Set(static_cast<double>(epoch));  // exact: accepted epochs are below 2^53
  config_version_.Set(static_cast<double>(config_version));
}

void OcsdMetrics::DeviceConnected(bool connected) { connected_.Set(connected ? 1 : 0); }

}  // namespace mixnet::ocs
