// NIC discovery and lazy transport devices (see nic.h). Runs on NCCL's init
// thread (discovery) and proxy service threads (device creation).
#include "plugins/nccl_net/nic.h"

#include <algorithm>
#include <fstream>

#include "absl/strings/str_cat.h"
#include "plugins/nccl_net/interface_choice.h"
#include "plugins/nccl_net/result.h"
#include "runtime/common/cpu_affinity.h"
#include "runtime/common/settings.h"
#include "runtime/common/status.h"
#include "runtime/transport/tcp/socket_util.h"

namespace mixnet::nccl {
namespace {

// Link speed from sysfs in Mbit/s; 0 when unknown (lo, veth in some kernels).
int SysfsSpeed(const std::string& ifname) {
  std::ifstream in("/sys/class/net/" + ifname + "/speed");
  int v = 0;
  if (in >> v && v > 0) return v;
  return 0;
}

}  // namespace

absl::Status Nic::PinProgress(transport::Device& device) const {
  const std::string& policy = GetSettings().progress_cpus;
  // auto and none: the thread keeps the affinity of the NCCL thread that made
  // it (NCCL places its proxy threads near the GPU).
  if (policy == "auto" || policy == "none") return absl::OkStatus();
  absl::StatusOr<std::vector<int>> cpus = ParseCpuList(policy);
  if (!cpus.ok() || cpus->empty()) {
    return absl::InvalidArgumentError(
        absl::StrCat("NCCL device ", name_, ": MIXNET_PROGRESS_CPUS='", policy,
                     "' must be auto, none or a CPU list",
                     cpus.ok() ? "" : absl::StrCat(": ", cpus.status().message())));
  }
  const int cpu = (*cpus)[static_cast<size_t>(index_) % cpus->size()];
  absl::Status st = device.PinProgressThread(cpu);
  if (st.code() == absl::StatusCode::kUnimplemented) return absl::OkStatus();
  return Annotate(st, absl::StrCat("NCCL device ", name_));
}

Nic::Nic(int index, std::string ifname, std::string ip, std::string name, int speed_mbps,
         std::string transport, std::string spec_nic, bool ocs)
    : index_(index),
      ifname_(std::move(ifname)),
      ip_(std::move(ip)),
      name_(std::move(name)),
      speed_mbps_(speed_mbps),
      transport_(std::move(transport)),
      spec_nic_(std::move(spec_nic)),
      ocs_(ocs) {}

absl::StatusOr<transport::Device*> Nic::device() {
  absl::MutexLock lock(&mu_);
  if (device_ == nullptr) {
    transport::DeviceOptions o = transport::DeviceOptionsFromSettings();
    o.ifname = spec_nic_.empty() ? ifname_ : "";  // spec names may be symbolic
    o.bind_address = ip_;
    o.device_receives = device_receives_;
    if (ocs_ && o.stall_timeout == absl::ZeroDuration()) {
      o.stall_timeout = absl::Milliseconds(std::max<int64_t>(0, GetSettings().path_stall_ms));
    }
    absl::StatusOr<std::unique_ptr<transport::Device>> d = transport::CreateDevice(transport_, o);
    if (!d.ok()) return Annotate(d.status(), absl::StrCat("NCCL device ", name_));
    RETURN_IF_ERROR(PinProgress(**d));
    device_ = std::move(*d);
  }
  return device_.get();
}

absl::StatusOr<std::vector<std::unique_ptr<Nic>>> DiscoverNics(const PluginConfig& config) {
  std::vector<std::pair<std::string, std::string>> found;
  if (config.ifname_filter.empty()) {
    ASSIGN_OR_RETURN(std::vector<InterfaceEntry> all, ListInterfaces());
    ASSIGN_OR_RETURN(InterfaceChoice choice, ChooseInterface(all));
    LogInfo(choice.explanation);
    found.emplace_back(choice.ifname, choice.ip);
  } else {
    ASSIGN_OR_RETURN(found, transport::tcp::MatchInterfaces(config.ifname_filter));
  }
  std::vector<std::unique_ptr<Nic>> nics;
  for (size_t i = 0; i < found.size(); ++i) {
    const auto& [ifname, ip] = found[i];
    std::string name = found.size() == 1 ? "mixnet" : absl::StrCat("mixnet_", ifname);
    int speed = config.speed_mbps > 0 ? config.speed_mbps : SysfsSpeed(ifname);
    if (speed <= 0) speed = 100000;
    nics.push_back(std::make_unique<Nic>(static_cast<int>(i), ifname, ip, std::move(name), speed,
                                         config.transport));
  }
  return nics;
}

absl::StatusOr<std::vector<std::unique_ptr<Nic>>> SpecNics(const PluginConfig& config,
                                                           const cluster::ClusterSpec& spec,
                                                           const std::string& host) {
  const cluster::HostSpec* h = spec.FindHost(host);
  if (h == nullptr) {
    return absl::InvalidArgumentError(absl::StrCat(
        "host '", host, "' (MIXNET_HOST, else the host name) is not in the cluster spec ",
        config.cluster_spec));
  }
  std::vector<const cluster::NicSpec*> eps, ocs;
  for (const cluster::NicSpec& n : h->nics) {
    (n.role == cluster::NicRole::kEps ? eps : ocs).push_back(&n);
  }
  if (eps.empty()) {
    return absl::InvalidArgumentError(
        absl::StrCat("host '", host, "' has no EPS NIC in ", config.cluster_spec,
                     ": NCCL's connections start on EPS and move onto circuits"));
  }
  std::vector<std::unique_ptr<Nic>> nics;
  for (const cluster::NicSpec* n : eps) {
    const int speed = config.speed_mbps > 0 ? config.speed_mbps : static_cast<int>(n->gbps * 1000);
    std::string name = eps.size() == 1 ? "mixnet" : absl::StrCat("mixnet_", n->name);
    nics.push_back(std::make_unique<Nic>(static_cast<int>(nics.size()), n->name, n->address,
                                         std::move(name), std::max(speed, 1), config.transport,
                                         n->name, false));
  }
  for (const cluster::NicSpec* n : ocs) {
    nics.push_back(std::make_unique<Nic>(
        static_cast<int>(nics.size()), n->name, n->address, absl::StrCat("ocs:", n->name),
        static_cast<int>(n->gbps * 1000), config.transport, n->name, true));
  }
  return nics;
}

}  // namespace mixnet::nccl
