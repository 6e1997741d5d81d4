// The warm-up sweep's rounds (see warm_sweep.h).
#include "runtime/control/warm_sweep.h"

#include <algorithm>
#include <map>
#include <utility>

#include "absl/strings/str_cat.h"

namespace mixnet::control {
namespace {

// Host matchings of 0..n-1 by the circle method: n - 1 rounds for even n,
// n for odd n (a bye: the host paired with the phantom n sits out).
std::vector<std::vector<std::pair<int, int>>> RoundRobin(int n) {
  std::vector<std::vector<std::pair<int, int>>> out;
  if (n < 2) return out;
  const int m = n % 2 == 0 ? n : n + 1;  // with a phantom host n when odd
  for (int r = 0; r < m - 1; ++r) {
    std::vector<std::pair<int, int>> round;
    auto add = [&](int a, int b) {
      if (a < n && b < n) round.emplace_back(std::min(a, b), std::max(a, b));
    };
    add(m - 1, r);
    for (int i = 1; i < m / 2; ++i) add((r + i) % (m - 1), (r - i + (m - 1)) % (m - 1));
    out.push_back(std::move(round));
  }
  return out;
}

}  // namespace

absl::StatusOr<std::vector<std::vector<cluster::CircuitSpec>>> WarmSweep(
    const cluster::ClusterSpec& spec, const std::string& region) {
  const cluster::RegionSpec* rs = nullptr;
  for (const cluster::RegionSpec& r : spec.regions) {
    if (r.name == region) rs = &r;
  }
  if (rs == nullptr) {
    return absl::InvalidArgumentError(absl::StrCat("warm-up sweep: no region '", region, "'"));
  }
  // Per switch: each region host's ports on it (hosts in region order).
  std::map<std::string, std::vector<std::vector<int>>> ports;
  for (const std::string& name : rs->hosts) {
    const cluster::HostSpec* h = spec.FindHost(name);
    if (h == nullptr) continue;
    std::map<std::string, std::vector<int>> mine;
    for (const cluster::NicSpec& nic : h->nics) {
      if (nic.role == cluster::NicRole::kOcs) mine[nic.ocs_switch].push_back(nic.ocs_port);
    }
    for (auto& [sw, p] : mine) ports[sw].push_back(std::move(p));
  }
  std::vector<std::vector<cluster::CircuitSpec>> rounds;
  for (const auto& [sw, hosts] : ports) {
    size_t r = 0;  // this switch's rounds fill rounds[0..]
    for (const auto& matching : RoundRobin(static_cast<int>(hosts.size()))) {
      size_t shifts = 0;
      for (const auto& [a, b] : matching) {
        shifts = std::max({shifts, hosts[a].size(), hosts[b].size()});
      }
      for (size_t s = 0; s < shifts; ++s, ++r) {
        if (rounds.size() <= r) rounds.emplace_back();
        for (const auto& [a, b] : matching) {
          const bool a_small = hosts[a].size() <= hosts[b].size();
          const std::vector<int>& small = a_small ? hosts[a] : hosts[b];
          const std::vector<int>& large = a_small ? hosts[b] : hosts[a];
          if (s >= large.size()) continue;  // this pair is done; others shift on
          for (size_t i = 0; i < small.size(); ++i) {
            const int p = small[i], q = large[(i + s) % large.size()];
            rounds[r].push_back(cluster::CircuitSpec{sw, std::min(p, q), std::max(p, q)});
          }
        }
      }
    }
  }
  return rounds;
}

}  // namespace mixnet::control
