// Traffic predictors: per (MoE layer, direction), guess the host-pair matrix
// of the coming all-to-all from the ones observed before, so circuits can be
// switched ahead of time. Three implementations behind one interface:
//
//  - "last":        the previous observation (the paper's predictor);
//  - "ewma":        exponentially weighted moving average, weight `alpha` on
//                   the newest observation;
//  - "share_trend": ours. MoE traffic has structure the other two ignore:
//      * each source host sends a fixed number of tokens x k (its row total
//        is known; only where they go changes), so we predict per-row shares
//        and scale them by the last row total (columns for combine);
//      * expert popularity is nearly the same from every source, so the
//        shares are modelled as pooled shares (all sources together, which
//        averages away per-source sampling noise) plus a per-source deviation
//        that changes slowly and is smoothed hard (weight `source_alpha`);
//      * popularity drifts during training, so the pooled shares follow
//        Holt's linear trend (level weight `alpha`, trend weight `beta`,
//        damping `phi`), which tracks drift without the lag of an EWMA;
//      * how fast it drifts versus how noisy batches are differs between
//        layers and over training, so with `adaptive` a small bank of
//        (alpha, beta) settings runs side by side and each (layer,
//        direction) forecasts with the one whose recent one-step error
//        (EWMA of L1 on the pooled shares) is lowest.
//    Negative forecasts are clipped and rows renormalised, so predictions
//    stay valid matrices with the right row totals; constant traffic is
//    predicted exactly from the first observation.
//
// Not thread-safe: one controller thread owns a predictor.
#pragma once

#include <map>
#include <memory>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "runtime/locality/token_counts.h"
#include "runtime/locality/traffic_matrix.h"

namespace mixnet {

class Predictor {
 public:
  virtual ~Predictor() = default;
  virtual std::string_view name() const = 0;
  // InvalidArgument for an invalid matrix or one whose host count differs from
  // earlier observations of the same (layer, direction).
  virtual absl::Status Observe(int layer, Direction direction, const TrafficMatrix& actual) = 0;
  // NotFound before the first observation of (layer, direction).
  virtual absl::StatusOr<TrafficMatrix> Predict(int layer, Direction direction) const = 0;
};

struct PredictorOptions {
  double alpha = 0.5;         // ewma: weight of the newest observation; share_trend: level weight
  double beta = 0.2;          // share_trend: trend weight
  double phi = 0.8;           // share_trend: trend damping (0 = no trend)
  double source_alpha = 0.1;  // share_trend: weight of the newest per-source deviation
  bool adaptive = true;       // share_trend: also run a bank of (alpha, beta) and pick the best
};

// "last", "ewma" or "share_trend"; InvalidArgument for another name or
// options outside [0, 1] (alpha and source_alpha must be > 0).
absl::StatusOr<std::unique_ptr<Predictor>> MakePredictor(std::string_view name,
                                                         const PredictorOptions& options = {});

// Shared bookkeeping: one state per (layer, direction), checked matrices.
template <typename State>
class KeyedPredictor : public Predictor {
 public:
  absl::Status Observe(int layer, Direction direction, const TrafficMatrix& actual) final;
  absl::StatusOr<TrafficMatrix> Predict(int layer, Direction direction) const final;

 protected:
  using Key = std::pair<int, Direction>;
  virtual void Init(State& state, Direction direction, const TrafficMatrix& actual) = 0;
  virtual void Update(State& state, Direction direction, const TrafficMatrix& actual) = 0;
  virtual TrafficMatrix Forecast(const State& state, Direction direction) const = 0;
  virtual int Hosts(const State& state) const = 0;

 private:
  std::map<Key, State> states_;
};

class LastIterationPredictor final : public KeyedPredictor<TrafficMatrix> {
 public:
  std::string_view name() const override { return "last"; }

 private:
  void Init(TrafficMatrix& s, Direction, const TrafficMatrix& a) override { s = a; }
  void Update(TrafficMatrix& s, Direction, const TrafficMatrix& a) override { s = a; }
  TrafficMatrix Forecast(const TrafficMatrix& s, Direction) const override { return s; }
  int Hosts(const TrafficMatrix& s) const override { return s.hosts(); }
};

class EwmaPredictor final : public KeyedPredictor<TrafficMatrix> {
 public:
  explicit EwmaPredictor(double alpha) : alpha_(alpha) {}
  std::string_view name() const override { return "ewma"; }

 private:
  void Init(TrafficMatrix& s, Direction, const TrafficMatrix& a) override { s = a; }
  void Update(TrafficMatrix& s, Direction, const TrafficMatrix& a) override;
  TrafficMatrix Forecast(const TrafficMatrix& s, Direction) const override { return s; }
  int Hosts(const TrafficMatrix& s) const override { return s.hosts(); }

  double alpha_;
};

struct ShareTrendState {
  int n = 0;
  // Per (alpha, beta) setting: pooled destination shares (n), their trend
  // (n), and the running one-step error.
  std::vector<std::vector<double>> level;
  std::vector<std::vector<double>> trend;
  std::vector<double> error;
  std::vector<double> deviation;   // n x n: source row share minus pooled share
  std::vector<double> row_totals;  // last observed bytes per source host
};

class ShareTrendPredictor final : public KeyedPredictor<ShareTrendState> {
 public:
  explicit ShareTrendPredictor(const PredictorOptions& options);
  std::string_view name() const override { return "share_trend"; }

 private:
  void Init(ShareTrendState& s, Direction d, const TrafficMatrix& a) override;
  void Update(ShareTrendState& s, Direction d, const TrafficMatrix& a) override;
  TrafficMatrix Forecast(const ShareTrendState& s, Direction d) const override;
  int Hosts(const ShareTrendState& s) const override { return s.n; }
  // The pooled-share forecast of setting `c`.
  double PooledForecast(const ShareTrendState& s, size_t c, int j) const;

  PredictorOptions o_;
  std::vector<std::pair<double, double>> settings_;  // (alpha, beta); [0] from the options
};

}  // namespace mixnet
