// What a plugin end tells its peer in the connection handshake
// (handshake.h), so ranks that cannot work together fail at connect with a
// message naming both sides instead of connecting silently: the plugin
// version, a fingerprint of the cluster spec, and the names route lookups
// need in full (host, NIC), which the 128-byte NCCL handle cannot hold.
// Pure functions; any thread.
#pragma once

#include <string>

#include "runtime/cluster/cluster_spec.h"

namespace mixnet::nccl {

struct Identity {
  std::string plugin_version;  // PluginVersion()
  std::string spec;            // SpecFingerprint(), or "none" without a spec
  std::string spec_source;     // the spec's path (messages only)
  std::string host;            // the host name route lookups use (any length)
  std::string nic;             // this end's NIC's cluster-spec name ("" without a spec)
};

// The version of this build of the plugin (the project's version, from CMake).
std::string PluginVersion();

// 16 hex digits: a 64-bit FNV-1a hash over a canonical form of every field
// of `spec` (independent of YAML layout, comments and key order).
std::string SpecFingerprint(const cluster::ClusterSpec& spec);

// "host h0, plugin 0.1.0, cluster spec 0123456789abcdef (/etc/mixnet/spec.yaml)".
std::string DescribeIdentity(const Identity& id);

// OK when two ends may talk; FailedPrecondition naming both sides' values
// otherwise. `self` is this end, `peer` the other, `peer_where` names it.
absl::Status CheckCompatible(const Identity& self, const Identity& peer,
                             const std::string& peer_where);

}  // namespace mixnet::nccl
