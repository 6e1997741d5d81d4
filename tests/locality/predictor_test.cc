// Tests for the traffic predictors and accuracy measures: hand-checked L1 and
// top-pair overlap, the tracker, exact prediction of constant traffic,
// direction handling, bad input, and a comparison of the three predictors on
// synthetic drifting and skewed MoE traffic (share_trend must beat both
// baselines). Single-threaded.
#include "runtime/locality/predictor.h"

#include <cmath>
#include <cstdio>
#include <string>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "runtime/locality/accuracy.h"
#include "tests/locality/synthetic_traffic.h"

namespace mixnet {
namespace {

using ::testing::HasSubstr;
using testing_util::SyntheticOptions;
using testing_util::SyntheticTraffic;

TrafficMatrix Make(int n, std::vector<double> values) {
  TrafficMatrix m(n);
  for (int i = 0; i < n; ++i) {
    for (int j = 0; j < n; ++j) m.at(i, j) = values[i * n + j];
  }
  return m;
}

std::unique_ptr<Predictor> Must(absl::StatusOr<std::unique_ptr<Predictor>> p) {
  EXPECT_TRUE(p.ok()) << p.status();
  return std::move(*p);
}

TEST(AccuracyTest, HandCheckedL1AndOverlap) {
  // Off-diagonal actual: 10 20 | 30 40 | 50 60 (total 210); diagonal ignored.
  const TrafficMatrix actual = Make(3, {99, 10, 20, 30, 99, 40, 50, 60, 99});
  const TrafficMatrix pred = Make(3, {0, 15, 20, 30, 0, 40, 50, 40, 0});
  // |15-10| + |40-60| = 25 -> 25 / 210.
  EXPECT_NEAR(*NormalisedL1Error(pred, actual), 25.0 / 210, 1e-12);
  EXPECT_DOUBLE_EQ(*NormalisedL1Error(actual, actual), 0);
  EXPECT_DOUBLE_EQ(*NormalisedL1Error(TrafficMatrix(3), actual), 1.0);
  EXPECT_DOUBLE_EQ(*NormalisedL1Error(TrafficMatrix(3), TrafficMatrix(3)), 0);
  EXPECT_DOUBLE_EQ(*NormalisedL1Error(actual, TrafficMatrix(3)), 1.0);

  // Top-2 actual: (2,1)=60, (2,0)=50. Pred top-2: (2,0)=50, (1,2)=40 -> 1 of 2.
  EXPECT_EQ(TopPairs(actual, 2), (std::vector<int64_t>{7, 6}));
  EXPECT_DOUBLE_EQ(*TopPairOverlap(pred, actual, 2), 0.5);
  // Top-3 actual adds (1,2)=40; pred top-3 {(2,0),(1,2),(2,1)} (ties: lower index first).
  EXPECT_DOUBLE_EQ(*TopPairOverlap(pred, actual, 3), 1.0);
  // k beyond the pairs carrying traffic: only those count.
  const TrafficMatrix sparse = Make(3, {0, 5, 0, 0, 0, 0, 0, 0, 0});
  EXPECT_DOUBLE_EQ(*TopPairOverlap(sparse, sparse, 4), 1.0);
  EXPECT_DOUBLE_EQ(*TopPairOverlap(Make(3, {0, 0, 5, 0, 0, 0, 0, 0, 0}), sparse, 4), 0.0);
  EXPECT_DOUBLE_EQ(*TopPairOverlap(sparse, TrafficMatrix(3), 4), 1.0);

  EXPECT_EQ(NormalisedL1Error(TrafficMatrix(2), actual).status().code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(TopPairOverlap(actual, actual, 0).status().code(), absl::StatusCode::kInvalidArgument);
}

TEST(AccuracyTest, TrackerPerKeyAndSummary) {
  AccuracyTracker tracker(2);
  const TrafficMatrix actual = Make(2, {0, 10, 30, 0});
  ASSERT_TRUE(tracker.Record(1, Direction::kDispatch, Make(2, {0, 10, 30, 0}), actual).ok());
  ASSERT_TRUE(tracker.Record(1, Direction::kDispatch, Make(2, {0, 20, 30, 0}), actual).ok());
  ASSERT_TRUE(tracker.Record(2, Direction::kCombine, Make(2, {0, 0, 0, 0}), actual).ok());
  absl::StatusOr<AccuracyStats> s = tracker.Stats(1, Direction::kDispatch);
  ASSERT_TRUE(s.ok());
  EXPECT_EQ(s->samples, 2);
  EXPECT_DOUBLE_EQ(s->mean_l1, 0.125);  // (0 + 10/40) / 2
  EXPECT_DOUBLE_EQ(s->max_l1, 0.25);
  EXPECT_DOUBLE_EQ(s->last_l1, 0.25);
  EXPECT_DOUBLE_EQ(s->mean_overlap, 1.0);
  EXPECT_EQ(tracker.Stats(1, Direction::kCombine).status().code(), absl::StatusCode::kNotFound);
  EXPECT_EQ(tracker.Overall().samples, 3);
  EXPECT_DOUBLE_EQ(tracker.Overall().mean_l1, 1.25 / 3);
  const std::string line = tracker.Summary("ewma");
  EXPECT_THAT(line, HasSubstr("ewma: 3 samples"));
  EXPECT_THAT(line, HasSubstr("worst layer 2 combine (L1 mean 1.000)"));
  tracker.LogSummary("ewma");

  TrafficMatrix bad = actual;
  bad.at(0, 1) = std::nan("");
  EXPECT_EQ(tracker.Record(1, Direction::kDispatch, bad, actual).code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(tracker.Record(1, Direction::kDispatch, TrafficMatrix(3), actual).code(),
            absl::StatusCode::kInvalidArgument);
}

TEST(PredictorTest, ConstantTrafficIsPredictedExactly) {
  const TrafficMatrix m = Make(3, {5, 100, 20, 7, 0, 300, 60, 2, 1});
  for (const char* name : {"last", "ewma", "share_trend"}) {
    SCOPED_TRACE(name);
    auto p = Must(MakePredictor(name));
    EXPECT_EQ(p->name(), name);
    EXPECT_EQ(p->Predict(0, Direction::kDispatch).status().code(), absl::StatusCode::kNotFound);
    AccuracyTracker tracker;
    for (int i = 0; i < 10; ++i) {
      ASSERT_TRUE(tracker.ObserveAndScore(*p, 0, Direction::kDispatch, m).ok());
      ASSERT_TRUE(tracker.ObserveAndScore(*p, 0, Direction::kCombine, m.Transposed()).ok());
    }
    absl::StatusOr<TrafficMatrix> d = p->Predict(0, Direction::kDispatch);
    absl::StatusOr<TrafficMatrix> c = p->Predict(0, Direction::kCombine);
    ASSERT_TRUE(d.ok() && c.ok());
    for (int i = 0; i < 3; ++i) {
      for (int j = 0; j < 3; ++j) {
        EXPECT_NEAR(d->at(i, j), m.at(i, j), 1e-9 * m.at(i, j) + 1e-9);
        EXPECT_NEAR(c->at(j, i), m.at(i, j), 1e-9 * m.at(i, j) + 1e-9);
      }
    }
    EXPECT_EQ(tracker.Overall().samples, 18);
    EXPECT_LT(tracker.Overall().max_l1, 1e-9);
  }
}

TEST(PredictorTest, HandCheckedEwmaAndLast) {
  auto last = Must(MakePredictor("last"));
  auto ewma = Must(MakePredictor("ewma", {.alpha = 0.25}));
  for (double v : {100.0, 200.0}) {
    ASSERT_TRUE(last->Observe(3, Direction::kDispatch, Make(2, {0, v, 0, 0})).ok());
    ASSERT_TRUE(ewma->Observe(3, Direction::kDispatch, Make(2, {0, v, 0, 0})).ok());
  }
  EXPECT_DOUBLE_EQ(last->Predict(3, Direction::kDispatch)->at(0, 1), 200);
  EXPECT_DOUBLE_EQ(ewma->Predict(3, Direction::kDispatch)->at(0, 1), 125);
  EXPECT_EQ(ewma->Predict(3, Direction::kCombine).status().code(), absl::StatusCode::kNotFound);
  EXPECT_EQ(ewma->Predict(4, Direction::kDispatch).status().code(), absl::StatusCode::kNotFound);
}

TEST(PredictorTest, ShareTrendKeepsRowTotalsAndFollowsATrend) {
  // One source row whose share to host 1 grows by 0.05 per step.
  auto p = Must(
      MakePredictor("share_trend",
                    {.alpha = 0.5, .beta = 0.5, .phi = 1.0, .source_alpha = 1, .adaptive = false}));
  for (int t = 0; t < 12; ++t) {
    const double s = 0.2 + 0.05 * t;
    ASSERT_TRUE(
        p->Observe(0, Direction::kDispatch, Make(2, {1000 * (1 - s), 1000 * s, 0, 50})).ok());
  }
  absl::StatusOr<TrafficMatrix> m = p->Predict(0, Direction::kDispatch);
  ASSERT_TRUE(m.ok());
  EXPECT_NEAR(m->at(0, 0) + m->at(0, 1), 1000, 1e-9);  // row total kept
  EXPECT_DOUBLE_EQ(m->at(1, 1), 50);
  // Next share is 0.8; the last observation says 0.75 and an EWMA less.
  EXPECT_GT(m->at(0, 1), 775);
  EXPECT_LT(m->at(0, 1), 825);
}

TEST(PredictorTest, BadInputs) {
  EXPECT_EQ(MakePredictor("oracle").status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(MakePredictor("ewma", {.alpha = 0}).status().code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(MakePredictor("share_trend", {.beta = 1.5}).status().code(),
            absl::StatusCode::kInvalidArgument);
  for (const char* name : {"last", "ewma", "share_trend"}) {
    auto p = Must(MakePredictor(name));
    TrafficMatrix neg = Make(2, {0, -1, 0, 0});
    absl::Status s = p->Observe(2, Direction::kCombine, neg);
    EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
    EXPECT_THAT(std::string(s.message()), HasSubstr("layer 2 combine"));
    ASSERT_TRUE(p->Observe(2, Direction::kCombine, Make(2, {0, 1, 0, 0})).ok());
    s = p->Observe(2, Direction::kCombine, TrafficMatrix(3));
    EXPECT_THAT(std::string(s.message()), HasSubstr("3 hosts, earlier ones had 2"));
  }
}

// Mean normalised L1 error of each predictor over `steps` iterations (after a
// warm-up of 5) of one synthetic scenario.
struct Scores {
  double last, ewma, share_trend;
};
Scores RunScenario(const SyntheticOptions& o, int steps) {
  SyntheticTraffic traffic(o);
  std::vector<std::unique_ptr<Predictor>> ps;
  for (const char* name : {"last", "ewma", "share_trend"}) ps.push_back(Must(MakePredictor(name)));
  std::vector<AccuracyTracker> trackers(3);
  for (int t = 0; t < steps + 5; ++t) {
    const TrafficMatrix m = traffic.Next();
    for (int i = 0; i < 3; ++i) {
      if (t >= 5) {
        EXPECT_TRUE(trackers[i].ObserveAndScore(*ps[i], 0, Direction::kDispatch, m).ok());
      } else {
        EXPECT_TRUE(ps[i]->Observe(0, Direction::kDispatch, m).ok());
      }
    }
  }
  for (int i = 0; i < 3; ++i) trackers[i].LogSummary(ps[i]->name());
  Scores s{trackers[0].Overall().mean_l1, trackers[1].Overall().mean_l1,
           trackers[2].Overall().mean_l1};
  std::printf("last %.4f ewma %.4f share_trend %.4f\n", s.last, s.ewma, s.share_trend);
  return s;
}

TEST(PredictorTest, SkewedStationaryTraffic) {
  // The paper's example: skewed, nearly the same from every source, noisy per batch.
  const Scores s = RunScenario({.skew = 1.0, .seed = 3}, 40);
  EXPECT_LT(s.ewma, 0.85 * s.last);
  EXPECT_LT(s.share_trend, 0.85 * s.last);
  EXPECT_LT(s.share_trend, s.ewma);
}

TEST(PredictorTest, RandomSkewPerBatch) {
  // Strong skew whose details change every batch: smoothing pays most.
  const Scores s = RunScenario({.skew = 1.5, .batch_noise = 0.3, .seed = 4}, 40);
  EXPECT_LT(s.ewma, 0.85 * s.last);
  EXPECT_LT(s.share_trend, 0.85 * s.last);
  EXPECT_LT(s.share_trend, s.ewma);
}

TEST(PredictorTest, DriftingTraffic) {
  const Scores s = RunScenario({.skew = 1.0, .drift = 0.02, .wave = 0.3, .seed = 5}, 60);
  EXPECT_LT(s.ewma, s.last);
  EXPECT_LT(s.share_trend, s.last);
  EXPECT_LT(s.share_trend, s.ewma);
}

TEST(PredictorTest, FastDriftWithLittleNoise) {
  // Where plain smoothing lags: EWMA loses to the last iteration, the trend term does not.
  const Scores s = RunScenario(
      {.tokens_per_host = 8192, .skew = 1.0, .drift = 0.08, .batch_noise = 0.0, .seed = 9}, 30);
  EXPECT_LT(s.share_trend, s.ewma);
}

}  // namespace
}  // namespace mixnet
