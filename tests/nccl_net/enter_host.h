// For the NCCL plugin tests on the emulated cluster: a forked rank enters its
// host's network namespace before it loads the plugin, with a sysfs of that
// namespace (so the plugin reads NIC speeds there, as under `ip netns exec`;
// best effort). Header-only; runs in the forked rank.
#pragma once

#include <sched.h>
#include <sys/mount.h>
#include <string>

#include "absl/status/status.h"
#include "runtime/common/status.h"
#include "tests/emulation/netns_test_util.h"

namespace mixnet::nccl_test {

inline absl::Status EnterHostNamespace(const std::string& ns) {
  RETURN_IF_ERROR(testing::EnterNamespace(ns));
  if (unshare(CLONE_NEWNS) == 0 && mount("", "/", "none", MS_SLAVE | MS_REC, nullptr) == 0) {
    umount2("/sys", MNT_DETACH);
    mount("sysfs", "/sys", "sysfs", 0, nullptr);
  }
  return absl::OkStatus();
}

}  // namespace mixnet::nccl_test
