// StateSaver: saves mixnet-ocsd's desired state (StateStore::Save: write,
// fsync, rename, fsync the directory) on its own long-lived thread, so that
// an Apply's fsync overlaps its read of the switch instead of following it.
// The Apply still waits for the save before it sends anything to the switch
// (write-ahead, as before); only the read, which changes nothing, runs
// beside it. One save at a time: Start, then Wait, then the next Start.
//
// Threading: Start and Wait on the Apply's thread (the service holds the
// device, so one caller at a time); the save runs on "mx-ocsd-save", made
// once at construction and joined by the destructor.
#pragma once

#include <optional>
#include <thread>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "absl/synchronization/mutex.h"
#include "ocs_driver/service/state_store.h"

namespace mixnet::ocs {

class StateSaver {
 public:
  // `store` must outlive the saver.
  explicit StateSaver(const StateStore* store);
  ~StateSaver();
  StateSaver(const StateSaver&) = delete;
  StateSaver& operator=(const StateSaver&) = delete;

  // Begins saving `state`. A save still unwaited is waited for first.
  void Start(PersistedState state);
  // The result of the last Start's save once it is durable (or failed); OK
  // when nothing was started. Blocks as long as the save takes, as a
  // synchronous Save would.
  absl::Status Wait();

 private:
  void Run();

  const StateStore* const store_;
  absl::Mutex mu_;
  std::optional<PersistedState> job_ ABSL_GUARDED_BY(mu_);
  std::optional<absl::Status> result_ ABSL_GUARDED_BY(mu_);
  bool pending_ ABSL_GUARDED_BY(mu_) = false;  // started, not yet waited for
  bool stop_ ABSL_GUARDED_BY(mu_) = false;
  std::thread thread_;
};

}  // namespace mixnet::ocs
