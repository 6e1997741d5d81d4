// Water-filling split of each pair's bytes over circuits, EPS and relays (see
// routing.h). Pure computation, callable from any thread.
#include "runtime/planner/routing.h"

#include <algorithm>
#include <cmath>

namespace mixnet::planner {
namespace {

// Dense per-direction circuit capacity, cap[i * n + j].
std::vector<double> DenseCaps(int n, const Adjacency& adjacency) {
  std::vector<double> cap(static_cast<size_t>(n) * n, 0);
  for (int i = 0; i < n && i < static_cast<int>(adjacency.size()); ++i) {
    for (const CircuitLink& l : adjacency[i]) {
      if (l.peer >= 0 && l.peer < n && l.peer != i)
        cap[static_cast<size_t>(i) * n + l.peer] += l.Bps;
    }
  }
  return cap;
}

// Dense per-direction circuit count, count[i * n + j].
std::vector<int> DenseCounts(int n, const Adjacency& adjacency) {
  std::vector<int> count(static_cast<size_t>(n) * n, 0);
  for (int i = 0; i < n && i < static_cast<int>(adjacency.size()); ++i) {
    for (const CircuitLink& l : adjacency[i]) {
      if (l.peer >= 0 && l.peer < n && l.peer != i)
        count[static_cast<size_t>(i) * n + l.peer] += std::max(1, l.circuits);
    }
  }
  return count;
}

RegionRouting DirectRouting(const FluidModel& model, const std::vector<double>& cap, double t) {
  const int n = model.hosts();
  RegionRouting r;
  r.hosts = n;
  r.pairs.resize(static_cast<size_t>(n) * n);
  for (int i = 0; i < n; ++i) {
    for (int j = 0; j < n; ++j) {
      if (i == j) continue;
      const double d = model.demand(i, j);
      const double c = cap[static_cast<size_t>(i) * n + j];
      PairSplit& p = r.at(i, j);
      p.circuit = std::isfinite(t) ? std::min(d, t * c) : (c > 0 ? d : 0);
      // Rounding must not leave a sliver on EPS (a host may have none).
      if (c > 0 && d - p.circuit <= 1e-12 * d) p.circuit = d;
      p.eps = d - p.circuit;
    }
  }
  return r;
}

// Tries to meet target `t` by moving EPS bytes onto relays (see routing.h).
// Fills `out` and returns true when every EPS side fits within t E.
bool TryTarget(const FluidModel& model, const Adjacency& adj, const std::vector<double>& cap,
               double t, bool eps_relay, RegionRouting& out) {
  const int n = model.hosts();
  out = DirectRouting(model, cap, t);
  std::vector<double> spare(static_cast<size_t>(n) * n, 0);
  std::vector<double> ex_out(n, 0), ex_in(n, 0);
  double scale = 0;
  for (int i = 0; i < n; ++i) {
    scale = std::max(scale, std::max(model.egress_bytes(i), model.ingress_bytes(i)));
    for (int j = 0; j < n; ++j) {
      if (i == j) continue;
      const size_t ij = static_cast<size_t>(i) * n + j;
      spare[ij] = t * cap[ij] - out.pairs[ij].circuit;
      ex_out[i] += out.pairs[ij].eps;
      ex_in[j] += out.pairs[ij].eps;
    }
  }
  for (int h = 0; h < n; ++h) {
    ex_out[h] -= t * model.eps_Bps(h);
    ex_in[h] -= t * model.eps_Bps(h);
  }
  const double tol = 1e-9 * scale;

  // Adds m bytes over relay host k to a list of (k, bytes).
  auto add = [](std::vector<std::pair<int, double>>& list, int k, double m) {
    for (auto& r : list) {
      if (r.first == k) {
        r.second += m;
        return;
      }
    }
    list.emplace_back(k, m);
  };
  // Moves up to `want` EPS bytes of (i, j) onto relays via the circuit peers of `via_host`.
  auto relieve = [&](int i, int j, double want) {
    PairSplit& p = out.at(i, j);
    const int anchor = ex_out[i] > tol ? i : j;
    for (const CircuitLink& l : adj[anchor]) {
      if (want <= tol || p.eps <= tol) break;
      const int k = l.peer;
      if (k == i || k == j) continue;
      const size_t ik = static_cast<size_t>(i) * n + k;
      const size_t kj = static_cast<size_t>(k) * n + j;
      const double m = std::min({want, p.eps, spare[ik], spare[kj]});
      if (m <= tol) continue;
      spare[ik] -= m;
      spare[kj] -= m;
      p.eps -= m;
      ex_out[i] -= m;
      ex_in[j] -= m;
      want -= m;
      add(p.relay, k, m);
    }
  };
  // One-sided relays for the EPS bytes of (i, j). `ingress`: j's EPS ingress
  // is over, so they go i -EPS-> k -circuit-> j through j's circuit peers k
  // with spare EPS ingress and no circuit from i. Else i's egress is over:
  // i -circuit-> k -EPS-> j through i's circuit peers with spare EPS egress
  // and no circuit to j.
  auto one_sided = [&](int i, int j, bool ingress) {
    PairSplit& p = out.at(i, j);
    const int hub = ingress ? j : i;  // the end that is over
    std::vector<double>& ex = ingress ? ex_in : ex_out;
    for (const CircuitLink& l : adj[hub]) {
      if (ex[hub] <= tol || p.eps <= tol) break;
      const int k = l.peer;
      const size_t eps_hop =
          ingress ? static_cast<size_t>(i) * n + k : static_cast<size_t>(k) * n + j;
      const size_t circuit_hop =
          ingress ? static_cast<size_t>(k) * n + j : static_cast<size_t>(i) * n + k;
      if (k == i || k == j || cap[eps_hop] > 0) continue;
      const double m = std::min({ex[hub], p.eps, -ex[k], spare[circuit_hop]});
      if (m <= tol) continue;
      spare[circuit_hop] -= m;
      p.eps -= m;
      ex[hub] -= m;
      ex[k] += m;
      add(ingress ? p.eps_circuit : p.circuit_eps, k, m);
    }
  };
  // Pairs whose both ends are over first (each byte moved helps twice), then
  // the rest; then one-sided relays for what is still over.
  for (int pass = 0; pass < (eps_relay ? 3 : 2); ++pass) {
    for (int i = 0; i < n; ++i) {
      for (int j = 0; j < n; ++j) {
        if (i == j) continue;
        const bool both = ex_out[i] > tol && ex_in[j] > tol;
        const bool one = ex_out[i] > tol || ex_in[j] > tol;
        if (pass == 0 ? !both : !one) continue;
        if (out.at(i, j).eps <= tol) continue;
        if (pass < 2) {
          relieve(i, j, std::max(ex_out[i], ex_in[j]));
        } else {
          if (ex_in[j] > tol) one_sided(i, j, /*ingress=*/true);
          if (ex_out[i] > tol) one_sided(i, j, /*ingress=*/false);
        }
      }
    }
  }
  for (int h = 0; h < n; ++h) {
    if (ex_out[h] > tol || ex_in[h] > tol) return false;
  }
  return true;
}

}  // namespace

double EvaluateRouting(const FluidModel& model, const Adjacency& adjacency,
                       const RegionRouting& routing, double relay_chunk_bytes) {
  const int n = model.hosts();
  const std::vector<double> cap = DenseCaps(n, adjacency);
  std::vector<double> load(static_cast<size_t>(n) * n, 0);
  std::vector<double> eps_out(n, 0), eps_in(n, 0);
  for (int i = 0; i < n && i < routing.hosts; ++i) {
    for (int j = 0; j < n && j < routing.hosts; ++j) {
      if (i == j) continue;
      const PairSplit& p = routing.at(i, j);
      load[static_cast<size_t>(i) * n + j] += p.circuit;
      eps_out[i] += p.eps;
      eps_in[j] += p.eps;
      for (const auto& [k, bytes] : p.relay) {
        load[static_cast<size_t>(i) * n + k] += bytes;
        load[static_cast<size_t>(k) * n + j] += bytes;
      }
      for (const auto& [k, bytes] : p.eps_circuit) {
        eps_out[i] += bytes;
        eps_in[k] += bytes;
        load[static_cast<size_t>(k) * n + j] += bytes;
      }
      for (const auto& [k, bytes] : p.circuit_eps) {
        load[static_cast<size_t>(i) * n + k] += bytes;
        eps_out[k] += bytes;
        eps_in[j] += bytes;
      }
    }
  }
  auto ratio = [](double bytes, double rate) {
    if (bytes <= 0) return 0.0;
    return rate > 0 ? bytes / rate : kInfinity;
  };
  double t = 0;
  for (size_t x = 0; x < load.size(); ++x) t = std::max(t, ratio(load[x], cap[x]));
  for (int h = 0; h < n; ++h) {
    t = std::max(t, ratio(eps_out[h], model.eps_Bps(h)));
    t = std::max(t, ratio(eps_in[h], model.eps_Bps(h)));
  }
  if (relay_chunk_bytes > 0) {
    // Store and forward: the last chunk crosses the second hop (one of its
    // circuits) after the first hop has carried everything it carries.
    const std::vector<int> count = DenseCounts(n, adjacency);
    auto one_circuit = [&](size_t x) { return count[x] > 0 ? cap[x] / count[x] : 0.0; };
    // A hop over EPS from a to b: the slower of a's egress and b's ingress.
    auto eps_hop = [&](int a, int b) {
      return std::max(ratio(eps_out[a], model.eps_Bps(a)), ratio(eps_in[b], model.eps_Bps(b)));
    };
    for (int i = 0; i < n && i < routing.hosts; ++i) {
      for (int j = 0; j < n && j < routing.hosts; ++j) {
        if (i == j) continue;
        const PairSplit& p = routing.at(i, j);
        for (const auto& [k, bytes] : p.relay) {
          if (bytes <= 0) continue;
          const size_t ik = static_cast<size_t>(i) * n + k;
          const size_t kj = static_cast<size_t>(k) * n + j;
          t = std::max(t, ratio(load[ik], cap[ik]) +
                              ratio(std::min(relay_chunk_bytes, bytes), one_circuit(kj)));
        }
        for (const auto& [k, bytes] : p.eps_circuit) {
          if (bytes <= 0) continue;
          const size_t kj = static_cast<size_t>(k) * n + j;
          t = std::max(t,
                       eps_hop(i, k) + ratio(std::min(relay_chunk_bytes, bytes), one_circuit(kj)));
        }
        for (const auto& [k, bytes] : p.circuit_eps) {
          if (bytes <= 0) continue;
          const size_t ik = static_cast<size_t>(i) * n + k;
          t = std::max(t, ratio(load[ik], cap[ik]) +
                              ratio(std::min(relay_chunk_bytes, bytes), model.eps_Bps(k)));
        }
      }
    }
  }
  return t;
}

RegionRouting OptimiseRouting(const FluidModel& model, const Adjacency& unsorted,
                              const RoutingOptions& options) {
  const int n = model.hosts();
  // Relay choices follow adjacency order: make it canonical so the result
  // depends on the topology only.
  Adjacency adjacency = unsorted;
  for (std::vector<CircuitLink>& links : adjacency) {
    std::sort(links.begin(), links.end(),
              [](const CircuitLink& a, const CircuitLink& b) { return a.peer < b.peer; });
  }
  const std::vector<double> cap = DenseCaps(n, adjacency);
  const bool eps_relay = options.eps_relay;
  const double t0 = model.Estimate(adjacency).completion_s;
  RegionRouting best = DirectRouting(model, cap, t0);
  best.completion_s = EvaluateRouting(model, adjacency, best);
  if (!options.relay || n < 3 || best.completion_s <= 0) return best;

  std::vector<double> ocs(n, 0);
  for (int h = 0; h < n && h < static_cast<int>(adjacency.size()); ++h) {
    for (const CircuitLink& l : adjacency[h]) ocs[h] += l.Bps;
  }
  double lo = model.LowerBound(ocs);
  double hi = best.completion_s;
  RegionRouting trial;
  RegionRouting found;
  bool have = false;
  if (!std::isfinite(hi)) {
    // Direct routing cannot finish (a host without EPS and a pair without a
    // circuit): look for any finite target relays can meet.
    if (!std::isfinite(lo) || lo <= 0) return best;
    double t = lo;
    for (int i = 0; i < 60 && !have; ++i) {
      if (TryTarget(model, adjacency, cap, t, eps_relay, trial)) {
        found = std::move(trial);
        found.completion_s = EvaluateRouting(model, adjacency, found, options.relay_chunk_bytes);
        have = true;
        hi = t;
      } else {
        lo = t;
        t *= 2;
      }
    }
    if (!have) return best;
  }
  if (lo >= hi * (1 - 1e-9) && !have) return best;
  // A smaller target relays more; with store and forward that need not finish
  // sooner, so the feasible routing kept is the one that evaluates best.
  for (int step = 0; step < options.search_steps; ++step) {
    const double mid = 0.5 * (lo + hi);
    if (TryTarget(model, adjacency, cap, mid, eps_relay, trial)) {
      hi = mid;
      trial.completion_s = EvaluateRouting(model, adjacency, trial, options.relay_chunk_bytes);
      if (!have || trial.completion_s < found.completion_s) found = std::move(trial);
      have = true;
    } else {
      lo = mid;
    }
    if (hi - lo <= 1e-4 * hi) break;
  }
  if (!have) return best;
  if (options.relay_chunk_bytes > 0 && std::isfinite(best.completion_s) &&
      found.completion_s > hi * (1 + 1e-9)) {
    // The tails bind: a larger target relays less and shortens them. Every
    // target from `hi` up is feasible; golden-section search between `hi` and
    // direct routing's time for the best evaluated routing.
    const double g = (std::sqrt(5.0) - 1) / 2;
    double a = hi;
    double b = best.completion_s;
    auto eval = [&](double t) {
      if (!TryTarget(model, adjacency, cap, t, eps_relay, trial)) return kInfinity;
      trial.completion_s = EvaluateRouting(model, adjacency, trial, options.relay_chunk_bytes);
      if (trial.completion_s < found.completion_s) found = trial;
      return trial.completion_s;
    };
    double x1 = b - g * (b - a);
    double x2 = a + g * (b - a);
    double f1 = eval(x1);
    double f2 = eval(x2);
    for (int step = 0; step < options.search_steps && b - a > 1e-4 * b; ++step) {
      if (f1 <= f2) {
        b = x2;
        x2 = x1;
        f2 = f1;
        x1 = b - g * (b - a);
        f1 = eval(x1);
      } else {
        a = x1;
        x1 = x2;
        f1 = f2;
        x2 = a + g * (b - a);
        f2 = eval(x2);
      }
    }
  }
  if (found.completion_s < best.completion_s) return found;
  return best;
}

RegionRouting CircuitOnlyRouting(const FluidModel& model, const Adjacency& adjacency) {
  const int n = model.hosts();
  const std::vector<double> cap = DenseCaps(n, adjacency);
  RegionRouting r = DirectRouting(model, cap, kInfinity);
  r.completion_s = EvaluateRouting(model, adjacency, r);
  return r;
}

RegionRouting EpsOnlyRouting(const FluidModel& model) {
  const int n = model.hosts();
  RegionRouting r;
  r.hosts = n;
  r.pairs.resize(static_cast<size_t>(n) * n);
  for (int i = 0; i < n; ++i) {
    for (int j = 0; j < n; ++j) {
      if (i != j) r.at(i, j).eps = model.demand(i, j);
    }
  }
  r.completion_s = EvaluateRouting(model, Adjacency(n), r);
  return r;
}

}  // namespace mixnet::planner
