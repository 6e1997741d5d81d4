// The emulated cluster: turns a ClusterSpec into network namespaces on this
// machine (see fabric_names.h for the names).
//   - one namespace per host with its NICs (veth ends named as in the spec,
//     with the spec's addresses), lo up, IPv6 off; so that several NICs in
//     one subnet work: rp_filter=0, arp_ignore=1, arp_announce=2, and per NIC
//     a rule "from <address> lookup <100+i>" whose table routes the subnet
//     out of that NIC (replies leave through the NIC they belong to);
//   - an EPS namespace: bridge br0 joining every host's EPS NICs;
//   - one OCS namespace per switch: port "p<port>" per OCS NIC, dark (no
//     redirect, ingress qdisc ready) until circuits are installed through the
//     netns OCS backend (ocs_driver/netns), starting with the spec's circuits;
//   - tbf at each NIC's gbps on both ends of every link, with a bucket of
//     EmulationOptions::burst_ms of line rate (links.h, TbfFor);
//   - optionally an oversubscribed EPS: the host ports on leaf bridges of
//     `leaf_hosts` hosts each, every leaf joined to one spine bridge by an
//     uplink shaped to `uplink_gbps` in each direction.
// Needs root: without it Up returns PermissionDenied.
//
// Threading: methods may be called from any thread; netlink access is
// serialised by an internal mutex. NetnsOcs objects lock themselves.
#pragma once

#include <map>
#include <memory>
#include <string>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/synchronization/mutex.h"
#include "emulation/links.h"
#include "ocs_driver/netns/netns_ocs.h"
#include "runtime/cluster/cluster_spec.h"

namespace mixnet::emulation {

// Linux's initial TCP window, segments (RFC 6928; include/net/tcp.h TCP_INIT_CWND).
inline constexpr uint32_t kKernelInitCwnd = 10;

// How links are emulated beyond what the spec says.
struct EmulationOptions {
  double burst_ms = kDefaultBurstMs;       // tbf bucket, ms of line rate (see TbfFor)
  int queue_frames = kDefaultQueueFrames;  // tbf queue behind it, full frames
  // Minimum TCP retransmission timeout of every host's routes (ms; 0: the
  // kernel's 200 ms), as data-centre hosts lower it.
  uint32_t rto_min_ms = 0;
  // Initial TCP congestion and receive windows of every host's routes, in
  // segments (0: the kernel's 10). Every new connection starts in slow start
  // at this window; the runtime opens new ones on every new circuit.
  uint32_t init_cwnd = 0;
  // false: net.ipv4.tcp_slow_start_after_idle = 0 in every host namespace
  // (long-lived connections keep their window across idle compute phases).
  bool slow_start_after_idle = true;
  // TCP congestion control of every host namespace (net.ipv4.
  // tcp_congestion_control); empty: inherit the machine's. Cubic, the Linux
  // default, by default: a new namespace inherits the root namespace's
  // choice, and on the development machines that is bbr, which overshot the
  // shallow tbf queues (thousands of retransmissions per all-to-all).
  std::string tcp_congestion = "cubic";
  // Oversubscribed EPS: 0 puts every EPS port on one non-blocking bridge
  // "br0"; n > 0 puts host i's ports on leaf bridge "leaf<i / n>", and joins
  // each leaf to the bridge "spine" by the veth pair "up<l>" (leaf side) /
  // "dn<l>" (spine side), both ends shaped to uplink_gbps (needs > 0).
  int leaf_hosts = 0;
  double uplink_gbps = 0;
  // TOS byte (DSCP << 2) of a strict-priority class on every shaped link
  // (SetTbf's priority_tos), as switches configured for the transport's
  // control class (MIXNET_CONTROL_TC) give it; -1: one FIFO per link.
  int control_tos = -1;
};

class EmulatedFabric {
 public:
  // Builds the fabric for `spec` under `prefix` (DefaultPrefix(spec.name) when
  // empty). AlreadyExists when namespaces with this prefix exist;
  // InvalidArgument for bad options. On any failure everything created so far
  // is removed again.
  static absl::StatusOr<std::unique_ptr<EmulatedFabric>> Up(const cluster::ClusterSpec& spec,
                                                            std::string prefix = "",
                                                            EmulationOptions options = {});

  // Removes every namespace "<prefix>-*" and any root-namespace link whose
  // name starts with the prefix. Idempotent; works after a crash (needs no
  // spec and no live EmulatedFabric). Fails only when something could not be
  // removed, naming it.
  static absl::Status DownPrefix(absl::string_view prefix);

  ~EmulatedFabric();  // Down() unless Release()d; errors are logged.
  EmulatedFabric(const EmulatedFabric&) = delete;
  EmulatedFabric& operator=(const EmulatedFabric&) = delete;

  // Closes this object's sockets and removes the fabric. Idempotent.
  absl::Status Down();
  // Leaves the namespaces in place when this object is destroyed (e.g. the
  // `up` command). Sockets are still closed.
  void Release();

  const std::string& prefix() const { return prefix_; }
  const cluster::ClusterSpec& spec() const { return spec_; }
  const EmulationOptions& options() const { return options_; }
  // The leaf uplinks in the EPS namespace ("up0", "up1", ...; empty without
  // leaves): tx is leaf -> spine, rx spine -> leaf.
  std::vector<std::string> UplinkNames() const;

  std::string HostNamespace(absl::string_view host) const;
  std::string EpsNamespace() const;
  // The namespace of `ocs_switch`, or of the first switch when empty.
  std::string OcsNamespace(absl::string_view ocs_switch = {}) const;

  // The circuit programmer of `ocs_switch` (first switch when empty);
  // NotFound for an unknown switch. Valid until Down()/destruction.
  absl::StatusOr<ocs::NetnsOcs*> Ocs(absl::string_view ocs_switch = {});
  // The first switch's programmer; the spec must have a switch (aborts otherwise).
  ocs::NetnsOcs& ocs();

  // Makes the switches hold exactly `circuits` (spec ports; switches not
  // mentioned lose all circuits). Validated against the spec first.
  absl::Status ApplyCircuits(const std::vector<cluster::CircuitSpec>& circuits);

  // Interface counters of NIC `nic` of `host`, read in the host namespace.
  absl::StatusOr<LinkCounters> ReadCounters(absl::string_view host, absl::string_view nic) const;
  // All links of one of this fabric's namespaces.
  absl::StatusOr<std::vector<LinkInfo>> ReadLinks(absl::string_view netns) const;

 private:
  EmulatedFabric(cluster::ClusterSpec spec, std::string prefix, EmulationOptions options);
  absl::Status Build();
  absl::Status BuildHost(const cluster::HostSpec& host, int host_index)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  absl::Status BuildLeaves() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // The bridge host `host_index`'s EPS ports join.
  std::string BridgeOf(int host_index) const;
  absl::StatusOr<netns::NlSocket*> Socket(const std::string& netns) const
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  const cluster::ClusterSpec spec_;
  const std::string prefix_;
  const EmulationOptions options_;
  bool released_ = false;
  bool down_ = false;

  mutable absl::Mutex mu_;
  // Netlink sockets by namespace name (each keeps its namespace alive: closed
  // before the namespaces are removed).
  std::map<std::string, std::unique_ptr<netns::NlSocket>> sockets_ ABSL_GUARDED_BY(mu_);
  std::map<std::string, std::unique_ptr<ocs::NetnsOcs>> ocs_;  // by switch name
};

}  // namespace mixnet::emulation
