// Controller (see controller.h): the warm-up sweep. WarmPaths (gRPC threads)
// records that a worker asks; once every worker of its region asked, watches
// and every host of the region has one, the region is queued for the planner
// thread, which runs the sweep's rounds (warm_sweep.h, computed at start
// in warm_sweeps_) through RunRound,
// restores the topology the region had, and sends WARMED to its workers.
#include <algorithm>
#include <map>
#include <set>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "runtime/common/log.h"
#include "runtime/control/controller.h"

namespace mixnet::control {

absl::StatusOr<v1::WarmPathsResponse> Controller::WarmPaths(const v1::WarmPathsRequest& request) {
  absl::MutexLock lock(&mu_);
  auto it = sessions_.find(request.worker_id());
  if (it == sessions_.end()) {
    return absl::NotFoundError(
        absl::StrCat("WarmPaths from worker ", request.worker_id(), ": not registered"));
  }
  Session& s = *it->second;
  if (s.watch_gen == 0) {
    return absl::FailedPreconditionError(absl::StrCat("WarmPaths from worker ", s.worker_id,
                                                      ": no watch stream (WatchTopology first)"));
  }
  v1::WarmPathsResponse resp;
  resp.set_enabled(opt_.warm_paths);
  if (!opt_.warm_paths || s.region < 0) {
    resp.set_enabled(false);
    return resp;
  }
  // The sweep, then one round back to the topology the region had.
  const WarmRounds& sweep = warm_sweeps_[s.region];
  resp.set_rounds(static_cast<uint32_t>(sweep.size() + (sweep.empty() ? 0 : 1)));
  s.warm_asked = true;
  RegionState& rs = regions_[s.region];
  if (rs.warm == RegionState::Warm::kDone) {
    SendWarmedLocked(s.region, s.worker_id);
  } else {
    MaybeQueueWarmLocked(s.region);
  }
  return resp;
}

void Controller::MaybeQueueWarmLocked(int region) {
  RegionState& rs = regions_[region];
  if (rs.warm != RegionState::Warm::kCold) return;
  std::set<std::string> covered;
  for (const auto& [id, s] : sessions_) {
    if (s->region != region) continue;
    if (!s->warm_asked || s->watch_gen == 0) return;
    covered.insert(s->host);
  }
  for (const std::string& h : planner_.regions()[region].input().hosts) {
    if (covered.count(h) == 0) return;
  }
  rs.warm = RegionState::Warm::kQueued;
  warm_queue_.push_back(region);
  log::Info("controller: region {}: every worker asked for the warm-up sweep",
            regions_label(region));
}

void Controller::SendWarmedLocked(int region, const std::string& worker_id) {
  const RegionState& rs = regions_[region];
  v1::TopologyEvent ev;
  ev.set_kind(v1::TopologyEvent::WARMED);
  ev.mutable_topology()->set_epoch(committed_epoch_);
  ev.set_warm_rounds(static_cast<uint32_t>(rs.warm_rounds));
  ev.set_warm_complete(rs.warm_complete);
  ev.set_reason(rs.warm_reason);
  if (!worker_id.empty()) {
    SendLocked(worker_id, std::move(ev));
    return;
  }
  for (const auto& [id, s] : sessions_) {
    if (s->region == region && s->warm_asked) SendLocked(id, ev);
  }
}

void Controller::RunWarmSweep(int region) {
  const std::string name = regions_label(region);
  const WarmRounds& sweep = warm_sweeps_[region];
  // The region's ports: circuits of other regions stay as they are.
  std::set<std::pair<std::string, int>> ports;
  for (const std::string& h : planner_.regions()[region].input().hosts) {
    const cluster::HostSpec* host = opt_.spec.FindHost(h);
    if (host == nullptr) continue;
    for (const cluster::NicSpec& nic : host->nics) {
      if (nic.role == cluster::NicRole::kOcs) ports.emplace(nic.ocs_switch, nic.ocs_port);
    }
  }
  std::vector<cluster::CircuitSpec> before, others;
  {
    absl::MutexLock lock(&mu_);
    before = committed_;
  }
  for (const cluster::CircuitSpec& c : before) {
    if (ports.count({c.ocs_switch, c.port_a}) == 0 && ports.count({c.ocs_switch, c.port_b}) == 0) {
      others.push_back(c);
    }
  }
  const absl::Time start = absl::Now();
  std::string stopped;
  uint64_t committed = 0;
  // Runs one round; on failure keeps the first reason.
  auto run = [&](const std::vector<cluster::CircuitSpec>& target, const std::string& what) {
    std::string why;
    {
      absl::MutexLock lock(&mu_);
      if (shutdown_ || !fenced_.empty()) why = shutdown_ ? "controller shutting down" : fenced_;
      last_abort_.clear();
    }
    if (why.empty()) {
      if (RunRound(target, {region}, GateKey{}, absl::Now(), {}, {}, /*warm=*/true)) {
        ++committed;
        return true;
      }
      absl::MutexLock lock(&mu_);
      why = last_abort_.empty() ? "not started" : last_abort_;
    }
    if (stopped.empty()) stopped = absl::StrCat(what, ": ", why);
    return false;
  };
  if (!sweep.empty()) {
    log::Info("controller: region {}: warm-up sweep, {} rounds", name, sweep.size());
    for (size_t i = 0; i < sweep.size(); ++i) {
      std::vector<cluster::CircuitSpec> target = others;
      target.insert(target.end(), sweep[i].begin(), sweep[i].end());
      if (!run(target, absl::StrCat("sweep round ", i + 1, " of ", sweep.size()))) break;
    }
    // Back to what the region had, also after a failed round (which may
    // have left a switch uncertain: this round re-applies it).
    if (committed > 0 || !dirty_switches_.empty()) run(before, "restoring the topology");
  }
  absl::MutexLock lock(&mu_);
  RegionState& rs = regions_[region];
  rs.warm = RegionState::Warm::kDone;
  rs.warm_rounds = committed;
  rs.warm_ms = absl::ToDoubleMilliseconds(absl::Now() - start);
  rs.warm_complete = stopped.empty();
  rs.warm_reason =
      stopped.empty() ? std::string() : absl::StrCat("warm-up sweep stopped: ", stopped);
  if (stopped.empty()) {
    log::Info("controller: region {}: warm-up sweep done, {} rounds in {:.1f} ms", name, committed,
              rs.warm_ms);
  } else {
    log::Warn("controller: region {}: {} ({} rounds committed)", name, rs.warm_reason, committed);
  }
  SendWarmedLocked(region, "");
}

}  // namespace mixnet::control
