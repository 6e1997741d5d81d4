// For the NCCL plugin tests on the emulated cluster: a forked rank enters its
// host's network namespace before it loads the plugin, with a sysfs of that
// namespace (so the plugin reads NIC speeds there, as under `ip netns exec`;
// best effort). Header-only; runs in the forked rank.
#pragma once

#include <sched.h>
#include <sys/mount.h>
#include <unistd.h>

#include <cerrno>
#include <string>

#include "absl/status/status.h"
#include "ocs_driver/netns/netns.h"
#include "runtime/common/status.h"

namespace mixnet::nccl_test {

inline absl::Status EnterNamespace(const std::string& ns) {
  ASSIGN_OR_RETURN(int fd, netns::OpenNamespaceFd(ns));
  const int rc = setns(fd, CLONE_NEWNET);
  const int err = errno;
  close(fd);
  if (rc != 0) return ErrnoStatus(ns, "setns", err);
  if (unshare(CLONE_NEWNS) == 0 && mount("", "/", "none", MS_SLAVE | MS_REC, nullptr) == 0) {
    umount2("/sys", MNT_DETACH);
    mount("sysfs", "/sys", "sysfs", 0, nullptr);
  }
  return absl::OkStatus();
}

}  // namespace mixnet::nccl_test
