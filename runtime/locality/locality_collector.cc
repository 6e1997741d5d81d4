// LocalityCollector: gate-output checks, counting and matrix building (see
// locality_collector.h).
#include "runtime/locality/locality_collector.h"

#include <utility>

#include "absl/strings/str_cat.h"
#include "runtime/common/status.h"

namespace mixnet {
namespace {

template <typename T>
GateIds MakeIds(std::span<const T> ids, int64_t tokens, int k) {
  GateIds g;
  g.data = ids.data();
  g.is_int64 = sizeof(T) == 8;
  g.size = static_cast<int64_t>(ids.size());
  g.tokens = tokens;
  g.k = k;
  return g;
}

template <typename T>
absl::Status CountTyped(const T* ids, const GateIds& g, int num_experts, bool skip_negative,
                        std::vector<int64_t>& out) {
  for (int64_t t = 0; t < g.tokens; ++t) {
    const T* row = ids + t * g.k;
    for (int s = 0; s < g.k; ++s) {
      const int64_t e = static_cast<int64_t>(row[s]);
      if (e < 0 && skip_negative) continue;
      if (e < 0 || e >= num_experts) {
        return absl::InvalidArgumentError(absl::StrCat("gate ids: token ", t, " slot ", s,
                                                       " (index ", t * g.k + s, "): expert id ", e,
                                                       " out of range [0, ", num_experts, ")"));
      }
      for (int p = 0; p < s; ++p) {
        if (static_cast<int64_t>(row[p]) == e) {
          return absl::InvalidArgumentError(absl::StrCat("gate ids: token ", t, " slot ", s,
                                                         " (index ", t * g.k + s, "): expert ", e,
                                                         " repeats slot ", p));
        }
      }
      ++out[e];
    }
  }
  return absl::OkStatus();
}

}  // namespace

GateIds GateIds::Of(std::span<const int32_t> ids, int k) {
  return MakeIds(ids, k > 0 ? static_cast<int64_t>(ids.size()) / k : 0, k);
}
GateIds GateIds::Of(std::span<const int64_t> ids, int k) {
  return MakeIds(ids, k > 0 ? static_cast<int64_t>(ids.size()) / k : 0, k);
}
GateIds GateIds::Of(std::span<const int32_t> ids, int64_t tokens, int k) {
  return MakeIds(ids, tokens, k);
}
GateIds GateIds::Of(std::span<const int64_t> ids, int64_t tokens, int k) {
  return MakeIds(ids, tokens, k);
}

absl::StatusOr<std::vector<int64_t>> CountGateIds(const GateIds& ids, int num_experts,
                                                  bool skip_negative_ids) {
  if (ids.k <= 0 || ids.k > num_experts) {
    return absl::InvalidArgumentError(
        absl::StrCat("gate ids: k = ", ids.k, " outside [1, ", num_experts, "]"));
  }
  if (ids.tokens < 0 || ids.size != ids.tokens * ids.k) {
    return absl::InvalidArgumentError(absl::StrCat("gate ids: buffer holds ", ids.size,
                                                   " ids, expected tokens (", ids.tokens, ") x k (",
                                                   ids.k, ") = ", ids.tokens * ids.k));
  }
  if (ids.data == nullptr && ids.size > 0) {
    return absl::InvalidArgumentError("gate ids: null buffer");
  }
  std::vector<int64_t> out(num_experts, 0);
  if (ids.is_int64) {
    RETURN_IF_ERROR(CountTyped(static_cast<const int64_t*>(ids.data), ids, num_experts,
                               skip_negative_ids, out));
  } else {
    RETURN_IF_ERROR(CountTyped(static_cast<const int32_t*>(ids.data), ids, num_experts,
                               skip_negative_ids, out));
  }
  return out;
}

absl::StatusOr<LocalityMatrices> BuildMatrices(const ExpertPlacement& placement,
                                               const TokenCounts& counts, double bytes_per_token) {
  if (counts.num_ranks != placement.num_ranks() || counts.num_experts != placement.num_experts()) {
    return absl::InvalidArgumentError(
        absl::StrCat("token counts ", KeyString(counts.key), ": shape ", counts.num_ranks,
                     " ranks x ", counts.num_experts, " experts, placement has ",
                     placement.num_ranks(), " x ", placement.num_experts()));
  }
  RETURN_IF_ERROR(counts.Validate());
  LocalityMatrices m;
  m.cluster = TrafficMatrix(placement.num_hosts());
  for (int r = 0; r < counts.num_ranks; ++r) {
    const int src = placement.HostOfRank(r);
    for (int e = 0; e < counts.num_experts; ++e) {
      const int64_t n = counts.at(r, e);
      if (n != 0) m.cluster.Add(src, placement.HostOfExpert(e), n * bytes_per_token);
    }
  }
  if (counts.key.direction == Direction::kCombine) m.cluster = m.cluster.Transposed();

  m.regions.reserve(placement.num_regions());
  for (int g = 0; g < placement.num_regions(); ++g) {
    m.regions.emplace_back(static_cast<int>(placement.RegionHosts(g).size()));
  }
  for (int i = 0; i < placement.num_hosts(); ++i) {
    for (int j = 0; j < placement.num_hosts(); ++j) {
      const double v = m.cluster.at(i, j);
      if (v == 0) continue;
      const int g = placement.RegionOfHost(i);
      if (i == j) {
        if (g >= 0) m.regions[g].Add(placement.LocalIndex(i), placement.LocalIndex(i), v);
      } else if (g >= 0 && g == placement.RegionOfHost(j)) {
        m.regions[g].Add(placement.LocalIndex(i), placement.LocalIndex(j), v);
      } else {
        m.cross_region_bytes += v;
      }
    }
  }
  return m;
}

absl::StatusOr<std::unique_ptr<LocalityCollector>> LocalityCollector::Create(
    ExpertPlacement placement, LocalityOptions options) {
  if (options.hidden <= 0 || options.element_bytes <= 0) {
    return absl::InvalidArgumentError(absl::StrCat("locality collector: hidden (", options.hidden,
                                                   ") and element_bytes (", options.element_bytes,
                                                   ") must be > 0"));
  }
  return std::unique_ptr<LocalityCollector>(new LocalityCollector(std::move(placement), options));
}

TokenCounts& LocalityCollector::EntryLocked(const GateKey& key) {
  auto it = entries_.find(key);
  if (it == entries_.end()) {
    it = entries_
             .emplace(key, TokenCounts::Zero(key, placement_.num_ranks(), placement_.num_experts()))
             .first;
  }
  return it->second;
}

absl::Status LocalityCollector::Record(const GateKey& key, int source_rank, const GateIds& ids) {
  const std::string where = absl::StrCat("rank ", source_rank, " ", KeyString(key));
  if (source_rank < 0 || source_rank >= placement_.num_ranks()) {
    return absl::InvalidArgumentError(
        absl::StrCat(where, ": source rank out of range [0, ", placement_.num_ranks(), ")"));
  }
  absl::StatusOr<std::vector<int64_t>> row =
      CountGateIds(ids, placement_.num_experts(), options_.skip_negative_ids);
  if (!row.ok()) return Annotate(row.status(), where);
  absl::MutexLock lock(&mu_);
  TokenCounts& entry = EntryLocked(key);
  for (int e = 0; e < placement_.num_experts(); ++e) entry.at(source_rank, e) += (*row)[e];
  return absl::OkStatus();
}

absl::Status LocalityCollector::Merge(const TokenCounts& counts) {
  if (counts.num_ranks != placement_.num_ranks() ||
      counts.num_experts != placement_.num_experts()) {
    return absl::InvalidArgumentError(
        absl::StrCat("merge ", KeyString(counts.key), ": shape ", counts.num_ranks, " ranks x ",
                     counts.num_experts, " experts, placement has ", placement_.num_ranks(), " x ",
                     placement_.num_experts()));
  }
  RETURN_IF_ERROR(counts.Validate());
  absl::MutexLock lock(&mu_);
  return EntryLocked(counts.key).Merge(counts);
}

absl::Status LocalityCollector::MergeReport(const TrafficReport& report) {
  for (size_t i = 0; i < report.entries.size(); ++i) {
    const TokenCounts& c = report.entries[i];
    absl::Status s = c.Validate();
    if (s.ok() &&
        (c.num_ranks != placement_.num_ranks() || c.num_experts != placement_.num_experts())) {
      s = absl::InvalidArgumentError(absl::StrCat(
          "shape ", c.num_ranks, " ranks x ", c.num_experts, " experts, placement has ",
          placement_.num_ranks(), " x ", placement_.num_experts()));
    }
    if (!s.ok()) {
      return Annotate(s, absl::StrCat("report from rank ", report.reporter_rank, " entries[", i,
                                      "] (", KeyString(c.key), ")"));
    }
  }
  absl::MutexLock lock(&mu_);
  for (const TokenCounts& c : report.entries) RETURN_IF_ERROR(EntryLocked(c.key).Merge(c));
  return absl::OkStatus();
}

absl::StatusOr<TokenCounts> LocalityCollector::Counts(const GateKey& key) const {
  absl::MutexLock lock(&mu_);
  auto it = entries_.find(key);
  if (it == entries_.end()) {
    return absl::NotFoundError(absl::StrCat("locality: nothing recorded for ", KeyString(key)));
  }
  return it->second;
}

absl::StatusOr<LocalityMatrices> LocalityCollector::Matrices(const GateKey& key) const {
  ASSIGN_OR_RETURN(TokenCounts counts, Counts(key));
  return BuildMatrices(placement_, counts, options_.BytesPerToken());
}

absl::StatusOr<TrafficMatrix> LocalityCollector::RegionMatrix(const GateKey& key,
                                                              int region) const {
  if (region < 0 || region >= placement_.num_regions()) {
    return absl::InvalidArgumentError(absl::StrCat(
        "locality: region ", region, " out of range [0, ", placement_.num_regions(), ")"));
  }
  ASSIGN_OR_RETURN(LocalityMatrices m, Matrices(key));
  return std::move(m.regions[region]);
}

std::vector<GateKey> LocalityCollector::Keys() const {
  absl::MutexLock lock(&mu_);
  std::vector<GateKey> keys;
  for (const auto& [k, v] : entries_) keys.push_back(k);
  return keys;
}

TrafficReport LocalityCollector::TakeReport(int reporter_rank, int64_t iteration) {
  TrafficReport r;
  r.reporter_rank = reporter_rank;
  r.iteration = iteration;
  absl::MutexLock lock(&mu_);
  for (auto& [k, v] : entries_) r.entries.push_back(std::move(v));
  entries_.clear();
  return r;
}

void LocalityCollector::Clear() {
  absl::MutexLock lock(&mu_);
  entries_.clear();
}

}  // namespace mixnet
