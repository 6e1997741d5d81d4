// Internal to mixnet_cluster: pieces shared by the YAML parser (spec_yaml.cc)
// and the public checks (cluster_spec.cc). Called on the loading thread only;
// no state.
#pragma once

#include <cstddef>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"
#include "runtime/cluster/cluster_spec.h"

namespace mixnet::cluster::internal {

// The first problem found in a list of circuits: which circuit, which of its
// fields ("switch", "ports", "ports[0]", "ports[1]") and what is wrong.
struct CircuitIssue {
  size_t index = 0;
  std::string field;
  std::string message;
};
std::optional<CircuitIssue> FindCircuitIssue(const ClusterSpec& spec,
                                             const std::vector<CircuitSpec>& circuits);

// Parses YAML text into a checked spec (see ClusterSpec::Parse).
absl::StatusOr<ClusterSpec> ParseSpecYaml(std::string_view yaml, std::string_view source);

// True when `name` is usable as a host, switch or region name: 1..63 of
// [A-Za-z0-9_.-].
bool IsValidName(std::string_view name);
// True when `name` is usable as a Linux interface name: 1..15 characters, no
// whitespace, '/' or ':'.
bool IsValidIfName(std::string_view name);

}  // namespace mixnet::cluster::internal
