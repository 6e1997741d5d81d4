// Which RDMA adapter, port and GID a NIC's verbs device uses, so that each
// NIC of the cluster spec (an EPS NIC, each OCS NIC) opens its own HCA
// rather than all of them the first one:
//  * the adapter behind the NIC's network interface: the name under
//    <sysfs>/class/net/<if>/device/infiniband/ (one entry: the PCI
//    function's RDMA device);
//  * its port: the port one of whose GIDs names the interface
//    (<sysfs>/class/infiniband/<adapter>/ports/<p>/gid_attrs/ndevs/<i>, RoCE),
//    else <sysfs>/class/net/<if>/dev_port + 1 (IPoIB, and RoCE without
//    gid_attrs);
//  * the GID (ChooseGid): on RoCE the v2 entry holding the NIC's own IPv4
//    address, else a v2 IPv4 entry of that interface, else the first v2 IPv4
//    entry; on InfiniBand index 0; an explicit index is taken as it is.
// Pure functions over sysfs and a GID table; the thread that opens the
// device runs them.
#pragma once

#include <array>
#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "runtime/transport/verbs/address.h"

namespace mixnet::transport::verbs {

struct AdapterPort {
  std::string adapter;  // "mlx5_0"
  int port = 0;         // 1-based; 0: sysfs did not say
};

// NotFound (naming the path looked at) when the interface has no RDMA
// adapter; InvalidArgument when it has several.
absl::StatusOr<AdapterPort> AdapterOfInterface(const std::string& sysfs_root,
                                               const std::string& ifname);

// One entry of a port's GID table (ibv_query_gid_ex).
struct GidEntry {
  int index = 0;
  bool roce_v2 = false;  // IBV_GID_TYPE_ROCE_V2
  Gid raw{};
  uint32_t ndev_ifindex = 0;  // the netdev it belongs to (0: unknown)
};

// The IPv4 address inside a v4-mapped GID (::ffff:a.b.c.d), or "".
std::string GidIpv4(const Gid& raw);
// "index: type gid (ifindex)" per entry, for messages.
std::string DescribeGids(const std::vector<GidEntry>& table);

// The GID index to use (see the file comment). `requested` >= 0 must name a
// non-empty entry of `table` (on RoCE; on InfiniBand any index below
// `table_len`); -1 is auto. `nic_ipv4` (may be empty) and `ifindex` (0:
// unknown) identify the NIC. Unavailable naming `what` and the table when
// nothing fits.
absl::StatusOr<int> ChooseGid(const std::vector<GidEntry>& table, int table_len, bool ethernet,
                              int requested, const std::string& nic_ipv4, uint32_t ifindex,
                              const std::string& what);

}  // namespace mixnet::transport::verbs
