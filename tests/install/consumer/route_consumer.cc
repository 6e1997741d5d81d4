// Out-of-tree consumer of MixNet::runtime: parses the cluster spec given as
// argv[1] (YAML, through the installed mixnet_cluster and its yaml-cpp), builds
// router v1's table of host h0 with the one circuit sw:1-2 at epoch 3 and
// prints one line per path: "<peer> <kind> <nic> <address> -> <nic> <address>
// <gbps>". Single-threaded.
#include <cstdio>

#include "runtime/cluster/cluster_spec.h"
#include "runtime/common/status.h"
#include "runtime/router/route_table.h"

int main(int argc, char** argv) {
  if (argc != 2) {
    std::fprintf(stderr, "usage: route_consumer SPEC.yaml\n");
    return 2;
  }
  absl::StatusOr<mixnet::cluster::ClusterSpec> spec =
      mixnet::cluster::ClusterSpec::LoadFile(argv[1]);
  if (!spec.ok()) {
    std::fprintf(stderr, "route_consumer: %s\n", spec.status().ToString().c_str());
    return 1;
  }
  mixnet::router::Topology topology{.epoch = 3, .circuits = {{"sw", 1, 2}}};
  absl::StatusOr<mixnet::router::RouteTable> table =
      mixnet::router::BuildRouteTable(*spec, topology, "h0");
  if (!table.ok()) {
    std::fprintf(stderr, "route_consumer: %s\n", table.status().ToString().c_str());
    return 1;
  }
  std::printf("epoch %llu router v%d\n", static_cast<unsigned long long>(table->epoch()),
              table->version());
  for (const auto& [peer, paths] : table->all()) {
    if (peer == "h0") continue;
    for (const mixnet::router::Path& p : paths) {
      std::printf("%s %s %s %s -> %s %s %g\n", peer.c_str(),
                  std::string(mixnet::router::PathKindName(p.kind)).c_str(), p.local_nic.c_str(),
                  p.local_address.c_str(), p.remote_nic.c_str(), p.remote_address.c_str(), p.gbps);
    }
  }
  return 0;
}
