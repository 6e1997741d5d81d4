// The persisted state of mixnet-ocsd in --state-dir: the last accepted desired
// set of circuits, its epoch (the highest epoch seen, used for fencing) and
// config version. Saved atomically (write a temp file, fsync, rename, fsync
// the directory) before the daemon touches the switch, so a crash at any
// point leaves either the old or the new state, never a torn one. The
// directory is locked (flock) while a daemon uses it: two daemons cannot
// share one state dir.
//
// Threading: a StateStore is used by the service's writer (one Apply at a
// time); it has no locking of its own.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "ocs_driver/backend.h"

namespace mixnet::ocs {

struct PersistedState {
  uint64_t epoch = 0;            // highest epoch accepted (0: none yet)
  uint64_t config_version = 0;   // version of `desired` (0: none yet)
  std::vector<Circuit> desired;  // normalised (a < b), sorted
  std::string controller_id;     // who sent it (for logs)
  friend bool operator==(const PersistedState&, const PersistedState&) = default;
};

class StateStore {
 public:
  // Creates `dir` (and parents) if missing and locks it (FailedPrecondition
  // when another process holds the lock).
  static absl::StatusOr<StateStore> Open(const std::string& dir);
  StateStore(StateStore&& o) noexcept;
  StateStore& operator=(StateStore&&) = delete;
  ~StateStore();

  // The saved state, or nullopt when none was ever saved. InvalidArgument
  // (naming the file) when the file is corrupt.
  absl::StatusOr<std::optional<PersistedState>> Load() const;
  // Replaces the saved state atomically and durably.
  absl::Status Save(const PersistedState& state) const;

  const std::string& dir() const { return dir_; }
  std::string path() const { return dir_ + "/state.json"; }

 private:
  StateStore(std::string dir, int lock_fd) : dir_(std::move(dir)), lock_fd_(lock_fd) {}
  std::string dir_;
  int lock_fd_ = -1;
};

}  // namespace mixnet::ocs
