// Loopback clusters with OCS NICs for collectives tests (label cpu): a spec
// whose hosts each have an EPS NIC (1 Gbit/s) and two "ocs" NICs (2 Gbit/s)
// on 127.x addresses, so direct paths run over lo, and a communicator for
// one rank of it, plans over its hosts and a circuit killer. Header-only;
// called from rank threads.
#pragma once

#include <functional>
#include <memory>
#include <string>
#include <thread>

#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "runtime/collectives/communicator.h"
#include "runtime/common/status.h"
#include "tests/collectives/rank_harness.h"

namespace mixnet::testing {

// Host h: eps0 127.0.1.(h+1) at 1 Gbit/s; ocs0 127.0.2.(h+1) on port 2h+1
// and ocs1 127.0.3.(h+1) on port 2h+2 of switch s0, at 2 Gbit/s; one region
// r0; `circuits` is YAML list items ("  - {switch: s0, ports: [1, 3]}\n").
inline std::string LoOcsSpec(const std::string& name, int hosts, const std::string& circuits) {
  std::string y = absl::StrCat("name: ", name, "\nocs_switches:\n  - {name: s0, ports: ", 2 * hosts,
                               ", switch_ms: 1}\nhosts:\n");
  std::string region;
  for (int h = 0; h < hosts; ++h) {
    absl::StrAppend(&y, "  - name: h", h, "\n    nics:\n", "      - {name: eps0, role: eps, ",
                    "address: 127.0.1.", h + 1, ", gbps: 1}\n",
                    "      - {name: ocs0, role: ocs, address: 127.0.2.", h + 1,
                    ", gbps: 2, switch: s0, port: ", 2 * h + 1, "}\n",
                    "      - {name: ocs1, role: ocs, address: 127.0.3.", h + 1,
                    ", gbps: 2, switch: s0, port: ", 2 * h + 2, "}\n");
    absl::StrAppend(&region, h ? ", " : "", "h", h);
  }
  absl::StrAppend(&y, "regions:\n  - {name: r0, hosts: [", region, "]}\n", "circuits:\n", circuits);
  return y;
}

// A routing plan over hosts h0..h<hosts-1>: bytes(i, j) from h<i> to h<j>
// (the diagonal zero), relays allowed when `relay`.
inline router::RoutingPlan HostPlan(int hosts, bool relay,
                                    const std::function<double(int, int)>& bytes) {
  router::RoutingPlan p;
  p.version = 2;
  p.relay = relay;
  for (int h = 0; h < hosts; ++h) p.hosts.push_back(absl::StrCat("h", h));
  for (int i = 0; i < hosts; ++i) {
    for (int j = 0; j < hosts; ++j) p.bytes.push_back(i == j ? 0.0 : bytes(i, j));
  }
  return p;
}

// A thread that waits (up to 20 s) until `ready()`, then `delay`, then
// kills `comm`'s direct link to `peer` (a circuit cut mid-transfer).
inline std::thread KillDirectLinkWhen(collectives::Communicator& comm, std::function<bool()> ready,
                                      int peer, absl::Duration delay = absl::ZeroDuration()) {
  return std::thread([&comm, ready = std::move(ready), peer, delay] {
    const absl::Time give_up = absl::Now() + absl::Seconds(20);
    while (!ready() && absl::Now() < give_up) absl::SleepFor(absl::Microseconds(50));
    absl::SleepFor(delay);
    comm.TestOnlyKillDirectLink(peer);
  });
}

// Rank `rank` on host h<rank> of `spec_yaml`, running `router`; `tweak`
// (optional) edits the options last.
inline absl::StatusOr<std::unique_ptr<collectives::Communicator>> MakeLoOcsComm(
    int rank, int world, rendezvous::Store& store, const std::string& spec_yaml,
    const std::string& router = "v2",
    const std::function<void(collectives::CommunicatorOptions&)>& tweak = nullptr) {
  ASSIGN_OR_RETURN(cluster::ClusterSpec spec, cluster::ClusterSpec::Parse(spec_yaml));
  collectives::CommunicatorOptions o = TestOptions(rank, world, &store);
  o.spec = spec;
  o.host = absl::StrCat("h", rank);
  o.router = router;
  o.device_options.stall_timeout = absl::Seconds(2);
  if (tweak) tweak(o);
  return collectives::Communicator::Create(std::move(o));
}

}  // namespace mixnet::testing
