// RegionReports (see region_reports.h): row checks, matrix assembly, key
// order. Called under the controller's mutex (gRPC threads, planner thread).
#include "runtime/control/region_reports.h"

#include <algorithm>
#include <cmath>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "runtime/common/log.h"

namespace mixnet::control {
namespace {
constexpr size_t kDoneKept = 256;
}  // namespace

RegionReports::RegionReports(std::string region, std::vector<std::string> hosts, size_t max_pending)
    : region_(std::move(region)), hosts_(std::move(hosts)), max_pending_(max_pending) {}

int RegionReports::HostIndex(const std::string& host) const {
  for (size_t i = 0; i < hosts_.size(); ++i) {
    if (hosts_[i] == host) return static_cast<int>(i);
  }
  return -1;
}

absl::StatusOr<std::optional<CompletedMatrix>> RegionReports::Add(
    const std::string& worker_id, const std::string& host, const StepKey& key,
    const std::vector<std::string>& peer_hosts, const std::vector<double>& bytes,
    const std::set<std::string>& expected, absl::Time now, const std::optional<PlanTarget>& plan,
    double observed_ms) {
  const std::string who = absl::StrCat(
      "report from worker ", worker_id, " (host ", host, ", ", KeyString(key.key),
      key.pass == kBackwardPass ? " backward" : "", ", iteration ", key.iteration, ")");
  const int src = HostIndex(host);
  if (src < 0) {
    return absl::InvalidArgumentError(
        absl::StrCat(who, ": host ", host, " is not in region '", region_, "'"));
  }
  if (peer_hosts.size() != bytes.size()) {
    return absl::InvalidArgumentError(absl::StrCat(who, ": ", peer_hosts.size(), " peer hosts but ",
                                                   bytes.size(), " byte counts"));
  }
  if (peer_hosts.size() > hosts_.size()) {
    return absl::InvalidArgumentError(absl::StrCat(who, ": ", peer_hosts.size(),
                                                   " columns, region '", region_, "' has ",
                                                   hosts_.size(), " hosts"));
  }
  if (!std::isfinite(observed_ms) || observed_ms < 0) {
    return absl::InvalidArgumentError(absl::StrCat(who, ": observed_ms is ", observed_ms));
  }
  Row row{src, std::vector<double>(hosts_.size(), 0.0), observed_ms};
  std::vector<bool> seen(hosts_.size(), false);
  for (size_t i = 0; i < peer_hosts.size(); ++i) {
    const int dst = HostIndex(peer_hosts[i]);
    if (dst < 0) {
      return absl::InvalidArgumentError(
          absl::StrCat(who, ": peer host '", peer_hosts[i], "' is not in region '", region_, "'"));
    }
    if (seen[dst]) {
      return absl::InvalidArgumentError(
          absl::StrCat(who, ": peer host ", peer_hosts[i], " appears twice"));
    }
    if (!std::isfinite(bytes[i]) || bytes[i] < 0) {
      return absl::InvalidArgumentError(
          absl::StrCat(who, ": bytes to ", peer_hosts[i], " is ", bytes[i]));
    }
    seen[dst] = true;
    row.bytes[dst] = bytes[i];
  }
  if (done_set_.count(key) != 0) {
    log::Debug("controller: region {}: late {} dropped", region_, who);
    return std::optional<CompletedMatrix>();
  }
  auto it = pending_.find(key);
  if (it == pending_.end()) {
    if (pending_.size() >= max_pending_) {
      log::Warn("controller: region {}: more than {} matrices assembling, dropping {} iteration {}",
                region_, max_pending_, KeyString(pending_.begin()->first.key),
                pending_.begin()->first.iteration);
      pending_.erase(pending_.begin());
    }
    it = pending_.emplace(key, Pending{now, {}, plan}).first;
  }
  it->second.rows[worker_id] = std::move(row);
  for (const std::string& w : expected) {
    if (it->second.rows.count(w) == 0) return std::optional<CompletedMatrix>();
  }
  CompletedMatrix done = Build(key, it->second, expected);
  pending_.erase(it);
  MarkDone(key);
  return std::optional<CompletedMatrix>(std::move(done));
}

std::vector<CompletedMatrix> RegionReports::Expire(const std::set<std::string>& expected,
                                                   absl::Time now, absl::Duration timeout) {
  std::vector<CompletedMatrix> out;
  for (auto it = pending_.begin(); it != pending_.end();) {
    bool complete = true;
    for (const std::string& w : expected) {
      if (it->second.rows.count(w) == 0) complete = false;
    }
    if (complete || now - it->second.first_row >= timeout) {
      out.push_back(Build(it->first, it->second, expected));
      MarkDone(it->first);
      it = pending_.erase(it);
    } else {
      ++it;
    }
  }
  return out;
}

CompletedMatrix RegionReports::Build(const StepKey& key, const Pending& p,
                                     const std::set<std::string>& expected) const {
  CompletedMatrix c{key, TrafficMatrix(static_cast<int>(hosts_.size())), {}, p.plan, 0};
  for (const auto& [worker, row] : p.rows) {
    for (size_t j = 0; j < row.bytes.size(); ++j)
      c.matrix.Add(row.src, static_cast<int>(j), row.bytes[j]);
    c.observed_ms = std::max(c.observed_ms, row.observed_ms);
  }
  for (const std::string& w : expected) {
    if (p.rows.count(w) == 0) c.missing.push_back(w);
  }
  return c;
}

void RegionReports::MarkDone(const StepKey& key) {
  if (done_set_.insert(key).second) done_.push_back(key);
  while (done_.size() > kDoneKept) {
    done_set_.erase(done_.front());
    done_.pop_front();
  }
}

void RegionReports::LearnOrder(const StepKey& k) {
  if (k.key.direction != Direction::kDispatch || k.pass != kForwardPass) return;
  if (last_dispatch_ && *last_dispatch_ < k && !(last_dispatch_->key == k.key)) {
    next_[last_dispatch_->key] = k.key;
  }
  if (!last_dispatch_ || *last_dispatch_ < k) last_dispatch_ = k;
}

std::optional<GateKey> RegionReports::NextDispatch(const GateKey& k) const {
  auto it = next_.find(k);
  if (it == next_.end()) return std::nullopt;
  return it->second;
}

}  // namespace mixnet::control
