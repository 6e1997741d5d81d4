// Link plumbing of the emulated fabric through rtnetlink (libnl-route-3):
// veth pairs whose ends are created directly inside their namespaces, the EPS
// bridge, addresses, link state, tbf rate limits; and reading all of it back
// (links, addresses, counters, qdiscs) for `status` and tests.
//
// Each function uses the NlSocket it is given (bound to one namespace) on the
// caller's thread; a socket must not be used by two threads at once.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "ocs_driver/netns/nl_socket.h"

namespace mixnet::emulation {

// Creates veth `ifname` in `sock`'s namespace with its peer `peer_ifname`
// inside namespace `peer_netns` (no end ever appears in another namespace).
absl::Status CreateVeth(netns::NlSocket& sock, absl::string_view ifname,
                        absl::string_view peer_netns, absl::string_view peer_ifname);

absl::Status CreateBridge(netns::NlSocket& sock, absl::string_view name);
absl::Status SetMaster(netns::NlSocket& sock, absl::string_view ifname, absl::string_view master);
absl::Status SetLinkUp(netns::NlSocket& sock, absl::string_view ifname, bool up = true);
absl::Status AddAddress(netns::NlSocket& sock, absl::string_view ifname, absl::string_view address,
                        int prefix_len);
// Source routing for a host with several NICs in one subnet: routing table
// `table` holds "<subnet> dev <ifname> src <address>", and a rule "from
// <address> lookup <table>" (priority `table`) sends every packet with that
// source, replies included, out of `ifname`. `rto_min_ms` > 0 sets the
// route's minimum TCP retransmission timeout (ip route ... rto_min), which
// then applies to every TCP connection from that address. `init_cwnd` > 0
// sets the route's initial congestion and receive windows, in segments (ip
// route ... initcwnd N initrwnd N; the kernel's are 10).
absl::Status AddSourceRouting(netns::NlSocket& sock, absl::string_view ifname,
                              absl::string_view address, int prefix_len, uint32_t table,
                              uint32_t rto_min_ms = 0, uint32_t init_cwnd = 0);
absl::Status DeleteLink(netns::NlSocket& sock, absl::string_view ifname);

// The tbf bucket, in milliseconds of line rate, unless told otherwise: about
// 1 ms, so that a transfer of a few milliseconds already pays the rate (a
// bucket of tens of milliseconds lets short phases run at memory speed).
inline constexpr double kDefaultBurstMs = 1.0;
// The bucket never holds fewer than this many full-sized Ethernet frames
// (1500-byte MTU + 14-byte header): tbf drops a frame larger than its bucket,
// and below a few frames the rate comes out wrong.
inline constexpr uint32_t kMinBurstFrames = 4;
inline constexpr uint32_t kFrameBytes = 1514;

// The tbf queue behind the bucket, in full-sized frames, unless told
// otherwise (packets beyond it are dropped). Counted in frames, not in time:
// how often TCP loses packets when many flows meet at one port (incast)
// depends on how many packets the port can hold, whatever the rate. 400
// frames (606 KB) is about what a data-centre switch gives one port of its
// shared buffer; at an emulated 25 Mbit/s it is 194 ms of queue, where a
// queue of 20 ms (41 frames) lost so many packets that the links ran at 40%.
inline constexpr int kDefaultQueueFrames = 400;

// The tbf parameters SetTbf uses: rate `gbps` (capped at the 32-bit byte rate
// libnl can express, about 17 Gbit/s), bucket max(burst_ms at rate,
// kMinBurstFrames frames), queue limit queue_frames full frames.
// InvalidArgument for a rate or burst that is not positive and finite, or a
// queue outside 1..100000 frames.
struct TbfParams {
  uint32_t rate_bytes_per_s = 0;
  uint32_t burst_bytes = 0;
  uint32_t limit_bytes = 0;  // the queue
};
absl::StatusOr<TbfParams> TbfFor(double gbps, double burst_ms = kDefaultBurstMs,
                                 int queue_frames = kDefaultQueueFrames);

// Rate limit on the egress of `ifname`: root tbf with TbfFor(gbps, burst_ms,
// queue_frames). With `priority_tos` >= 0 the link also has a strict-priority
// queue: packets whose DSCP (the TOS byte's upper six bits) is
// priority_tos's leave before any other packet queued there, both queues
// sharing the one rate. That is what a data-centre switch does for a traffic
// class configured as strict priority, and what NCCL's NCCL_IB_FIFO_TC and
// our MIXNET_CONTROL_TC are for: the go-aheads of a rendezvous and other
// small control messages do not wait behind the queue of bulk data (up to
// queue_frames frames, 194 ms at 25 Mbit/s). Built as tbf 1: -> htb 10: with
// classes 10:10 (priority, prio 0) and 10:20 (the rest, prio 1, the default)
// at well above the tbf rate, each class a bfifo of the tbf's queue limit,
// and a u32 filter on the TOS byte.
absl::Status SetTbf(netns::NlSocket& sock, absl::string_view ifname, double gbps,
                    double burst_ms = kDefaultBurstMs, int queue_frames = kDefaultQueueFrames,
                    int priority_tos = -1);

struct LinkCounters {
  uint64_t rx_bytes = 0;
  uint64_t tx_bytes = 0;
  uint64_t rx_packets = 0;
  uint64_t tx_packets = 0;
  uint64_t rx_dropped = 0;
  uint64_t tx_dropped = 0;
};

struct LinkInfo {
  std::string name;
  int ifindex = 0;
  std::string kind;    // "veth", "bridge", "" (lo)
  std::string master;  // bridge name when enslaved
  bool admin_up = false;
  bool carrier = false;                // IFF_LOWER_UP
  std::vector<std::string> addresses;  // IPv4 "a.b.c.d/len"
  LinkCounters counters;
  uint64_t tbf_rate_bytes_per_s = 0;  // 0: no tbf at the root
  uint32_t tbf_burst_bytes = 0;
  bool priority_queue = false;  // an htb under the tbf (SetTbf's priority_tos)
  bool ingress_qdisc = false;
};

// Every link of `sock`'s namespace, by ifindex.
absl::StatusOr<std::vector<LinkInfo>> ReadLinks(netns::NlSocket& sock);
// One link; NotFound naming it.
absl::StatusOr<LinkInfo> ReadLink(netns::NlSocket& sock, absl::string_view ifname);

}  // namespace mixnet::emulation
