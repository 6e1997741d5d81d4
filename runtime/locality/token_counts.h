// TokenCounts: how many tokens each source EP rank sent to each expert in one
// all-to-all (one layer, micro-batch and direction), and TrafficReport: the
// batch of TokenCounts one rank hands the controller (issue 5 carries it in
// the control-plane proto; until then it travels as JSON or CBOR). Counts are
// additive, so the controller merges the rows every rank reports into the
// region's full table. Plain value types, not thread-safe.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"

namespace mixnet {

// Dispatch sends tokens to their experts; combine brings the results back
// (its matrix is the transpose of the dispatch one).
enum class Direction { kDispatch = 0, kCombine = 1 };
std::string_view DirectionName(Direction d);
// "layer 3 dispatch", for messages.
std::string LayerDirectionName(int layer, Direction d);
// "dispatch" / "combine"; InvalidArgument otherwise.
absl::StatusOr<Direction> ParseDirection(std::string_view name);

// Identifies one all-to-all.
struct GateKey {
  int layer = 0;
  int micro_batch = 0;
  Direction direction = Direction::kDispatch;

  friend bool operator==(const GateKey&, const GateKey&) = default;
  friend auto operator<=>(const GateKey&, const GateKey&) = default;
};
std::string KeyString(const GateKey& key);  // "layer 3 mb 1 dispatch"

struct TokenCounts {
  GateKey key;
  int num_ranks = 0;
  int num_experts = 0;
  // Rank-major: counts[rank * num_experts + expert] tokens (a token with top-k
  // routing counts once for each of its k experts).
  std::vector<int64_t> counts;

  static TokenCounts Zero(GateKey key, int num_ranks, int num_experts);

  int64_t at(int rank, int expert) const {
    return counts[static_cast<size_t>(rank) * num_experts + expert];
  }
  int64_t& at(int rank, int expert) {
    return counts[static_cast<size_t>(rank) * num_experts + expert];
  }
  int64_t Total() const;
  // Per-expert totals over all source ranks.
  std::vector<int64_t> PerExpert() const;

  // Adds `other` entry by entry. InvalidArgument when keys or shapes differ.
  absl::Status Merge(const TokenCounts& other);
  // InvalidArgument unless the shape is consistent and every count >= 0.
  absl::Status Validate() const;

  friend bool operator==(const TokenCounts&, const TokenCounts&) = default;
};

// What one rank reports after a step: its counts for every all-to-all it saw.
// Only rows with a non-zero count are serialised, so a rank that saw only its
// own gate outputs sends one row per entry.
struct TrafficReport {
  int reporter_rank = -1;  // who sent it (for error messages), -1 when unknown
  int64_t iteration = 0;
  std::vector<TokenCounts> entries;

  std::string ToJson() const;
  static absl::StatusOr<TrafficReport> FromJson(std::string_view text);
  // The same content as CBOR (binary, about half the size of the JSON).
  std::string ToCbor() const;
  static absl::StatusOr<TrafficReport> FromCbor(std::string_view bytes);

  friend bool operator==(const TrafficReport&, const TrafficReport&) = default;
};

}  // namespace mixnet
