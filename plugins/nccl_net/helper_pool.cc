// HelperPool (see helper_pool.h). Threads: callers of Submit (NCCL's proxy
// threads, the mover thread) and the pool's "mx-nccl-<name>" workers.
#include "plugins/nccl_net/helper_pool.h"

#include <pthread.h>

#include <algorithm>
#include <system_error>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"

namespace mixnet::nccl {

HelperPool::HelperPool(std::string name, int max_threads, absl::Duration idle_exit)
    : name_(std::move(name)), max_threads_(std::max(1, max_threads)), idle_exit_(idle_exit) {}

HelperPool::~HelperPool() {
  std::vector<std::thread> threads;
  {
    absl::MutexLock lock(&mu_);
    stop_ = true;
    queue_.clear();
    threads.swap(threads_);
  }
  for (std::thread& t : threads) t.join();
}

void HelperPool::ReapLocked() {
  for (std::thread::id id : ended_) {
    auto it = std::find_if(threads_.begin(), threads_.end(),
                           [id](const std::thread& t) { return t.get_id() == id; });
    if (it == threads_.end()) continue;
    it->join();  // it has left Work(); this returns at once
    threads_.erase(it);
  }
  ended_.clear();
}

absl::Status HelperPool::Submit(std::function<void()> job) {
  absl::MutexLock lock(&mu_);
  ReapLocked();
  queue_.push_back(std::move(job));
  if (idle_ >= static_cast<int>(queue_.size()) || alive_ >= max_threads_) return absl::OkStatus();
  try {
    threads_.emplace_back([this] { Work(); });
  } catch (const std::system_error& e) {
    if (alive_ > 0) return absl::OkStatus();  // a running thread will take it
    queue_.pop_back();
    return absl::ResourceExhaustedError(
        absl::StrCat("cannot start a ", name_, " thread for a connection set-up: ", e.what()));
  }
  ++alive_;
  peak_ = std::max(peak_, alive_);
  return absl::OkStatus();
}

int HelperPool::threads() const {
  absl::MutexLock lock(&mu_);
  return alive_;
}

int HelperPool::peak_threads() const {
  absl::MutexLock lock(&mu_);
  return peak_;
}

void HelperPool::Work() {
  pthread_setname_np(pthread_self(), absl::StrCat("mx-nccl-", name_).substr(0, 15).c_str());
  absl::MutexLock lock(&mu_);
  auto has_work = [this]() ABSL_SHARED_LOCKS_REQUIRED(mu_) { return stop_ || !queue_.empty(); };
  while (!stop_) {
    if (queue_.empty()) {
      ++idle_;
      const bool woke = mu_.AwaitWithTimeout(absl::Condition(&has_work), idle_exit_);
      --idle_;
      if (!woke) break;  // idle too long
      continue;
    }
    std::function<void()> job = std::move(queue_.front());
    queue_.pop_front();
    mu_.Unlock();
    job();
    job = nullptr;  // its captures go before the lock is taken again
    mu_.Lock();
  }
  --alive_;
  if (!stop_) ended_.push_back(std::this_thread::get_id());
}

HelperPool& HelperPool::Answering() {
  static HelperPool* pool = new HelperPool("answer", kHelperThreads);  // never destroyed
  return *pool;
}

HelperPool& HelperPool::Dialing() {
  static HelperPool* pool = new HelperPool("dial", kHelperThreads);  // never destroyed
  return *pool;
}

}  // namespace mixnet::nccl
