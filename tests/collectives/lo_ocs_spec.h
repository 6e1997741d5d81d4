// Loopback clusters with OCS NICs for collectives tests (label cpu): a spec
// whose hosts each have an EPS NIC (1 Gbit/s) and two "ocs" NICs (2 Gbit/s)
// on 127.x addresses, so direct paths run over lo, and a communicator for
// one rank of it. Header-only; called from rank threads.
#pragma once

#include <functional>
#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
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
