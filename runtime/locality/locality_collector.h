// LocalityCollector: turns MoE gate outputs (top-k expert ids per token) into
// token counts per (source EP rank, expert) and byte matrices per host pair of
// each region. Each training rank records its own gate outputs and sends a
// TrafficReport; the controller merges the reports of every rank of a region
// into the same kind of collector and asks it for the region's matrix.
//
// Thread-safe: Record/Merge may run on the training thread or gRPC threads
// while another thread reads matrices.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <span>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "runtime/locality/expert_placement.h"
#include "runtime/locality/token_counts.h"
#include "runtime/locality/traffic_matrix.h"

namespace mixnet {

// A read-only view of one gate output: `tokens` rows of `k` expert ids,
// row-major, int32 or int64 (what torch.topk returns).
struct GateIds {
  const void* data = nullptr;
  bool is_int64 = false;
  int64_t size = 0;  // number of ids in the buffer
  int64_t tokens = 0;
  int k = 0;

  // Tokens inferred as ids.size() / k.
  static GateIds Of(std::span<const int32_t> ids, int k);
  static GateIds Of(std::span<const int64_t> ids, int k);
  // Explicit token count: the buffer must hold exactly tokens * k ids.
  static GateIds Of(std::span<const int32_t> ids, int64_t tokens, int k);
  static GateIds Of(std::span<const int64_t> ids, int64_t tokens, int k);
};

struct LocalityOptions {
  int64_t hidden = 0;     // model hidden size (elements per token), > 0
  int element_bytes = 2;  // bytes per element (bf16: 2), > 0
  // Treat negative ids as dropped tokens (capacity overflow) instead of errors.
  bool skip_negative_ids = false;

  double BytesPerToken() const { return static_cast<double>(hidden) * element_bytes; }
};

// Checks one gate output and returns its tokens per expert (size
// num_experts). InvalidArgument naming the token and slot for an id out of
// range or a repeated id within a token, and naming the sizes for a wrong
// shape (buffer not tokens * k, k outside [1, num_experts]).
absl::StatusOr<std::vector<int64_t>> CountGateIds(const GateIds& ids, int num_experts,
                                                  bool skip_negative_ids = false);

// The byte matrices of one all-to-all.
struct LocalityMatrices {
  TrafficMatrix cluster;               // every placement host, placement host order
  std::vector<TrafficMatrix> regions;  // per region, region-local host order
  // Bytes between hosts of different regions, or touching a host in no
  // region (carried by EPS, in no region's matrix). Diagonal bytes stay.
  double cross_region_bytes = 0;
};

// Dispatch: counts(r, e) tokens go from host(r) to host(expert e), each
// `bytes_per_token` bytes; tokens whose expert sits on the same host land on
// the diagonal. Combine: the transpose. InvalidArgument when the counts'
// shape does not match the placement.
absl::StatusOr<LocalityMatrices> BuildMatrices(const ExpertPlacement& placement,
                                               const TokenCounts& counts, double bytes_per_token);

class LocalityCollector {
 public:
  // InvalidArgument when hidden or element_bytes is not positive.
  static absl::StatusOr<std::unique_ptr<LocalityCollector>> Create(ExpertPlacement placement,
                                                                   LocalityOptions options);

  const ExpertPlacement& placement() const { return placement_; }
  const LocalityOptions& options() const { return options_; }

  // Adds one gate output of `source_rank`. Nothing is counted when it fails.
  absl::Status Record(const GateKey& key, int source_rank, const GateIds& ids);
  absl::Status Record(const GateKey& key, int source_rank, std::span<const int32_t> ids, int k) {
    return Record(key, source_rank, GateIds::Of(ids, k));
  }
  absl::Status Record(const GateKey& key, int source_rank, std::span<const int64_t> ids, int k) {
    return Record(key, source_rank, GateIds::Of(ids, k));
  }

  // Adds counts reported elsewhere (another rank, a GPU histogram).
  absl::Status Merge(const TokenCounts& counts);
  // Merges every entry; on a bad entry nothing of the report is merged.
  absl::Status MergeReport(const TrafficReport& report);

  // NotFound when nothing was recorded for `key`.
  absl::StatusOr<TokenCounts> Counts(const GateKey& key) const;
  absl::StatusOr<LocalityMatrices> Matrices(const GateKey& key) const;
  // One region's matrix; InvalidArgument for an unknown region.
  absl::StatusOr<TrafficMatrix> RegionMatrix(const GateKey& key, int region) const;

  std::vector<GateKey> Keys() const;
  // Everything recorded so far as a report, and forget it (what a rank sends
  // after each step).
  TrafficReport TakeReport(int reporter_rank, int64_t iteration);
  void Clear();

 private:
  LocalityCollector(ExpertPlacement placement, LocalityOptions options)
      : placement_(std::move(placement)), options_(options) {}

  TokenCounts& EntryLocked(const GateKey& key) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  const ExpertPlacement placement_;
  const LocalityOptions options_;
  mutable absl::Mutex mu_;
  std::map<GateKey, TokenCounts> entries_ ABSL_GUARDED_BY(mu_);
};

}  // namespace mixnet
