// ClusterSpec: lookups, file loading, the one-host default spec, IPv4 parsing
// and the circuit checks shared by the YAML parser and the router. Runs on
// whichever thread loads or inspects a spec; the spec is immutable afterwards.
#include "runtime/cluster/cluster_spec.h"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <map>
#include <utility>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/strings/string_view.h"
#include "runtime/cluster/spec_internal.h"
#include "runtime/common/absl_view.h"
#include "runtime/common/status.h"

namespace mixnet::cluster {
std::string_view NicRoleName(NicRole role) {
  switch (role) {
    case NicRole::kEps:
      return "eps";
    case NicRole::kOcs:
      return "ocs";
  }
  return "unknown";
}

const NicSpec* HostSpec::FindNic(std::string_view nic) const {
  for (const NicSpec& n : nics) {
    if (n.name == nic) return &n;
  }
  return nullptr;
}

const HostSpec* ClusterSpec::FindHost(std::string_view host) const {
  for (const HostSpec& h : hosts) {
    if (h.name == host) return &h;
  }
  return nullptr;
}

const OcsSwitchSpec* ClusterSpec::FindSwitch(std::string_view name) const {
  for (const OcsSwitchSpec& s : ocs_switches) {
    if (s.name == name) return &s;
  }
  return nullptr;
}

std::optional<ClusterSpec::PortOwner> ClusterSpec::FindPort(std::string_view ocs_switch,
                                                            int port) const {
  for (const HostSpec& h : hosts) {
    for (const NicSpec& n : h.nics) {
      if (n.role == NicRole::kOcs && n.ocs_switch == ocs_switch && n.ocs_port == port) {
        return PortOwner{&h, &n};
      }
    }
  }
  return std::nullopt;
}

ClusterSpec ClusterSpec::SingleHost(std::string_view host, std::string_view ifname,
                                    std::string_view address, double gbps) {
  NicSpec nic;
  nic.name = std::string(ifname);
  nic.role = NicRole::kEps;
  nic.gbps = gbps;
  if (absl::StatusOr<Ipv4Address> ip = ParseIpv4(address); ip.ok()) {
    nic.address = ip->address;
    nic.prefix_len = ip->prefix_len;
  } else {
    nic.address = std::string(address);
  }
  HostSpec h;
  h.name = std::string(host);
  h.gpus = 1;
  h.nics.push_back(std::move(nic));
  ClusterSpec spec;
  spec.name = std::string(host);
  spec.hosts.push_back(std::move(h));
  return spec;
}

absl::StatusOr<ClusterSpec> ClusterSpec::Parse(std::string_view yaml, std::string_view source) {
  return internal::ParseSpecYaml(yaml, source);
}

absl::StatusOr<ClusterSpec> ClusterSpec::LoadFile(const std::string& path) {
  const std::string what = absl::StrCat("cannot read cluster spec '", path, "'");
  int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return ErrnoStatus(what, "open", errno);
  std::string text;
  char buf[16384];
  while (true) {
    ssize_t n = ::read(fd, buf, sizeof(buf));
    if (n > 0) {
      text.append(buf, static_cast<size_t>(n));
      continue;
    }
    if (n == 0) break;
    if (errno == EINTR) continue;
    int err = errno;
    ::close(fd);
    absl::Status s = ErrnoStatus(what, "read", err);
    // A directory is bad input, not an internal failure.
    if (err == EISDIR) return absl::InvalidArgumentError(s.message());
    return s;
  }
  ::close(fd);
  return Parse(text, path);
}

absl::StatusOr<Ipv4Address> ParseIpv4(std::string_view text) {
  auto bad = [&](absl::string_view why) {
    return absl::InvalidArgumentError(
        absl::StrCat("expected an IPv4 address a.b.c.d or a.b.c.d/len, got '", Av(text), "'",
                     why.empty() ? "" : absl::StrCat(" (", why, ")")));
  };
  Ipv4Address out;
  std::string_view addr = text;
  if (size_t slash = text.find('/'); slash != std::string_view::npos) {
    addr = text.substr(0, slash);
    std::string_view len = text.substr(slash + 1);
    if (len.empty() || len.size() > 2 || len.find_first_not_of("0123456789") != len.npos) {
      return bad("bad prefix length");
    }
    int v = 0;
    if (!absl::SimpleAtoi(Av(len), &v) || v < 0 || v > 32) return bad("prefix length not in 0..32");
    out.prefix_len = v;
  }
  std::vector<absl::string_view> octets = absl::StrSplit(Av(addr), '.');
  if (octets.size() != 4) return bad("need four octets");
  for (absl::string_view o : octets) {
    if (o.empty() || o.size() > 3 || o.find_first_not_of("0123456789") != o.npos) {
      return bad("octets are decimal numbers");
    }
    if (o.size() > 1 && o[0] == '0') return bad("leading zero in an octet");
    int v = 0;
    if (!absl::SimpleAtoi(o, &v) || v > 255) return bad("octet above 255");
  }
  out.address = std::string(addr);
  return out;
}

absl::Status ValidateCircuits(const ClusterSpec& spec, const std::vector<CircuitSpec>& circuits) {
  std::optional<internal::CircuitIssue> issue = internal::FindCircuitIssue(spec, circuits);
  if (!issue) return absl::OkStatus();
  return absl::InvalidArgumentError(
      absl::StrCat("circuits[", issue->index, "].", issue->field, ": ", issue->message));
}

namespace internal {

bool IsValidName(std::string_view name) {
  if (name.empty() || name.size() > 63) return false;
  for (char c : name) {
    bool ok = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
              c == '-' || c == '_' || c == '.';
    if (!ok) return false;
  }
  return true;
}

bool IsValidIfName(std::string_view name) {
  if (name.empty() || name.size() > 15 || name == "." || name == "..") return false;
  for (char c : name) {
    if (c == '/' || c == ':' || static_cast<unsigned char>(c) <= ' ' || c == 0x7f) return false;
  }
  return true;
}

std::optional<CircuitIssue> FindCircuitIssue(const ClusterSpec& spec,
                                             const std::vector<CircuitSpec>& circuits) {
  using PortKey = std::pair<std::string, int>;
  std::map<PortKey, ClusterSpec::PortOwner> cabled;
  for (const HostSpec& h : spec.hosts) {
    for (const NicSpec& n : h.nics) {
      if (n.role == NicRole::kOcs) {
        cabled.emplace(PortKey{n.ocs_switch, n.ocs_port}, ClusterSpec::PortOwner{&h, &n});
      }
    }
  }
  std::map<PortKey, size_t> used;  // port -> index of the circuit using it
  for (size_t i = 0; i < circuits.size(); ++i) {
    const CircuitSpec& c = circuits[i];
    auto issue = [&](std::string field, std::string message) {
      return CircuitIssue{i, std::move(field), std::move(message)};
    };
    const OcsSwitchSpec* sw = spec.FindSwitch(c.ocs_switch);
    if (sw == nullptr) return issue("switch", absl::StrCat("unknown switch '", c.ocs_switch, "'"));
    const int ports[2] = {c.port_a, c.port_b};
    for (int k = 0; k < 2; ++k) {
      if (ports[k] < 1 || ports[k] > sw->ports) {
        return issue(absl::StrCat("ports[", k, "]"),
                     absl::StrCat("port ", ports[k], " out of range 1..", sw->ports, " of switch ",
                                  sw->name));
      }
    }
    if (c.port_a == c.port_b) {
      return issue("ports", absl::StrCat("self-loop: both ends are port ", c.port_a, " of switch ",
                                         sw->name));
    }
    const ClusterSpec::PortOwner* owner[2] = {nullptr, nullptr};
    for (int k = 0; k < 2; ++k) {
      auto it = cabled.find(PortKey{sw->name, ports[k]});
      if (it == cabled.end()) {
        return issue(
            absl::StrCat("ports[", k, "]"),
            absl::StrCat("port ", ports[k], " of switch ", sw->name, " is not cabled to any NIC"));
      }
      owner[k] = &it->second;
    }
    for (int k = 0; k < 2; ++k) {
      auto it = used.find(PortKey{sw->name, ports[k]});
      if (it != used.end()) {
        return issue(absl::StrCat("ports[", k, "]"),
                     absl::StrCat("port ", ports[k], " of switch ", sw->name,
                                  " is already used by circuits[", it->second, "]"));
      }
    }
    const HostSpec& ha = *owner[0]->host;
    const HostSpec& hb = *owner[1]->host;
    if (&ha == &hb || ha.name == hb.name) {
      return issue("ports", absl::StrCat("circuit joins two NICs of host ", ha.name, " (",
                                         owner[0]->nic->name, " and ", owner[1]->nic->name, ")"));
    }
    if (!ha.region.empty() && !hb.region.empty() && ha.region != hb.region) {
      return issue("ports", absl::StrCat("circuit crosses regions: host ", ha.name, " is in ",
                                         ha.region, ", host ", hb.name, " in ", hb.region));
    }
    used.emplace(PortKey{sw->name, c.port_a}, i);
    used.emplace(PortKey{sw->name, c.port_b}, i);
  }
  return std::nullopt;
}

}  // namespace internal
}  // namespace mixnet::cluster
