// The demo's workload generator and trace reader (see workload.h).
#include "apps/demo/workload.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <fstream>
#include <map>
#include <numeric>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "runtime/common/status.h"
#include "runtime/locality/locality_collector.h"

namespace mixnet::demo {
namespace {

uint64_t Mix(uint64_t x) {  // splitmix64 finaliser
  x += 0x9e3779b97f4a7c15ULL;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ULL;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebULL;
  return x ^ (x >> 31);
}

uint64_t Hash(std::initializer_list<uint64_t> parts) {
  uint64_t h = 0x6d69786e65742d64ULL;
  for (uint64_t p : parts) h = Mix(h ^ p);
  return h;
}

// A small deterministic generator (the same numbers on every platform).
class Rng {
 public:
  explicit Rng(uint64_t seed) : s_(seed) {}
  uint64_t Next() { return Mix(s_++); }
  double Uniform() { return static_cast<double>(Next() >> 11) * 0x1.0p-53; }
  int Below(int n) { return static_cast<int>(Next() % static_cast<uint64_t>(n)); }

 private:
  uint64_t s_;
};

enum Stream : uint64_t { kAffinity = 1, kHot = 2, kJitter = 3 };

// Sattolo's algorithm: a uniformly random cyclic permutation (no fixed point).
std::vector<int> RandomCycle(int n, Rng& rng) {
  std::vector<int> p(n);
  std::iota(p.begin(), p.end(), 0);
  for (int i = n - 1; i > 0; --i) std::swap(p[i], p[rng.Below(i)]);
  return p;
}

std::vector<int> RandomPermutation(int n, Rng& rng) {
  std::vector<int> p(n);
  std::iota(p.begin(), p.end(), 0);
  for (int i = n - 1; i > 0; --i) std::swap(p[i], p[rng.Below(i + 1)]);
  return p;
}

// A random derangement: for an even n a perfect matching (a(a(s)) = s: hot
// pairs, as inside an expert-parallel group), else one random cycle.
std::vector<int> RandomAffinity(int n, Rng& rng) {
  if (n % 2 != 0) return RandomCycle(n, rng);
  const std::vector<int> order = RandomPermutation(n, rng);
  std::vector<int> a(n);
  for (int i = 0; i < n; i += 2) {
    a[order[i]] = order[i + 1];
    a[order[i + 1]] = order[i];
  }
  return a;
}

}  // namespace

// Largest-remainder rounding (see workload.h).
std::vector<int64_t> Apportion(const std::vector<double>& p, int64_t total) {
  std::vector<int64_t> out(p.size());
  std::vector<std::pair<double, size_t>> rest(p.size());
  int64_t given = 0;
  for (size_t i = 0; i < p.size(); ++i) {
    const double exact = p[i] * static_cast<double>(total);
    out[i] = static_cast<int64_t>(std::floor(exact));
    given += out[i];
    rest[i] = {exact - static_cast<double>(out[i]), i};
  }
  std::stable_sort(rest.begin(), rest.end(),
                   [](const auto& a, const auto& b) { return a.first > b.first; });
  for (size_t k = 0; given < total && k < rest.size(); ++k, ++given) ++out[rest[k].second];
  return out;
}

std::string Workload::HostName(int host) { return absl::StrCat("h", host); }

absl::StatusOr<Workload> Workload::Create(WorkloadOptions o) {
  if (o.hosts < 2)
    return absl::InvalidArgumentError(absl::StrCat("workload: --hosts ", o.hosts, " < 2"));
  if (o.tokens < 0 || o.token_bytes <= 0) {
    return absl::InvalidArgumentError(absl::StrCat(
        "workload: --tokens ", o.tokens, " and --token-bytes ", o.token_bytes, " must be > 0"));
  }
  if (!(o.affine_share >= 0 && o.affine_share <= 1) || !(o.jitter >= 0 && o.jitter < 1) ||
      !(o.zipf_s >= 0)) {
    return absl::InvalidArgumentError(absl::StrCat("workload: affine_share ", o.affine_share,
                                                   " jitter ", o.jitter, " zipf_s ", o.zipf_s,
                                                   " out of range"));
  }
  if (o.drift_every < 1) o.drift_every = 1;
  std::vector<std::vector<TokenCounts>> trace;
  if (!o.trace.empty()) {
    std::ifstream in(o.trace);
    if (!in) return absl::NotFoundError(absl::StrCat("workload: cannot open trace ", o.trace));
    std::map<int64_t, std::map<int, TokenCounts>> by_iter;
    std::string line;
    int line_no = 0;
    while (std::getline(in, line)) {
      ++line_no;
      if (line.find_first_not_of(" \t\r") == std::string::npos) continue;
      absl::StatusOr<TrafficReport> r = TrafficReport::FromJson(line);
      if (!r.ok()) return Annotate(r.status(), absl::StrCat("trace ", o.trace, ":", line_no));
      for (TokenCounts& c : r->entries) {
        if (c.key.direction != Direction::kDispatch) continue;
        if (c.num_ranks != o.hosts || c.num_experts % o.hosts != 0 || c.num_experts == 0) {
          return absl::InvalidArgumentError(absl::StrCat(
              "trace ", o.trace, ":", line_no, ": ", c.num_ranks, " ranks x ", c.num_experts,
              " experts does not fit ", o.hosts, " hosts (one rank each, experts a multiple)"));
        }
        c.key.micro_batch = 0;
        auto [it, fresh] = by_iter[r->iteration].try_emplace(c.key.layer, c);
        if (!fresh)
          RETURN_IF_ERROR(
              Annotate(it->second.Merge(c), absl::StrCat("trace ", o.trace, ":", line_no)));
      }
    }
    if (by_iter.empty())
      return absl::InvalidArgumentError(absl::StrCat("trace ", o.trace, ": no dispatch counts"));
    const int layers = static_cast<int>(by_iter.begin()->second.size());
    for (auto& [iter, layer_map] : by_iter) {
      std::vector<TokenCounts> row;
      for (int l = 0; l < layers; ++l) {
        auto it = layer_map.find(l);
        if (it == layer_map.end() || static_cast<int>(layer_map.size()) != layers) {
          return absl::InvalidArgumentError(absl::StrCat("trace ", o.trace, ": iteration ", iter,
                                                         " does not have exactly layers 0..",
                                                         layers - 1));
        }
        if (it->second.num_experts != by_iter.begin()->second.begin()->second.num_experts) {
          return absl::InvalidArgumentError(absl::StrCat("trace ", o.trace, ": iteration ", iter,
                                                         " changes the number of experts"));
        }
        row.push_back(std::move(it->second));
      }
      trace.push_back(std::move(row));
    }
    o.layers = layers;
    o.experts_per_host = trace[0][0].num_experts / o.hosts;
  }
  if (o.layers < 1 || o.experts_per_host < 1) {
    return absl::InvalidArgumentError(absl::StrCat("workload: layers ", o.layers,
                                                   " and experts_per_host ", o.experts_per_host,
                                                   " must be >= 1"));
  }
  PlacementTables t;
  for (int h = 0; h < o.hosts; ++h) {
    t.hosts.push_back(HostName(h));
    t.host_region.push_back("r0");
    t.rank_host.push_back(h);
  }
  if (o.placement != "round_robin" && o.placement != "contiguous") {
    return absl::InvalidArgumentError(
        absl::StrCat("workload: placement '", o.placement, "' (round_robin or contiguous)"));
  }
  const bool blocks = o.placement == "contiguous";
  for (int e = 0; e < o.hosts * o.experts_per_host; ++e) {
    t.expert_rank.push_back(blocks ? e / o.experts_per_host : e % o.hosts);
  }
  ASSIGN_OR_RETURN(ExpertPlacement p, ExpertPlacement::Create(std::move(t)));
  Workload w(std::move(o), std::move(p));
  w.trace_ = std::move(trace);
  return w;
}

std::vector<int> Workload::Affinity(int64_t iteration, int layer) const {
  if (!trace_.empty()) return {};
  Rng rng(Hash({o_.seed, kAffinity, static_cast<uint64_t>(layer),
                static_cast<uint64_t>(iteration / o_.drift_every)}));
  return RandomAffinity(o_.hosts, rng);
}

TokenCounts Workload::Counts(int64_t iteration, int layer) const {
  const GateKey key{.layer = layer, .micro_batch = 0, .direction = Direction::kDispatch};
  if (!trace_.empty()) {
    TokenCounts c = trace_[static_cast<size_t>(iteration) % trace_.size()][layer];
    c.key = key;
    return c;
  }
  const int hosts = o_.hosts;
  const int experts = num_experts();
  const uint64_t epoch = static_cast<uint64_t>(iteration / o_.drift_every);
  const std::vector<int> affinity = Affinity(iteration, layer);
  Rng hot_rng(Hash({o_.seed, kHot, static_cast<uint64_t>(layer), epoch}));
  const std::vector<int> hot_rank =
      RandomPermutation(experts, hot_rng);  // expert -> popularity rank
  std::vector<double> z(experts);
  std::vector<double> z_host(hosts, 0.0);
  double z_all = 0;
  for (int e = 0; e < experts; ++e) {
    z[e] = 1.0 / std::pow(hot_rank[e] + 1.0, o_.zipf_s);
    z_host[placement_.HostOfExpert(e)] += z[e];
    z_all += z[e];
  }
  TokenCounts out = TokenCounts::Zero(key, hosts, experts);
  for (int s = 0; s < hosts; ++s) {
    Rng jit(Hash({o_.seed, kJitter, static_cast<uint64_t>(iteration), static_cast<uint64_t>(layer),
                  static_cast<uint64_t>(s)}));
    std::vector<double> p(experts);
    double sum = 0;
    for (int e = 0; e < experts; ++e) {
      const int h = placement_.HostOfExpert(e);
      double v = (1 - o_.affine_share) * z[e] / z_all;
      if (h == affinity[s]) v += o_.affine_share * z[e] / z_host[h];
      v *= 1 + o_.jitter * (2 * jit.Uniform() - 1);
      p[e] = v;
      sum += v;
    }
    for (double& v : p) v /= sum;
    const std::vector<int64_t> c = Apportion(p, o_.tokens);
    for (int e = 0; e < experts; ++e) out.at(s, e) = c[e];
  }
  return out;
}

TrafficMatrix Workload::DispatchMatrix(int64_t iteration, int layer) const {
  absl::StatusOr<LocalityMatrices> m =
      BuildMatrices(placement_, Counts(iteration, layer), static_cast<double>(o_.token_bytes));
  return m.ok() ? m->cluster : TrafficMatrix(o_.hosts);  // shapes match by construction
}

std::vector<size_t> Workload::DispatchBytes(int64_t iteration, int layer) const {
  const TokenCounts c = Counts(iteration, layer);
  std::vector<size_t> out(static_cast<size_t>(o_.hosts) * o_.hosts, 0);
  for (int s = 0; s < o_.hosts; ++s) {
    for (int e = 0; e < c.num_experts; ++e) {
      out[static_cast<size_t>(s) * o_.hosts + placement_.HostOfExpert(e)] +=
          static_cast<size_t>(c.at(s, e)) * static_cast<size_t>(o_.token_bytes);
    }
  }
  return out;
}

std::string Workload::Describe() const {
  if (!trace_.empty()) {
    return absl::StrFormat(
        "workload: trace %s (%d iterations, replayed in a cycle), %d hosts x %d experts each "
        "(%s), %d layers, %d bytes per token",
        o_.trace, trace_.size(), o_.hosts, o_.experts_per_host, o_.placement, o_.layers,
        o_.token_bytes);
  }
  return absl::StrFormat(
      "workload: seed %d, %d hosts x %d experts each (%s), %d layers,\n"
      "  %d tokens per rank (top-1) x %d bytes. Per layer each host sends %.0f%% of its tokens to\n"
      "  the experts of its affine host (%s), the rest Zipf(s=%.2f) over all\n"
      "  experts by a per-layer hot ranking; affinities and hot experts drift every %d "
      "iterations;\n"
      "  per-iteration jitter +-%.0f%%",
      o_.seed, o_.hosts, o_.experts_per_host,
      o_.placement == "contiguous" ? "in blocks" : "expert e on host e % hosts", o_.layers,
      o_.tokens, o_.token_bytes, 100 * o_.affine_share,
      o_.hosts % 2 == 0 ? "a per-layer random pairing of the hosts" : "a per-layer random cycle",
      o_.zipf_s, o_.drift_every, 100 * o_.jitter);
}

namespace {
uint64_t BlockBase(const BlockId& id) {
  return Hash({id.seed, 0xB10C, static_cast<uint64_t>(id.iteration),
               static_cast<uint64_t>(id.layer), static_cast<uint64_t>(id.direction),
               static_cast<uint64_t>(id.src), static_cast<uint64_t>(id.dst)});
}
}  // namespace

void FillBlock(const BlockId& id, uint8_t* data, size_t bytes) {
  const uint64_t base = BlockBase(id);
  size_t i = 0;
  for (; i + 8 <= bytes; i += 8) {
    const uint64_t w = Mix(base + i);
    std::memcpy(data + i, &w, 8);
  }
  if (i < bytes) {
    const uint64_t w = Mix(base + i);
    std::memcpy(data + i, &w, bytes - i);
  }
}

size_t VerifyBlock(const BlockId& id, const uint8_t* data, size_t bytes) {
  // Word granularity: a word that differs counts all its bytes (callers
  // poison receive buffers first, so a byte never written cannot pass).
  const uint64_t base = BlockBase(id);
  size_t bad = 0;
  size_t i = 0;
  for (; i + 8 <= bytes; i += 8) {
    const uint64_t w = Mix(base + i);
    if (std::memcmp(data + i, &w, 8) != 0) bad += 8;
  }
  if (i < bytes) {
    const uint64_t w = Mix(base + i);
    if (std::memcmp(data + i, &w, bytes - i) != 0) bad += bytes - i;
  }
  return bad;
}

}  // namespace mixnet::demo
