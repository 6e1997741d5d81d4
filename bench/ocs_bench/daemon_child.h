// DaemonChild: mixnet-ocsd started by mixnet_ocs_bench as a child process on
// an ephemeral loopback port, with its own temporary state dir, ready file and
// log; stopped (SIGTERM, then SIGKILL) and cleaned up on destruction. The
// child also gets SIGTERM should the bench die first (PR_SET_PDEATHSIG).
//
// Threading: one thread owns a DaemonChild.
#pragma once

#include <sys/types.h>

#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/time/time.h"

namespace mixnet::ocs::bench {

class DaemonChild {
 public:
  // Runs `binary` with `args` plus --listen 127.0.0.1:0, --state-dir and
  // --ready-file in a new temporary directory under `base_dir` ("" = /tmp),
  // and waits up to `timeout` for the ready file. On failure the error
  // carries the tail of the daemon's log.
  static absl::StatusOr<std::unique_ptr<DaemonChild>> Start(const std::string& binary,
                                                            const std::vector<std::string>& args,
                                                            const std::string& base_dir,
                                                            absl::Duration timeout);
  ~DaemonChild();
  DaemonChild(const DaemonChild&) = delete;
  DaemonChild& operator=(const DaemonChild&) = delete;

  const std::string& address() const { return address_; }

 private:
  DaemonChild(std::string dir, pid_t pid) : dir_(std::move(dir)), pid_(pid) {}
  std::string LogTail() const;
  void Stop();

  std::string dir_;
  pid_t pid_ = -1;
  std::string address_;
};

// mixnet-ocsd in this executable's directory, else the build tree's
// (MIXNET_OCSD_BUILD_PATH when compiled in); "" when neither exists.
std::string FindDaemonBinary();

}  // namespace mixnet::ocs::bench
