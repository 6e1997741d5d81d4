// HelperPool: a bounded set of named, joinable worker threads that run the
// plugin's blocking connection set-ups (control handshakes and transport
// Device::Connect calls) so NCCL's connect/accept and the path mover only
// poll. At most `max_threads` jobs run at once; more wait in a FIFO queue.
// Threads are started on demand and end after `idle_exit` without work; the
// pool joins them (an ended thread at the next Submit, the rest in the
// destructor), so none is ever detached.
//
// Two process-wide pools (never destroyed, like the plugin itself, so a
// blocked set-up never holds up process exit):
//   * Answering(): jobs that never wait for a job the peer has not started:
//     AnswerPeer (the dialer that reached us already runs) and the initiator
//     of a lane move (a TCP dial that waits for nothing but the network).
//   * Dialing(): jobs that wait for a job of the peer's Answering() pool:
//     DialPeer (waits for the peer's AnswerPeer) and the waiting side of a
//     lane move (waits for the peer's initiator).
// Answering() jobs thus always finish (each within its timeout) without
// needing a free thread anywhere, so a full pool delays jobs but cannot
// deadlock two processes.
// Thread-safe.
#pragma once

#include <deque>
#include <functional>
#include <string>
#include <thread>
#include <vector>

#include "absl/status/status.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"

namespace mixnet::nccl {

class HelperPool {
 public:
  HelperPool(std::string name, int max_threads, absl::Duration idle_exit = absl::Seconds(2));
  ~HelperPool();  // drops queued jobs, waits for running ones, joins every thread
  HelperPool(const HelperPool&) = delete;
  HelperPool& operator=(const HelperPool&) = delete;

  // Queues `job`; never blocks. ResourceExhausted only when no thread can be
  // made and none is running (the job is then dropped).
  absl::Status Submit(std::function<void()> job);

  int max_threads() const { return max_threads_; }
  // Threads alive now, and the most alive at once so far.
  int threads() const;
  int peak_threads() const;

  static HelperPool& Answering();
  static HelperPool& Dialing();

 private:
  void Work();
  void ReapLocked() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  const std::string name_;
  const int max_threads_;
  const absl::Duration idle_exit_;
  mutable absl::Mutex mu_;
  std::deque<std::function<void()>> queue_ ABSL_GUARDED_BY(mu_);
  std::vector<std::thread> threads_ ABSL_GUARDED_BY(mu_);
  std::vector<std::thread::id> ended_ ABSL_GUARDED_BY(mu_);  // to join
  int alive_ ABSL_GUARDED_BY(mu_) = 0;
  int idle_ ABSL_GUARDED_BY(mu_) = 0;
  int peak_ ABSL_GUARDED_BY(mu_) = 0;
  bool stop_ ABSL_GUARDED_BY(mu_) = false;
};

// Threads per process-wide pool.
inline constexpr int kHelperThreads = 32;

}  // namespace mixnet::nccl
