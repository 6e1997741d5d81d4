// What `mixnet-fabric status` shows: for one prefix, every namespace with its
// links (state, addresses, counters, tbf rate) and, for OCS namespaces, the
// circuits read back from the kernel. Read fresh from the kernel each call,
// so it needs no spec and no live EmulatedFabric. Any thread.
#pragma once

#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "emulation/links.h"
#include "nlohmann/json.hpp"
#include "ocs_driver/netns/netns_ocs.h"

namespace mixnet::emulation {

struct NamespaceStatus {
  std::string name;
  std::string role;  // "host", "eps" or "ocs"
  std::vector<LinkInfo> links;
  std::vector<ocs::PortPair> circuits;       // OCS namespaces only
  std::vector<ocs::Redirect> half_circuits;  // redirects without their reverse
};

struct FabricStatus {
  std::string prefix;
  std::vector<NamespaceStatus> namespaces;
};

// NotFound-free: an unknown prefix yields an empty namespace list.
absl::StatusOr<FabricStatus> ReadFabricStatus(absl::string_view prefix);

std::string FormatFabricStatus(const FabricStatus& status);
nlohmann::json FabricStatusJson(const FabricStatus& status);

}  // namespace mixnet::emulation
