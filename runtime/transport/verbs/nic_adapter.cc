// NIC -> RDMA adapter, port and GID (see nic_adapter.h).
#include "runtime/transport/verbs/nic_adapter.h"

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <system_error>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/strip.h"

namespace mixnet::transport::verbs {
namespace {

namespace fs = std::filesystem;

// The first line of a sysfs file, without its newline ("" when unreadable).
std::string ReadLine(const fs::path& p) {
  std::ifstream in(p);
  std::string line;
  if (!in || !std::getline(in, line)) return "";
  return std::string(absl::StripAsciiWhitespace(line));
}

bool IsEmpty(const Gid& raw) {
  return std::all_of(raw.begin(), raw.end(), [](uint8_t b) { return b == 0; });
}

}  // namespace

absl::StatusOr<AdapterPort> AdapterOfInterface(const std::string& sysfs_root,
                                               const std::string& ifname) {
  const fs::path dir = fs::path(sysfs_root) / "class/net" / ifname / "device/infiniband";
  std::error_code ec;
  std::vector<std::string> adapters;
  for (const fs::directory_entry& e : fs::directory_iterator(dir, ec)) {
    adapters.push_back(e.path().filename().string());
  }
  if (ec || adapters.empty()) {
    return absl::NotFoundError(absl::StrCat("interface ", ifname, " has no RDMA adapter (",
                                            dir.string(), " ", ec ? "is absent" : "is empty", ")"));
  }
  std::sort(adapters.begin(), adapters.end());
  if (adapters.size() > 1) {
    return absl::InvalidArgumentError(absl::StrCat("interface ", ifname, " has several RDMA ",
                                                   "adapters (", absl::StrJoin(adapters, ", "),
                                                   "); set MIXNET_IB_DEVICE"));
  }
  AdapterPort out;
  out.adapter = adapters[0];
  // RoCE: the port one of whose GIDs belongs to the interface.
  const fs::path ports = fs::path(sysfs_root) / "class/infiniband" / out.adapter / "ports";
  std::vector<int> found;
  for (const fs::directory_entry& p : fs::directory_iterator(ports, ec)) {
    int port = 0;
    if (!absl::SimpleAtoi(p.path().filename().string(), &port)) continue;
    std::error_code ec2;
    for (const fs::directory_entry& n : fs::directory_iterator(p.path() / "gid_attrs/ndevs", ec2)) {
      if (ReadLine(n.path()) == ifname) {
        found.push_back(port);
        break;
      }
    }
  }
  if (!found.empty()) {
    out.port = *std::min_element(found.begin(), found.end());
    return out;
  }
  // IPoIB (and RoCE without gid_attrs): the netdev's 0-based port.
  int dev_port = -1;
  if (absl::SimpleAtoi(ReadLine(fs::path(sysfs_root) / "class/net" / ifname / "dev_port"),
                       &dev_port) &&
      dev_port >= 0) {
    out.port = dev_port + 1;
  }
  return out;
}

std::string GidIpv4(const Gid& raw) {
  const bool mapped =
      std::all_of(raw.begin(), raw.begin() + 10, [](uint8_t b) { return b == 0; }) &&
      raw[10] == 0xff && raw[11] == 0xff;
  if (!mapped) return "";
  return absl::StrCat(raw[12], ".", raw[13], ".", raw[14], ".", raw[15]);
}

std::string DescribeGids(const std::vector<GidEntry>& table) {
  std::vector<std::string> parts;
  for (const GidEntry& e : table) {
    if (IsEmpty(e.raw)) continue;
    const std::string v4 = GidIpv4(e.raw);
    parts.push_back(absl::StrCat(
        e.index, ": ", e.roce_v2 ? "RoCE v2 " : "", v4.empty() ? GidToString(e.raw) : v4,
        e.ndev_ifindex != 0 ? absl::StrCat(" (ifindex ", e.ndev_ifindex, ")") : ""));
  }
  return parts.empty() ? "no entries" : absl::StrJoin(parts, "; ");
}

absl::StatusOr<int> ChooseGid(const std::vector<GidEntry>& table, int table_len, bool ethernet,
                              int requested, const std::string& nic_ipv4, uint32_t ifindex,
                              const std::string& what) {
  if (requested >= 0) {
    if (requested >= table_len) {
      return absl::UnavailableError(absl::StrCat(what, ": GID index ", requested,
                                                 " out of range (the table has ", table_len,
                                                 " entries; MIXNET_IB_GID_INDEX)"));
    }
    if (ethernet) {
      auto it = std::find_if(table.begin(), table.end(),
                             [&](const GidEntry& e) { return e.index == requested; });
      if (it == table.end() || IsEmpty(it->raw)) {
        return absl::UnavailableError(
            absl::StrCat(what, ": GID index ", requested,
                         " is empty (MIXNET_IB_GID_INDEX); the table holds ", DescribeGids(table)));
      }
    }
    return requested;
  }
  if (!ethernet) return 0;         // InfiniBand: the port GID
  const GidEntry* own = nullptr;   // v2, the NIC's address
  const GidEntry* mine = nullptr;  // v2 IPv4 of the NIC's interface
  const GidEntry* any = nullptr;   // first v2 IPv4
  for (const GidEntry& e : table) {
    const std::string v4 = GidIpv4(e.raw);
    if (!e.roce_v2 || v4.empty()) continue;
    if (own == nullptr && !nic_ipv4.empty() && v4 == nic_ipv4) own = &e;
    if (mine == nullptr && ifindex != 0 && e.ndev_ifindex == ifindex) mine = &e;
    if (any == nullptr) any = &e;
  }
  if (own != nullptr) return own->index;
  if (mine != nullptr) return mine->index;
  if (any != nullptr) return any->index;
  return absl::UnavailableError(absl::StrCat(
      what, ": no RoCE v2 GID with an IPv4 address", nic_ipv4.empty() ? "" : " (the NIC has ",
      nic_ipv4, nic_ipv4.empty() ? "" : ")", "; the table holds ", DescribeGids(table),
      "; give the port's interface an IPv4 address, or set MIXNET_IB_GID_INDEX"));
}

}  // namespace mixnet::transport::verbs
