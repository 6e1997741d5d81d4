// Completion state shared by a transport Request handle (held by the caller)
// and the connection that completes it (on a transport's progress or poller
// thread). Used by every transport. Thread-safe; the first completion wins.
#pragma once

#include <atomic>
#include <memory>

#include "absl/status/status.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "runtime/transport/completion_group.h"
#include "runtime/transport/transport.h"

namespace mixnet::transport {

class RequestState {
 public:
  // First completion wins; later calls are ignored.
  void Complete(absl::Status status, size_t bytes) {
    std::shared_ptr<CompletionGroup> group;
    bool hard = false;
    {
      absl::MutexLock lock(&mu_);
      if (done_.load(std::memory_order_relaxed)) return;
      hard = !status.ok() && status.code() != absl::StatusCode::kInvalidArgument;
      status_ = std::move(status);
      bytes_ = bytes;
      done_.store(true, std::memory_order_release);
      group = std::move(group_);
    }
    if (group != nullptr) group->Notify(hard);
  }
  // See Request::NotifyOnDone.
  void NotifyOnDone(std::shared_ptr<CompletionGroup> group) {
    bool hard;
    {
      absl::MutexLock lock(&mu_);
      if (!done_.load(std::memory_order_relaxed)) {
        group_ = std::move(group);
        return;
      }
      hard = !status_.ok() && status_.code() != absl::StatusCode::kInvalidArgument;
    }
    group->Notify(hard);
  }
  bool done() const { return done_.load(std::memory_order_acquire); }
  absl::Status Wait(absl::Duration timeout) {
    if (!done()) {
      mu_.Lock();
      bool ok = mu_.AwaitWithTimeout(absl::Condition(this, &RequestState::DoneLocked), timeout);
      mu_.Unlock();
      if (!ok) return absl::DeadlineExceededError("request still pending");
    }
    absl::MutexLock lock(&mu_);
    return status_;
  }
  absl::Status status() const {
    absl::MutexLock lock(&mu_);
    return status_;
  }
  size_t bytes() const {
    absl::MutexLock lock(&mu_);
    return bytes_;
  }

 private:
  bool DoneLocked() const { return done_.load(std::memory_order_relaxed); }
  mutable absl::Mutex mu_;
  std::atomic<bool> done_{false};
  absl::Status status_;
  size_t bytes_ = 0;
  std::shared_ptr<CompletionGroup> group_;
};

// The Request handle given to callers.
class StateRequest : public Request {
 public:
  explicit StateRequest(std::shared_ptr<RequestState> state) : state_(std::move(state)) {}
  bool Done() const override { return state_->done(); }
  absl::Status Wait(absl::Duration timeout) override { return state_->Wait(timeout); }
  absl::Status status() const override { return state_->status(); }
  size_t bytes() const override { return state_->bytes(); }
  bool NotifyOnDone(std::shared_ptr<CompletionGroup> group) override {
    state_->NotifyOnDone(std::move(group));
    return true;
  }

 private:
  std::shared_ptr<RequestState> state_;
};

}  // namespace mixnet::transport
