// A blocking job run on its own detached thread and polled without blocking:
// how the plugin turns the transport's blocking Device::Connect into NCCL's
// non-blocking connect/accept. The thread owns a share of the state, so the
// poller may drop its handle at any time (closeListen, finalize); a result
// nobody collects is destroyed by the thread. Thread-safe.
#pragma once

#include <atomic>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <thread>
#include <utility>

#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"

namespace mixnet::nccl {

template <typename T>
class Background {
 public:
  using Job = std::function<absl::StatusOr<T>(const std::atomic<bool>& cancelled)>;

  // Starts `job` on a new detached thread. Fails only when no thread can be made.
  static absl::StatusOr<std::shared_ptr<Background>> Start(Job job) {
    auto self = std::shared_ptr<Background>(new Background());
    try {
      std::thread([self, job = std::move(job)] {
        absl::StatusOr<T> r = job(self->cancelled_);
        absl::MutexLock lock(&self->mu_);
        self->result_.emplace(std::move(r));
      }).detach();
    } catch (const std::system_error& e) {
      return absl::ResourceExhaustedError(std::string("cannot start a connection thread: ") +
                                          e.what());
    }
    return self;
  }

  // The result once the job has finished (handed out once), nullopt before.
  std::optional<absl::StatusOr<T>> Poll() {
    absl::MutexLock lock(&mu_);
    if (!result_.has_value() || taken_) return std::nullopt;
    taken_ = true;
    return std::move(*result_);
  }

  // Asks the job to give up early; it checks the flag between its steps.
  void Cancel() { cancelled_.store(true); }

 private:
  Background() = default;
  std::atomic<bool> cancelled_{false};
  absl::Mutex mu_;
  std::optional<absl::StatusOr<T>> result_ ABSL_GUARDED_BY(mu_);
  bool taken_ ABSL_GUARDED_BY(mu_) = false;
};

}  // namespace mixnet::nccl
