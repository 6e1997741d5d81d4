// The 3-host cluster spec the emulation tests share: every host has one EPS
// NIC (10.10.0.x/24, 0.2 Gbit/s) and two OCS NICs (ocs0 10.20.0.x/24 on
// ports 1,3,5; ocs1 10.21.0.x/24 on ports 2,4,6; 0.4 Gbit/s) on switch ocs0;
// the initial circuit joins h0.ocs0 and h1.ocs0 (ports 1 and 3).
#pragma once

#include <string>

namespace mixnet::testing {

inline constexpr char kThreeHostSpec[] = R"(
name: emutest
ocs_switches:
  - {name: ocs0, ports: 8, switch_ms: 10}
hosts:
  - name: h0
    gpus: 8
    nics:
      - {name: eps0, role: eps, address: 10.10.0.1/24, gbps: 0.2}
      - {name: ocs0, role: ocs, address: 10.20.0.1/24, gbps: 0.4, switch: ocs0, port: 1}
      - {name: ocs1, role: ocs, address: 10.21.0.1/24, gbps: 0.4, switch: ocs0, port: 2}
  - name: h1
    gpus: 8
    nics:
      - {name: eps0, role: eps, address: 10.10.0.2/24, gbps: 0.2}
      - {name: ocs0, role: ocs, address: 10.20.0.2/24, gbps: 0.4, switch: ocs0, port: 3}
      - {name: ocs1, role: ocs, address: 10.21.0.2/24, gbps: 0.4, switch: ocs0, port: 4}
  - name: h2
    gpus: 8
    nics:
      - {name: eps0, role: eps, address: 10.10.0.3/24, gbps: 0.2}
      - {name: ocs0, role: ocs, address: 10.20.0.3/24, gbps: 0.4, switch: ocs0, port: 5}
      - {name: ocs1, role: ocs, address: 10.21.0.3/24, gbps: 0.4, switch: ocs0, port: 6}
regions:
  - {name: r0, hosts: [h0, h1, h2]}
circuits:
  - {switch: ocs0, ports: [1, 3]}
)";

}  // namespace mixnet::testing
