// EpochStore: the controller's persisted fencing epoch in --state-dir
// ("controller_epoch.json": {"highest_epoch": N, "controller_id": "..."}).
// Save writes a temp file, fsyncs it, renames it over the old one and fsyncs
// the directory, so a crash leaves the old or the new epoch, never a torn
// file. The controller saves an epoch at least as high as E+1 before it sends
// PREPARE(E+1) (a block of epochs ahead, ControllerOptions::epoch_block), so a
// restarted controller, which starts above the saved one, never reuses an
// epoch. The directory is locked
// (flock on "controller.lock") while a controller uses it.
//
// Threading: used by one thread at a time (start-up, then the planner thread).
#pragma once

#include <cstdint>
#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"

namespace mixnet::control {

class EpochStore {
 public:
  // Creates `dir` if missing and locks it: FailedPrecondition naming the dir
  // when another controller holds it.
  static absl::StatusOr<EpochStore> Open(const std::string& dir);
  EpochStore(EpochStore&& o) noexcept;
  EpochStore& operator=(EpochStore&&) = delete;
  ~EpochStore();

  // The persisted highest epoch, 0 when none was saved; InvalidArgument
  // naming the file when it is corrupt.
  absl::StatusOr<uint64_t> Load() const;
  // Persists `epoch` atomically and durably.
  absl::Status Save(uint64_t epoch, const std::string& controller_id) const;

  const std::string& dir() const { return dir_; }
  std::string path() const { return dir_ + "/controller_epoch.json"; }

 private:
  EpochStore(std::string dir, int lock_fd) : dir_(std::move(dir)), lock_fd_(lock_fd) {}
  std::string dir_;
  int lock_fd_ = -1;
};

}  // namespace mixnet::control
