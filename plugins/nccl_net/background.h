// A blocking job run on a HelperPool thread and polled without blocking: how
// the plugin turns the transport's blocking Device::Connect into NCCL's
// non-blocking connect/accept. The job owns a share of the state, so the
// poller may drop its handle at any time (closeListen, finalize, an
// abandoned connect); a result nobody collects is destroyed with the job.
// Thread-safe.
#pragma once

#include <atomic>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <utility>

#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "plugins/nccl_net/helper_pool.h"

namespace mixnet::nccl {

template <typename T>
class Background {
 public:
  using Job = std::function<absl::StatusOr<T>(const std::atomic<bool>& cancelled)>;

  // Queues `job` on `pool` (see helper_pool.h for which pool a job belongs
  // to). Fails only when the pool can run nothing.
  static absl::StatusOr<std::shared_ptr<Background>> Start(HelperPool& pool, Job job) {
    auto self = std::shared_ptr<Background>(new Background());
    absl::Status s = pool.Submit([self, job = std::move(job)] {
      absl::StatusOr<T> r = job(self->cancelled_);
      absl::MutexLock lock(&self->mu_);
      self->result_.emplace(std::move(r));
    });
    if (!s.ok()) return s;
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
