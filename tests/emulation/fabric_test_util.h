// For the netns tests that bring up an emulated fabric: takes it down and
// checks that nothing of it is left. Header-only; the test thread.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "emulation/emulated_fabric.h"
#include "gtest/gtest.h"
#include "ocs_driver/netns/netns.h"

namespace mixnet::testing {

// Downs `fabric` (when up) and expects no namespace of `prefix` to remain.
inline void DownFabric(std::unique_ptr<emulation::EmulatedFabric>& fabric,
                       const std::string& prefix) {
  if (fabric == nullptr) return;
  absl::Status down = fabric->Down();
  EXPECT_TRUE(down.ok()) << down;
  fabric.reset();
  EXPECT_TRUE(netns::ListNamespaces(prefix + "-")
                  .value_or(std::vector<std::string>{"(cannot list namespaces)"})
                  .empty())
      << "namespaces of " << prefix << " left behind";
}

}  // namespace mixnet::testing
