// The capacity search over closed-form probe functions (no replay): a monotone step finds its
// threshold within the tolerance in a bounded number of probes, an SLO met everywhere reports
// at least max_rate, one missed everywhere reports 0, a non-monotone metric gets a bracket
// consistent with every probe, the same inputs give the same probes, and the summaries over
// seeds.
#include "agentkv/sim/replay/capacity_search.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cmath>
#include <functional>
#include <vector>

namespace agentkv::sim {
namespace {

using ::testing::HasSubstr;

// TTFT p95 as a function of the rate: `p95(rate)` seconds, the other metrics derived from it.
CapacityProbeFn Metric(std::function<double(double)> p95, int* calls = nullptr) {
  return [p95 = std::move(p95), calls](double rate) -> StatusOr<CapacityMetrics> {
    if (calls != nullptr) ++*calls;
    CapacityMetrics m;
    m.ttft_p95_s = p95(rate);
    m.ttft_p50_s = m.ttft_p95_s / 2;
    m.ttft_p99_s = m.ttft_p95_s * 2;
    m.server_time_mean_s = m.ttft_p95_s * 10;
    return m;
  };
}

// 1 s below `threshold`, 5 s at and above it (the SLO is 2 s).
CapacityProbeFn Step(double threshold, int* calls = nullptr) {
  return Metric([threshold](double rate) { return rate < threshold ? 1.0 : 5.0; }, calls);
}

// Every met probe at or below the capacity, every missed one at or above the lowest miss.
void ExpectConsistentBracket(const CapacitySearchResult& r) {
  for (const CapacityProbe& p : r.probes) {
    if (p.met) {
      EXPECT_LE(p.rate, r.capacity) << p.rate;
    } else {
      ASSERT_TRUE(r.lowest_missed.has_value());
      EXPECT_GE(p.rate, *r.lowest_missed) << p.rate;
    }
  }
  if (r.lowest_missed) {
    EXPECT_LT(r.capacity, *r.lowest_missed);
  }
}

TEST(CapacitySearchTest, MonotoneStepFindsTheThresholdWithinTolerance) {
  for (const double threshold : {1.5, 7.0, 60.0, 61.0, 333.3, 3599.0}) {
    for (const double start : {1.0, 60.0, 1000.0}) {
      CapacitySearchOptions options;
      options.start_rate = start;
      int calls = 0;
      StatusOr<CapacitySearchResult> r = SearchCapacity(options, Step(threshold, &calls));
      ASSERT_TRUE(r.ok()) << r.status().message();
      EXPECT_EQ(r->outcome, CapacityOutcome::kFound) << threshold;
      EXPECT_LT(r->capacity, threshold);
      EXPECT_GE(r->capacity, threshold / (1 + options.tolerance)) << threshold << " " << start;
      ASSERT_TRUE(r->lowest_missed.has_value());
      EXPECT_GE(*r->lowest_missed, threshold);
      EXPECT_LE(*r->lowest_missed - r->capacity, options.tolerance * r->capacity);
      EXPECT_EQ(calls, static_cast<int>(r->probes.size()));
      EXPECT_LE(static_cast<int64_t>(r->probes.size()), options.MaxProbes());
      ExpectConsistentBracket(*r);
      ASSERT_NE(r->AtCapacity(), nullptr);
      EXPECT_TRUE(r->AtCapacity()->met);
    }
  }
}

TEST(CapacitySearchTest, ProbeCountIsBoundedByBracketingAndBisection) {
  CapacitySearchOptions options;
  options.min_rate = 1;
  options.max_rate = 1024;
  options.start_rate = 1;
  options.tolerance = 0.01;
  // 1 + log2(1024) + ceil(log2(100)) + 1 slack.
  EXPECT_EQ(options.MaxProbes(), 1 + 10 + 7 + 1);
  StatusOr<CapacitySearchResult> r = SearchCapacity(options, Step(1000));
  ASSERT_TRUE(r.ok());
  // 1, 2, ..., 1024 (11 probes), then at most 7 bisections of [512, 1024].
  EXPECT_LE(r->probes.size(), 18U);
  EXPECT_GE(r->capacity, 1000 / 1.01);
}

TEST(CapacitySearchTest, MetEverywhereReportsAtLeastMax) {
  CapacitySearchOptions options;
  options.start_rate = 100;
  options.max_rate = 1000;
  StatusOr<CapacitySearchResult> r = SearchCapacity(options, Metric([](double) { return 0.5; }));
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r->outcome, CapacityOutcome::kAtLeastMax);
  EXPECT_EQ(r->capacity, 1000);
  EXPECT_FALSE(r->lowest_missed.has_value());
  // 100, 200, 400, 800, 1000.
  ASSERT_EQ(r->probes.size(), 5U);
  EXPECT_EQ(r->probes.back().rate, 1000);
  EXPECT_TRUE(r->AtCapacity()->met);
}

TEST(CapacitySearchTest, MissedEverywhereReportsZero) {
  CapacitySearchOptions options;
  options.start_rate = 8;
  options.min_rate = 1;
  StatusOr<CapacitySearchResult> r = SearchCapacity(options, Metric([](double) { return 9.0; }));
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r->outcome, CapacityOutcome::kNoneMet);
  EXPECT_EQ(r->capacity, 0);
  ASSERT_TRUE(r->lowest_missed.has_value());
  EXPECT_EQ(*r->lowest_missed, 1);
  // 8, 4, 2, 1.
  EXPECT_EQ(r->probes.size(), 4U);
  EXPECT_EQ(r->AtCapacity(), nullptr);
}

TEST(CapacitySearchTest, NonFiniteMetricMissesTheSlo) {
  CapacitySearchOptions options;
  options.start_rate = 2;
  options.min_rate = 2;
  StatusOr<CapacitySearchResult> r = SearchCapacity(options, Metric([](double) { return NAN; }));
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r->outcome, CapacityOutcome::kNoneMet);
  EXPECT_FALSE(r->probes.front().met);
}

TEST(CapacitySearchTest, NonMonotoneMetricGetsAConsistentBracket) {
  // Met below 10, missed in [10, 20), met again in [20, 40), missed from 40.
  const auto bumpy = [](double rate) { return rate < 10 || (rate >= 20 && rate < 40) ? 1.0 : 3.0; };
  for (const double start : {5.0, 16.0, 25.0, 30.0, 100.0}) {
    CapacitySearchOptions options;
    options.start_rate = start;
    StatusOr<CapacitySearchResult> r = SearchCapacity(options, Metric(bumpy));
    ASSERT_TRUE(r.ok());
    EXPECT_EQ(r->outcome, CapacityOutcome::kFound) << start;
    ExpectConsistentBracket(*r);
    // Whichever edge it found, the bracket straddles one of the two met-to-missed edges.
    const bool first_edge = r->capacity < 10 && *r->lowest_missed >= 10;
    const bool second_edge = r->capacity < 40 && *r->lowest_missed >= 40;
    EXPECT_TRUE(first_edge || second_edge) << start << ": " << r->capacity;
  }
}

TEST(CapacitySearchTest, SameInputsGiveTheSameProbes) {
  CapacitySearchOptions options;
  options.metric = SloMetric::kServerTimeMean;
  options.slo_s = 30;
  const auto smooth = [](double rate) { return 0.2 * std::exp(rate / 40); };
  StatusOr<CapacitySearchResult> a = SearchCapacity(options, Metric(smooth));
  StatusOr<CapacitySearchResult> b = SearchCapacity(options, Metric(smooth));
  ASSERT_TRUE(a.ok());
  ASSERT_TRUE(b.ok());
  EXPECT_EQ(*a, *b);
  // The metric is server time (10 x p95 here): met while 2 exp(rate / 40) <= 30.
  EXPECT_NEAR(a->capacity, 40 * std::log(15.0), 0.05 * 40 * std::log(15.0));
  EXPECT_EQ(a->probes.front().value, a->probes.front().metrics.server_time_mean_s);
}

TEST(CapacitySearchTest, ReportsEachProbeAndItsNumber) {
  std::vector<double> rates;
  int64_t last = 0;
  StatusOr<CapacitySearchResult> r =
      SearchCapacity(CapacitySearchOptions{}, Step(100), [&](int64_t n, const CapacityProbe& p) {
        EXPECT_EQ(n, last + 1);
        last = n;
        rates.push_back(p.rate);
      });
  ASSERT_TRUE(r.ok());
  ASSERT_EQ(rates.size(), r->probes.size());
  for (size_t i = 0; i < rates.size(); ++i) EXPECT_EQ(rates[i], r->probes[i].rate);
  const std::vector<CapacityProbe> sorted = r->ProbesByRate();
  for (size_t i = 1; i < sorted.size(); ++i) EXPECT_LT(sorted[i - 1].rate, sorted[i].rate);
}

TEST(CapacitySearchTest, ProbeFailureStopsTheSearchNamingTheRate) {
  const CapacityProbeFn failing = [](double rate) -> StatusOr<CapacityMetrics> {
    if (rate > 100) return InvalidArgumentError("boom");
    return CapacityMetrics{};
  };
  StatusOr<CapacitySearchResult> r = SearchCapacity(CapacitySearchOptions{}, failing);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), StatusCode::kInvalidArgument);
  EXPECT_THAT(r.status().message(), HasSubstr("probe at 120"));
  EXPECT_THAT(r.status().message(), HasSubstr("boom"));
}

TEST(CapacitySearchTest, InvalidOptionsNameTheField) {
  const auto error = [](CapacitySearchOptions o) {
    return SearchCapacity(o, Step(10)).status().message();
  };
  CapacitySearchOptions o;
  o.slo_s = 0;
  EXPECT_THAT(error(o), HasSubstr("slo_s"));
  o = {};
  o.min_rate = 10;
  o.max_rate = 5;
  EXPECT_THAT(error(o), HasSubstr("max_rate"));
  o = {};
  o.tolerance = NAN;
  EXPECT_THAT(error(o), HasSubstr("tolerance"));
  o = {};
  o.start_rate = -1;
  EXPECT_THAT(error(o), HasSubstr("start_rate"));
}

TEST(CapacitySearchTest, MetricNamesRoundTrip) {
  for (const SloMetric m : {SloMetric::kTtftP95, SloMetric::kTtftP99, SloMetric::kServerTimeMean}) {
    StatusOr<SloMetric> parsed = ParseSloMetric(SloMetricName(m));
    ASSERT_TRUE(parsed.ok());
    EXPECT_EQ(*parsed, m);
  }
  EXPECT_THAT(
      ParseSloMetric("p95").status().message(),
      HasSubstr("--slo-metric must be ttft-p95, ttft-p99 or server-time-mean, got \"p95\""));
}

TEST(CapacityResultTest, SpreadsOverSeedsAndAgainstTheBaseline) {
  EXPECT_FALSE(SpreadOf({}).has_value());
  EXPECT_EQ(*SpreadOf({3, 1, 2}), (SeedSpread{2, 1, 3}));
  EXPECT_EQ(*SpreadOf({4, 1, 2, 3}), (SeedSpread{2.5, 1, 4}));

  CapacityResult result;
  result.arms = {"agentkv", "baseline"};
  result.seeds = {1, 2, 3};
  const auto search = [](double capacity) {
    CapacitySearchResult s;
    s.capacity = capacity;
    return s;
  };
  result.searches = {{search(30), search(40), search(10)}, {search(10), search(20), search(0)}};
  EXPECT_EQ(result.BaselineArm(), 1U);
  EXPECT_EQ(result.Capacity(0), (SeedSpread{30, 10, 40}));
  // Seed 3's baseline is 0: left out of the ratios.
  EXPECT_EQ(*result.VsBaseline(0), (SeedSpread{2.5, 2, 3}));
  EXPECT_EQ(*result.VsBaseline(1), (SeedSpread{1, 1, 1}));
  result.arms = {"agentkv", "lru"};
  EXPECT_FALSE(result.VsBaseline(0).has_value());
}

}  // namespace
}  // namespace agentkv::sim
