// A throwaway sysfs tree for the verbs tests: network interfaces with their
// RDMA adapter and port, as /sys shows them (nic_adapter.h reads it).
// Header-only; test thread.
#pragma once

#include <stdlib.h>

#include <filesystem>
#include <fstream>
#include <string>

namespace mixnet::transport::verbs::verbs_test {

class SysfsTree {
 public:
  SysfsTree() {
    char tmpl[] = "/tmp/mixnet-sysfs-XXXXXX";
    root_ = mkdtemp(tmpl) != nullptr ? tmpl : "";
  }
  ~SysfsTree() {
    std::error_code ec;
    if (!root_.empty()) std::filesystem::remove_all(root_, ec);
  }
  const std::string& root() const { return root_; }
  // class/net/<ifname>/device/infiniband/<adapter>
  void Adapter(const std::string& ifname, const std::string& adapter) {
    std::filesystem::create_directories(root_ + "/class/net/" + ifname + "/device/infiniband/" +
                                        adapter);
  }
  // class/infiniband/<adapter>/ports/<port>/gid_attrs/ndevs/<index> = ifname
  void GidNdev(const std::string& adapter, int port, int index, const std::string& ifname) {
    const std::string dir = root_ + "/class/infiniband/" + adapter + "/ports/" +
                            std::to_string(port) + "/gid_attrs/ndevs";
    std::filesystem::create_directories(dir);
    std::ofstream(dir + "/" + std::to_string(index)) << ifname << "\n";
  }
  // class/net/<ifname>/dev_port
  void DevPort(const std::string& ifname, int dev_port) {
    std::filesystem::create_directories(root_ + "/class/net/" + ifname);
    std::ofstream(root_ + "/class/net/" + ifname + "/dev_port") << dev_port << "\n";
  }
  // module/<name>/version (a loaded kernel module, e.g. nvidia_peermem)
  void Module(const std::string& name, const std::string& version) {
    std::filesystem::create_directories(root_ + "/module/" + name);
    std::ofstream(root_ + "/module/" + name + "/version") << version << "\n";
  }

 private:
  std::string root_;
};

}  // namespace mixnet::transport::verbs::verbs_test
