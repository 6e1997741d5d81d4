// Link plumbing through rtnetlink (see links.h). Caller's thread.
#include "emulation/links.h"

#include <arpa/inet.h>
#include <linux/fib_rules.h>
#include <linux/if_ether.h>
#include <linux/pkt_sched.h>
#include <linux/rtnetlink.h>
#include <net/if.h>
#include <netlink/addr.h>
#include <netlink/cache.h>
#include <netlink/errno.h>
#include <netlink/route/addr.h>
#include <netlink/route/class.h>
#include <netlink/route/classifier.h>
#include <netlink/route/cls/u32.h>
#include <netlink/route/link.h>
#include <netlink/route/link/bridge.h>
#include <netlink/route/link/veth.h>
#include <netlink/route/qdisc.h>
#include <netlink/route/qdisc/fifo.h>
#include <netlink/route/qdisc/htb.h>
#include <netlink/route/qdisc/tbf.h>
#include <netlink/route/route.h>
#include <netlink/route/rule.h>
#include <netlink/route/tc.h>
#include <unistd.h>

#include <algorithm>
#include <climits>
#include <cmath>

#include "absl/strings/str_cat.h"
#include "ocs_driver/netns/netns.h"
#include "runtime/common/status.h"

namespace mixnet::emulation {
namespace {

using netns::NlPtr;

constexpr unsigned kIffLowerUp = 1u << 16;  // IFF_LOWER_UP (linux/if.h clashes with net/if.h)

std::string Str(absl::string_view s) { return std::string(s); }

}  // namespace

absl::Status CreateVeth(netns::NlSocket& sock, absl::string_view ifname,
                        absl::string_view peer_netns, absl::string_view peer_ifname) {
  const std::string what = absl::StrCat("veth ", ifname, " <-> ", peer_netns, "/", peer_ifname);
  NlPtr<rtnl_link> link(rtnl_link_veth_alloc());
  if (!link) return absl::ResourceExhaustedError("rtnl_link_veth_alloc failed");
  NlPtr<rtnl_link> peer(rtnl_link_veth_get_peer(link.get()));  // own reference
  rtnl_link_set_name(link.get(), Str(ifname).c_str());
  rtnl_link_set_name(peer.get(), Str(peer_ifname).c_str());
  ASSIGN_OR_RETURN(int fd, netns::OpenNamespaceFd(peer_netns));
  rtnl_link_set_ns_fd(peer.get(), fd);
  int rc = rtnl_link_add(sock.get(), link.get(), NLM_F_CREATE | NLM_F_EXCL);
  close(fd);
  return sock.Error(rc, what, "rtnl_link_add(veth)");
}

absl::Status CreateBridge(netns::NlSocket& sock, absl::string_view name) {
  NlPtr<rtnl_link> link(rtnl_link_bridge_alloc());
  if (!link) return absl::ResourceExhaustedError("rtnl_link_bridge_alloc failed");
  rtnl_link_set_name(link.get(), Str(name).c_str());
  return sock.Error(rtnl_link_add(sock.get(), link.get(), NLM_F_CREATE | NLM_F_EXCL),
                    absl::StrCat("bridge ", name), "rtnl_link_add(bridge)");
}

absl::Status SetMaster(netns::NlSocket& sock, absl::string_view ifname, absl::string_view master) {
  ASSIGN_OR_RETURN(int slave_index, sock.IfIndex(ifname));
  ASSIGN_OR_RETURN(int master_index, sock.IfIndex(master));
  return sock.Error(rtnl_link_enslave_ifindex(sock.get(), master_index, slave_index),
                    absl::StrCat("link ", ifname, " -> master ", master),
                    "rtnl_link_enslave_ifindex");
}

absl::Status SetLinkUp(netns::NlSocket& sock, absl::string_view ifname, bool up) {
  ASSIGN_OR_RETURN(int index, sock.IfIndex(ifname));
  NlPtr<rtnl_link> orig(rtnl_link_alloc());
  NlPtr<rtnl_link> change(rtnl_link_alloc());
  if (!orig || !change) return absl::ResourceExhaustedError("rtnl_link_alloc failed");
  rtnl_link_set_ifindex(orig.get(), index);
  if (up) {
    rtnl_link_set_flags(change.get(), IFF_UP);
  } else {
    rtnl_link_unset_flags(change.get(), IFF_UP);
  }
  return sock.Error(rtnl_link_change(sock.get(), orig.get(), change.get(), 0),
                    absl::StrCat("link ", ifname),
                    up ? "rtnl_link_change(up)" : "rtnl_link_change(down)");
}

absl::Status AddAddress(netns::NlSocket& sock, absl::string_view ifname, absl::string_view address,
                        int prefix_len) {
  const std::string what = absl::StrCat("link ", ifname, " address ", address, "/", prefix_len);
  ASSIGN_OR_RETURN(int index, sock.IfIndex(ifname));
  in_addr a{};
  if (inet_pton(AF_INET, Str(address).c_str(), &a) != 1 || prefix_len < 0 || prefix_len > 32) {
    return absl::InvalidArgumentError(absl::StrCat(what, ": not an IPv4 address/prefix"));
  }
  NlPtr<nl_addr> local(nl_addr_build(AF_INET, &a, sizeof(a)));
  NlPtr<rtnl_addr> addr(rtnl_addr_alloc());
  if (!local || !addr) return absl::ResourceExhaustedError("nl_addr_build/rtnl_addr_alloc failed");
  rtnl_addr_set_ifindex(addr.get(), index);
  rtnl_addr_set_family(addr.get(), AF_INET);
  RETURN_IF_ERROR(
      sock.Error(rtnl_addr_set_local(addr.get(), local.get()), what, "rtnl_addr_set_local"));
  rtnl_addr_set_prefixlen(addr.get(), prefix_len);
  return sock.Error(rtnl_addr_add(sock.get(), addr.get(), 0), what, "rtnl_addr_add");
}

absl::Status AddSourceRouting(netns::NlSocket& sock, absl::string_view ifname,
                              absl::string_view address, int prefix_len, uint32_t table,
                              uint32_t rto_min_ms, uint32_t init_cwnd) {
  const std::string what =
      absl::StrCat("link ", ifname, " source routing for ", address, " (table ", table, ")");
  ASSIGN_OR_RETURN(int index, sock.IfIndex(ifname));
  in_addr a{};
  if (inet_pton(AF_INET, Str(address).c_str(), &a) != 1 || prefix_len < 0 || prefix_len > 32) {
    return absl::InvalidArgumentError(absl::StrCat(what, ": not an IPv4 address/prefix"));
  }
  const uint32_t mask = prefix_len == 0 ? 0 : htonl(~uint32_t{0} << (32 - prefix_len));
  in_addr net{a.s_addr & mask};
  NlPtr<nl_addr> dst(nl_addr_build(AF_INET, &net, sizeof(net)));
  NlPtr<nl_addr> src(nl_addr_build(AF_INET, &a, sizeof(a)));
  NlPtr<rtnl_route> route(rtnl_route_alloc());
  NlPtr<rtnl_rule> rule(rtnl_rule_alloc());
  rtnl_nexthop* nh = rtnl_route_nh_alloc();
  if (!dst || !src || !route || !rule || !nh) {
    if (nh) rtnl_route_nh_free(nh);
    return absl::ResourceExhaustedError("libnl allocation failed");
  }
  nl_addr_set_prefixlen(dst.get(), prefix_len);
  rtnl_route_set_family(route.get(), AF_INET);
  rtnl_route_set_table(route.get(), table);
  rtnl_route_set_scope(route.get(), RT_SCOPE_LINK);
  rtnl_route_set_protocol(route.get(), RTPROT_STATIC);
  RETURN_IF_ERROR(
      sock.Error(rtnl_route_set_dst(route.get(), dst.get()), what, "rtnl_route_set_dst"));
  RETURN_IF_ERROR(
      sock.Error(rtnl_route_set_pref_src(route.get(), src.get()), what, "rtnl_route_set_pref_src"));
  rtnl_route_nh_set_ifindex(nh, index);
  rtnl_route_add_nexthop(route.get(), nh);  // the route owns nh now
  if (rto_min_ms > 0) {
    // RTAX_RTO_MIN is in milliseconds (the kernel converts with msecs_to_jiffies).
    RETURN_IF_ERROR(sock.Error(rtnl_route_set_metric(route.get(), RTAX_RTO_MIN, rto_min_ms), what,
                               "rtnl_route_set_metric(RTAX_RTO_MIN)"));
  }
  if (init_cwnd > 0) {
    RETURN_IF_ERROR(sock.Error(rtnl_route_set_metric(route.get(), RTAX_INITCWND, init_cwnd), what,
                               "rtnl_route_set_metric(RTAX_INITCWND)"));
    RETURN_IF_ERROR(sock.Error(rtnl_route_set_metric(route.get(), RTAX_INITRWND, init_cwnd), what,
                               "rtnl_route_set_metric(RTAX_INITRWND)"));
  }
  RETURN_IF_ERROR(sock.Error(rtnl_route_add(sock.get(), route.get(), NLM_F_CREATE | NLM_F_EXCL),
                             what, "rtnl_route_add"));
  nl_addr_set_prefixlen(src.get(), 32);
  rtnl_rule_set_family(rule.get(), AF_INET);
  rtnl_rule_set_table(rule.get(), table);
  rtnl_rule_set_prio(rule.get(), table);
  rtnl_rule_set_action(rule.get(), FR_ACT_TO_TBL);
  RETURN_IF_ERROR(sock.Error(rtnl_rule_set_src(rule.get(), src.get()), what, "rtnl_rule_set_src"));
  return sock.Error(rtnl_rule_add(sock.get(), rule.get(), NLM_F_CREATE | NLM_F_EXCL), what,
                    "rtnl_rule_add");
}

absl::Status DeleteLink(netns::NlSocket& sock, absl::string_view ifname) {
  NlPtr<rtnl_link> link(rtnl_link_alloc());
  if (!link) return absl::ResourceExhaustedError("rtnl_link_alloc failed");
  rtnl_link_set_name(link.get(), Str(ifname).c_str());
  int rc = rtnl_link_delete(sock.get(), link.get());
  if (rc == -NLE_OBJ_NOTFOUND || rc == -NLE_NODEV) rc = 0;
  return sock.Error(rc, absl::StrCat("link ", ifname), "rtnl_link_delete");
}

absl::StatusOr<TbfParams> TbfFor(double gbps, double burst_ms, int queue_frames) {
  if (!(gbps > 0) || !std::isfinite(gbps) || !(burst_ms > 0) || !std::isfinite(burst_ms) ||
      queue_frames < 1 || queue_frames > 100000) {
    return absl::InvalidArgumentError(absl::StrCat(
        "tbf: rate ", gbps, " Gbit/s and burst ", burst_ms,
        " ms must be positive and finite, the queue 1..100000 frames (", queue_frames, ")"));
  }
  TbfParams p;
  const double rate = std::clamp(gbps * 1e9 / 8, 1000.0, static_cast<double>(INT_MAX));
  p.rate_bytes_per_s = static_cast<uint32_t>(rate);
  const double burst = std::min(rate * burst_ms / 1000, static_cast<double>(INT_MAX / 2));
  p.burst_bytes = std::max(kMinBurstFrames * kFrameBytes, static_cast<uint32_t>(burst));
  p.limit_bytes = static_cast<uint32_t>(queue_frames) * kFrameBytes;
  return p;
}

namespace {

// The strict-priority queue under a link's tbf (see SetTbf).
constexpr uint32_t kPrioQdiscMajor = 0x10;
constexpr uint32_t kPrioClassMinor = 0x10;  // 10:10, prio 0
constexpr uint32_t kBulkClassMinor = 0x20;  // 10:20, prio 1, the default

absl::Status AddPriorityQueue(netns::NlSocket& sock, int index, const std::string& what,
                              const TbfParams& p, int tos) {
  NlPtr<rtnl_qdisc> htb(rtnl_qdisc_alloc());
  if (!htb) return absl::ResourceExhaustedError("rtnl_qdisc_alloc failed");
  rtnl_tc_set_ifindex(TC_CAST(htb.get()), index);
  rtnl_tc_set_parent(TC_CAST(htb.get()), TC_HANDLE(1, 1));  // the tbf's child
  rtnl_tc_set_handle(TC_CAST(htb.get()), TC_HANDLE(kPrioQdiscMajor, 0));
  RETURN_IF_ERROR(
      sock.Error(rtnl_tc_set_kind(TC_CAST(htb.get()), "htb"), what, "rtnl_tc_set_kind(htb)"));
  RETURN_IF_ERROR(
      sock.Error(rtnl_htb_set_defcls(htb.get(), kBulkClassMinor), what, "rtnl_htb_set_defcls"));
  RETURN_IF_ERROR(sock.Error(rtnl_qdisc_add(sock.get(), htb.get(), NLM_F_CREATE), what,
                             "rtnl_qdisc_add(htb under tbf)"));
  // Both classes far above the tbf's rate: htb never holds a packet back,
  // it only picks the priority class first; the tbf sets the pace.
  const uint64_t rate = std::max<uint64_t>(uint64_t{4} * p.rate_bytes_per_s, 125'000'000);
  for (const auto& [minor, prio] : {std::pair{kPrioClassMinor, 0u}, {kBulkClassMinor, 1u}}) {
    NlPtr<rtnl_class> cls(rtnl_class_alloc());
    if (!cls) return absl::ResourceExhaustedError("rtnl_class_alloc failed");
    rtnl_tc_set_ifindex(TC_CAST(cls.get()), index);
    rtnl_tc_set_parent(TC_CAST(cls.get()), TC_HANDLE(kPrioQdiscMajor, 0));
    rtnl_tc_set_handle(TC_CAST(cls.get()), TC_HANDLE(kPrioQdiscMajor, minor));
    RETURN_IF_ERROR(
        sock.Error(rtnl_tc_set_kind(TC_CAST(cls.get()), "htb"), what, "rtnl_tc_set_kind(htb)"));
    RETURN_IF_ERROR(sock.Error(rtnl_htb_set_rate64(cls.get(), rate), what, "rtnl_htb_set_rate64"));
    RETURN_IF_ERROR(sock.Error(rtnl_htb_set_ceil64(cls.get(), rate), what, "rtnl_htb_set_ceil64"));
    RETURN_IF_ERROR(sock.Error(rtnl_htb_set_prio(cls.get(), prio), what, "rtnl_htb_set_prio"));
    // Buckets of many frames: the tbf hands htb bursts of its own bucket.
    RETURN_IF_ERROR(sock.Error(rtnl_htb_set_rbuffer(cls.get(), 64 * kFrameBytes), what,
                               "rtnl_htb_set_rbuffer"));
    RETURN_IF_ERROR(sock.Error(rtnl_htb_set_cbuffer(cls.get(), 64 * kFrameBytes), what,
                               "rtnl_htb_set_cbuffer"));
    // Each class has a priority of its own, so the quantum (the share of
    // classes of one priority) never matters; set to keep htb from warning.
    RETURN_IF_ERROR(sock.Error(rtnl_htb_set_quantum(cls.get(), 16 * kFrameBytes), what,
                               "rtnl_htb_set_quantum"));
    RETURN_IF_ERROR(sock.Error(rtnl_class_add(sock.get(), cls.get(), NLM_F_CREATE), what,
                               "rtnl_class_add(htb)"));
    NlPtr<rtnl_qdisc> fifo(rtnl_qdisc_alloc());
    if (!fifo) return absl::ResourceExhaustedError("rtnl_qdisc_alloc failed");
    rtnl_tc_set_ifindex(TC_CAST(fifo.get()), index);
    rtnl_tc_set_parent(TC_CAST(fifo.get()), TC_HANDLE(kPrioQdiscMajor, minor));
    rtnl_tc_set_handle(TC_CAST(fifo.get()), TC_HANDLE(kPrioQdiscMajor + minor, 0));
    RETURN_IF_ERROR(sock.Error(rtnl_tc_set_kind(TC_CAST(fifo.get()), "bfifo"), what,
                               "rtnl_tc_set_kind(bfifo)"));
    RETURN_IF_ERROR(
        sock.Error(rtnl_qdisc_fifo_set_limit(fifo.get(), static_cast<int>(p.limit_bytes)), what,
                   "rtnl_qdisc_fifo_set_limit"));
    RETURN_IF_ERROR(sock.Error(rtnl_qdisc_add(sock.get(), fifo.get(), NLM_F_CREATE), what,
                               "rtnl_qdisc_add(bfifo)"));
  }
  // u32 at the IPv4 header: the TOS byte (offset 1) with the ECN bits masked.
  NlPtr<rtnl_cls> filter(rtnl_cls_alloc());
  if (!filter) return absl::ResourceExhaustedError("rtnl_cls_alloc failed");
  rtnl_tc_set_ifindex(TC_CAST(filter.get()), index);
  rtnl_tc_set_parent(TC_CAST(filter.get()), TC_HANDLE(kPrioQdiscMajor, 0));
  RETURN_IF_ERROR(
      sock.Error(rtnl_tc_set_kind(TC_CAST(filter.get()), "u32"), what, "rtnl_tc_set_kind(u32)"));
  rtnl_cls_set_prio(filter.get(), 1);
  rtnl_cls_set_protocol(filter.get(), ETH_P_IP);
  RETURN_IF_ERROR(
      sock.Error(rtnl_u32_add_key_uint8(filter.get(), static_cast<uint8_t>(tos & 0xfc), 0xfc, 1, 0),
                 what, "rtnl_u32_add_key_uint8(tos)"));
  RETURN_IF_ERROR(
      sock.Error(rtnl_u32_set_classid(filter.get(), TC_HANDLE(kPrioQdiscMajor, kPrioClassMinor)),
                 what, "rtnl_u32_set_classid"));
  // A match ends the search with that class (tc's "flowid" sets it too).
  RETURN_IF_ERROR(
      sock.Error(rtnl_u32_set_cls_terminal(filter.get()), what, "rtnl_u32_set_cls_terminal"));
  return sock.Error(rtnl_cls_add(sock.get(), filter.get(), NLM_F_CREATE), what,
                    "rtnl_cls_add(u32 tos -> priority class)");
}

}  // namespace

absl::Status SetTbf(netns::NlSocket& sock, absl::string_view ifname, double gbps, double burst_ms,
                    int queue_frames, int priority_tos) {
  if (priority_tos > 255) {
    return absl::InvalidArgumentError(
        absl::StrCat("link ", ifname, ": priority TOS ", priority_tos, " outside 0..255"));
  }
  ASSIGN_OR_RETURN(const TbfParams p, TbfFor(gbps, burst_ms, queue_frames));
  const std::string what = absl::StrCat("link ", ifname, " tbf ", gbps, " Gbit/s");
  ASSIGN_OR_RETURN(int index, sock.IfIndex(ifname));
  NlPtr<rtnl_qdisc> q(rtnl_qdisc_alloc());
  if (!q) return absl::ResourceExhaustedError("rtnl_qdisc_alloc failed");
  rtnl_tc_set_ifindex(TC_CAST(q.get()), index);
  rtnl_tc_set_parent(TC_CAST(q.get()), TC_H_ROOT);
  rtnl_tc_set_handle(TC_CAST(q.get()), TC_HANDLE(1, 0));
  RETURN_IF_ERROR(
      sock.Error(rtnl_tc_set_kind(TC_CAST(q.get()), "tbf"), what, "rtnl_tc_set_kind(tbf)"));
  rtnl_qdisc_tbf_set_rate(q.get(), static_cast<int>(p.rate_bytes_per_s),
                          static_cast<int>(p.burst_bytes), 0);
  rtnl_qdisc_tbf_set_limit(q.get(), static_cast<int>(p.limit_bytes));
  RETURN_IF_ERROR(sock.Error(rtnl_qdisc_add(sock.get(), q.get(), NLM_F_CREATE | NLM_F_REPLACE),
                             what, "rtnl_qdisc_add(tbf)"));
  if (priority_tos < 0) return absl::OkStatus();
  return AddPriorityQueue(sock, index, what, p, priority_tos);
}

absl::StatusOr<std::vector<LinkInfo>> ReadLinks(netns::NlSocket& sock) {
  ASSIGN_OR_RETURN(auto links, sock.LinkCache());
  nl_cache* raw = nullptr;
  RETURN_IF_ERROR(
      sock.Error(rtnl_addr_alloc_cache(sock.get(), &raw), "addresses", "rtnl_addr_alloc_cache"));
  NlPtr<nl_cache> addrs(raw);
  raw = nullptr;
  RETURN_IF_ERROR(
      sock.Error(rtnl_qdisc_alloc_cache(sock.get(), &raw), "qdiscs", "rtnl_qdisc_alloc_cache"));
  NlPtr<nl_cache> qdiscs(raw);

  std::vector<LinkInfo> out;
  for (nl_object* o = nl_cache_get_first(links.get()); o; o = nl_cache_get_next(o)) {
    auto* link = reinterpret_cast<rtnl_link*>(o);
    LinkInfo info;
    info.name = rtnl_link_get_name(link) ? rtnl_link_get_name(link) : "";
    info.ifindex = rtnl_link_get_ifindex(link);
    if (const char* type = rtnl_link_get_type(link)) info.kind = type;
    if (int m = rtnl_link_get_master(link); m > 0) {
      char name[IF_NAMESIZE + 1] = {};
      if (rtnl_link_i2name(links.get(), m, name, sizeof(name))) info.master = name;
    }
    unsigned flags = rtnl_link_get_flags(link);
    info.admin_up = flags & IFF_UP;
    info.carrier = flags & kIffLowerUp;
    info.counters.rx_bytes = rtnl_link_get_stat(link, RTNL_LINK_RX_BYTES);
    info.counters.tx_bytes = rtnl_link_get_stat(link, RTNL_LINK_TX_BYTES);
    info.counters.rx_packets = rtnl_link_get_stat(link, RTNL_LINK_RX_PACKETS);
    info.counters.tx_packets = rtnl_link_get_stat(link, RTNL_LINK_TX_PACKETS);
    info.counters.rx_dropped = rtnl_link_get_stat(link, RTNL_LINK_RX_DROPPED);
    info.counters.tx_dropped = rtnl_link_get_stat(link, RTNL_LINK_TX_DROPPED);
    out.push_back(std::move(info));
  }
  auto find = [&](int ifindex) -> LinkInfo* {
    for (LinkInfo& l : out) {
      if (l.ifindex == ifindex) return &l;
    }
    return nullptr;
  };
  for (nl_object* o = nl_cache_get_first(addrs.get()); o; o = nl_cache_get_next(o)) {
    auto* addr = reinterpret_cast<rtnl_addr*>(o);
    LinkInfo* l = find(rtnl_addr_get_ifindex(addr));
    nl_addr* local = rtnl_addr_get_local(addr);
    if (!l || !local || rtnl_addr_get_family(addr) != AF_INET) continue;
    char buf[INET_ADDRSTRLEN] = {};
    inet_ntop(AF_INET, nl_addr_get_binary_addr(local), buf, sizeof(buf));
    l->addresses.push_back(absl::StrCat(buf, "/", rtnl_addr_get_prefixlen(addr)));
  }
  for (nl_object* o = nl_cache_get_first(qdiscs.get()); o; o = nl_cache_get_next(o)) {
    auto* q = reinterpret_cast<rtnl_qdisc*>(o);
    LinkInfo* l = find(rtnl_tc_get_ifindex(TC_CAST(q)));
    const char* kind = rtnl_tc_get_kind(TC_CAST(q));
    if (!l || !kind) continue;
    std::string_view k = kind;
    if (k == "ingress") {
      l->ingress_qdisc = true;
    } else if (k == "htb" && rtnl_tc_get_parent(TC_CAST(q)) == TC_HANDLE(1, 1)) {
      l->priority_queue = true;
    } else if (k == "tbf" && rtnl_tc_get_parent(TC_CAST(q)) == TC_H_ROOT) {
      l->tbf_rate_bytes_per_s = static_cast<uint32_t>(rtnl_qdisc_tbf_get_rate(q));
      l->tbf_burst_bytes = static_cast<uint32_t>(rtnl_qdisc_tbf_get_rate_bucket(q));
    }
  }
  std::sort(out.begin(), out.end(),
            [](const LinkInfo& a, const LinkInfo& b) { return a.ifindex < b.ifindex; });
  return out;
}

absl::StatusOr<LinkInfo> ReadLink(netns::NlSocket& sock, absl::string_view ifname) {
  ASSIGN_OR_RETURN(std::vector<LinkInfo> links, ReadLinks(sock));
  for (LinkInfo& l : links) {
    if (l.name == ifname) return std::move(l);
  }
  return absl::NotFoundError(
      absl::StrCat(sock.NetnsLabel(), ": no interface named '", ifname, "'"));
}

}  // namespace mixnet::emulation
