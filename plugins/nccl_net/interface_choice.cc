// Default interface choice (see interface_choice.h). NCCL's init thread.
#include "plugins/nccl_net/interface_choice.h"

#include <arpa/inet.h>
#include <ifaddrs.h>
#include <net/if.h>
#include <netinet/in.h>

#include <cerrno>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "runtime/common/status.h"

namespace mixnet::nccl {
namespace {

enum class Class { kIpoib, kRegular, kContainer, kLoopback };

bool IsContainerStyle(const std::string& name) {
  return absl::StartsWith(name, "docker") || absl::StartsWith(name, "virbr") ||
         absl::StartsWith(name, "veth");
}

Class Classify(const InterfaceEntry& e) {
  if (e.loopback || absl::StartsWith(e.name, "lo")) return Class::kLoopback;
  if (IsContainerStyle(e.name)) return Class::kContainer;
  if (absl::StartsWith(e.name, "ib")) return Class::kIpoib;
  return Class::kRegular;
}

const char* Why(Class c) {
  switch (c) {
    case Class::kIpoib:
      return "the first IPoIB interface that is up with an IPv4 address";
    case Class::kRegular:
      return "the first interface that is up with an IPv4 address and is neither loopback nor "
             "docker-style";
    case Class::kContainer:
      return "no other interface is up with an IPv4 address, so a docker-style one";
    case Class::kLoopback:
      return "no other interface is up with an IPv4 address, so loopback (this host only)";
  }
  return "";
}

}  // namespace

absl::StatusOr<InterfaceChoice> ChooseInterface(const std::vector<InterfaceEntry>& interfaces) {
  const InterfaceEntry* best = nullptr;
  Class best_class = Class::kLoopback;
  for (const InterfaceEntry& e : interfaces) {
    if (!e.up || e.ip.empty()) continue;
    const Class c = Classify(e);
    if (best == nullptr || c < best_class) {
      best = &e;
      best_class = c;
    }
  }
  if (best == nullptr) {
    return absl::NotFoundError(
        "MIXNET_SOCKET_IFNAME is not set and no interface is up with an IPv4 address");
  }
  std::vector<std::string> passed;
  for (const InterfaceEntry& e : interfaces) {
    if (&e == best) continue;
    if (!e.up) {
      passed.push_back(absl::StrCat(e.name, " (down)"));
    } else if (e.ip.empty()) {
      passed.push_back(absl::StrCat(e.name, " (no IPv4 address)"));
    } else if (Classify(e) == Class::kLoopback) {
      passed.push_back(absl::StrCat(e.name, " (loopback)"));
    } else if (Classify(e) == Class::kContainer) {
      passed.push_back(absl::StrCat(e.name, " (docker-style)"));
    } else {
      passed.push_back(absl::StrCat(e.name, " (not the first)"));
    }
  }
  InterfaceChoice out;
  out.ifname = best->name;
  out.ip = best->ip;
  out.explanation = absl::StrCat(
      "MIXNET_SOCKET_IFNAME is not set: using ", best->name, " (", best->ip, "), ", Why(best_class),
      passed.empty() ? std::string() : absl::StrCat("; passed over ", absl::StrJoin(passed, ", ")),
      "; set MIXNET_SOCKET_IFNAME to choose");
  return out;
}

absl::StatusOr<std::vector<InterfaceEntry>> ListInterfaces() {
  ifaddrs* list = nullptr;
  if (getifaddrs(&list) != 0) return ErrnoStatus("listing interfaces", "getifaddrs");
  std::vector<InterfaceEntry> out;
  for (ifaddrs* a = list; a != nullptr; a = a->ifa_next) {
    if (a->ifa_name == nullptr) continue;
    InterfaceEntry* e = nullptr;
    for (InterfaceEntry& x : out) {
      if (x.name == a->ifa_name) e = &x;
    }
    if (e == nullptr) {
      out.push_back(InterfaceEntry{a->ifa_name, "", false, false});
      e = &out.back();
    }
    e->up = e->up || (a->ifa_flags & IFF_UP) != 0;
    e->loopback = e->loopback || (a->ifa_flags & IFF_LOOPBACK) != 0;
    if (e->ip.empty() && a->ifa_addr != nullptr && a->ifa_addr->sa_family == AF_INET) {
      char ip[INET_ADDRSTRLEN] = {};
      const auto* sin = reinterpret_cast<const sockaddr_in*>(a->ifa_addr);
      if (inet_ntop(AF_INET, &sin->sin_addr, ip, sizeof(ip)) != nullptr) e->ip = ip;
    }
  }
  freeifaddrs(list);
  return out;
}

}  // namespace mixnet::nccl
