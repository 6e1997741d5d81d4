// Traffic predictors (see predictor.h). Runs on the caller's thread.
#include "runtime/locality/predictor.h"

#include <algorithm>
#include <cmath>

#include "absl/strings/str_cat.h"
#include "runtime/common/status.h"

namespace mixnet {
namespace {

// Dispatch rows are source hosts; for combine the sources are the columns,
// so we work on the transpose and transpose the forecast back.
TrafficMatrix SourceMajor(const TrafficMatrix& m, Direction d) {
  return d == Direction::kCombine ? m.Transposed() : m;
}

// Pooled destination shares of `m` (all rows together), each row's shares
// minus the pooled ones, and the row totals. A row with no traffic gets no
// deviation.
void Shares(const TrafficMatrix& m, std::vector<double>& pooled, std::vector<double>& deviation,
            std::vector<double>& totals) {
  const int n = m.hosts();
  totals.assign(n, 0.0);
  pooled.assign(n, 0.0);
  double all = 0;
  for (int i = 0; i < n; ++i) {
    for (int j = 0; j < n; ++j) {
      totals[i] += m.at(i, j);
      pooled[j] += m.at(i, j);
    }
    all += totals[i];
  }
  if (all > 0) {
    for (double& p : pooled) p /= all;
  }
  deviation.assign(static_cast<size_t>(n) * n, 0.0);
  for (int i = 0; i < n; ++i) {
    if (totals[i] <= 0) continue;
    for (int j = 0; j < n; ++j) {
      deviation[static_cast<size_t>(i) * n + j] = m.at(i, j) / totals[i] - pooled[j];
    }
  }
}

}  // namespace

template <typename State>
absl::Status KeyedPredictor<State>::Observe(int layer, Direction direction,
                                            const TrafficMatrix& actual) {
  if (absl::Status s = actual.Validate(); !s.ok()) {
    return Annotate(
        s, absl::StrCat(std::string(name()), " predictor, ", LayerDirectionName(layer, direction)));
  }
  const Key key{layer, direction};
  auto it = states_.find(key);
  if (it == states_.end()) {
    Init(states_[key], direction, actual);
    return absl::OkStatus();
  }
  if (Hosts(it->second) != actual.hosts()) {
    return absl::InvalidArgumentError(absl::StrCat(
        std::string(name()), " predictor, ", LayerDirectionName(layer, direction), ": matrix has ",
        actual.hosts(), " hosts, earlier ones had ", Hosts(it->second)));
  }
  Update(it->second, direction, actual);
  return absl::OkStatus();
}

template <typename State>
absl::StatusOr<TrafficMatrix> KeyedPredictor<State>::Predict(int layer, Direction direction) const {
  auto it = states_.find(Key{layer, direction});
  if (it == states_.end()) {
    return absl::NotFoundError(absl::StrCat(std::string(name()),
                                            " predictor: no observation yet for ",
                                            LayerDirectionName(layer, direction)));
  }
  return Forecast(it->second, direction);
}

template class KeyedPredictor<TrafficMatrix>;
template class KeyedPredictor<ShareTrendState>;

void EwmaPredictor::Update(TrafficMatrix& s, Direction, const TrafficMatrix& a) {
  for (int i = 0; i < a.hosts(); ++i) {
    for (int j = 0; j < a.hosts(); ++j) {
      s.at(i, j) = alpha_ * a.at(i, j) + (1 - alpha_) * s.at(i, j);
    }
  }
}

ShareTrendPredictor::ShareTrendPredictor(const PredictorOptions& options) : o_(options) {
  settings_.emplace_back(o_.alpha, o_.beta);
  if (o_.adaptive) {
    // From heavy smoothing (stationary, noisy) to following the newest
    // observation with a strong trend (fast drift).
    for (auto ab :
         {std::pair{0.2, 0.1}, std::pair{0.35, 0.15}, std::pair{0.7, 0.3}, std::pair{1.0, 0.5}}) {
      settings_.push_back(ab);
    }
  }
}

double ShareTrendPredictor::PooledForecast(const ShareTrendState& s, size_t c, int j) const {
  return s.level[c][j] + o_.phi * s.trend[c][j];
}

void ShareTrendPredictor::Init(ShareTrendState& s, Direction d, const TrafficMatrix& a) {
  s.n = a.hosts();
  std::vector<double> pooled;
  Shares(SourceMajor(a, d), pooled, s.deviation, s.row_totals);
  s.level.assign(settings_.size(), pooled);
  s.trend.assign(settings_.size(), std::vector<double>(s.n, 0.0));
  s.error.assign(settings_.size(), 0.0);
}

void ShareTrendPredictor::Update(ShareTrendState& s, Direction d, const TrafficMatrix& a) {
  constexpr double kErrorWeight = 0.2;  // EWMA weight of the newest one-step error
  std::vector<double> pooled, deviation;
  Shares(SourceMajor(a, d), pooled, deviation, s.row_totals);
  for (size_t c = 0; c < settings_.size(); ++c) {
    const auto [alpha, beta] = settings_[c];
    double err = 0;
    for (int j = 0; j < s.n; ++j) err += std::fabs(PooledForecast(s, c, j) - pooled[j]);
    s.error[c] = kErrorWeight * err + (1 - kErrorWeight) * s.error[c];
    for (int j = 0; j < s.n; ++j) {
      const double prev = s.level[c][j];
      s.level[c][j] = alpha * pooled[j] + (1 - alpha) * (prev + o_.phi * s.trend[c][j]);
      s.trend[c][j] = beta * (s.level[c][j] - prev) + (1 - beta) * o_.phi * s.trend[c][j];
    }
  }
  for (int i = 0; i < s.n; ++i) {
    if (s.row_totals[i] <= 0) continue;  // keep what we knew of an idle source
    for (int j = 0; j < s.n; ++j) {
      double& dev = s.deviation[static_cast<size_t>(i) * s.n + j];
      dev = o_.source_alpha * deviation[static_cast<size_t>(i) * s.n + j] +
            (1 - o_.source_alpha) * dev;
    }
  }
}

TrafficMatrix ShareTrendPredictor::Forecast(const ShareTrendState& s, Direction d) const {
  size_t best = 0;
  for (size_t c = 1; c < s.error.size(); ++c) {
    if (s.error[c] < s.error[best]) best = c;
  }
  TrafficMatrix out(s.n);
  std::vector<double> row(s.n);
  for (int i = 0; i < s.n; ++i) {
    double sum = 0;
    for (int j = 0; j < s.n; ++j) {
      row[j] =
          std::max(0.0, PooledForecast(s, best, j) + s.deviation[static_cast<size_t>(i) * s.n + j]);
      sum += row[j];
    }
    if (sum <= 0) continue;
    for (int j = 0; j < s.n; ++j) out.at(i, j) = row[j] / sum * s.row_totals[i];
  }
  return d == Direction::kCombine ? out.Transposed() : out;
}

absl::StatusOr<std::unique_ptr<Predictor>> MakePredictor(std::string_view name,
                                                         const PredictorOptions& o) {
  auto unit = [](double v) { return std::isfinite(v) && v >= 0 && v <= 1; };
  if (!unit(o.alpha) || o.alpha == 0 || !unit(o.source_alpha) || o.source_alpha == 0 ||
      !unit(o.beta) || !unit(o.phi)) {
    return absl::InvalidArgumentError(
        absl::StrCat("predictor options: alpha (", o.alpha, ") and source_alpha (", o.source_alpha,
                     ") must be in (0, 1], beta (", o.beta, ") and phi (", o.phi, ") in [0, 1]"));
  }
  if (name == "last") return std::unique_ptr<Predictor>(new LastIterationPredictor());
  if (name == "ewma") return std::unique_ptr<Predictor>(new EwmaPredictor(o.alpha));
  if (name == "share_trend") return std::unique_ptr<Predictor>(new ShareTrendPredictor(o));
  return absl::InvalidArgumentError(absl::StrCat("predictor: unknown name '", std::string(name),
                                                 "' (expected last, ewma or share_trend)"));
}

}  // namespace mixnet
