// StateSaver (see state_saver.h): one thread that runs StateStore::Save.
#include "ocs_driver/service/state_saver.h"

#include <pthread.h>

#include <utility>

namespace mixnet::ocs {

StateSaver::StateSaver(const StateStore* store) : store_(store) {
  thread_ = std::thread([this] { Run(); });
}

StateSaver::~StateSaver() {
  {
    absl::MutexLock lock(&mu_);
    stop_ = true;
  }
  thread_.join();
}

void StateSaver::Start(PersistedState state) {
  (void)Wait();
  absl::MutexLock lock(&mu_);
  job_ = std::move(state);
  result_.reset();
  pending_ = true;
}

absl::Status StateSaver::Wait() {
  absl::MutexLock lock(&mu_);
  if (!pending_) return absl::OkStatus();
  auto done = [this]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) { return result_.has_value(); };
  mu_.Await(absl::Condition(&done));
  pending_ = false;
  return *std::exchange(result_, std::nullopt);
}

void StateSaver::Run() {
  pthread_setname_np(pthread_self(), "mx-ocsd-save");
  while (true) {
    PersistedState state;
    {
      absl::MutexLock lock(&mu_);
      auto ready = [this]()
                       ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) { return stop_ || job_.has_value(); };
      mu_.Await(absl::Condition(&ready));
      if (!job_.has_value()) return;  // stopping with nothing left to save
      state = *std::exchange(job_, std::nullopt);
    }
    absl::Status s = store_->Save(state);
    absl::MutexLock lock(&mu_);
    result_ = std::move(s);
  }
}

}  // namespace mixnet::ocs
