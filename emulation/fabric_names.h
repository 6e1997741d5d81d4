// Names of everything the emulated fabric creates, and the checks that a spec
// and a prefix can be turned into namespaces and links. Pure functions; any
// thread.
//
// For prefix P:
//   host namespace      P-<host>        NICs inside named as in the spec
//   EPS namespace       P-eps           bridge "br0" + one port per EPS NIC
//   OCS namespace       P-ocs-<switch>  one port "p<port>" per OCS NIC
// Links are created directly inside their namespaces, so their names never
// carry the prefix (interface names stay within 15 characters); the prefix
// only names namespaces. A prefix has no '-', so "P-" never starts another
// prefix's names and `down` removes exactly one instance.
#pragma once

#include <string>

#include "absl/status/status.h"
#include "absl/strings/string_view.h"
#include "runtime/cluster/cluster_spec.h"

namespace mixnet::emulation {

inline constexpr size_t kMaxPrefixLen = 32;
inline constexpr char kBridgeName[] = "br0";

// 1..32 characters of [a-z0-9_], starting with a letter.
absl::Status ValidatePrefix(absl::string_view prefix);

// "<spec name, lower-cased, other characters -> '_', at most 16>_<pid>", with
// "_<n>" appended from the second call in a process on (unique per instance).
std::string DefaultPrefix(absl::string_view spec_name);

// The part of DefaultPrefix before the pid: "<sanitized name>_".
std::string DefaultPrefixStem(absl::string_view spec_name);

// True when `prefix` is DefaultPrefixStem(spec_name) followed by [0-9_]+.
bool IsDefaultPrefixOf(absl::string_view prefix, absl::string_view spec_name);

std::string HostNamespaceName(absl::string_view prefix, absl::string_view host);
std::string EpsNamespaceName(absl::string_view prefix);
std::string OcsNamespaceName(absl::string_view prefix, absl::string_view ocs_switch);

// The prefix of a namespace name created by the fabric ("P-..." -> "P"), or ""
// when the name is not one of ours.
std::string PrefixOfNamespace(absl::string_view netns_name);

// The bridge port in the EPS namespace facing `host`'s EPS NIC `nic`:
// "<host>-<nic>" when that fits in 15 characters, else "h<hi>n<ni>".
std::string EpsPortName(const cluster::ClusterSpec& spec, int host_index, int nic_index);

// Linux interface name rules: 1..15 bytes, no '/', ':' or whitespace, not
// "." or "..".
bool IsValidIfName(absl::string_view name);

// Everything `up` needs beyond what ClusterSpec::Parse checks: host names
// usable in namespace names and not clashing with "eps"/"ocs-<switch>", NIC
// names valid interface names (not "lo", "all", "default"), unique per host, an address on
// every NIC, OCS NICs on a known switch, switch names usable in namespace
// names. InvalidArgument naming the host/NIC/switch.
absl::Status ValidateSpecForEmulation(const cluster::ClusterSpec& spec);

}  // namespace mixnet::emulation
