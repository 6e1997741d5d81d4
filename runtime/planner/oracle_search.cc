// The oracle's search for the best circuit set (oracle.h, figure (c)): the
// relaxation gives the lower bound and, rounded, a starting set; the caller's
// set (the installed circuits) is another start. Each start has its free
// ports filled (a circuit more never slows the best routing), then a local
// search re-pairs two circuits' ends, (a, b) + (c, d) -> (a, c) + (b, d) or
// (a, d) + (b, c), or moves one end onto a free port, taking the first change
// that lowers (b). From a local optimum it kicks the best set found (three
// random re-pairings, a fixed seed) and searches again, until a set meets
// the lower bound or OracleOptions::max_evaluations solves are spent.
// Deterministic; any thread.
#include <algorithm>
#include <cmath>
#include <numeric>
#include <random>
#include <utility>
#include <vector>

#include "runtime/planner/oracle.h"
#include "runtime/planner/oracle_internal.h"

namespace mixnet::planner {
namespace {

struct Edge {
  int a = 0;
  int b = 0;
};

class Search {
 public:
  Search(const TrafficMatrix& demand, const OracleFabric& fabric, const OracleOptions& options,
         double lower_bound)
      : d_(demand), f_(fabric), opt_(options), n_(fabric.hosts()), lb_(lower_bound) {}

  // Fills free ports, evaluates and improves `edges`; keeps the best seen.
  absl::Status Run(std::vector<Edge> edges);
  bool budget_left() const { return evaluations_ < opt_.max_evaluations && !AtBound(best_); }

  double best() const { return best_; }
  const std::vector<Edge>& best_edges() const { return best_edges_; }
  int evaluations() const { return evaluations_; }
  bool AtBound(double v) const { return v <= lb_ * (1 + 1e-9) + 1e-15; }

 private:
  std::vector<int> Free(const std::vector<Edge>& edges) const {
    std::vector<int> free(f_.ocs_ports);
    for (const Edge& e : edges) {
      --free[e.a];
      --free[e.b];
    }
    return free;
  }
  bool Usable(int a, int b) const { return a != b && f_.circuit_Bps(a, b) > 0; }
  void Fill(std::vector<Edge>& edges) const;
  absl::StatusOr<double> Evaluate(const std::vector<Edge>& edges);

  const TrafficMatrix& d_;
  const OracleFabric& f_;
  const OracleOptions& opt_;
  int n_;
  double lb_;
  int evaluations_ = 0;
  double best_ = kInfinity;
  std::vector<Edge> best_edges_;
};

// Free ports are paired greedily: the pair with the most bytes between them
// first (relays make any circuit useful, so idle pairs come last, not never).
void Search::Fill(std::vector<Edge>& edges) const {
  std::vector<int> free = Free(edges);
  std::vector<std::pair<int, int>> pairs;
  for (int a = 0; a < n_; ++a) {
    for (int b = a + 1; b < n_; ++b) {
      if (Usable(a, b)) pairs.emplace_back(a, b);
    }
  }
  std::stable_sort(pairs.begin(), pairs.end(), [&](const auto& x, const auto& y) {
    return d_.at(x.first, x.second) + d_.at(x.second, x.first) >
           d_.at(y.first, y.second) + d_.at(y.second, y.first);
  });
  bool added = true;
  while (added) {
    added = false;
    for (auto [a, b] : pairs) {
      if (free[a] > 0 && free[b] > 0) {
        edges.push_back({a, b});
        --free[a];
        --free[b];
        added = true;
      }
    }
  }
}

absl::StatusOr<double> Search::Evaluate(const std::vector<Edge>& edges) {
  std::vector<int> counts(static_cast<size_t>(n_) * n_, 0);
  for (const Edge& e : edges) {
    ++counts[static_cast<size_t>(e.a) * n_ + e.b];
    ++counts[static_cast<size_t>(e.b) * n_ + e.a];
  }
  ++evaluations_;
  absl::StatusOr<double> v = FloorOnCounts(d_, f_, counts, opt_);
  if (v.ok() && *v < best_) {
    best_ = *v;
    best_edges_ = edges;
  }
  return v;
}

absl::Status Search::Run(std::vector<Edge> edges) {
  Fill(edges);
  absl::StatusOr<double> cur = Evaluate(edges);
  if (!cur.ok()) return cur.status();
  // Evaluates a changed set and takes it when it lowers the floor.
  bool improved = true;
  auto take_if_better = [&](std::vector<Edge> next) -> absl::Status {
    absl::StatusOr<double> v = Evaluate(next);
    if (!v.ok()) return v.status();
    if (*v < *cur * (1 - 1e-9)) {
      edges = std::move(next);
      cur = v;
      improved = true;
    }
    return absl::OkStatus();
  };
  while (improved && budget_left()) {
    improved = false;
    const int m = static_cast<int>(edges.size());
    // Re-pair two circuits' ends.
    for (int p = 0; p < m && !improved && budget_left(); ++p) {
      for (int q = p + 1; q < m && !improved && budget_left(); ++q) {
        const Edge e = edges[p], g = edges[q];
        for (auto [x, y] : {std::pair{Edge{e.a, g.a}, Edge{e.b, g.b}},
                            std::pair{Edge{e.a, g.b}, Edge{e.b, g.a}}}) {
          if (improved || !budget_left()) break;
          if (!Usable(x.a, x.b) || !Usable(y.a, y.b)) continue;
          std::vector<Edge> next = edges;
          next[p] = x;
          next[q] = y;
          if (absl::Status s = take_if_better(std::move(next)); !s.ok()) return s;
        }
      }
    }
    // Move one end of a circuit onto a free port.
    const std::vector<int> free = Free(edges);
    for (int p = 0; p < m && !improved && budget_left(); ++p) {
      for (int end = 0; end < 2 && !improved; ++end) {
        for (int h = 0; h < n_ && !improved && budget_left(); ++h) {
          if (free[h] <= 0) continue;
          std::vector<Edge> next = edges;
          (end == 0 ? next[p].a : next[p].b) = h;
          if (!Usable(next[p].a, next[p].b)) continue;
          if (absl::Status s = take_if_better(std::move(next)); !s.ok()) return s;
        }
      }
    }
  }
  return absl::OkStatus();
}

// Three random re-pairings of two circuits' ends, (a, b) + (c, d) -> (a, c) +
// (b, d) or (a, d) + (b, c), skipping those that would join a host to itself or use a pair
// without a circuit rate.
void Kick(const OracleFabric& fabric, std::vector<Edge>& edges, std::mt19937& rng) {
  const int m = static_cast<int>(edges.size());
  if (m < 2) return;
  std::uniform_int_distribution<int> pick(0, m - 1);
  for (int done = 0, tries = 0; done < 3 && tries < 64; ++tries) {
    const int p = pick(rng), q = pick(rng);
    if (p == q) continue;
    const Edge e = edges[p], g = edges[q];
    const bool cross = rng() % 2 == 1;
    const Edge x{e.a, cross ? g.b : g.a}, y{e.b, cross ? g.a : g.b};
    if (x.a == x.b || y.a == y.b || fabric.circuit_Bps(x.a, x.b) <= 0 ||
        fabric.circuit_Bps(y.a, y.b) <= 0) {
      continue;
    }
    edges[p] = x;
    edges[q] = y;
    ++done;
  }
}

// The relaxation's fractional counts to whole circuits: whole parts first,
// then the largest fractions, within the ports.
std::vector<Edge> Round(const OracleFabric& fabric, const std::vector<double>& x) {
  const int n = fabric.hosts();
  std::vector<int> free(fabric.ocs_ports);
  std::vector<Edge> edges;
  std::vector<std::pair<double, std::pair<int, int>>> fractions;
  for (int a = 0; a < n; ++a) {
    for (int b = a + 1; b < n; ++b) {
      const double v = x[static_cast<size_t>(a) * n + b];
      int whole = static_cast<int>(std::floor(v + 1e-7));
      whole = std::min({whole, free[a], free[b]});
      for (int i = 0; i < whole; ++i) edges.push_back({a, b});
      free[a] -= whole;
      free[b] -= whole;
      const double frac = v - whole;
      if (frac > 1e-7) fractions.push_back({frac, {a, b}});
    }
  }
  std::stable_sort(fractions.begin(), fractions.end(),
                   [](const auto& p, const auto& q) { return p.first > q.first; });
  for (const auto& [frac, ab] : fractions) {
    auto [a, b] = ab;
    if (free[a] > 0 && free[b] > 0) {
      edges.push_back({a, b});
      --free[a];
      --free[b];
    }
  }
  return edges;
}

}  // namespace

absl::StatusOr<BestFloor> SearchBestFloor(const TrafficMatrix& demand, const OracleFabric& fabric,
                                          const std::vector<UndirectedCircuit>* start,
                                          const OracleOptions& options) {
  absl::StatusOr<Relaxation> relaxed = RelaxedFloor(demand, fabric, options);
  if (!relaxed.ok()) return relaxed.status();
  std::vector<Edge> given;
  if (start != nullptr) {
    absl::StatusOr<std::vector<int>> counts = CircuitCounts(fabric, *start);
    if (!counts.ok()) return counts.status();
    for (const UndirectedCircuit& c : *start) given.push_back({c.a, c.b});
  }
  BestFloor out;
  out.lower_bound_s = relaxed->lower_bound_s;
  Search search(demand, fabric, options, relaxed->lower_bound_s);
  if (absl::Status s = search.Run(Round(fabric, relaxed->circuits)); !s.ok()) return s;
  if (start != nullptr && search.budget_left()) {
    if (absl::Status s = search.Run(given); !s.ok()) return s;
  }
  std::mt19937 rng(1);
  while (search.budget_left() && search.best_edges().size() >= 2) {
    std::vector<Edge> kicked = search.best_edges();
    Kick(fabric, kicked, rng);
    if (absl::Status s = search.Run(std::move(kicked)); !s.ok()) return s;
  }
  out.floor_s = search.best();
  out.evaluations = search.evaluations();
  out.at_bound = search.AtBound(out.floor_s);
  for (const Edge& e : search.best_edges()) {
    out.circuits.push_back({e.a, e.b, fabric.circuit_Bps(e.a, e.b)});
  }
  return out;
}

}  // namespace mixnet::planner
