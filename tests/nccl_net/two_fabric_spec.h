// The cluster specs of the NCCL plugin's fabric tests: hosts h0..h<n-1>,
// each with one EPS NIC (eps0) and one OCS NIC (ocs0, port h+1 of switch
// ocs0), all in one region, optionally with initial circuits. Addresses are
// "<prefix><h+1>" (e.g. 127.0.51. for loopback hosts, 10.44.0. for emulated
// ones). Header-only; any thread.
#pragma once

#include <string>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"

namespace mixnet::nccl_test {

struct TwoFabricSpec {
  std::string name;
  int hosts = 2;
  std::string eps_prefix, ocs_prefix;  // address of host h: prefix + (h + 1)
  std::string mask = "/32";
  double eps_gbps = 1, ocs_gbps = 1;
  int ports = 0;  // 0: one per host
  int switch_ms = 1;
  std::vector<std::pair<int, int>> circuits;  // OCS ports joined at epoch 0
};

inline std::string HostAddress(const std::string& prefix, int host) {
  return absl::StrCat(prefix, host + 1);
}

inline std::string TwoFabricSpecYaml(const TwoFabricSpec& s) {
  std::string y =
      absl::StrCat("name: ", s.name,
                   "\nocs_switches:\n  - {name: ocs0, ports: ", s.ports > 0 ? s.ports : s.hosts,
                   ", switch_ms: ", s.switch_ms, "}\nhosts:\n");
  std::string members;
  for (int h = 0; h < s.hosts; ++h) {
    absl::StrAppend(&y, "  - name: h", h, "\n    nics:\n",
                    "      - {name: eps0, role: eps, address: ", HostAddress(s.eps_prefix, h),
                    s.mask, ", gbps: ", s.eps_gbps, "}\n",
                    "      - {name: ocs0, role: ocs, address: ", HostAddress(s.ocs_prefix, h),
                    s.mask, ", gbps: ", s.ocs_gbps, ", switch: ocs0, port: ", h + 1, "}\n");
    absl::StrAppend(&members, h == 0 ? "" : ", ", "h", h);
  }
  absl::StrAppend(&y, "regions:\n  - {name: r0, hosts: [", members, "]}\n");
  if (!s.circuits.empty()) y += "circuits:\n";
  for (const auto& [a, b] : s.circuits) {
    absl::StrAppend(&y, "  - {switch: ocs0, ports: [", a, ", ", b, "]}\n");
  }
  return y;
}

}  // namespace mixnet::nccl_test
