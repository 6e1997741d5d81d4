// How a dynamic pair's bytes are cut into pieces (SplitPair) and relay
// pieces into chunks (CutRelays, RelayChunkCount/Len); pure
// functions, declared in alltoall_internal.h. Caller thread only.
#include <algorithm>
#include <cmath>

#include "runtime/collectives/alltoall_internal.h"

namespace mixnet::collectives::internal {
namespace {

constexpr size_t kAlign = 4096;

// round(bytes x share) in whole 4 KiB pages.
uint64_t Pages(uint64_t bytes, double share) {
  return static_cast<uint64_t>(
             std::llround(static_cast<double>(bytes) * share / static_cast<double>(kAlign))) *
         kAlign;
}

}  // namespace

std::vector<PieceSpec> SplitPair(size_t offset, size_t bytes, const std::vector<double>& eps_gbps,
                                 const std::vector<double>& link_gbps, double eps_share,
                                 size_t first) {
  std::vector<PieceSpec> out;
  auto add = [&](const std::vector<double>& gbps, size_t len, bool direct) {
    std::vector<size_t> sizes = SplitAcrossPaths(len, gbps, first);
    for (size_t i = 0; i < sizes.size(); ++i) {
      out.push_back(PieceSpec{offset, sizes[i], direct, i});
      offset += sizes[i];
    }
  };
  if (link_gbps.empty()) {
    add(eps_gbps, bytes, false);
    return out;
  }
  if (!(eps_share > 0) || eps_gbps.empty()) {  // router v1 (or no EPS path)
    add(link_gbps, bytes, true);
    return out;
  }
  const double share = std::min(eps_share, 1.0);
  size_t on_eps = Pages(bytes, share);
  if (share >= 1.0 || on_eps > bytes) on_eps = bytes;
  add(link_gbps, bytes - on_eps, true);
  add(eps_gbps, on_eps, false);
  std::vector<PieceSpec> kept;
  for (const PieceSpec& p : out) {
    if (p.len > 0) kept.push_back(p);
  }
  if (kept.empty()) kept.push_back(out.front());
  return kept;
}

RelayCut CutRelays(uint64_t bytes, double eps_share, const std::vector<double>& relay_shares) {
  RelayCut out;
  uint64_t left = bytes;
  for (double share : relay_shares) {
    const uint64_t len = share > 0 ? std::min(Pages(bytes, std::min(share, 1.0)), left) : 0;
    out.lens.push_back(len);
    left -= len;
  }
  if (left > 0 && eps_share > 0) {
    out.rest_eps_share =
        std::min(1.0, static_cast<double>(bytes) * eps_share / static_cast<double>(left));
  }
  return out;
}

size_t RelayChunkCount(uint64_t len, uint32_t chunk) {
  return chunk == 0 ? 0 : static_cast<size_t>((len + chunk - 1) / chunk);
}

size_t RelayChunkLen(uint64_t len, uint32_t chunk, size_t k) {
  const uint64_t start = static_cast<uint64_t>(k) * chunk;
  return start >= len ? 0 : static_cast<size_t>(std::min<uint64_t>(chunk, len - start));
}

}  // namespace mixnet::collectives::internal
