// YAML -> ClusterSpec: walks the yaml-cpp node tree, checks every field and
// reports the first problem as InvalidArgument "source:line: field.path: what".
// yaml-cpp exceptions never leave this file. Runs on the loading thread.
#include <cmath>
#include <cstdint>
#include <exception>
#include <initializer_list>
#include <limits>
#include <map>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/string_view.h"
#include "runtime/cluster/cluster_spec.h"
#include "runtime/cluster/spec_internal.h"
#include "runtime/common/absl_view.h"
#include "runtime/common/status.h"
#include "yaml-cpp/yaml.h"

namespace mixnet::cluster::internal {
namespace {

std::string Join(absl::string_view path, absl::string_view key) {
  return path.empty() ? std::string(key) : absl::StrCat(path, ".", key);
}

std::string Index(absl::string_view path, size_t i) { return absl::StrCat(path, "[", i, "]"); }

// What a node is, for "expected X, got Y" messages.
std::string Describe(const YAML::Node& node) {
  if (!node.IsDefined() || node.IsNull()) return "nothing";
  if (node.IsMap()) return "a mapping";
  if (node.IsSequence()) return "a sequence";
  return absl::StrCat("'", node.Scalar(), "'");
}

struct Field {
  YAML::Node key;
  YAML::Node value;
};
using Fields = std::map<std::string, Field, std::less<>>;

// Nodes of one `circuits` entry, kept to point errors at the right line.
struct CircuitNodes {
  YAML::Node entry;
  YAML::Node ocs_switch;
  YAML::Node ports;
  YAML::Node port[2];
};

class SpecParser {
 public:
  explicit SpecParser(absl::string_view source) : source_(source) {}

  absl::StatusOr<ClusterSpec> Run(absl::string_view yaml) {
    YAML::Node root;
    try {
      root = YAML::Load(std::string(yaml));
    } catch (const YAML::Exception& e) {
      return Error(e.mark, "", absl::StrCat("YAML syntax error: ", e.msg));
    }
    try {
      return Walk(root);
    } catch (const YAML::Exception& e) {
      return Error(e.mark, "", absl::StrCat("YAML error: ", e.msg));
    } catch (const std::exception& e) {
      return absl::InternalError(absl::StrCat(source_, ": unexpected error: ", e.what()));
    }
  }

 private:
  absl::Status Error(const YAML::Mark& mark, absl::string_view path, absl::string_view msg) const {
    std::string where = mark.is_null() ? source_ : absl::StrCat(source_, ":", mark.line + 1);
    if (path.empty()) return absl::InvalidArgumentError(absl::StrCat(where, ": ", msg));
    return absl::InvalidArgumentError(absl::StrCat(where, ": ", path, ": ", msg));
  }

  // Points at `node`, or at `fallback` when the node carries no position.
  absl::Status Error(const YAML::Node& node, const YAML::Node& fallback, absl::string_view path,
                     absl::string_view msg) const {
    // An empty value ("name:") is a null node positioned at the next token;
    // its key is the better place to point at.
    YAML::Mark mark = node.IsDefined() && !node.IsNull() ? node.Mark() : YAML::Mark::null_mark();
    if (mark.is_null() && fallback.IsDefined()) mark = fallback.Mark();
    return Error(mark, path, msg);
  }

  absl::Status Missing(const YAML::Node& parent, absl::string_view path, absl::string_view key) {
    return Error(parent.Mark(), Join(path, key), "missing required field");
  }

  // The keys of a mapping, rejecting duplicates and keys outside `allowed`.
  absl::StatusOr<Fields> MapFields(const YAML::Node& node, const YAML::Node& parent,
                                   absl::string_view path,
                                   std::initializer_list<absl::string_view> allowed) {
    if (!node.IsMap()) {
      return Error(node, parent, path, absl::StrCat("expected a mapping, got ", Describe(node)));
    }
    Fields fields;
    for (auto it = node.begin(); it != node.end(); ++it) {
      // Copies: `it->` yields a temporary whose members die with the statement.
      const YAML::Node key = it->first;
      const YAML::Node value = it->second;
      if (!key.IsScalar()) return Error(key, node, path, "mapping keys must be plain names");
      const std::string& name = key.Scalar();
      bool known = false;
      for (absl::string_view a : allowed) known = known || a == name;
      if (!known) {
        return Error(key, node, Join(path, name),
                     absl::StrCat("unknown field '", name,
                                  "'; expected one of: ", absl::StrJoin(allowed, ", ")));
      }
      if (auto prev = fields.find(name); prev != fields.end()) {
        return Error(
            key, node, Join(path, name),
            absl::StrCat("duplicate field (first at line ", prev->second.key.Mark().line + 1, ")"));
      }
      fields.emplace(name, Field{key, value});
    }
    return fields;
  }

  absl::StatusOr<std::string> String(const Field& f, absl::string_view path) {
    if (!f.value.IsScalar() || f.value.Scalar().empty()) {
      return Error(f.value, f.key, path,
                   absl::StrCat("expected a string, got ", Describe(f.value)));
    }
    return f.value.Scalar();
  }

  absl::StatusOr<std::string> Name(const Field& f, absl::string_view path) {
    ASSIGN_OR_RETURN(std::string name, String(f, path));
    if (!IsValidName(name)) {
      return Error(
          f.value, f.key, path,
          absl::StrCat("bad name '", name, "': use 1..63 of letters, digits, '-', '_', '.'"));
    }
    return name;
  }
  // The required "name" of list entry `node` at `path`, unique among the
  // entries seen so far (`line_of`: name -> 1-based line of first use).
  absl::StatusOr<std::string> UniqueName(const Fields& f, const YAML::Node& node,
                                         const std::string& path, absl::string_view kind,
                                         std::map<std::string, int>& line_of) {
    auto name = f.find("name");
    if (name == f.end()) return Missing(node, path, "name");
    ASSIGN_OR_RETURN(std::string value, Name(name->second, Join(path, "name")));
    if (auto [it, fresh] = line_of.emplace(value, name->second.value.Mark().line + 1); !fresh) {
      return Error(
          name->second.value, node, Join(path, "name"),
          absl::StrCat("duplicate ", kind, " name '", value, "' (first at line ", it->second, ")"));
    }
    return value;
  }

  absl::StatusOr<int64_t> Int(const YAML::Node& node, const YAML::Node& fallback,
                              absl::string_view path) {
    int64_t v = 0;
    if (!node.IsScalar() || !absl::SimpleAtoi(node.Scalar(), &v)) {
      return Error(node, fallback, path, absl::StrCat("expected an integer, got ", Describe(node)));
    }
    return v;
  }

  absl::StatusOr<double> Double(const Field& f, absl::string_view path) {
    double v = 0;
    if (!f.value.IsScalar() || !absl::SimpleAtod(f.value.Scalar(), &v) || !std::isfinite(v)) {
      return Error(f.value, f.key, path,
                   absl::StrCat("expected a number, got ", Describe(f.value)));
    }
    return v;
  }

  absl::Status Sequence(const Field& f, absl::string_view path, absl::string_view what) {
    if (!f.value.IsSequence()) {
      return Error(f.value, f.key, path,
                   absl::StrCat("expected a sequence of ", what, ", got ", Describe(f.value)));
    }
    return absl::OkStatus();
  }

  absl::StatusOr<ClusterSpec> Walk(const YAML::Node& root) {
    if (!root.IsMap()) {
      YAML::Mark mark = root.Mark();
      if (mark.is_null()) mark = YAML::Mark();  // line 1
      return Error(mark, "",
                   absl::StrCat("expected a mapping at the top level, got ", Describe(root)));
    }
    ASSIGN_OR_RETURN(Fields f, MapFields(root, root, "",
                                         {"name", "ocs_switches", "hosts", "regions", "circuits"}));
    ClusterSpec spec;
    if (auto it = f.find("name"); it != f.end()) {
      ASSIGN_OR_RETURN(spec.name, Name(it->second, "name"));
    }
    if (auto it = f.find("ocs_switches"); it != f.end()) {
      RETURN_IF_ERROR(ParseSwitches(it->second, spec));
    }
    auto hosts = f.find("hosts");
    if (hosts == f.end()) return Missing(root, "", "hosts");
    RETURN_IF_ERROR(ParseHosts(hosts->second, spec));
    if (auto it = f.find("regions"); it != f.end()) {
      RETURN_IF_ERROR(ParseRegions(it->second, spec));
    }
    if (auto it = f.find("circuits"); it != f.end()) {
      RETURN_IF_ERROR(ParseCircuits(it->second, spec));
    }
    return spec;
  }

  absl::Status ParseSwitches(const Field& list, ClusterSpec& spec) {
    RETURN_IF_ERROR(Sequence(list, "ocs_switches", "switches"));
    std::map<std::string, int> line_of;
    for (size_t i = 0; i < list.value.size(); ++i) {
      const YAML::Node node = list.value[i];
      const std::string path = Index("ocs_switches", i);
      ASSIGN_OR_RETURN(Fields f, MapFields(node, list.value, path, {"name", "ports", "switch_ms"}));
      OcsSwitchSpec sw;
      ASSIGN_OR_RETURN(sw.name, UniqueName(f, node, path, "switch", line_of));
      auto ports = f.find("ports");
      if (ports == f.end()) return Missing(node, path, "ports");
      ASSIGN_OR_RETURN(int64_t n, Int(ports->second.value, ports->second.key, Join(path, "ports")));
      if (n < 1 || n > 1000000) {
        return Error(ports->second.value, node, Join(path, "ports"),
                     absl::StrCat("must be in 1..1000000, got ", n));
      }
      sw.ports = static_cast<int>(n);
      if (auto ms = f.find("switch_ms"); ms != f.end()) {
        ASSIGN_OR_RETURN(sw.switch_ms, Double(ms->second, Join(path, "switch_ms")));
        if (sw.switch_ms < 0) {
          return Error(ms->second.value, node, Join(path, "switch_ms"),
                       absl::StrCat("must be >= 0, got ", sw.switch_ms));
        }
      }
      spec.ocs_switches.push_back(std::move(sw));
    }
    return absl::OkStatus();
  }

  absl::Status ParseHosts(const Field& list, ClusterSpec& spec) {
    RETURN_IF_ERROR(Sequence(list, "hosts", "hosts"));
    if (list.value.size() == 0)
      return Error(list.value, list.key, "hosts", "expected at least one host");
    std::map<std::string, int> line_of;
    for (size_t i = 0; i < list.value.size(); ++i) {
      const YAML::Node node = list.value[i];
      const std::string path = Index("hosts", i);
      ASSIGN_OR_RETURN(Fields f, MapFields(node, list.value, path, {"name", "gpus", "nics"}));
      HostSpec host;
      ASSIGN_OR_RETURN(host.name, UniqueName(f, node, path, "host", line_of));
      if (auto gpus = f.find("gpus"); gpus != f.end()) {
        ASSIGN_OR_RETURN(int64_t n, Int(gpus->second.value, gpus->second.key, Join(path, "gpus")));
        if (n < 1 || n > 4096) {
          return Error(gpus->second.value, node, Join(path, "gpus"),
                       absl::StrCat("must be in 1..4096, got ", n));
        }
        host.gpus = static_cast<int>(n);
      }
      auto nics = f.find("nics");
      if (nics == f.end()) return Missing(node, path, "nics");
      const std::string nics_path = Join(path, "nics");
      RETURN_IF_ERROR(Sequence(nics->second, nics_path, "NICs"));
      if (nics->second.value.size() == 0) {
        return Error(nics->second.value, nics->second.key, nics_path, "expected at least one NIC");
      }
      for (size_t j = 0; j < nics->second.value.size(); ++j) {
        NicSpec nic;
        RETURN_IF_ERROR(ParseNic(nics->second.value[j], nics->second.value, Index(nics_path, j),
                                 spec, host, nic));
        host.nics.push_back(std::move(nic));
      }
      spec.hosts.push_back(std::move(host));
    }
    return absl::OkStatus();
  }

  absl::Status ParseNic(const YAML::Node& node, const YAML::Node& parent, const std::string& path,
                        const ClusterSpec& spec, const HostSpec& host, NicSpec& nic) {
    ASSIGN_OR_RETURN(Fields f, MapFields(node, parent, path,
                                         {"name", "role", "address", "gbps", "switch", "port"}));
    // name
    auto name = f.find("name");
    if (name == f.end()) return Missing(node, path, "name");
    ASSIGN_OR_RETURN(nic.name, String(name->second, Join(path, "name")));
    if (!IsValidIfName(nic.name)) {
      return Error(name->second.value, node, Join(path, "name"),
                   absl::StrCat("bad interface name '", nic.name,
                                "': 1..15 characters, no spaces, '/' or ':'"));
    }
    if (host.FindNic(nic.name) != nullptr) {
      return Error(name->second.value, node, Join(path, "name"),
                   absl::StrCat("duplicate NIC name '", nic.name, "' on host ", host.name));
    }
    // role
    auto role = f.find("role");
    if (role == f.end()) return Missing(node, path, "role");
    const YAML::Node& rv = role->second.value;
    if (rv.IsScalar() && rv.Scalar() == "eps") {
      nic.role = NicRole::kEps;
    } else if (rv.IsScalar() && rv.Scalar() == "ocs") {
      nic.role = NicRole::kOcs;
    } else {
      return Error(rv, role->second.key, Join(path, "role"),
                   absl::StrCat("expected eps or ocs, got ", Describe(rv)));
    }
    // address
    auto address = f.find("address");
    if (address == f.end()) return Missing(node, path, "address");
    ASSIGN_OR_RETURN(std::string text, String(address->second, Join(path, "address")));
    absl::StatusOr<Ipv4Address> ip = ParseIpv4(text);
    if (!ip.ok())
      return Error(address->second.value, node, Join(path, "address"), ip.status().message());
    nic.address = ip->address;
    nic.prefix_len = ip->prefix_len;
    std::string owner = absl::StrCat(host.name, "/", nic.name);
    if (auto [it, fresh] = address_owner_.emplace(nic.address, owner); !fresh) {
      return Error(address->second.value, node, Join(path, "address"),
                   absl::StrCat("address ", nic.address, " is already used by ", it->second));
    }
    // gbps
    auto gbps = f.find("gbps");
    if (gbps == f.end()) return Missing(node, path, "gbps");
    ASSIGN_OR_RETURN(nic.gbps, Double(gbps->second, Join(path, "gbps")));
    if (nic.gbps <= 0) {
      return Error(gbps->second.value, node, Join(path, "gbps"),
                   absl::StrCat("must be > 0, got ", gbps->second.value.Scalar()));
    }
    // switch / port
    auto sw = f.find("switch");
    auto port = f.find("port");
    if (nic.role == NicRole::kEps) {
      if (sw != f.end() || port != f.end()) {
        const Field& bad = sw != f.end() ? sw->second : port->second;
        return Error(bad.key, node, Join(path, bad.key.Scalar()),
                     "only OCS NICs are cabled to a switch port (role is eps)");
      }
      return absl::OkStatus();
    }
    if (sw == f.end()) return Missing(node, path, "switch");
    if (port == f.end()) return Missing(node, path, "port");
    ASSIGN_OR_RETURN(nic.ocs_switch, String(sw->second, Join(path, "switch")));
    const OcsSwitchSpec* s = spec.FindSwitch(nic.ocs_switch);
    if (s == nullptr) {
      return Error(sw->second.value, node, Join(path, "switch"),
                   absl::StrCat("unknown switch '", nic.ocs_switch, "'"));
    }
    ASSIGN_OR_RETURN(int64_t p, Int(port->second.value, port->second.key, Join(path, "port")));
    if (p < 1 || p > s->ports) {
      return Error(port->second.value, node, Join(path, "port"),
                   absl::StrCat("port ", p, " out of range 1..", s->ports, " of switch ", s->name));
    }
    nic.ocs_port = static_cast<int>(p);
    if (auto [it, fresh] = port_owner_.emplace(std::pair(s->name, nic.ocs_port), owner); !fresh) {
      return Error(
          port->second.value, node, Join(path, "port"),
          absl::StrCat("port ", p, " of switch ", s->name, " is already cabled to ", it->second));
    }
    return absl::OkStatus();
  }

  absl::Status ParseRegions(const Field& list, ClusterSpec& spec) {
    RETURN_IF_ERROR(Sequence(list, "regions", "regions"));
    std::map<std::string, int> line_of;
    for (size_t i = 0; i < list.value.size(); ++i) {
      const YAML::Node node = list.value[i];
      const std::string path = Index("regions", i);
      ASSIGN_OR_RETURN(Fields f, MapFields(node, list.value, path, {"name", "hosts"}));
      RegionSpec region;
      ASSIGN_OR_RETURN(region.name, UniqueName(f, node, path, "region", line_of));
      auto hosts = f.find("hosts");
      if (hosts == f.end()) return Missing(node, path, "hosts");
      const std::string hosts_path = Join(path, "hosts");
      RETURN_IF_ERROR(Sequence(hosts->second, hosts_path, "host names"));
      for (size_t j = 0; j < hosts->second.value.size(); ++j) {
        const YAML::Node h = hosts->second.value[j];
        const std::string hpath = Index(hosts_path, j);
        ASSIGN_OR_RETURN(std::string host_name, String(Field{hosts->second.key, h}, hpath));
        HostSpec* host = nullptr;
        for (HostSpec& candidate : spec.hosts) {
          if (candidate.name == host_name) host = &candidate;
        }
        if (host == nullptr) {
          return Error(h, node, hpath, absl::StrCat("unknown host '", host_name, "'"));
        }
        if (!host->region.empty()) {
          return Error(h, node, hpath,
                       absl::StrCat("host ", host_name, " is already in region ", host->region));
        }
        host->region = region.name;
        region.hosts.push_back(host_name);
      }
      spec.regions.push_back(std::move(region));
    }
    return absl::OkStatus();
  }

  absl::Status ParseCircuits(const Field& list, ClusterSpec& spec) {
    RETURN_IF_ERROR(Sequence(list, "circuits", "circuits"));
    std::vector<CircuitNodes> nodes;
    for (size_t i = 0; i < list.value.size(); ++i) {
      CircuitNodes n;
      n.entry = list.value[i];
      const std::string path = Index("circuits", i);
      ASSIGN_OR_RETURN(Fields f, MapFields(n.entry, list.value, path, {"switch", "ports"}));
      CircuitSpec c;
      auto sw = f.find("switch");
      if (sw == f.end()) return Missing(n.entry, path, "switch");
      ASSIGN_OR_RETURN(c.ocs_switch, String(sw->second, Join(path, "switch")));
      n.ocs_switch = sw->second.value;
      auto ports = f.find("ports");
      if (ports == f.end()) return Missing(n.entry, path, "ports");
      const std::string ports_path = Join(path, "ports");
      n.ports = ports->second.value;
      if (!n.ports.IsSequence() || n.ports.size() != 2) {
        return Error(n.ports, n.entry, ports_path,
                     absl::StrCat("expected two ports [a, b], got ",
                                  n.ports.IsSequence() ? absl::StrCat(n.ports.size(), " entries")
                                                       : Describe(n.ports)));
      }
      int* ends[2] = {&c.port_a, &c.port_b};
      for (int k = 0; k < 2; ++k) {
        n.port[k] = n.ports[k];
        ASSIGN_OR_RETURN(int64_t p, Int(n.port[k], n.entry, Index(ports_path, k)));
        if (p < std::numeric_limits<int>::min() || p > std::numeric_limits<int>::max()) {
          return Error(n.port[k], n.entry, Index(ports_path, k),
                       absl::StrCat("port ", p, " out of range"));
        }
        *ends[k] = static_cast<int>(p);
      }
      spec.circuits.push_back(std::move(c));
      nodes.push_back(std::move(n));
    }
    std::optional<CircuitIssue> issue = FindCircuitIssue(spec, spec.circuits);
    if (!issue) return absl::OkStatus();
    const CircuitNodes& n = nodes[issue->index];
    const YAML::Node& at = issue->field == "switch"     ? n.ocs_switch
                           : issue->field == "ports[0]" ? n.port[0]
                           : issue->field == "ports[1]" ? n.port[1]
                                                        : n.ports;
    return Error(at, n.entry, absl::StrCat("circuits[", issue->index, "].", issue->field),
                 issue->message);
  }

  std::string source_;
  std::map<std::string, std::string> address_owner_;               // address -> "host/nic"
  std::map<std::pair<std::string, int>, std::string> port_owner_;  // (switch, port) -> "host/nic"
};

}  // namespace

absl::StatusOr<ClusterSpec> ParseSpecYaml(std::string_view yaml, std::string_view source) {
  return SpecParser(Av(source)).Run(Av(yaml));
}

}  // namespace mixnet::cluster::internal
