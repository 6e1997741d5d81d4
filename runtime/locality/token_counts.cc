// TokenCounts arithmetic and TrafficReport serialisation (see token_counts.h).
#include "runtime/locality/token_counts.h"

#include <exception>

#include "absl/strings/str_cat.h"
#include "nlohmann/json.hpp"

namespace mixnet {
namespace {

using nlohmann::json;

// Guards allocations driven by untrusted input (64 Mi counts = 512 MiB).
constexpr int64_t kMaxCells = int64_t{1} << 26;

json ToJsonValue(const TrafficReport& r) {
  json entries = json::array();
  for (const TokenCounts& c : r.entries) {
    json rows = json::array();
    for (int rank = 0; rank < c.num_ranks; ++rank) {
      const auto begin = c.counts.begin() + static_cast<size_t>(rank) * c.num_experts;
      const std::vector<int64_t> row(begin, begin + c.num_experts);
      bool any = false;
      for (int64_t v : row) any = any || v != 0;
      if (any) rows.push_back({{"rank", rank}, {"counts", row}});
    }
    entries.push_back({{"layer", c.key.layer},
                       {"micro_batch", c.key.micro_batch},
                       {"direction", std::string(DirectionName(c.key.direction))},
                       {"num_ranks", c.num_ranks},
                       {"num_experts", c.num_experts},
                       {"rows", std::move(rows)}});
  }
  return {{"reporter_rank", r.reporter_rank},
          {"iteration", r.iteration},
          {"entries", std::move(entries)}};
}

absl::StatusOr<TrafficReport> FromJsonValue(const json& j) {
  TrafficReport r;
  try {
    r.reporter_rank = j.at("reporter_rank").get<int>();
    r.iteration = j.at("iteration").get<int64_t>();
    const json& entries = j.at("entries");
    for (size_t i = 0; i < entries.size(); ++i) {
      const json& e = entries.at(i);
      const std::string where = absl::StrCat("traffic report: entries[", i, "]");
      GateKey key;
      key.layer = e.at("layer").get<int>();
      key.micro_batch = e.at("micro_batch").get<int>();
      absl::StatusOr<Direction> dir = ParseDirection(e.at("direction").get<std::string>());
      if (!dir.ok())
        return absl::InvalidArgumentError(absl::StrCat(where, ": ", dir.status().message()));
      key.direction = *dir;
      const int ranks = e.at("num_ranks").get<int>();
      const int experts = e.at("num_experts").get<int>();
      if (ranks <= 0 || experts <= 0 || int64_t{ranks} * experts > kMaxCells) {
        return absl::InvalidArgumentError(
            absl::StrCat(where, ": bad shape ", ranks, " ranks x ", experts, " experts"));
      }
      TokenCounts c = TokenCounts::Zero(key, ranks, experts);
      std::vector<bool> seen(ranks, false);
      const json& rows = e.at("rows");
      for (size_t k = 0; k < rows.size(); ++k) {
        const int rank = rows.at(k).at("rank").get<int>();
        if (rank < 0 || rank >= ranks || seen[rank]) {
          return absl::InvalidArgumentError(absl::StrCat(
              where, ".rows[", k, "]: rank ", rank, " out of range [0, ", ranks, ") or repeated"));
        }
        seen[rank] = true;
        const auto row = rows.at(k).at("counts").get<std::vector<int64_t>>();
        if (static_cast<int>(row.size()) != experts) {
          return absl::InvalidArgumentError(absl::StrCat(where, ".rows[", k, "]: ", row.size(),
                                                         " counts for ", experts, " experts"));
        }
        for (int x = 0; x < experts; ++x) c.at(rank, x) = row[x];
      }
      if (absl::Status s = c.Validate(); !s.ok()) {
        return absl::InvalidArgumentError(absl::StrCat(where, ": ", s.message()));
      }
      r.entries.push_back(std::move(c));
    }
  } catch (const std::exception& e) {
    return absl::InvalidArgumentError(absl::StrCat("traffic report: ", e.what()));
  }
  return r;
}

}  // namespace

std::string LayerDirectionName(int layer, Direction d) {
  return absl::StrCat("layer ", layer, " ", std::string(DirectionName(d)));
}

std::string_view DirectionName(Direction d) {
  return d == Direction::kDispatch ? "dispatch" : "combine";
}

absl::StatusOr<Direction> ParseDirection(std::string_view name) {
  if (name == "dispatch") return Direction::kDispatch;
  if (name == "combine") return Direction::kCombine;
  return absl::InvalidArgumentError(
      absl::StrCat("direction: expected dispatch or combine, got '", std::string(name), "'"));
}

std::string KeyString(const GateKey& key) {
  return absl::StrCat("layer ", key.layer, " mb ", key.micro_batch, " ",
                      std::string(DirectionName(key.direction)));
}

TokenCounts TokenCounts::Zero(GateKey key, int num_ranks, int num_experts) {
  TokenCounts c;
  c.key = key;
  c.num_ranks = num_ranks;
  c.num_experts = num_experts;
  c.counts.assign(static_cast<size_t>(num_ranks) * num_experts, 0);
  return c;
}

int64_t TokenCounts::Total() const {
  int64_t sum = 0;
  for (int64_t v : counts) sum += v;
  return sum;
}

std::vector<int64_t> TokenCounts::PerExpert() const {
  std::vector<int64_t> out(num_experts, 0);
  for (int r = 0; r < num_ranks; ++r) {
    for (int e = 0; e < num_experts; ++e) out[e] += at(r, e);
  }
  return out;
}

absl::Status TokenCounts::Merge(const TokenCounts& other) {
  if (other.key != key) {
    return absl::InvalidArgumentError(absl::StrCat("token counts: cannot merge ",
                                                   KeyString(other.key), " into ", KeyString(key)));
  }
  if (other.num_ranks != num_ranks || other.num_experts != num_experts ||
      other.counts.size() != counts.size()) {
    return absl::InvalidArgumentError(
        absl::StrCat("token counts ", KeyString(key), ": shape ", other.num_ranks, "x",
                     other.num_experts, " does not match ", num_ranks, "x", num_experts));
  }
  for (size_t i = 0; i < counts.size(); ++i) counts[i] += other.counts[i];
  return absl::OkStatus();
}

absl::Status TokenCounts::Validate() const {
  if (num_ranks <= 0 || num_experts <= 0 ||
      counts.size() != static_cast<size_t>(num_ranks) * num_experts) {
    return absl::InvalidArgumentError(absl::StrCat("token counts ", KeyString(key), ": ",
                                                   counts.size(), " counts for ", num_ranks,
                                                   " ranks x ", num_experts, " experts"));
  }
  for (int r = 0; r < num_ranks; ++r) {
    for (int e = 0; e < num_experts; ++e) {
      if (at(r, e) < 0) {
        return absl::InvalidArgumentError(absl::StrCat("token counts ", KeyString(key), ": rank ",
                                                       r, " expert ", e, " count ", at(r, e),
                                                       " < 0"));
      }
    }
  }
  return absl::OkStatus();
}

std::string TrafficReport::ToJson() const { return ToJsonValue(*this).dump(); }

absl::StatusOr<TrafficReport> TrafficReport::FromJson(std::string_view text) {
  json j = json::parse(text.begin(), text.end(), nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded()) return absl::InvalidArgumentError("traffic report: not valid JSON");
  return FromJsonValue(j);
}

std::string TrafficReport::ToCbor() const {
  const std::vector<std::uint8_t> bytes = json::to_cbor(ToJsonValue(*this));
  return std::string(bytes.begin(), bytes.end());
}

absl::StatusOr<TrafficReport> TrafficReport::FromCbor(std::string_view bytes) {
  json j = json::from_cbor(bytes.begin(), bytes.end(), /*strict=*/true,
                           /*allow_exceptions=*/false);
  if (j.is_discarded()) return absl::InvalidArgumentError("traffic report: not valid CBOR");
  return FromJsonValue(j);
}

}  // namespace mixnet
