// Helpers shared by the OCS client tests: start a sim mixnet-ocsd (through
// tests/ocs_driver/daemon_process.h), build requests, and wait for a
// condition with a deadline. Header-only; test thread.
#pragma once

#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "mixnet/ocs/v1/ocs_driver.pb.h"
#include "tests/ocs_driver/daemon_process.h"

namespace mixnet::testing {

using CircuitPairs = std::vector<std::pair<int, int>>;

// mixnet-ocsd --backend sim --ports `ports` --switch-ms `switch_ms` on an
// ephemeral loopback port (or `listen`), plus `extra` flags.
inline absl::StatusOr<std::unique_ptr<DaemonProcess>> StartSimDaemon(
    int ports, double switch_ms, std::vector<std::string> extra = {},
    const std::string& listen = "127.0.0.1:0") {
  std::vector<std::string> args = {"--backend",   "sim",
                                   "--ports",     std::to_string(ports),
                                   "--switch-ms", std::to_string(switch_ms),
                                   "--listen",    listen};
  args.insert(args.end(), extra.begin(), extra.end());
  return DaemonProcess::Start(args, DaemonProcess::Options());
}

inline ocs::v1::ApplyCrossConnectsRequest MakeApply(uint64_t epoch, uint64_t version,
                                                    const CircuitPairs& circuits) {
  ocs::v1::ApplyCrossConnectsRequest r;
  r.set_epoch(epoch);
  r.set_config_version(version);
  r.set_controller_id("client-test");
  for (const auto& [a, b] : circuits) {
    ocs::v1::Circuit* c = r.add_circuits();
    c->set_port_a(static_cast<uint32_t>(a));
    c->set_port_b(static_cast<uint32_t>(b));
  }
  return r;
}

inline CircuitPairs PairsOf(const google::protobuf::RepeatedPtrField<ocs::v1::Circuit>& v) {
  CircuitPairs out;
  for (const ocs::v1::Circuit& c : v) out.emplace_back(c.port_a(), c.port_b());
  return out;
}

// Polls `cond` every 5 ms until it holds or `timeout` passes.
template <typename Cond>
bool WaitUntil(Cond cond, absl::Duration timeout = absl::Seconds(10)) {
  const absl::Time end = absl::Now() + timeout;
  while (!cond()) {
    if (absl::Now() >= end) return false;
    absl::SleepFor(absl::Milliseconds(5));
  }
  return true;
}

}  // namespace mixnet::testing
