// Plugin identities (see identity.h). Any thread.
#include "plugins/nccl_net/identity.h"

#include <cstdint>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"

#ifndef MIXNET_NCCL_PLUGIN_VERSION
#define MIXNET_NCCL_PLUGIN_VERSION "unknown"
#endif

namespace mixnet::nccl {
namespace {

// Appends one field as "<len>:<text>;" so no two field lists read the same.
void Field(std::string* out, const std::string& text) {
  absl::StrAppend(out, text.size(), ":", text, ";");
}
void Field(std::string* out, double v) { Field(out, absl::StrFormat("%.17g", v)); }
void Field(std::string* out, int v) { Field(out, absl::StrCat(v)); }

}  // namespace

std::string PluginVersion() { return MIXNET_NCCL_PLUGIN_VERSION; }

std::string SpecFingerprint(const cluster::ClusterSpec& spec) {
  std::string c;
  Field(&c, spec.name);
  Field(&c, static_cast<int>(spec.hosts.size()));
  for (const cluster::HostSpec& h : spec.hosts) {
    Field(&c, h.name);
    Field(&c, h.gpus);
    Field(&c, h.region);
    Field(&c, static_cast<int>(h.nics.size()));
    for (const cluster::NicSpec& n : h.nics) {
      Field(&c, n.name);
      Field(&c, std::string(cluster::NicRoleName(n.role)));
      Field(&c, n.address);
      Field(&c, n.prefix_len);
      Field(&c, n.gbps);
      Field(&c, n.ocs_switch);
      Field(&c, n.ocs_port);
    }
  }
  Field(&c, static_cast<int>(spec.ocs_switches.size()));
  for (const cluster::OcsSwitchSpec& s : spec.ocs_switches) {
    Field(&c, s.name);
    Field(&c, s.ports);
    Field(&c, s.switch_ms);
  }
  Field(&c, static_cast<int>(spec.regions.size()));
  for (const cluster::RegionSpec& r : spec.regions) {
    Field(&c, r.name);
    Field(&c, static_cast<int>(r.hosts.size()));
    for (const std::string& h : r.hosts) Field(&c, h);
  }
  Field(&c, static_cast<int>(spec.circuits.size()));
  for (const cluster::CircuitSpec& k : spec.circuits) {
    Field(&c, k.ocs_switch);
    Field(&c, k.port_a);
    Field(&c, k.port_b);
  }
  uint64_t h = 14695981039346656037ull;  // FNV-1a 64 offset basis
  for (unsigned char ch : c) {
    h ^= ch;
    h *= 1099511628211ull;  // FNV-1a 64 prime
  }
  return absl::StrFormat("%016x", h);
}

std::string DescribeIdentity(const Identity& id) {
  return absl::StrCat(
      "host ", id.host.empty() ? std::string("?") : id.host, ", plugin ", id.plugin_version,
      ", cluster spec ", id.spec,
      id.spec_source.empty() ? std::string() : absl::StrCat(" (", id.spec_source, ")"));
}

absl::Status CheckCompatible(const Identity& self, const Identity& peer,
                             const std::string& peer_where) {
  const bool version = self.plugin_version != peer.plugin_version;
  const bool spec = self.spec != peer.spec;
  if (!version && !spec) return absl::OkStatus();
  std::string what = version && spec ? "plugin versions and cluster specs differ"
                     : version       ? "plugin versions differ"
                                     : "cluster specs differ";
  return absl::FailedPreconditionError(absl::StrCat(
      "mixnet NCCL plugin mismatch (", what, "): this end is ", DescribeIdentity(self), "; ",
      peer_where, " is ", DescribeIdentity(peer),
      ". Every rank must load the same plugin version with the same MIXNET_CLUSTER_SPEC "
      "(or none)"));
}

}  // namespace mixnet::nccl
