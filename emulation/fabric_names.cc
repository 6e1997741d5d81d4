// Fabric naming and spec checks (see fabric_names.h).
#include "emulation/fabric_names.h"

#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <set>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "ocs_driver/netns/netns.h"
#include "runtime/common/absl_view.h"

namespace mixnet::emulation {

absl::Status ValidatePrefix(absl::string_view prefix) {
  bool ok = !prefix.empty() && prefix.size() <= kMaxPrefixLen &&
            absl::ascii_islower(static_cast<unsigned char>(prefix[0])) &&
            std::all_of(prefix.begin(), prefix.end(), [](char c) {
              return absl::ascii_islower(static_cast<unsigned char>(c)) ||
                     absl::ascii_isdigit(static_cast<unsigned char>(c)) || c == '_';
            });
  if (ok) return absl::OkStatus();
  return absl::InvalidArgumentError(
      absl::StrCat("bad fabric prefix '", prefix, "': want 1..", kMaxPrefixLen,
                   " characters of [a-z0-9_] starting with a letter"));
}

std::string DefaultPrefixStem(absl::string_view spec_name) {
  std::string stem;
  for (char c : spec_name) {
    if (stem.size() == 16) break;
    unsigned char u = static_cast<unsigned char>(c);
    stem += absl::ascii_isalnum(u) ? absl::ascii_tolower(u) : '_';
  }
  if (stem.empty() || !absl::ascii_islower(static_cast<unsigned char>(stem[0]))) {
    stem.insert(0, "mx");
    stem.resize(std::min<size_t>(stem.size(), 16));
  }
  return absl::StrCat(stem, "_");
}

std::string DefaultPrefix(absl::string_view spec_name) {
  static std::atomic<int> counter{0};
  int n = counter.fetch_add(1);
  std::string prefix = absl::StrCat(DefaultPrefixStem(spec_name), getpid());
  if (n > 0) absl::StrAppend(&prefix, "_", n);
  return prefix;
}

bool IsDefaultPrefixOf(absl::string_view prefix, absl::string_view spec_name) {
  std::string stem = DefaultPrefixStem(spec_name);
  if (!absl::StartsWith(prefix, stem) || prefix.size() == stem.size()) return false;
  absl::string_view rest = prefix.substr(stem.size());
  return absl::ascii_isdigit(static_cast<unsigned char>(rest[0])) &&
         std::all_of(rest.begin(), rest.end(), [](char c) {
           return absl::ascii_isdigit(static_cast<unsigned char>(c)) || c == '_';
         });
}

std::string HostNamespaceName(absl::string_view prefix, absl::string_view host) {
  return absl::StrCat(prefix, "-", host);
}

std::string EpsNamespaceName(absl::string_view prefix) { return absl::StrCat(prefix, "-eps"); }

std::string OcsNamespaceName(absl::string_view prefix, absl::string_view ocs_switch) {
  return absl::StrCat(prefix, "-ocs-", ocs_switch);
}

std::string PrefixOfNamespace(absl::string_view netns_name) {
  size_t dash = netns_name.find('-');
  if (dash == absl::string_view::npos || dash + 1 == netns_name.size()) return "";
  absl::string_view prefix = netns_name.substr(0, dash);
  if (!ValidatePrefix(prefix).ok()) return "";
  return std::string(prefix);
}

bool IsValidIfName(absl::string_view name) {
  if (name.empty() || name.size() > 15 || name == "." || name == "..") return false;
  return std::none_of(name.begin(), name.end(), [](char c) {
    return c == '/' || c == ':' || absl::ascii_isspace(static_cast<unsigned char>(c)) ||
           static_cast<unsigned char>(c) < 0x21 || static_cast<unsigned char>(c) > 0x7e;
  });
}

std::string EpsPortName(const cluster::ClusterSpec& spec, int host_index, int nic_index) {
  const cluster::HostSpec& h = spec.hosts[host_index];
  std::string name = absl::StrCat(Av(h.name), "-", Av(h.nics[nic_index].name));
  if (IsValidIfName(name)) {
    // Unique unless another (host, nic) spells the same string.
    int same = 0;
    for (const cluster::HostSpec& oh : spec.hosts) {
      for (const cluster::NicSpec& on : oh.nics) {
        if (on.role == cluster::NicRole::kEps &&
            absl::StrCat(Av(oh.name), "-", Av(on.name)) == name) {
          ++same;
        }
      }
    }
    if (same == 1) return name;
  }
  return absl::StrCat("h", host_index, "n", nic_index);
}

absl::Status ValidateSpecForEmulation(const cluster::ClusterSpec& spec) {
  if (spec.hosts.empty()) return absl::InvalidArgumentError("spec has no hosts");
  std::set<std::string> switches;
  for (const cluster::OcsSwitchSpec& s : spec.ocs_switches) {
    if (!netns::IsValidNamespaceName(absl::StrCat("x-ocs-", Av(s.name))) ||
        absl::StrContains(Av(s.name), "/")) {
      return absl::InvalidArgumentError(absl::StrCat("ocs_switches: switch name '", Av(s.name),
                                                     "' cannot be part of a namespace name"));
    }
    switches.insert(s.name);
  }
  std::set<std::string> hosts;
  for (const cluster::HostSpec& h : spec.hosts) {
    const std::string where = absl::StrCat("host '", Av(h.name), "'");
    if (!netns::IsValidNamespaceName(absl::StrCat("x-", Av(h.name)))) {
      return absl::InvalidArgumentError(
          absl::StrCat(where, ": name cannot be part of a namespace name ([A-Za-z0-9_.-])"));
    }
    if (h.name == "eps" || (absl::StartsWith(Av(h.name), "ocs-") &&
                            switches.count(std::string(Av(h.name).substr(4))))) {
      return absl::InvalidArgumentError(
          absl::StrCat(where, ": name clashes with the fabric's own namespace"));
    }
    if (!hosts.insert(h.name).second) {
      return absl::InvalidArgumentError(absl::StrCat(where, ": listed twice"));
    }
    std::set<std::string> nics;
    for (const cluster::NicSpec& n : h.nics) {
      const std::string nwhere = absl::StrCat(where, " NIC '", Av(n.name), "'");
      if (!IsValidIfName(n.name) || n.name == "lo" || n.name == "all" || n.name == "default") {
        return absl::InvalidArgumentError(
            absl::StrCat(nwhere,
                         ": not usable as an interface name (1..15 chars, no '/', ':', space; "
                         "not lo, all or default)"));
      }
      if (!nics.insert(n.name).second) {
        return absl::InvalidArgumentError(absl::StrCat(nwhere, ": listed twice"));
      }
      if (n.address.empty()) {
        return absl::InvalidArgumentError(absl::StrCat(nwhere, ": no address"));
      }
      if (n.role == cluster::NicRole::kOcs) {
        if (!switches.count(n.ocs_switch)) {
          return absl::InvalidArgumentError(
              absl::StrCat(nwhere, ": unknown OCS switch '", Av(n.ocs_switch), "'"));
        }
        if (n.ocs_port <= 0) {
          return absl::InvalidArgumentError(absl::StrCat(nwhere, ": OCS port must be >= 1"));
        }
      }
    }
  }
  return absl::OkStatus();
}

}  // namespace mixnet::emulation
