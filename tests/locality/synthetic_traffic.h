// Synthetic MoE traffic for predictor tests: expert popularity follows
// skewed logits that drift over iterations (linear trend plus a slow wave),
// every source host samples its tokens' top-k experts from that popularity
// (plus a small fixed per-source bias and a per-iteration batch effect), and
// the counts become a host-pair byte matrix through a placement of
// experts_per_host experts on each host. Deterministic for a seed.
// Single-threaded.
#pragma once

#include <algorithm>
#include <cmath>
#include <numeric>
#include <random>
#include <vector>

#include "runtime/locality/traffic_matrix.h"

namespace mixnet::testing_util {

struct SyntheticOptions {
  int hosts = 8;
  int experts_per_host = 2;
  int tokens_per_host = 2048;  // tokens each host routes per iteration
  int k = 2;
  double skew = 1.0;          // spread of the base logits
  double drift = 0.0;         // logit change per iteration (per-expert direction)
  double wave = 0.0;          // amplitude of a slow per-expert sinusoid
  double batch_noise = 0.05;  // per-iteration logit noise shared by all sources
  double source_bias = 0.05;  // fixed per-(source, expert) logit bias
  unsigned seed = 1;
};

class SyntheticTraffic {
 public:
  explicit SyntheticTraffic(SyntheticOptions o) : o_(o), rng_(o.seed) {
    const int e = o_.hosts * o_.experts_per_host;
    std::normal_distribution<double> n01(0, 1);
    std::uniform_real_distribution<double> u(0, 6.283);
    for (int x = 0; x < e; ++x) {
      base_.push_back(o_.skew * n01(rng_));
      dir_.push_back(n01(rng_));
      phase_.push_back(u(rng_));
    }
    bias_.resize(static_cast<size_t>(o_.hosts) * e);
    for (double& b : bias_) b = o_.source_bias * n01(rng_);
  }

  // The matrix of iteration `t` (call with increasing t).
  TrafficMatrix Next() {
    const int e = o_.hosts * o_.experts_per_host;
    std::normal_distribution<double> n01(0, 1);
    std::vector<double> logits(e);
    for (int x = 0; x < e; ++x) {
      logits[x] = base_[x] + o_.drift * dir_[x] * t_ + o_.wave * std::sin(0.05 * t_ + phase_[x]) +
                  o_.batch_noise * n01(rng_);
    }
    ++t_;
    TrafficMatrix m(o_.hosts);
    std::vector<double> w(e);
    for (int src = 0; src < o_.hosts; ++src) {
      for (int x = 0; x < e; ++x) w[x] = std::exp(logits[x] + bias_[src * e + x]);
      for (int tok = 0; tok < o_.tokens_per_host; ++tok) {
        // Top-k without replacement: k draws, zeroing each pick.
        std::vector<double> left = w;
        for (int s = 0; s < o_.k; ++s) {
          std::discrete_distribution<int> pick(left.begin(), left.end());
          const int x = pick(rng_);
          left[x] = 0;
          m.Add(src, x / o_.experts_per_host, 1.0);
        }
      }
    }
    return m;
  }

 private:
  SyntheticOptions o_;
  std::mt19937 rng_;
  std::vector<double> base_, dir_, phase_, bias_;
  int t_ = 0;
};

}  // namespace mixnet::testing_util
