// Circuit programming in the OCS namespace through rtnetlink (see netns_ocs.h).
// Runs on the caller's thread; the netlink socket was created inside the OCS
// namespace by NlSocket::Open.
#include "ocs_driver/netns/netns_ocs.h"

#include <linux/if_ether.h>
#include <linux/pkt_cls.h>
#include <linux/tc_act/tc_mirred.h>
#include <net/if.h>
#include <netlink/cache.h>
#include <netlink/errno.h>
#include <netlink/route/act/mirred.h>
#include <netlink/route/action.h>
#include <netlink/route/classifier.h>
#include <netlink/route/cls/u32.h>
#include <netlink/route/link.h>
#include <netlink/route/qdisc.h>
#include <netlink/route/tc.h>

#include <algorithm>
#include <charconv>
#include <map>
#include <set>
#include <string_view>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "ocs_driver/netns/nl_socket.h"
#include "runtime/common/log.h"
#include "runtime/common/status.h"

namespace mixnet::ocs {
namespace {

using netns::NlPtr;

constexpr uint32_t kIngressParent = 0xFFFF0000;  // "ffff:", the ingress qdisc's handle
constexpr uint16_t kFilterPrio = 1;
constexpr int kU32HtId = 0x800;  // root hash table of a u32 instance
constexpr int kU32Node = 0x800;  // fixed node id: one filter per port, replaced in place

std::map<std::string, int> IndexByName(nl_cache* links) {
  std::map<std::string, int> out;
  for (nl_object* o = nl_cache_get_first(links); o != nullptr; o = nl_cache_get_next(o)) {
    auto* link = reinterpret_cast<rtnl_link*>(o);
    const char* name = rtnl_link_get_name(link);
    if (name == nullptr || absl::string_view(name) == "lo") continue;
    out[name] = rtnl_link_get_ifindex(link);
  }
  return out;
}

}  // namespace

bool PortLess(absl::string_view x, absl::string_view y) {
  auto nx = NetnsOcs::PortNumber(x);
  auto ny = NetnsOcs::PortNumber(y);
  if (nx.ok() && ny.ok()) return *nx != *ny ? *nx < *ny : x < y;
  if (nx.ok() != ny.ok()) return nx.ok();
  return x < y;
}

std::string NetnsOcs::PortName(int port) { return absl::StrCat("p", port); }

absl::StatusOr<int> NetnsOcs::PortNumber(absl::string_view ifname) {
  int n = 0;
  if (ifname.size() >= 2 && ifname[0] == 'p' && ifname[1] != '0') {
    auto [ptr, ec] = std::from_chars(ifname.data() + 1, ifname.data() + ifname.size(), n);
    if (ec == std::errc() && ptr == ifname.data() + ifname.size() && n > 0) return n;
  }
  return absl::InvalidArgumentError(absl::StrCat("'", ifname, "' is not a port name p<N>"));
}

NetnsOcs::NetnsOcs(std::string netns, std::unique_ptr<netns::NlSocket> sock)
    : netns_(std::move(netns)), sock_(std::move(sock)) {}

NetnsOcs::~NetnsOcs() = default;

absl::StatusOr<std::unique_ptr<NetnsOcs>> NetnsOcs::Open(absl::string_view netns) {
  if (netns.empty()) return absl::InvalidArgumentError("NetnsOcs::Open: empty namespace name");
  ASSIGN_OR_RETURN(auto sock, netns::NlSocket::Open(netns));
  return std::unique_ptr<NetnsOcs>(new NetnsOcs(std::string(netns), std::move(sock)));
}

absl::StatusOr<std::vector<std::string>> NetnsOcs::Ports() {
  absl::MutexLock lock(&mu_);
  ASSIGN_OR_RETURN(auto links, sock_->LinkCache());
  std::vector<std::string> ports;
  for (const auto& [name, index] : IndexByName(links.get())) ports.push_back(name);
  std::sort(ports.begin(), ports.end(), PortLess);
  return ports;
}

absl::StatusOr<NetnsOcs::Snapshot> NetnsOcs::ReadSnapshot(bool with_qdiscs) {
  Snapshot snap;
  ASSIGN_OR_RETURN(auto links, sock_->LinkCache());
  snap.index = IndexByName(links.get());
  if (with_qdiscs) {
    nl_cache* raw = nullptr;
    RETURN_IF_ERROR(sock_->Error(rtnl_qdisc_alloc_cache(sock_->get(), &raw), "qdiscs",
                                 "rtnl_qdisc_alloc_cache"));
    NlPtr<nl_cache> qdiscs(raw);
    for (nl_object* o = nl_cache_get_first(raw); o; o = nl_cache_get_next(o)) {
      auto* q = reinterpret_cast<rtnl_qdisc*>(o);
      const char* kind = rtnl_tc_get_kind(TC_CAST(q));
      if (kind && std::string_view(kind) == "ingress")
        snap.ingress.insert(rtnl_tc_get_ifindex(TC_CAST(q)));
    }
  }
  for (const auto& [name, ifindex] : snap.index) {
    nl_cache* raw = nullptr;
    RETURN_IF_ERROR(sock_->Error(rtnl_cls_alloc_cache(sock_->get(), ifindex, kIngressParent, &raw),
                                 absl::StrCat("port ", name), "rtnl_cls_alloc_cache(ingress)"));
    NlPtr<nl_cache> filters(raw);
    for (nl_object* f = nl_cache_get_first(raw); f; f = nl_cache_get_next(f)) {
      auto* cls = reinterpret_cast<rtnl_cls*>(f);
      const char* kind = rtnl_tc_get_kind(TC_CAST(cls));
      if (kind == nullptr || std::string_view(kind) != "u32") continue;
      for (rtnl_act* act = rtnl_u32_get_action(cls); act; act = rtnl_act_next(act)) {
        const char* akind = rtnl_tc_get_kind(TC_CAST(act));
        if (akind == nullptr || std::string_view(akind) != "mirred" ||
            rtnl_mirred_get_action(act) != TCA_EGRESS_REDIR) {
          continue;
        }
        char to[IF_NAMESIZE + 1] = {};
        int to_index = static_cast<int>(rtnl_mirred_get_ifindex(act));
        snap.redirect[name] = rtnl_link_i2name(links.get(), to_index, to, sizeof(to))
                                  ? std::string(to)
                                  : absl::StrCat("ifindex ", to_index);
      }
    }
  }
  return snap;
}

absl::StatusOr<int> NetnsOcs::IndexIn(const Snapshot& snap, absl::string_view port) const {
  auto it = snap.index.find(std::string(port));
  if (it == snap.index.end()) {
    return absl::NotFoundError(absl::StrCat("OCS namespace ", netns_, ": no port '", port, "'"));
  }
  return it->second;
}

absl::Status NetnsOcs::AddIngress(std::vector<netns::NlSocket::Request>& batch,
                                  absl::string_view port, int index) {
  const std::string what = absl::StrCat("port ", port);
  NlPtr<rtnl_qdisc> q(rtnl_qdisc_alloc());
  if (!q) return absl::ResourceExhaustedError("rtnl_qdisc_alloc failed");
  rtnl_tc_set_ifindex(TC_CAST(q.get()), index);
  rtnl_tc_set_parent(TC_CAST(q.get()), TC_H_INGRESS);
  rtnl_tc_set_handle(TC_CAST(q.get()), kIngressParent);
  RETURN_IF_ERROR(
      sock_->Error(rtnl_tc_set_kind(TC_CAST(q.get()), "ingress"), what, "rtnl_tc_set_kind"));
  nl_msg* msg = nullptr;
  RETURN_IF_ERROR(sock_->Error(rtnl_qdisc_build_add_request(q.get(), NLM_F_CREATE, &msg), what,
                               "rtnl_qdisc_build_add_request(ingress)"));
  batch.push_back({NlPtr<nl_msg>(msg), what, "rtnl_qdisc_add(ingress)"});
  return absl::OkStatus();
}

absl::Status NetnsOcs::AddRedirect(std::vector<netns::NlSocket::Request>& batch,
                                   absl::string_view from, int from_index, absl::string_view to,
                                   int to_index) {
  const std::string what = absl::StrCat("port ", from, " -> ", to);
  NlPtr<rtnl_cls> cls(rtnl_cls_alloc());
  NlPtr<rtnl_act> act(rtnl_act_alloc());
  if (!cls || !act) return absl::ResourceExhaustedError("rtnl_cls_alloc/rtnl_act_alloc failed");
  rtnl_tc* tc = TC_CAST(cls.get());
  rtnl_tc_set_ifindex(tc, from_index);
  rtnl_tc_set_parent(tc, kIngressParent);
  RETURN_IF_ERROR(sock_->Error(rtnl_tc_set_kind(tc, "u32"), what, "rtnl_tc_set_kind(u32)"));
  rtnl_cls_set_prio(cls.get(), kFilterPrio);
  rtnl_cls_set_protocol(cls.get(), ETH_P_ALL);
  rtnl_u32_set_handle(cls.get(), kU32HtId, 0, kU32Node);
  // "match u32 0 0": value 0, mask 0 at offset 0 matches every packet.
  RETURN_IF_ERROR(sock_->Error(rtnl_u32_add_key_uint32(cls.get(), 0, 0, 0, 0), what,
                               "rtnl_u32_add_key_uint32(0, 0)"));
  RETURN_IF_ERROR(sock_->Error(rtnl_tc_set_kind(TC_CAST(act.get()), "mirred"), what,
                               "rtnl_tc_set_kind(mirred)"));
  RETURN_IF_ERROR(sock_->Error(rtnl_mirred_set_action(act.get(), TCA_EGRESS_REDIR), what,
                               "rtnl_mirred_set_action(egress redirect)"));
  RETURN_IF_ERROR(sock_->Error(rtnl_mirred_set_policy(act.get(), TC_ACT_STOLEN), what,
                               "rtnl_mirred_set_policy(stolen)"));
  RETURN_IF_ERROR(
      sock_->Error(rtnl_mirred_set_ifindex(act.get(), to_index), what, "rtnl_mirred_set_ifindex"));
  // rtnl_u32_add_action takes its own reference to act.
  RETURN_IF_ERROR(
      sock_->Error(rtnl_u32_add_action(cls.get(), act.get()), what, "rtnl_u32_add_action"));
  RETURN_IF_ERROR(
      sock_->Error(rtnl_u32_set_cls_terminal(cls.get()), what, "rtnl_u32_set_cls_terminal"));
  nl_msg* msg = nullptr;
  RETURN_IF_ERROR(
      sock_->Error(rtnl_cls_build_add_request(cls.get(), NLM_F_CREATE | NLM_F_REPLACE, &msg), what,
                   "rtnl_cls_build_add_request"));
  batch.push_back(
      {NlPtr<nl_msg>(msg), what, "rtnl_cls_add(u32 match-all, mirred egress redirect)"});
  return absl::OkStatus();
}

absl::Status NetnsOcs::AddFlush(std::vector<netns::NlSocket::Request>& batch,
                                absl::string_view port, int index) {
  const std::string what = absl::StrCat("port ", port);
  NlPtr<rtnl_cls> cls(rtnl_cls_alloc());
  if (!cls) return absl::ResourceExhaustedError("rtnl_cls_alloc failed");
  rtnl_tc_set_ifindex(TC_CAST(cls.get()), index);
  rtnl_tc_set_parent(TC_CAST(cls.get()), kIngressParent);
  // Priority 0 with no protocol, kind or handle flushes every ingress filter
  // of the port (like `tc filter del dev X ingress`).
  rtnl_cls_set_prio(cls.get(), 0);
  rtnl_cls_set_protocol(cls.get(), 0);
  nl_msg* msg = nullptr;
  RETURN_IF_ERROR(sock_->Error(rtnl_cls_build_delete_request(cls.get(), 0, &msg), what,
                               "rtnl_cls_build_delete_request"));
  batch.push_back({NlPtr<nl_msg>(msg), what, "rtnl_cls_delete(ingress flush)"});
  return absl::OkStatus();
}

absl::Status NetnsOcs::AddLinkState(std::vector<netns::NlSocket::Request>& batch,
                                    absl::string_view port, int index, bool up) {
  const std::string what = absl::StrCat("port ", port);
  NlPtr<rtnl_link> orig(rtnl_link_alloc());
  NlPtr<rtnl_link> change(rtnl_link_alloc());
  if (!orig || !change) return absl::ResourceExhaustedError("rtnl_link_alloc failed");
  rtnl_link_set_ifindex(orig.get(), index);
  if (up) {
    rtnl_link_set_flags(change.get(), IFF_UP);
  } else {
    rtnl_link_unset_flags(change.get(), IFF_UP);
  }
  nl_msg* msg = nullptr;
  RETURN_IF_ERROR(sock_->Error(rtnl_link_build_change_request(orig.get(), change.get(), 0, &msg),
                               what, "rtnl_link_build_change_request"));
  batch.push_back(
      {NlPtr<nl_msg>(msg), what, up ? "rtnl_link_change(up)" : "rtnl_link_change(down)"});
  return absl::OkStatus();
}

absl::Status NetnsOcs::SendDark(const Snapshot& snap, const std::vector<std::string>& ports,
                                bool dark) {
  std::vector<netns::NlSocket::Request> batch;
  for (const std::string& port : ports) {
    ASSIGN_OR_RETURN(int index, IndexIn(snap, port));
    RETURN_IF_ERROR(AddLinkState(batch, port, index, !dark));
  }
  return sock_->SendBatch(batch);
}

absl::Status NetnsOcs::EnsureIngress(absl::string_view port) {
  absl::MutexLock lock(&mu_);
  ASSIGN_OR_RETURN(int index, sock_->IfIndex(port));
  std::vector<netns::NlSocket::Request> batch;
  RETURN_IF_ERROR(AddIngress(batch, port, index));
  return sock_->SendBatch(batch);
}

absl::Status NetnsOcs::SetPortsDark(const std::vector<std::string>& ports, bool dark) {
  absl::MutexLock lock(&mu_);
  Snapshot snap;
  ASSIGN_OR_RETURN(auto links, sock_->LinkCache());
  snap.index = IndexByName(links.get());
  return SendDark(snap, ports, dark);
}

absl::StatusOr<std::vector<Redirect>> NetnsOcs::ListRedirects() {
  absl::MutexLock lock(&mu_);
  ASSIGN_OR_RETURN(Snapshot snap, ReadSnapshot(false));
  std::vector<Redirect> out;
  for (const auto& [from, to] : snap.redirect) out.push_back({from, to});
  std::sort(out.begin(), out.end(),
            [](const Redirect& x, const Redirect& y) { return PortLess(x.from, y.from); });
  return out;
}

std::vector<PortPair> NetnsOcs::DuplexCircuits(const Snapshot& snap) {
  std::vector<PortPair> out;
  for (const auto& [from, to] : snap.redirect) {
    auto back = snap.redirect.find(to);
    if (PortLess(from, to) && back != snap.redirect.end() && back->second == from) {
      out.push_back({from, to});
    }
  }
  std::sort(out.begin(), out.end(),
            [](const PortPair& x, const PortPair& y) { return PortLess(x.a, y.a); });
  return out;
}

absl::StatusOr<std::vector<PortPair>> NetnsOcs::List() {
  absl::MutexLock lock(&mu_);
  ASSIGN_OR_RETURN(Snapshot snap, ReadSnapshot(false));
  return DuplexCircuits(snap);
}

absl::Status NetnsOcs::Connect(absl::string_view port_a, absl::string_view port_b) {
  if (port_a == port_b) {
    return absl::InvalidArgumentError(
        absl::StrCat("OCS namespace ", netns_, ": circuit from port ", port_a, " to itself"));
  }
  absl::MutexLock lock(&mu_);
  ASSIGN_OR_RETURN(Snapshot snap, ReadSnapshot(true));
  ASSIGN_OR_RETURN(int a, IndexIn(snap, port_a));
  ASSIGN_OR_RETURN(int b, IndexIn(snap, port_b));
  std::vector<netns::NlSocket::Request> batch;
  // Former peers of a or b that still point back lose their redirect.
  for (absl::string_view p : {port_a, port_b}) {
    auto it = snap.redirect.find(std::string(p));
    if (it == snap.redirect.end() || it->second == port_a || it->second == port_b) continue;
    auto back = snap.redirect.find(it->second);
    if (back != snap.redirect.end() && back->second == p) {
      RETURN_IF_ERROR(AddFlush(batch, it->second, snap.index.at(it->second)));
    }
  }
  for (auto [port, index] : {std::pair{port_a, a}, std::pair{port_b, b}}) {
    if (!snap.ingress.count(index)) RETURN_IF_ERROR(AddIngress(batch, port, index));
  }
  RETURN_IF_ERROR(AddRedirect(batch, port_a, a, port_b, b));
  RETURN_IF_ERROR(AddRedirect(batch, port_b, b, port_a, a));
  return sock_->SendBatch(batch);
}

absl::Status NetnsOcs::Disconnect(absl::string_view port) {
  absl::MutexLock lock(&mu_);
  ASSIGN_OR_RETURN(Snapshot snap, ReadSnapshot(false));
  ASSIGN_OR_RETURN(int index, IndexIn(snap, port));
  auto it = snap.redirect.find(std::string(port));
  if (it == snap.redirect.end()) return absl::OkStatus();
  std::vector<netns::NlSocket::Request> batch;
  RETURN_IF_ERROR(AddFlush(batch, port, index));
  auto back = snap.redirect.find(it->second);
  if (back != snap.redirect.end() && back->second == port) {
    RETURN_IF_ERROR(AddFlush(batch, it->second, snap.index.at(it->second)));
  }
  return sock_->SendBatch(batch);
}

absl::StatusOr<ApplyResult> NetnsOcs::Apply(const std::vector<PortPair>& desired,
                                            absl::Duration dark_for) {
  ApplyReport report;
  RETURN_IF_ERROR(ApplyReporting(desired, dark_for, report));
  return report.result;
}

absl::Status NetnsOcs::SendTracked(std::vector<netns::NlSocket::Request>& batch,
                                   const std::vector<std::string>& ports, ApplyReport& report) {
  std::vector<absl::Status> results;
  absl::Status s = sock_->SendBatch(batch, nullptr, &results);
  for (size_t i = 0; i < results.size() && i < ports.size(); ++i) {
    if (!results[i].ok()) report.failed.emplace(ports[i], results[i]);  // keeps the first
  }
  batch.clear();
  return s;
}

absl::Status NetnsOcs::ApplyReporting(const std::vector<PortPair>& desired, absl::Duration dark_for,
                                      ApplyReport& report) {
  report = ApplyReport{};
  absl::MutexLock lock(&mu_);
  ASSIGN_OR_RETURN(Snapshot snap, ReadSnapshot(true));
  return ApplyToSnapshotLocked(snap, desired, dark_for, report);
}

absl::Status NetnsOcs::ChangeReporting(const std::vector<PortPair>& remove,
                                       const std::vector<PortPair>& add, absl::Duration dark_for,
                                       ApplyReport& report) {
  report = ApplyReport{};
  absl::MutexLock lock(&mu_);
  ASSIGN_OR_RETURN(Snapshot snap, ReadSnapshot(true));
  std::set<std::pair<std::string, std::string>> gone;
  for (const PortPair& c : remove) {
    gone.insert({c.a, c.b});
    gone.insert({c.b, c.a});
  }
  std::vector<PortPair> desired;
  for (const PortPair& c : DuplexCircuits(snap)) {
    if (!gone.count({c.a, c.b})) desired.push_back(c);
  }
  desired.insert(desired.end(), add.begin(), add.end());
  return ApplyToSnapshotLocked(snap, desired, dark_for, report);
}

absl::Status NetnsOcs::ApplyToSnapshotLocked(const Snapshot& snap,
                                             const std::vector<PortPair>& desired,
                                             absl::Duration dark_for, ApplyReport& report) {
  std::map<std::string, std::string> want;
  for (const PortPair& c : desired) {
    for (const std::string* p : {&c.a, &c.b}) {
      if (!snap.index.count(*p)) {
        return absl::InvalidArgumentError(absl::StrCat("OCS namespace ", netns_, ": circuit ", c.a,
                                                       "<->", c.b, ": no port '", *p, "'"));
      }
    }
    if (c.a == c.b) {
      return absl::InvalidArgumentError(
          absl::StrCat("OCS namespace ", netns_, ": circuit from port ", c.a, " to itself"));
    }
    for (const auto& [from, to] : {std::pair{c.a, c.b}, std::pair{c.b, c.a}}) {
      if (!want.emplace(from, to).second) {
        return absl::InvalidArgumentError(absl::StrCat("OCS namespace ", netns_, ": port ", from,
                                                       " used by more than one circuit"));
      }
    }
  }
  ApplyResult& result = report.result;
  std::vector<std::string> removals, sets;
  for (const auto& [from, to] : snap.redirect) {
    auto it = want.find(from);
    if (it == want.end()) {
      removals.push_back(from);
      auto back = snap.redirect.find(to);
      if (back == snap.redirect.end() || back->second != from) report.cleared.push_back({from, to});
    } else if (it->second != to) {
      sets.push_back(from);
    }
  }
  for (const auto& [from, to] : want) {
    if (!snap.redirect.count(from)) sets.push_back(from);
  }
  result.changed_ports = removals;
  result.changed_ports.insert(result.changed_ports.end(), sets.begin(), sets.end());
  std::sort(result.changed_ports.begin(), result.changed_ports.end(), PortLess);
  if (result.changed_ports.empty()) return absl::OkStatus();

  // Removals first, then the new redirects. Without a switching time that is
  // one batch. With one, every changed port first loses its light path (its
  // redirect is removed: frames into it are dropped, as in a switching OCS),
  // stays so for `dark_for`, then gets its new redirect. The ports' links stay
  // up: a carrier flap would make the hosts' kernels hold their transmit
  // queues until the link watcher runs (up to a second), which is an artefact
  // of the emulation, not a property of the switch. Netlink batches are not
  // transactions: a failed request does not stop the others, so each
  // request's acknowledgement is recorded against its port (report.failed)
  // and the second batch is sent even when some requests of the first failed.
  const bool dark = dark_for > absl::ZeroDuration();
  std::vector<netns::NlSocket::Request> batch;
  std::vector<std::string> ports;  // the port of each request of `batch`
  absl::Status first;
  for (const std::string& p : removals) {
    RETURN_IF_ERROR(AddFlush(batch, p, snap.index.at(p)));
    ports.push_back(p);
  }
  if (dark) {
    for (const std::string& p : sets) {
      if (snap.redirect.count(p)) {
        RETURN_IF_ERROR(AddFlush(batch, p, snap.index.at(p)));
        ports.push_back(p);
      }
    }
    first = SendTracked(batch, ports, report);
    ports.clear();
    absl::SleepFor(dark_for);
  }
  for (const std::string& p : sets) {
    const int index = snap.index.at(p);
    if (!snap.ingress.count(index)) {
      RETURN_IF_ERROR(AddIngress(batch, p, index));
      ports.push_back(p);
    }
    const std::string& to = want.at(p);
    RETURN_IF_ERROR(AddRedirect(batch, p, index, to, snap.index.at(to)));
    ports.push_back(p);
  }
  absl::Status second = SendTracked(batch, ports, report);
  if (first.ok()) first = second;
  result.redirects_removed = static_cast<int>(removals.size());
  result.redirects_set = static_cast<int>(sets.size());
  log::Debug("OCS {}: applied {} circuits, changed ports {}{}", netns_, desired.size(),
             absl::StrJoin(result.changed_ports, ","), first.ok() ? "" : " (some failed)");
  return first;
}

}  // namespace mixnet::ocs
