// CompletionGroup: lets one thread wait for many transport Requests with a
// single wake-up. Requests registered with Request::NotifyOnDone call Notify()
// when they complete (on a progress or poller thread, or on the caller's
// thread when they were already done); the waiter sleeps until `target`
// requests have completed or one of them failed hard.
//
// Why: waiting on requests one by one wakes the waiting thread once per
// request; with ranks sharing cores, each of those wake-ups is a context
// switch stolen from the threads moving bytes.
#pragma once

#include <cstddef>

#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"

namespace mixnet::transport {

class CompletionGroup {
 public:
  // `hard_error`: the request failed with something other than
  // InvalidArgument (a broken path: the waiter should stop waiting).
  void Notify(bool hard_error) {
    absl::MutexLock lock(&mu_);
    ++done_;
    hard_errors_ += hard_error ? 1 : 0;
  }
  // True once `target` requests completed or any failed hard; false when
  // `timeout` passed first.
  bool Wait(size_t target, absl::Duration timeout) {
    auto ready = [this, target]() ABSL_SHARED_LOCKS_REQUIRED(mu_) {
      return done_ >= target || hard_errors_ > 0;
    };
    absl::MutexLock lock(&mu_);
    return mu_.AwaitWithTimeout(absl::Condition(&ready), timeout);
  }
  size_t done() const {
    absl::MutexLock lock(&mu_);
    return done_;
  }

 private:
  mutable absl::Mutex mu_;
  size_t done_ ABSL_GUARDED_BY(mu_) = 0;
  size_t hard_errors_ ABSL_GUARDED_BY(mu_) = 0;
};

}  // namespace mixnet::transport
