// A router::TopologyFollower for control-plane tests: records every call as
// text ("prepare 2", "commit 2 circuits 1", "abort 3", "settle 2", "routing
// v2 hosts 2 bytes 4") and every committed topology, installs the epoch on
// Commit, and can be told to make Prepare miss its deadline (as a worker
// whose drain is stuck). Calls come from the agent's event thread; the test
// thread reads and waits. Header-only.
#pragma once

#include <algorithm>
#include <atomic>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/clock.h"
#include "runtime/router/topology_follower.h"

namespace mixnet::testing {

class RecordingFollower final : public router::TopologyFollower {
 public:
  absl::Status Prepare(const router::Topology& target, absl::Time deadline) override {
    Record(absl::StrCat("prepare ", target.epoch));
    if (block_prepare.load()) {
      absl::SleepFor(deadline - absl::Now());
      return absl::DeadlineExceededError("drain: a transfer is still running on ocs0 port 1");
    }
    return absl::OkStatus();
  }
  absl::Status Commit(const router::Topology& target, absl::Time) override {
    Record(absl::StrCat("commit ", target.epoch, " circuits ", target.circuits.size()));
    {
      absl::MutexLock l(&mu_);
      commits_.push_back(target);
    }
    installed_.store(target.epoch);
    return absl::OkStatus();
  }
  void Abort(uint64_t epoch) override { Record(absl::StrCat("abort ", epoch)); }
  absl::Status Settle(absl::Time) override {
    Record(absl::StrCat("settle ", installed_.load()));
    return absl::OkStatus();
  }
  absl::Status SetRouting(const router::RoutingPlan& plan) override {
    Record(absl::StrCat("routing v", plan.version, " hosts ", plan.hosts.size(), " bytes ",
                        plan.bytes.size()));
    if (refuse_routing.load()) return absl::InvalidArgumentError("routing plan: host 'x' unknown");
    return absl::OkStatus();
  }
  uint64_t installed_epoch() const override { return installed_.load(); }

  std::vector<std::string> calls() {
    absl::MutexLock l(&mu_);
    return calls_;
  }
  std::string Calls() { return absl::StrJoin(calls(), "; "); }
  // Every topology Commit was given, in order.
  std::vector<router::Topology> commits() {
    absl::MutexLock l(&mu_);
    return commits_;
  }
  // Waits until `call` was recorded.
  bool WaitFor(const std::string& call, absl::Duration timeout = absl::Seconds(10)) {
    absl::MutexLock l(&mu_);
    auto seen = [&]() ABSL_SHARED_LOCKS_REQUIRED(mu_) {
      return std::find(calls_.begin(), calls_.end(), call) != calls_.end();
    };
    return mu_.AwaitWithTimeout(absl::Condition(&seen), timeout);
  }

  std::atomic<bool> block_prepare{false};
  std::atomic<bool> refuse_routing{false};

 private:
  void Record(std::string s) {
    absl::MutexLock l(&mu_);
    calls_.push_back(std::move(s));
  }
  absl::Mutex mu_;
  std::vector<std::string> calls_ ABSL_GUARDED_BY(mu_);
  std::vector<router::Topology> commits_ ABSL_GUARDED_BY(mu_);
  std::atomic<uint64_t> installed_{0};
};

}  // namespace mixnet::testing
