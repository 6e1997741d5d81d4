// Settings of the NCCL net plugin: the MIXNET_* settings it shares with the
// runtime (transport, interfaces, timeouts) plus the plugin's own rows
// (MIXNET_NCCL_*), all from the settings table in runtime/common/settings.h,
// bounds-checked here. Read once per init; any thread.
#pragma once

#include <cstdint>
#include <string>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "runtime/router/route_table_v2.h"

namespace mixnet::nccl {

struct PluginConfig {
  std::string transport;      // MIXNET_TRANSPORT: "tcp" or "verbs"
  std::string ifname_filter;  // MIXNET_SOCKET_IFNAME (empty: interface_choice.h)
  absl::Duration connect_timeout = absl::Seconds(60);  // MIXNET_CONNECT_TIMEOUT_MS
  std::string host;                                    // MIXNET_HOST (else gethostname)
  std::string cluster_spec;  // MIXNET_CLUSTER_SPEC: routes over EPS and circuits (empty: none)
  std::string controller;    // MIXNET_CONTROLLER: follow its topology epochs (empty: static)
  absl::Duration report_period = absl::Seconds(1);  // MIXNET_NCCL_REPORT_MS (0: no reports)
  // With a controller: the wait for the warm-up sweep asked for once a send
  // comm reaches every other host of the region (MIXNET_NCCL_WARM_PATHS_MS;
  // zero: none asked).
  absl::Duration warm_paths = absl::Minutes(2);
  // The plugin's own rows:
  int max_recvs = 8;       // MIXNET_NCCL_MAX_RECVS: largest n of a grouped irecv (1..8)
  int speed_mbps = 0;      // MIXNET_NCCL_SPEED_MBPS: reported NIC speed (0: sysfs, else 100000)
  int max_requests = 256;  // MIXNET_NCCL_MAX_REQUESTS: outstanding requests per comm (>= 32)
  // Multipath (multipath.h): MIXNET_ROUTER ("v1": one lane per comm), the
  // smallest part split over a circuit and EPS (MIXNET_NCCL_SPLIT_MIN_BYTES),
  // and without a controller a demand matrix for router v2's weights
  // (MIXNET_NCCL_STATIC_DEMAND: a JSON file, see LoadStaticDemand).
  std::string router = "v2";
  int64_t split_min_bytes = 64 << 10;
  // Lanes left by moves kept open, suspended, for a later move back onto
  // their path (MIXNET_SUSPENDED_PATHS; 0: close them).
  int64_t kept_lanes = 256;
  std::string static_demand;
  // GPUDirect RDMA (gpu_direct.h): MIXNET_NCCL_GPU_DIRECT (auto, on, off)
  // and the CUDA driver library its probe opens (MIXNET_CUDA_DRIVER).
  std::string gpu_direct = "auto";
  std::string cuda_driver = "libcuda.so.1";
};

// Largest n of a grouped receive the plugin can be configured for.
inline constexpr int kMaxRecvsLimit = 8;

// Reads the environment. A malformed plugin row is an InvalidArgument naming it.
absl::StatusOr<PluginConfig> LoadPluginConfig();

// The routing plan in a MIXNET_NCCL_STATIC_DEMAND file:
//   {"hosts": ["h0", "h1"], "bytes": [0, 1e9, 1e9, 0], "relay": false}
// (bytes row-major, from hosts[i] to hosts[j]; relay optional). Errors name
// the file.
absl::StatusOr<router::RoutingPlan> LoadStaticDemand(const std::string& path);

}  // namespace mixnet::nccl
