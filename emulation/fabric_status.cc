// Fabric status read-back and formatting (see fabric_status.h).
#include "emulation/fabric_status.h"

#include <set>
#include <utility>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "emulation/fabric_names.h"
#include "ocs_driver/netns/netns.h"
#include "ocs_driver/netns/nl_socket.h"
#include "runtime/common/status.h"

namespace mixnet::emulation {

absl::StatusOr<FabricStatus> ReadFabricStatus(absl::string_view prefix) {
  RETURN_IF_ERROR(ValidatePrefix(prefix));
  FabricStatus out;
  out.prefix = std::string(prefix);
  ASSIGN_OR_RETURN(std::vector<std::string> names,
                   netns::ListNamespaces(absl::StrCat(prefix, "-")));
  const std::string eps = EpsNamespaceName(prefix);
  const std::string ocs_stem = absl::StrCat(prefix, "-ocs-");
  for (const std::string& name : names) {
    NamespaceStatus ns;
    ns.name = name;
    ns.role = name == eps ? "eps" : absl::StartsWith(name, ocs_stem) ? "ocs" : "host";
    ASSIGN_OR_RETURN(auto sock, netns::NlSocket::Open(name));
    ASSIGN_OR_RETURN(ns.links, ReadLinks(*sock));
    if (ns.role == "ocs") {
      ASSIGN_OR_RETURN(auto ocs, ocs::NetnsOcs::Open(name));
      ASSIGN_OR_RETURN(std::vector<ocs::Redirect> redirects, ocs->ListRedirects());
      std::set<std::pair<std::string, std::string>> seen;
      for (const ocs::Redirect& r : redirects) seen.emplace(r.from, r.to);
      for (const ocs::Redirect& r : redirects) {
        if (!seen.count({r.to, r.from})) {
          ns.half_circuits.push_back(r);
        } else if (ocs::PortLess(r.from, r.to)) {
          ns.circuits.push_back({r.from, r.to});
        }
      }
    }
    out.namespaces.push_back(std::move(ns));
  }
  return out;
}

namespace {

std::string Rate(uint64_t bytes_per_s) {
  double bits = static_cast<double>(bytes_per_s) * 8;
  if (bits >= 1e9) return absl::StrFormat("%.3gGbit", bits / 1e9);
  return absl::StrFormat("%.4gMbit", bits / 1e6);
}

}  // namespace

std::string FormatFabricStatus(const FabricStatus& status) {
  std::string out;
  if (status.namespaces.empty()) {
    return absl::StrCat("fabric ", status.prefix, ": no namespaces\n");
  }
  absl::StrAppend(&out, "fabric ", status.prefix, ": ", status.namespaces.size(), " namespaces\n");
  for (const NamespaceStatus& ns : status.namespaces) {
    absl::StrAppend(&out, "\n", ns.name, " (", ns.role, ")\n");
    absl::StrAppend(&out,
                    absl::StrFormat("  %-15s %-6s %-8s %-20s %10s %12s %12s %s\n", "link", "state",
                                    "master", "address", "tbf", "rx_bytes", "tx_bytes", "ingress"));
    for (const LinkInfo& l : ns.links) {
      std::string state = !l.admin_up ? "down" : l.carrier ? "up" : "no-car";
      absl::StrAppend(
          &out,
          absl::StrFormat("  %-15s %-6s %-8s %-20s %10s %12d %12d %s\n", l.name, state,
                          l.master.empty() ? "-" : l.master,
                          l.addresses.empty() ? "-" : absl::StrJoin(l.addresses, ","),
                          l.tbf_rate_bytes_per_s ? Rate(l.tbf_rate_bytes_per_s) : "-",
                          l.counters.rx_bytes, l.counters.tx_bytes, l.ingress_qdisc ? "yes" : "-"));
    }
    if (ns.role == "ocs") {
      std::vector<std::string> c;
      for (const ocs::PortPair& p : ns.circuits) c.push_back(absl::StrCat(p.a, "<->", p.b));
      absl::StrAppend(&out, "  circuits: ", c.empty() ? "none" : absl::StrJoin(c, " "), "\n");
      for (const ocs::Redirect& r : ns.half_circuits) {
        absl::StrAppend(&out, "  half circuit: ", r.from, " -> ", r.to, "\n");
      }
    }
  }
  return out;
}

nlohmann::json FabricStatusJson(const FabricStatus& status) {
  nlohmann::json j;
  j["prefix"] = status.prefix;
  j["namespaces"] = nlohmann::json::array();
  for (const NamespaceStatus& ns : status.namespaces) {
    nlohmann::json n;
    n["name"] = ns.name;
    n["role"] = ns.role;
    n["links"] = nlohmann::json::array();
    for (const LinkInfo& l : ns.links) {
      n["links"].push_back({{"name", l.name},
                            {"kind", l.kind},
                            {"master", l.master},
                            {"admin_up", l.admin_up},
                            {"carrier", l.carrier},
                            {"addresses", l.addresses},
                            {"tbf_rate_bytes_per_s", l.tbf_rate_bytes_per_s},
                            {"ingress_qdisc", l.ingress_qdisc},
                            {"rx_bytes", l.counters.rx_bytes},
                            {"tx_bytes", l.counters.tx_bytes},
                            {"rx_packets", l.counters.rx_packets},
                            {"tx_packets", l.counters.tx_packets},
                            {"rx_dropped", l.counters.rx_dropped},
                            {"tx_dropped", l.counters.tx_dropped}});
    }
    if (ns.role == "ocs") {
      n["circuits"] = nlohmann::json::array();
      for (const ocs::PortPair& p : ns.circuits) n["circuits"].push_back({p.a, p.b});
      n["half_circuits"] = nlohmann::json::array();
      for (const ocs::Redirect& r : ns.half_circuits) n["half_circuits"].push_back({r.from, r.to});
    }
    j["namespaces"].push_back(std::move(n));
  }
  return j;
}

}  // namespace mixnet::emulation
