// The demo's cluster specs (see fabric_spec.h).
#include "apps/demo/fabric_spec.h"

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"

namespace mixnet::demo {

absl::string_view FabricName(FabricKind kind) {
  switch (kind) {
    case FabricKind::kEps:
      return "eps";
    case FabricKind::kMixnet:
      return "mixnet";
    case FabricKind::kStatic:
      return "static";
    case FabricKind::kNonblocking:
      return "nonblocking";
    case FabricKind::kOversub:
      return "oversub";
  }
  return "?";
}

std::optional<FabricKind> ParseFabric(absl::string_view name) {
  for (FabricKind k : {FabricKind::kEps, FabricKind::kMixnet, FabricKind::kStatic,
                       FabricKind::kNonblocking, FabricKind::kOversub}) {
    if (FabricName(k) == name) return k;
  }
  return std::nullopt;
}

namespace {
std::string Address(const FabricShape& s, bool ocs, int nic, int host) {
  if (s.loopback) return absl::StrFormat("127.%d.%d.%d", ocs ? 20 : 10, nic, host + 1);
  return absl::StrFormat("10.%d.%d.%d/16", ocs ? 20 : 10, nic, host + 1);
}
}  // namespace

std::string FabricSpecYaml(FabricKind kind, const FabricShape& s,
                           const std::vector<cluster::CircuitSpec>& circuits) {
  const bool nonblocking = kind == FabricKind::kNonblocking || kind == FabricKind::kOversub;
  std::string y = absl::StrCat("# mixnet-demo: ", FabricName(kind), " fabric\nname: demo_",
                               FabricName(kind), "\n");
  if (!nonblocking) {
    absl::StrAppendFormat(&y, "ocs_switches:\n  - {name: ocs0, ports: %d, switch_ms: %g}\n",
                          s.hosts * s.ocs_nics, s.switch_ms);
  }
  y += "hosts:\n";
  for (int h = 0; h < s.hosts; ++h) {
    absl::StrAppendFormat(&y, "  - name: h%d\n    gpus: 1\n    nics:\n", h);
    const int eps = nonblocking ? 1 + s.ocs_nics : 1;
    for (int i = 0; i < eps; ++i) {
      absl::StrAppendFormat(&y, "      - {name: eps%d, role: eps, address: %s, gbps: %g}\n", i,
                            Address(s, false, i, h), s.gbps);
    }
    if (!nonblocking) {
      for (int j = 0; j < s.ocs_nics; ++j) {
        absl::StrAppendFormat(
            &y, "      - {name: ocs%d, role: ocs, address: %s, gbps: %g, switch: ocs0, port: %d}\n",
            j, Address(s, true, j, h), s.gbps, h * s.ocs_nics + j + 1);
      }
    }
  }
  y += "regions:\n  - {name: r0, hosts: [";
  for (int h = 0; h < s.hosts; ++h) absl::StrAppend(&y, h ? ", " : "", "h", h);
  y += "]}\n";
  if (kind == FabricKind::kStatic && !circuits.empty()) {
    y += "circuits:\n";
    for (const cluster::CircuitSpec& c : circuits) {
      absl::StrAppendFormat(&y, "  - {switch: %s, ports: [%d, %d]}\n", c.ocs_switch, c.port_a,
                            c.port_b);
    }
  }
  return y;
}

}  // namespace mixnet::demo
