// Building and removing the emulated fabric (see emulated_fabric.h). Runs on
// the caller's thread; namespace work happens on short helper threads.
#include "emulation/emulated_fabric.h"

#include <netlink/cache.h>
#include <netlink/route/link.h>

#include <cerrno>
#include <cstdlib>
#include <fstream>
#include <set>
#include <string_view>
#include <utility>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "emulation/fabric_names.h"
#include "ocs_driver/netns/netns.h"
#include "ocs_driver/netns/nl_socket.h"
#include "runtime/common/log.h"
#include "runtime/common/status.h"

namespace mixnet::emulation {
namespace {

// Routing tables (and rule priorities) of the per-NIC source routing.
constexpr uint32_t kFirstSourceTable = 100;

std::string_view Sv(absl::string_view s) { return std::string_view(s.data(), s.size()); }

// Host-namespace sysctls so several NICs in one subnet each answer ARP for
// their own address and accept traffic arriving on any of them.
std::vector<std::pair<std::string, std::string>> HostSysctls(absl::string_view ifname) {
  std::vector<std::pair<std::string, std::string>> out;
  for (const auto& [key, value] : {std::pair{"rp_filter", "0"}, std::pair{"arp_ignore", "1"},
                                   std::pair{"arp_announce", "2"}}) {
    out.emplace_back(absl::StrCat("net/ipv4/conf/", ifname, "/", key), value);
  }
  return out;
}

// A namespace other than the initial one may only pick a congestion control
// the initial namespace lists in net.ipv4.tcp_allowed_congestion_control
// (the kernel answers EPERM otherwise); Debian's list holds only the default
// and reno. Adds `name` to the list (read from /proc of the calling thread's
// namespace: the orchestrator runs in the initial one). NotFound when the
// kernel does not have the algorithm at all (module not loaded).
absl::Status AllowCongestionControl(const std::string& name) {
  constexpr char kDir[] = "/proc/sys/net/ipv4/";
  auto read = [&](const char* file) -> absl::StatusOr<std::set<std::string>> {
    const std::string path = absl::StrCat(kDir, file);
    std::ifstream in(path);
    if (!in) return absl::NotFoundError(absl::StrCat("open ", path, ": ", ErrnoText(errno)));
    std::set<std::string> out;
    for (std::string word; in >> word;) out.insert(word);
    return out;
  };
  ASSIGN_OR_RETURN(std::set<std::string> available, read("tcp_available_congestion_control"));
  if (available.count(name) == 0) {
    return absl::NotFoundError(
        absl::StrCat("TCP congestion control '", name, "' is not available in this kernel (", kDir,
                     "tcp_available_congestion_control lists ", absl::StrJoin(available, " "),
                     "; load its module, e.g. modprobe tcp_", name, ", or pick another)"));
  }
  ASSIGN_OR_RETURN(std::set<std::string> allowed, read("tcp_allowed_congestion_control"));
  if (allowed.count(name) != 0) return absl::OkStatus();
  allowed.insert(name);
  const std::string path = absl::StrCat(kDir, "tcp_allowed_congestion_control");
  std::ofstream out(path);
  out << absl::StrJoin(allowed, " ") << "\n";
  out.flush();
  if (!out) {
    return absl::PermissionDeniedError(absl::StrCat(
        "write ", path, " (adding ", name, " so namespaces may use it): ", ErrnoText(errno)));
  }
  log::Info("emulation: added {} to {} (namespaces may only use allowed algorithms)", name, path);
  return absl::OkStatus();
}

absl::Status DeleteRootLinks(absl::string_view prefix) {
  if (prefix.size() > 15) return absl::OkStatus();  // no interface name can carry it
  ASSIGN_OR_RETURN(auto sock, netns::NlSocket::Open(""));
  ASSIGN_OR_RETURN(auto links, sock->LinkCache());
  std::vector<std::string> stray;
  for (nl_object* o = nl_cache_get_first(links.get()); o; o = nl_cache_get_next(o)) {
    const char* name = rtnl_link_get_name(reinterpret_cast<rtnl_link*>(o));
    if (name && absl::StartsWith(name, prefix)) stray.emplace_back(name);
  }
  for (const std::string& name : stray) {
    log::Warn("fabric {}: removing stray link {} in the root namespace", std::string(prefix), name);
    RETURN_IF_ERROR(DeleteLink(*sock, name));
  }
  return absl::OkStatus();
}

}  // namespace

EmulatedFabric::EmulatedFabric(cluster::ClusterSpec spec, std::string prefix,
                               EmulationOptions options)
    : spec_(std::move(spec)), prefix_(std::move(prefix)), options_(options) {}

EmulatedFabric::~EmulatedFabric() {
  if (released_) return;
  if (absl::Status s = Down(); !s.ok()) {
    log::Error("fabric {}: teardown failed: {}", prefix_, s.ToString());
  }
}

absl::StatusOr<std::unique_ptr<EmulatedFabric>> EmulatedFabric::Up(const cluster::ClusterSpec& spec,
                                                                   std::string prefix,
                                                                   EmulationOptions options) {
  if (!netns::HavePrivileges()) {
    return absl::PermissionDeniedError(
        "the emulated fabric needs root (CAP_SYS_ADMIN and CAP_NET_ADMIN) to create network "
        "namespaces and links; run as root, e.g. with sudo");
  }
  if (prefix.empty()) prefix = DefaultPrefix(spec.name);
  RETURN_IF_ERROR(ValidatePrefix(prefix));
  RETURN_IF_ERROR(ValidateSpecForEmulation(spec));
  RETURN_IF_ERROR(TbfFor(1, options.burst_ms, options.queue_frames).status());
  if (options.control_tos > 255) {
    return absl::InvalidArgumentError(
        absl::StrCat("emulation: control TOS ", options.control_tos, " outside 0..255 (-1: none)"));
  }
  if (options.leaf_hosts < 0 || (options.leaf_hosts > 0 && !(options.uplink_gbps > 0))) {
    return absl::InvalidArgumentError(
        absl::StrCat("emulation: leaf_hosts ", options.leaf_hosts, " needs >= 0, and leaves need ",
                     "an uplink rate > 0 (uplink_gbps ", options.uplink_gbps, ")"));
  }
  if (!spec.circuits.empty()) {
    RETURN_IF_ERROR(Annotate(cluster::ValidateCircuits(spec, spec.circuits), "spec circuits"));
  }
  ASSIGN_OR_RETURN(std::vector<std::string> existing,
                   netns::ListNamespaces(absl::StrCat(prefix, "-")));
  if (!existing.empty()) {
    return absl::AlreadyExistsError(absl::StrCat(
        "fabric prefix '", prefix, "' is in use (", existing.front(),
        " exists); run `mixnet-fabric down --prefix ", prefix, "` or pick another prefix"));
  }
  std::unique_ptr<EmulatedFabric> fabric(new EmulatedFabric(spec, prefix, options));
  absl::Status s = fabric->Build();
  if (s.ok() && !spec.circuits.empty()) {
    s = Annotate(fabric->ApplyCircuits(spec.circuits), "initial circuits");
  }
  if (!s.ok()) {
    if (absl::Status d = fabric->Down(); !d.ok()) {
      log::Error("fabric {}: cleanup after failed up: {}", prefix, d.ToString());
    }
    return Annotate(s, absl::StrCat("fabric ", prefix, " up"));
  }
  log::Info("fabric {}: up ({} hosts, {} OCS switches, {} initial circuits)", prefix,
            spec.hosts.size(), spec.ocs_switches.size(), spec.circuits.size());
  return fabric;
}

absl::Status EmulatedFabric::Build() {
  absl::MutexLock lock(&mu_);
  bool have_eps = false;
  for (const cluster::HostSpec& h : spec_.hosts) {
    for (const cluster::NicSpec& n : h.nics) have_eps |= n.role == cluster::NicRole::kEps;
  }
  std::vector<std::string> host_ns, fabric_ns;
  for (const cluster::HostSpec& h : spec_.hosts) host_ns.push_back(HostNamespace(h.name));
  if (have_eps) fabric_ns.push_back(EpsNamespace());
  for (const cluster::OcsSwitchSpec& s : spec_.ocs_switches) {
    fabric_ns.push_back(OcsNamespace(s.name));
  }
  if (!options_.tcp_congestion.empty()) {
    RETURN_IF_ERROR(Annotate(AllowCongestionControl(options_.tcp_congestion),
                             absl::StrCat("fabric ", prefix_, " up")));
  }
  for (const std::vector<std::string>* group : {&host_ns, &fabric_ns}) {
    for (const std::string& ns : *group) {
      RETURN_IF_ERROR(netns::CreateNamespace(ns));
      // IPv6 off: no router solicitations or DAD noise in the counters.
      if (absl::Status s = netns::SetSysctls(ns, {{"net/ipv6/conf/all/disable_ipv6", "1"},
                                                  {"net/ipv6/conf/default/disable_ipv6", "1"}});
          !s.ok()) {
        log::Debug("fabric {}: IPv6 not disabled: {}", prefix_, s.ToString());
      }
      if (group == &host_ns) {
        std::vector<std::pair<std::string, std::string>> sysctls = HostSysctls("all");
        for (auto& kv : HostSysctls("default")) sysctls.push_back(std::move(kv));
        if (!options_.tcp_congestion.empty()) {
          sysctls.emplace_back("net/ipv4/tcp_congestion_control", options_.tcp_congestion);
        }
        if (!options_.slow_start_after_idle) {
          sysctls.emplace_back("net/ipv4/tcp_slow_start_after_idle", "0");
        }
        RETURN_IF_ERROR(netns::SetSysctls(ns, sysctls));
      }
      ASSIGN_OR_RETURN(auto sock, netns::NlSocket::Open(ns));
      RETURN_IF_ERROR(SetLinkUp(*sock, "lo"));
      sockets_[ns] = std::move(sock);
    }
  }
  if (have_eps) {
    ASSIGN_OR_RETURN(netns::NlSocket * eps, Socket(EpsNamespace()));
    if (options_.leaf_hosts > 0) {
      RETURN_IF_ERROR(BuildLeaves());
    } else {
      RETURN_IF_ERROR(CreateBridge(*eps, kBridgeName));
      RETURN_IF_ERROR(SetLinkUp(*eps, kBridgeName));
    }
  }
  for (const cluster::OcsSwitchSpec& s : spec_.ocs_switches) {
    ASSIGN_OR_RETURN(ocs_[s.name], ocs::NetnsOcs::Open(OcsNamespace(s.name)));
  }
  for (size_t i = 0; i < spec_.hosts.size(); ++i) {
    RETURN_IF_ERROR(BuildHost(spec_.hosts[i], static_cast<int>(i)));
  }
  return absl::OkStatus();
}

absl::Status EmulatedFabric::BuildHost(const cluster::HostSpec& host, int host_index) {
  const std::string hns = HostNamespace(host.name);
  ASSIGN_OR_RETURN(netns::NlSocket * hs, Socket(hns));
  std::vector<std::pair<std::string, std::string>> sysctls;
  for (size_t j = 0; j < host.nics.size(); ++j) {
    const cluster::NicSpec& nic = host.nics[j];
    const bool eps = nic.role == cluster::NicRole::kEps;
    const std::string peer_ns = eps ? EpsNamespace() : OcsNamespace(nic.ocs_switch);
    const std::string peer = eps ? EpsPortName(spec_, host_index, static_cast<int>(j))
                                 : ocs::NetnsOcs::PortName(nic.ocs_port);
    const std::string what = absl::StrCat("host ", host.name, " NIC ", nic.name);
    ASSIGN_OR_RETURN(netns::NlSocket * ps, Socket(peer_ns));
    RETURN_IF_ERROR(Annotate(CreateVeth(*hs, nic.name, peer_ns, peer), what));
    RETURN_IF_ERROR(Annotate(AddAddress(*hs, nic.name, nic.address, nic.prefix_len), what));
    if (nic.gbps > 0) {
      RETURN_IF_ERROR(Annotate(SetTbf(*hs, nic.name, nic.gbps, options_.burst_ms,
                                      options_.queue_frames, options_.control_tos),
                               what));
      RETURN_IF_ERROR(Annotate(SetTbf(*ps, peer, nic.gbps, options_.burst_ms, options_.queue_frames,
                                      options_.control_tos),
                               what));
    }
    if (eps) {
      RETURN_IF_ERROR(Annotate(SetMaster(*ps, peer, BridgeOf(host_index)), what));
    } else {
      RETURN_IF_ERROR(Annotate(ocs_.at(nic.ocs_switch)->EnsureIngress(peer), what));
    }
    RETURN_IF_ERROR(Annotate(SetLinkUp(*ps, peer), what));
    RETURN_IF_ERROR(Annotate(SetLinkUp(*hs, nic.name), what));
    // After the link is up (the kernel adds the subnet route then).
    RETURN_IF_ERROR(Annotate(AddSourceRouting(*hs, nic.name, nic.address, nic.prefix_len,
                                              kFirstSourceTable + static_cast<uint32_t>(j),
                                              options_.rto_min_ms, options_.init_cwnd),
                             what));
    for (auto& kv : HostSysctls(nic.name)) sysctls.push_back(std::move(kv));
  }
  return netns::SetSysctls(hns, sysctls);
}

namespace {
int LeafCount(int hosts, int leaf_hosts) {
  return leaf_hosts > 0 ? (hosts + leaf_hosts - 1) / leaf_hosts : 0;
}
}  // namespace

std::string EmulatedFabric::BridgeOf(int host_index) const {
  if (options_.leaf_hosts <= 0) return kBridgeName;
  return absl::StrCat("leaf", host_index / options_.leaf_hosts);
}

std::vector<std::string> EmulatedFabric::UplinkNames() const {
  std::vector<std::string> out;
  const int leaves = LeafCount(static_cast<int>(spec_.hosts.size()), options_.leaf_hosts);
  for (int l = 0; l < leaves; ++l) out.push_back(absl::StrCat("up", l));
  return out;
}

absl::Status EmulatedFabric::BuildLeaves() {
  const std::string ns = EpsNamespace();
  ASSIGN_OR_RETURN(netns::NlSocket * eps, Socket(ns));
  RETURN_IF_ERROR(CreateBridge(*eps, "spine"));
  RETURN_IF_ERROR(SetLinkUp(*eps, "spine"));
  const int leaves = LeafCount(static_cast<int>(spec_.hosts.size()), options_.leaf_hosts);
  for (int l = 0; l < leaves; ++l) {
    const std::string leaf = absl::StrCat("leaf", l);
    const std::string up = absl::StrCat("up", l), dn = absl::StrCat("dn", l);
    const std::string what = absl::StrCat("leaf ", leaf, " uplink");
    RETURN_IF_ERROR(Annotate(CreateBridge(*eps, leaf), what));
    RETURN_IF_ERROR(Annotate(CreateVeth(*eps, up, ns, dn), what));
    RETURN_IF_ERROR(Annotate(SetTbf(*eps, up, options_.uplink_gbps, options_.burst_ms,
                                    options_.queue_frames, options_.control_tos),
                             what));
    RETURN_IF_ERROR(Annotate(SetTbf(*eps, dn, options_.uplink_gbps, options_.burst_ms,
                                    options_.queue_frames, options_.control_tos),
                             what));
    RETURN_IF_ERROR(Annotate(SetMaster(*eps, up, leaf), what));
    RETURN_IF_ERROR(Annotate(SetMaster(*eps, dn, "spine"), what));
    for (const std::string& link : {leaf, up, dn}) {
      RETURN_IF_ERROR(Annotate(SetLinkUp(*eps, link), what));
    }
  }
  return absl::OkStatus();
}

absl::StatusOr<netns::NlSocket*> EmulatedFabric::Socket(const std::string& ns) const {
  auto it = sockets_.find(ns);
  if (it == sockets_.end()) {
    return absl::NotFoundError(absl::StrCat("fabric ", prefix_, ": namespace ", ns,
                                            " is not part of this fabric",
                                            down_ ? " (fabric is down)" : ""));
  }
  return it->second.get();
}

absl::Status EmulatedFabric::DownPrefix(absl::string_view prefix) {
  RETURN_IF_ERROR(ValidatePrefix(prefix));
  if (!netns::HavePrivileges()) {
    return absl::PermissionDeniedError(
        absl::StrCat("removing fabric ", prefix, " needs root (CAP_SYS_ADMIN, CAP_NET_ADMIN)"));
  }
  ASSIGN_OR_RETURN(std::vector<std::string> names,
                   netns::ListNamespaces(absl::StrCat(prefix, "-")));
  absl::Status first;
  for (const std::string& ns : names) {
    absl::Status s = netns::DeleteNamespace(ns);
    if (!s.ok() && first.ok()) first = s;
  }
  if (absl::Status s = DeleteRootLinks(prefix); !s.ok() && first.ok()) first = s;
  if (!names.empty())
    log::Debug("fabric {}: removed {} namespaces", std::string(prefix), names.size());
  return first;
}

absl::Status EmulatedFabric::Down() {
  {
    absl::MutexLock lock(&mu_);
    ocs_.clear();
    sockets_.clear();
    if (down_) return absl::OkStatus();
    down_ = true;
  }
  return DownPrefix(prefix_);
}

void EmulatedFabric::Release() {
  absl::MutexLock lock(&mu_);
  released_ = true;
  ocs_.clear();
  sockets_.clear();
}

std::string EmulatedFabric::HostNamespace(absl::string_view host) const {
  return HostNamespaceName(prefix_, host);
}

std::string EmulatedFabric::EpsNamespace() const { return EpsNamespaceName(prefix_); }

std::string EmulatedFabric::OcsNamespace(absl::string_view ocs_switch) const {
  if (ocs_switch.empty() && !spec_.ocs_switches.empty()) {
    return OcsNamespaceName(prefix_, spec_.ocs_switches.front().name);
  }
  return OcsNamespaceName(prefix_, ocs_switch);
}

absl::StatusOr<ocs::NetnsOcs*> EmulatedFabric::Ocs(absl::string_view ocs_switch) {
  absl::MutexLock lock(&mu_);
  std::string name(ocs_switch);
  if (name.empty() && !spec_.ocs_switches.empty()) name = spec_.ocs_switches.front().name;
  auto it = ocs_.find(name);
  if (it == ocs_.end()) {
    return absl::NotFoundError(absl::StrCat("fabric ", prefix_, ": no OCS switch '", name, "'",
                                            down_ ? " (fabric is down)" : ""));
  }
  return it->second.get();
}

ocs::NetnsOcs& EmulatedFabric::ocs() {
  absl::StatusOr<ocs::NetnsOcs*> o = Ocs();
  if (!o.ok()) {
    log::Error("EmulatedFabric::ocs(): {}", o.status().ToString());
    std::abort();
  }
  return **o;
}

absl::Status EmulatedFabric::ApplyCircuits(const std::vector<cluster::CircuitSpec>& circuits) {
  RETURN_IF_ERROR(cluster::ValidateCircuits(spec_, circuits));
  std::map<std::string, std::vector<ocs::PortPair>> by_switch;
  for (const cluster::OcsSwitchSpec& s : spec_.ocs_switches) by_switch[s.name];
  for (const cluster::CircuitSpec& c : circuits) {
    by_switch[c.ocs_switch].push_back(
        {ocs::NetnsOcs::PortName(c.port_a), ocs::NetnsOcs::PortName(c.port_b)});
  }
  for (const auto& [sw, pairs] : by_switch) {
    ASSIGN_OR_RETURN(ocs::NetnsOcs * o, Ocs(sw));
    RETURN_IF_ERROR(o->Apply(pairs).status());
  }
  return absl::OkStatus();
}

absl::StatusOr<std::vector<LinkInfo>> EmulatedFabric::ReadLinks(absl::string_view ns) const {
  absl::MutexLock lock(&mu_);
  ASSIGN_OR_RETURN(netns::NlSocket * s, Socket(std::string(ns)));
  return emulation::ReadLinks(*s);
}

absl::StatusOr<LinkCounters> EmulatedFabric::ReadCounters(absl::string_view host,
                                                          absl::string_view nic) const {
  if (spec_.FindHost(Sv(host)) == nullptr) {
    return absl::NotFoundError(absl::StrCat("fabric ", prefix_, ": no host '", host, "'"));
  }
  absl::MutexLock lock(&mu_);
  ASSIGN_OR_RETURN(netns::NlSocket * s, Socket(HostNamespace(host)));
  ASSIGN_OR_RETURN(LinkInfo link, ReadLink(*s, nic));
  return link.counters;
}

}  // namespace mixnet::emulation
