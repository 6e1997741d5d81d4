// The plugin's NCCL devices: one per interface chosen by MIXNET_SOCKET_IFNAME
// (unset: one, chosen as NCCL does, interface_choice.h), each backed by one transport Device (made
// on first use and shared by every comm and communicator of the process). Thread-safe.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "plugins/nccl_net/plugin_config.h"
#include "runtime/cluster/cluster_spec.h"
#include "runtime/transport/transport.h"

namespace mixnet::nccl {

class Nic {
 public:
  // `spec_nic`: the NIC's cluster-spec name when the plugin runs from a spec
  // (then the device binds by address only, and OCS NICs detect stalls).
  Nic(int index, std::string ifname, std::string ip, std::string name, int speed_mbps,
      std::string transport, std::string spec_nic = "", bool ocs = false);
  int index() const { return index_; }
  const std::string& ifname() const { return ifname_; }
  const std::string& ip() const { return ip_; }
  // NCCL device name; stable for the life of the process.
  const std::string& name() const { return name_; }
  int speed_mbps() const { return speed_mbps_; }
  const std::string& spec_nic() const { return spec_nic_; }
  bool ocs() const { return ocs_; }
  // Before the first device(): its connections' receives may be GPU memory
  // (DeviceOptions::device_receives; the plugin with GPUDirect RDMA).
  void set_device_receives(bool on) {
    absl::MutexLock lock(&mu_);
    device_receives_ = on;
  }
  // The transport device, created on first call. With MIXNET_PROGRESS_CPUS
  // set to a CPU list, its progress thread is pinned to entry index() mod n.
  absl::StatusOr<transport::Device*> device();

 private:
  absl::Status PinProgress(transport::Device& device) const;

  const int index_;
  const std::string ifname_, ip_, name_;
  const int speed_mbps_;
  const std::string transport_;
  const std::string spec_nic_;
  const bool ocs_;
  absl::Mutex mu_;
  std::unique_ptr<transport::Device> device_ ABSL_GUARDED_BY(mu_);
  bool device_receives_ ABSL_GUARDED_BY(mu_) = false;
};

// One Nic per interface matching the config's filter, in interface order
// (no filter: the one ChooseInterface picks, logged at INFO).
// Names are "mixnet" when there is one NIC, "mixnet_<ifname>" otherwise.
absl::StatusOr<std::vector<std::unique_ptr<Nic>>> DiscoverNics(const PluginConfig& config);

// From a cluster spec: one Nic per NIC of `host`, EPS NICs first (those are
// NCCL's devices: "mixnet" when there is one, "mixnet_<nic>" otherwise).
absl::StatusOr<std::vector<std::unique_ptr<Nic>>> SpecNics(const PluginConfig& config,
                                                           const cluster::ClusterSpec& spec,
                                                           const std::string& host);

}  // namespace mixnet::nccl
