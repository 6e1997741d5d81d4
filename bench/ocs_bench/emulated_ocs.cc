// The bench's emulated OCS: see emulated_ocs.h.
#include "bench/ocs_bench/emulated_ocs.h"

#include <unistd.h>

#include "absl/strings/str_cat.h"
#include "runtime/cluster/cluster_spec.h"
#include "runtime/common/status.h"

namespace mixnet::ocs::bench {

std::string BenchFabricSpec(int ports) {
  std::string yaml = absl::StrCat("name: ocsbench\nocs_switches:\n  - {name: ocs0, ports: ", ports,
                                  ", switch_ms: 0}\nhosts:\n");
  for (int h = 0; h < ports / 2; ++h) {
    // Addresses 10.20.x.y/16 and 10.21.x.y/16 with x.y = h+1.
    int x = (h + 1) / 256;
    int y = (h + 1) % 256;
    absl::StrAppend(&yaml, "  - name: h", h, "\n    nics:\n",
                    "      - {name: ocs0, role: ocs, address: 10.20.", x, ".", y,
                    "/16, gbps: 0.4, switch: ocs0, port: ", 2 * h + 1, "}\n",
                    "      - {name: ocs1, role: ocs, address: 10.21.", x, ".", y,
                    "/16, gbps: 0.4, switch: ocs0, port: ", 2 * h + 2, "}\n");
  }
  return yaml;
}

absl::StatusOr<std::unique_ptr<emulation::EmulatedFabric>> UpBenchFabric(int ports) {
  if (ports < 4 || ports % 2 != 0 || ports > 508) {
    return absl::InvalidArgumentError(
        absl::StrCat("--backend netns needs an even --ports in 4..508, got ", ports));
  }
  ASSIGN_OR_RETURN(cluster::ClusterSpec spec,
                   cluster::ClusterSpec::Parse(BenchFabricSpec(ports), "<bench spec>"));
  return emulation::EmulatedFabric::Up(spec, absl::StrCat("ocsbench", getpid()));
}

}  // namespace mixnet::ocs::bench
