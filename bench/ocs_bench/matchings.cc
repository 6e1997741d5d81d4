// DisjointMatchings: see matchings.h.
#include "bench/ocs_bench/matchings.h"

#include <algorithm>
#include <numeric>
#include <random>

#include "absl/strings/str_cat.h"

namespace mixnet::ocs::bench {

absl::StatusOr<std::pair<Matching, Matching>> DisjointMatchings(
    int n, uint64_t seed, const std::function<bool(int, int)>& forbidden) {
  if (n < 4 || n % 2 != 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("a full re-wiring needs an even port count >= 4, got ", n));
  }
  std::mt19937_64 rng(seed);
  std::vector<int> order(n);
  std::iota(order.begin(), order.end(), 1);
  for (int attempt = 0; attempt < 10000; ++attempt) {
    std::shuffle(order.begin(), order.end(), rng);
    Matching a;
    Matching b;
    bool ok = true;
    for (int i = 0; i < n && ok; ++i) {
      int x = order[i];
      int y = order[(i + 1) % n];
      if (forbidden && forbidden(std::min(x, y), std::max(x, y))) ok = false;
      (i % 2 == 0 ? a : b).push_back({std::min(x, y), std::max(x, y)});
    }
    if (!ok) continue;
    std::sort(a.begin(), a.end());
    std::sort(b.begin(), b.end());
    return std::make_pair(std::move(a), std::move(b));
  }
  return absl::NotFoundError(
      absl::StrCat("no pair of disjoint matchings of ", n, " ports avoids the forbidden pairs"));
}

}  // namespace mixnet::ocs::bench
