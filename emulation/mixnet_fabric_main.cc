// mixnet-fabric: the emulated cluster on network namespaces.
//   mixnet-fabric up SPEC [--prefix P] [--burst-ms B] [--control-tc TOS]
//                    [--leaf-hosts N --uplink-gbps G] [--json]
//   mixnet-fabric down [SPEC] [--prefix P]
//   mixnet-fabric status [SPEC] [--prefix P] [--json]
// `up` leaves the fabric running and prints its prefix. `down` and `status`
// act on --prefix P, or without it on every instance started from SPEC with a
// default prefix. Needs root. Single-threaded main.
#include <unistd.h>

#include <cstdio>
#include <iostream>
#include <set>
#include <string>

#include "CLI/CLI.hpp"
#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "emulation/emulated_fabric.h"
#include "emulation/fabric_names.h"
#include "emulation/fabric_status.h"
#include "ocs_driver/netns/netns.h"
#include "runtime/cluster/cluster_spec.h"
#include "runtime/common/status.h"

namespace mixnet::emulation {
namespace {

int Fail(const absl::Status& s) {
  std::cerr << "mixnet-fabric: " << s.ToString() << "\n";
  return 1;
}

// The prefixes `down`/`status` act on.
absl::StatusOr<std::vector<std::string>> Prefixes(const std::string& spec_path,
                                                  const std::string& prefix) {
  if (!prefix.empty()) {
    RETURN_IF_ERROR(ValidatePrefix(prefix));
    return std::vector<std::string>{prefix};
  }
  if (spec_path.empty()) {
    return absl::InvalidArgumentError("give --prefix P, or the SPEC whose instances to act on");
  }
  ASSIGN_OR_RETURN(cluster::ClusterSpec spec, cluster::ClusterSpec::LoadFile(spec_path));
  ASSIGN_OR_RETURN(std::vector<std::string> names, netns::ListNamespaces());
  std::set<std::string> found;
  for (const std::string& ns : names) {
    std::string p = PrefixOfNamespace(ns);
    if (!p.empty() && IsDefaultPrefixOf(p, spec.name)) found.insert(p);
  }
  return std::vector<std::string>(found.begin(), found.end());
}

int Up(const std::string& spec_path, const std::string& prefix, const EmulationOptions& options,
       bool json) {
  absl::StatusOr<cluster::ClusterSpec> spec = cluster::ClusterSpec::LoadFile(spec_path);
  if (!spec.ok()) return Fail(spec.status());
  absl::StatusOr<std::unique_ptr<EmulatedFabric>> fabric =
      EmulatedFabric::Up(*spec, prefix, options);
  if (!fabric.ok()) return Fail(fabric.status());
  (*fabric)->Release();
  const std::string& p = (*fabric)->prefix();
  if (json) {
    absl::StatusOr<FabricStatus> st = ReadFabricStatus(p);
    if (!st.ok()) return Fail(st.status());
    std::cout << FabricStatusJson(*st).dump(2) << "\n";
  } else {
    std::cout << "fabric up: prefix " << p << "\n";
    for (const cluster::HostSpec& h : spec->hosts) {
      std::cout << "  host " << h.name << ": ip netns exec " << (*fabric)->HostNamespace(h.name)
                << " ...\n";
    }
    std::cout << "  circuits: " << spec->circuits.size() << " initial\n"
              << "tear down: mixnet-fabric down --prefix " << p << "\n";
  }
  return 0;
}

int Down(const std::string& spec_path, const std::string& prefix) {
  absl::StatusOr<std::vector<std::string>> prefixes = Prefixes(spec_path, prefix);
  if (!prefixes.ok()) return Fail(prefixes.status());
  int rc = 0;
  for (const std::string& p : *prefixes) {
    if (absl::Status s = EmulatedFabric::DownPrefix(p); !s.ok()) {
      rc = Fail(s);
    } else {
      std::cout << "fabric " << p << ": down\n";
    }
  }
  if (prefixes->empty()) std::cout << "no fabric instances found\n";
  return rc;
}

int Status(const std::string& spec_path, const std::string& prefix, bool json) {
  absl::StatusOr<std::vector<std::string>> prefixes = Prefixes(spec_path, prefix);
  if (!prefixes.ok()) return Fail(prefixes.status());
  nlohmann::json all = nlohmann::json::array();
  for (const std::string& p : *prefixes) {
    absl::StatusOr<FabricStatus> st = ReadFabricStatus(p);
    if (!st.ok()) return Fail(st.status());
    if (json) {
      all.push_back(FabricStatusJson(*st));
    } else {
      std::cout << FormatFabricStatus(*st);
    }
  }
  if (json) {
    std::cout << (prefixes->size() == 1 ? all[0] : all).dump(2) << "\n";
  } else if (prefixes->empty()) {
    std::cout << "no fabric instances found\n";
  }
  return 0;
}

int Main(int argc, char** argv) {
  CLI::App app{"mixnet-fabric: the MixNet emulated cluster on Linux network namespaces"};
  app.require_subcommand(1);
  std::string spec_path, prefix;
  bool json = false;
  CLI::App* up = app.add_subcommand("up", "create the namespaces, links and initial circuits");
  up->add_option("spec", spec_path, "cluster spec YAML")->required();
  CLI::App* down = app.add_subcommand("down", "remove a fabric (idempotent, works after a crash)");
  down->add_option("spec", spec_path, "cluster spec YAML (its default-prefix instances)");
  CLI::App* status = app.add_subcommand("status", "namespaces, links, counters, circuits");
  status->add_option("spec", spec_path, "cluster spec YAML (its default-prefix instances)");
  for (CLI::App* sub : {up, down, status}) {
    sub->add_option("--prefix", prefix,
                    "instance prefix ([a-z0-9_], <= 32); default for up: <spec name>_<pid>");
  }
  up->add_flag("--json", json, "print the fabric status as JSON");
  EmulationOptions options;
  up->add_option("--burst-ms", options.burst_ms,
                 "tbf bucket of every link, in ms of its rate (at least 4 full frames)")
      ->capture_default_str();
  up->add_option("--queue-frames", options.queue_frames,
                 "tbf queue of every link, in full-sized frames")
      ->capture_default_str();
  up->add_option("--rto-min-ms", options.rto_min_ms,
                 "minimum TCP retransmission timeout of the hosts' routes (0: kernel default)")
      ->capture_default_str();
  up->add_option("--init-cwnd", options.init_cwnd,
                 "initial TCP congestion and receive windows of the hosts' routes, segments (0: "
                 "kernel default, 10)")
      ->check(CLI::Range(0, 1000))
      ->capture_default_str();
  up->add_option("--tcp-congestion", options.tcp_congestion,
                 "TCP congestion control of the hosts (empty: the machine's)")
      ->capture_default_str();
  options.control_tos = 0xb8;
  up->add_option("--control-tc", options.control_tos,
                 "TOS byte served from a strict-priority queue on every link (workers mark "
                 "their control sockets with MIXNET_CONTROL_TC); -1: one FIFO per link")
      ->check(CLI::Range(-1, 255))
      ->capture_default_str();
  up->add_option("--leaf-hosts", options.leaf_hosts,
                 "oversubscribed EPS: hosts per leaf bridge (0: one non-blocking bridge)")
      ->capture_default_str();
  up->add_option("--uplink-gbps", options.uplink_gbps,
                 "oversubscribed EPS: rate of each leaf's uplink to the spine, Gbit/s");
  status->add_flag("--json", json, "JSON output");
  CLI11_PARSE(app, argc, argv);

  if (!netns::HavePrivileges()) {
    std::cerr << "mixnet-fabric: needs root: creating and inspecting network namespaces requires "
                 "CAP_SYS_ADMIN and CAP_NET_ADMIN (try: sudo mixnet-fabric ...)\n";
    return 1;
  }
  if (up->parsed()) return Up(spec_path, prefix, options, json);
  if (down->parsed()) return Down(spec_path, prefix);
  return Status(spec_path, prefix, json);
}

}  // namespace
}  // namespace mixnet::emulation

int main(int argc, char** argv) {
  try {
    return mixnet::emulation::Main(argc, argv);
  } catch (const std::exception& e) {
    std::cerr << "mixnet-fabric: " << e.what() << "\n";
    return 1;
  }
}
