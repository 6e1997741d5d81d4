// Link end times of one all-to-all (see link_sampler.h).
#include "bench/route_bench/link_sampler.h"

#include "runtime/common/status.h"

namespace mixnet::bench {
double TimeOfShare(const std::vector<double>& t_ms, const std::vector<uint64_t>& v, double share) {
  if (v.size() < 2 || v.back() <= v.front()) return 0;
  const double target =
      static_cast<double>(v.front()) + share * static_cast<double>(v.back() - v.front());
  for (size_t i = 1; i < v.size(); ++i) {
    if (static_cast<double>(v[i]) < target) continue;
    const double a = static_cast<double>(v[i - 1]);
    const double b = static_cast<double>(v[i]);
    const double f = b > a ? (target - a) / (b - a) : 1.0;
    return t_ms[i - 1] + f * (t_ms[i] - t_ms[i - 1]);
  }
  return t_ms.back();
}

namespace {

LinkSpan SpanOf(const std::vector<double>& t_ms, const std::vector<uint64_t>& v) {
  LinkSpan s;
  if (v.size() < 2 || v.back() <= v.front()) return s;
  s.start_ms = TimeOfShare(t_ms, v, 0.01);
  s.end_ms = TimeOfShare(t_ms, v, 0.99);
  s.bytes = v.back() - v.front();
  return s;
}

}  // namespace

LinkEnd EndOf(const std::vector<double>& t_ms, const std::vector<demo::ByteCounters>& c) {
  std::vector<uint64_t> rx, tx;
  for (const demo::ByteCounters& b : c) {
    rx.push_back(b.rx);
    tx.push_back(b.tx);
  }
  return LinkEnd{SpanOf(t_ms, rx), SpanOf(t_ms, tx)};
}

absl::Status LinkSampler::Sample() {
  ASSIGN_OR_RETURN(const auto now, demo::ReadNicCounters(nics_));
  t_ms_.push_back(
      std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0_).count());
  for (const auto& [nic, c] : now) samples_[nic].push_back(c);
  return absl::OkStatus();
}

absl::Status LinkSampler::Start() {
  t0_ = std::chrono::steady_clock::now();
  RETURN_IF_ERROR(Sample());
  thread_ = std::thread([this] { Loop(); });
  return absl::OkStatus();
}

void LinkSampler::Loop() {
  while (!stop_.load(std::memory_order_acquire)) {
    std::this_thread::sleep_for(period_);
    if (absl::Status s = Sample(); !s.ok()) {
      error_ = s;
      return;
    }
  }
}

absl::StatusOr<std::map<std::string, LinkEnd>> LinkSampler::Stop() {
  if (!thread_.joinable()) return absl::FailedPreconditionError("link sampler not started");
  stop_.store(true, std::memory_order_release);
  thread_.join();
  RETURN_IF_ERROR(error_);
  RETURN_IF_ERROR(Sample());
  std::map<std::string, LinkEnd> out;
  for (const auto& [nic, c] : samples_) out[nic] = EndOf(t_ms_, c);
  return out;
}

}  // namespace mixnet::bench
