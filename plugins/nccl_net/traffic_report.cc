// PathMover's traffic reports (see path_mover.h): every report period, the
// bytes the send comms carried, summed per peer host, go to the worker
// agent. Runs on the "mx-nccl-mover" thread.
#include "absl/container/flat_hash_map.h"
#include "plugins/nccl_net/path_mover.h"

namespace mixnet::nccl {

void PathMover::Report() {
  if (options_.report_period <= absl::ZeroDuration() || !options_.report) return;
  const absl::Time now = absl::Now();
  const int64_t period_ns = absl::ToInt64Nanoseconds(options_.report_period);
  if (next_report_ == absl::Time()) {
    next_report_ = absl::FromUnixNanos((absl::ToUnixNanos(now) / period_ns + 1) * period_ns);
    return;
  }
  if (now < next_report_) return;
  TrafficSample sample;
  sample.period = absl::ToUnixNanos(next_report_) / period_ns - 1;
  next_report_ = absl::FromUnixNanos((absl::ToUnixNanos(now) / period_ns + 1) * period_ns);
  absl::flat_hash_map<std::string, uint64_t> by_peer;
  {
    absl::MutexLock lock(&comms_mu_);
    for (Comm* c : comms_) {
      if (!c->is_send) continue;
      absl::MutexLock cl(&c->mu);
      const uint64_t delta = c->sent_bytes - c->reported_bytes;
      c->reported_bytes = c->sent_bytes;
      if (delta > 0 && !c->peer_host.empty() && c->peer_host != options_.host &&
          options_.spec.FindHost(c->peer_host) != nullptr) {
        by_peer[c->peer_host] += delta;
      }
    }
  }
  if (by_peer.empty()) return;
  for (const auto& [peer, bytes] : by_peer) {
    sample.peer_hosts.push_back(peer);
    sample.bytes.push_back(static_cast<double>(bytes));
  }
  options_.report(std::move(sample));
}

}  // namespace mixnet::nccl
