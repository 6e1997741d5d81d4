// The completion-queue poller: the one thread per verbs Device
// ("mx-verbs-<dev>") that polls the device's CQ, hands each work completion to
// its connection (by QP number), and watches the connections' TCP bootstrap
// sockets for an orderly close or peer death. It spins briefly on an empty CQ,
// then sleeps on the completion channel (100 ms cap, so stopping is prompt;
// shorter with keepalives, see KeepAliveInterval).
// Add/Remove/Watch are thread-safe. The thread holds its Poller until its
// loop ends, so the Poller (with the context and CQ it keeps) is destroyed
// only after that, on whichever thread drops the last reference; stopped
// from its own thread (a callback), it is joined by a reaper thread rather
// than detached.
#pragma once

#include <atomic>
#include <cstdint>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "runtime/transport/verbs/bootstrap.h"
#include "runtime/transport/verbs/verbs_context.h"

namespace mixnet::transport::verbs {

class VerbsConnection;

// How often the poller of a device with stall detection (`stall` > 0) calls
// its connections' KeepAlive: stall / 4, at least 10 ms; zero without.
absl::Duration KeepAliveInterval(absl::Duration stall);

class Poller {
 public:
  static absl::StatusOr<std::shared_ptr<Poller>> Start(std::shared_ptr<VerbsContext> ctx,
                                                       std::string thread_name);
  ~Poller();

  // Restricts the poller thread to `cpu`; the CPUs it may run on.
  absl::Status Pin(int cpu);
  absl::StatusOr<std::vector<int>> Cpus();

  // Ends the loop and fails the connections still registered; joins the
  // thread (from the poller thread itself: hands it to the reaper). A Poller
  // lives until Stop: its thread holds it.
  void Stop();
  bool running() const { return running_.load(std::memory_order_acquire); }
  bool OnPollerThread() const { return std::this_thread::get_id() == thread_id_.load(); }

  // Completions for c->qpn() go to `c` from now on.
  void Add(std::shared_ptr<VerbsConnection> c);
  // Start watching c's bootstrap socket (after the handshake finished with it).
  void Watch(uint32_t qpn);
  // No more completions or socket events go to that connection.
  void Remove(uint32_t qpn);

 private:
  struct Entry {
    std::shared_ptr<VerbsConnection> conn;
    bool watch = false;
  };
  Poller(std::shared_ptr<VerbsContext> ctx, Fd event_fd)
      : ctx_(std::move(ctx)), event_fd_(std::move(event_fd)) {}
  void Loop(std::string thread_name);
  // Polls the CQ until empty (bounded); returns the completions handled.
  int Drain();
  std::shared_ptr<VerbsConnection> Lookup(uint32_t qpn);
  void Wake();
  void FailAll(const std::string& why, bool report);
  void KeepAliveAll();

  const std::shared_ptr<VerbsContext> ctx_;
  const Fd event_fd_;
  std::thread thread_;
  std::atomic<std::thread::id> thread_id_{};
  std::atomic<bool> stop_{false};
  std::atomic<bool> running_{false};
  int unacked_events_ = 0;  // poller thread only

  absl::Mutex mu_;
  absl::flat_hash_map<uint32_t, Entry> conns_ ABSL_GUARDED_BY(mu_);
  bool dirty_ ABSL_GUARDED_BY(mu_) = true;  // the watched socket set changed
};

}  // namespace mixnet::transport::verbs
