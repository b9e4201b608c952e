#include "agentkv/control/admission_metrics.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cstdint>
#include <functional>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <utility>
#include <vector>

namespace agentkv::control {
namespace {

using ::testing::ElementsAre;
using ::testing::IsEmpty;
using ::testing::Pair;
using Series = std::vector<std::pair<std::string, double>>;

AgenticOptions Options(bool lifecycle, bool admission) {
  AgenticOptions o;
  o.agentic_session_lifecycle = lifecycle;
  o.agentic_program_admission = admission;
  return o;
}

std::vector<std::string> Names(const Series& series) {
  std::vector<std::string> names;
  for (const auto& [name, value] : series) names.push_back(name);
  return names;
}

std::map<std::string, double> AsMap(const Series& series) {
  return std::map<std::string, double>(series.begin(), series.end());
}

bool Has(const Series& series, std::string_view name) {
  for (const auto& [n, v] : series) {
    if (n == name) return true;
  }
  return false;
}

// 10 decisions: 6 admitted, 3 waited, 1 bypassed as degraded; two waiters were later granted
// after 5 s in total; one lease expired; 4 closes, 1 of them failed.
AdmissionCounters BusyStep() {
  AdmissionCounters c;
  c.admit = 6;
  c.wait = 3;
  c.bypass = 1;
  c.bypass_degraded = 1;
  c.wait_granted = 2;
  c.wait_seconds_sum = 5.0;
  c.lease_expired = 1;
  c.session_close = 4;
  c.session_close_failure = 1;
  return c;
}

BudgetView HealthyBudget() {
  BudgetView b;
  b.epoch = 3;
  b.ceiling = 1000;
  b.reserved = 250;
  b.available_tokens = 750;
  b.lease_count = 5;
  b.kv_token_usage_mean = 0.4;
  b.kv_token_usage_max = 0.8;
  b.degraded = false;
  return b;
}

TEST(AdmissionMetricsTest, BothFeaturesOffReportNothing) {
  EXPECT_THAT(AgenticKvMetrics(Options(false, false), {}, 0, std::nullopt), IsEmpty());
  // Even a budget view is ignored while admission is off.
  EXPECT_THAT(AgenticKvMetrics(Options(false, false), {}, 0, HealthyBudget()), IsEmpty());
}

TEST(AdmissionMetricsTest, LifecycleAloneReportsEnabledAndCloseCounts) {
  EXPECT_THAT(AgenticKvMetrics(Options(true, false), {}, 0, std::nullopt),
              ElementsAre(Pair("agentic_kv/session/lifecycle_enabled", 1.0)));

  AdmissionCounters c = BusyStep();
  EXPECT_THAT(AgenticKvMetrics(Options(true, false), c, 7, HealthyBudget()),
              ElementsAre(Pair("agentic_kv/session/lifecycle_enabled", 1.0),
                          Pair("agentic_kv/session/close", 4.0),
                          Pair("agentic_kv/session/close_failure", 1.0)));
}

TEST(AdmissionMetricsTest, IdleAdmissionReportsOnlyTheWaitingGauge) {
  EXPECT_THAT(AgenticKvMetrics(Options(false, true), {}, 0, std::nullopt),
              ElementsAre(Pair("agentic_kv/admission/waiting", 0.0)));
}

TEST(AdmissionMetricsTest, BusyStepReportsEverySeriesWithItsValue) {
  AdmissionCounters c = BusyStep();
  c.bypass = 4;  // 1 degraded, 1 protected, 1 aged, and 1 whose reason is counted elsewhere.
  c.bypass_protected = 1;
  c.bypass_aged = 1;
  c.cancelled = 2;
  c.refused_oversized = 1;   // Not a decision of the seed's denominator.
  c.refused_over_share = 2;  // Nor this.
  const Series series = AgenticKvMetrics(Options(true, true), c, 7, HealthyBudget());
  // Decisions: 6 + 3 + 4 = 13.
  EXPECT_THAT(
      series,
      ElementsAre(
          Pair("agentic_kv/session/lifecycle_enabled", 1.0), Pair("agentic_kv/session/close", 4.0),
          Pair("agentic_kv/session/close_failure", 1.0), Pair("agentic_kv/admission/admit", 6.0),
          Pair("agentic_kv/admission/bypass", 4.0), Pair("agentic_kv/admission/wait", 3.0),
          Pair("agentic_kv/admission/waiting", 7.0), Pair("agentic_kv/admission/cancelled", 2.0),
          Pair("agentic_kv/admission/bypass_protected", 1.0),
          Pair("agentic_kv/admission/bypass_degraded", 1.0),
          Pair("agentic_kv/admission/bypass_aged", 1.0),
          Pair("agentic_kv/admission/refused_oversized", 1.0),
          Pair("agentic_kv/admission/refused_over_share", 2.0),
          Pair("agentic_kv/admission/defer_rate", 3.0 / 13.0),
          Pair("agentic_kv/admission/degraded_rate", 1.0 / 13.0),
          Pair("agentic_kv/admission/wait_seconds_mean", 2.5),
          Pair("agentic_kv/budget/ceiling", 1000.0), Pair("agentic_kv/budget/reserved", 250.0),
          Pair("agentic_kv/budget/available_tokens", 750.0),
          Pair("agentic_kv/budget/reserved_utilization", 0.25),
          Pair("agentic_kv/budget/lease_count", 5.0), Pair("agentic_kv/budget/lease_expired", 1.0),
          Pair("agentic_kv/budget/kv_token_usage_mean", 0.4),
          Pair("agentic_kv/budget/kv_token_usage_max", 0.8), Pair("agentic_kv/budget/epoch", 3.0),
          Pair("agentic_kv/budget/degraded", 0.0)));
  // Every name appears, in the documented order.
  const std::vector<std::string_view>& all = AllAgenticKvMetricNames();
  EXPECT_EQ(Names(series), std::vector<std::string>(all.begin(), all.end()));
}

struct RateCase {
  int64_t admit, wait, bypass, bypass_degraded;
  std::optional<double> defer_rate, degraded_rate;  // nullopt: both absent.
};

TEST(AdmissionMetricsTest, RatesAreOverAdmitWaitAndBypass) {
  const std::vector<RateCase> cases = {
      {6, 3, 1, 1, 0.3, 0.1},   {0, 0, 0, 0, std::nullopt, std::nullopt},
      {4, 0, 0, 0, 0.0, 0.0},  // Present (as 0) once any decision was made.
      {0, 2, 0, 0, 1.0, 0.0},  // Every request waited.
      {0, 0, 5, 5, 0.0, 1.0},  // Degraded fleet: everything bypassed as degraded.
      {1, 1, 2, 1, 0.25, 0.25},
  };
  for (const RateCase& rc : cases) {
    SCOPED_TRACE(testing::Message()
                 << "admit=" << rc.admit << " wait=" << rc.wait << " bypass=" << rc.bypass);
    AdmissionCounters c;
    c.admit = rc.admit;
    c.wait = rc.wait;
    c.bypass = rc.bypass;
    c.bypass_degraded = rc.bypass_degraded;
    const Series series = AgenticKvMetrics(Options(false, true), c, 0, std::nullopt);
    const auto values = AsMap(series);
    if (!rc.defer_rate.has_value()) {
      EXPECT_FALSE(Has(series, kDeferRateMetric));
      EXPECT_FALSE(Has(series, kDegradedRateMetric));
      continue;
    }
    ASSERT_TRUE(Has(series, kDeferRateMetric));
    ASSERT_TRUE(Has(series, kDegradedRateMetric));
    EXPECT_DOUBLE_EQ(values.at("agentic_kv/admission/defer_rate"), *rc.defer_rate);
    EXPECT_DOUBLE_EQ(values.at("agentic_kv/admission/degraded_rate"), *rc.degraded_rate);
  }
}

TEST(AdmissionMetricsTest, CancelledAloneDoesNotCreateRates) {
  AdmissionCounters c;
  c.cancelled = 3;
  const Series series = AgenticKvMetrics(Options(false, true), c, 0, std::nullopt);
  EXPECT_THAT(series, ElementsAre(Pair("agentic_kv/admission/waiting", 0.0),
                                  Pair("agentic_kv/admission/cancelled", 3.0)));
}

TEST(AdmissionMetricsTest, WaitSecondsMeanOnlyWhenAWaiterWasGranted) {
  AdmissionCounters c;
  c.wait = 2;
  c.wait_seconds_sum = 0.0;
  EXPECT_FALSE(
      Has(AgenticKvMetrics(Options(false, true), c, 2, std::nullopt), kWaitSecondsMeanMetric));
  c.wait_granted = 4;
  c.wait_seconds_sum = 3.0;
  const auto values = AsMap(AgenticKvMetrics(Options(false, true), c, 0, std::nullopt));
  EXPECT_DOUBLE_EQ(values.at("agentic_kv/admission/wait_seconds_mean"), 0.75);
}

TEST(AdmissionMetricsTest, ReservedUtilizationAbsentWhenCeilingIsZero) {
  BudgetView degraded;  // No snapshot yet: ceiling 0.
  degraded.degraded = true;
  const Series series = AgenticKvMetrics(Options(false, true), {}, 0, degraded);
  EXPECT_FALSE(Has(series, kReservedUtilizationMetric));
  const auto values = AsMap(series);
  EXPECT_DOUBLE_EQ(values.at("agentic_kv/budget/ceiling"), 0.0);
  EXPECT_DOUBLE_EQ(values.at("agentic_kv/budget/degraded"), 1.0);

  BudgetView full = HealthyBudget();
  full.reserved = 1000;
  full.available_tokens = 0;
  EXPECT_DOUBLE_EQ(AsMap(AgenticKvMetrics(Options(false, true), {}, 0, full))
                       .at("agentic_kv/budget/reserved_utilization"),
                   1.0);
}

TEST(AdmissionMetricsTest, BudgetSeriesNeedAdmissionAndAView) {
  const Series no_view = AgenticKvMetrics(Options(false, true), {}, 0, std::nullopt);
  const Series off = AgenticKvMetrics(Options(false, false), {}, 0, HealthyBudget());
  const Series on = AgenticKvMetrics(Options(false, true), {}, 0, HealthyBudget());
  for (std::string_view name :
       {kCeilingMetric, kReservedMetric, kAvailableTokensMetric, kReservedUtilizationMetric,
        kLeaseCountMetric, kKvTokenUsageMeanMetric, kKvTokenUsageMaxMetric, kEpochMetric,
        kDegradedMetric}) {
    SCOPED_TRACE(name);
    EXPECT_FALSE(Has(no_view, name));
    EXPECT_FALSE(Has(off, name));
    EXPECT_TRUE(Has(on, name));
  }
}

struct CounterCase {
  std::string_view name;
  bool needs_admission;
  std::function<void(AdmissionCounters&, int64_t)> set;
};

TEST(AdmissionMetricsTest, EachOutcomeCounterIsAbsentWhenZero) {
  const std::vector<CounterCase> cases = {
      {kAdmitMetric, true, [](AdmissionCounters& c, int64_t v) { c.admit = v; }},
      {kBypassMetric, true, [](AdmissionCounters& c, int64_t v) { c.bypass = v; }},
      {kWaitMetric, true, [](AdmissionCounters& c, int64_t v) { c.wait = v; }},
      {kCancelledMetric, true, [](AdmissionCounters& c, int64_t v) { c.cancelled = v; }},
      {kBypassProtectedMetric, true,
       [](AdmissionCounters& c, int64_t v) { c.bypass_protected = v; }},
      {kBypassDegradedMetric, true, [](AdmissionCounters& c, int64_t v) { c.bypass_degraded = v; }},
      {kBypassAgedMetric, true, [](AdmissionCounters& c, int64_t v) { c.bypass_aged = v; }},
      {kLeaseExpiredMetric, true, [](AdmissionCounters& c, int64_t v) { c.lease_expired = v; }},
      {kSessionCloseMetric, false, [](AdmissionCounters& c, int64_t v) { c.session_close = v; }},
      {kSessionCloseFailureMetric, false,
       [](AdmissionCounters& c, int64_t v) { c.session_close_failure = v; }},
  };
  for (const CounterCase& cc : cases) {
    SCOPED_TRACE(cc.name);
    AdmissionCounters zero;
    cc.set(zero, 0);
    EXPECT_FALSE(Has(AgenticKvMetrics(Options(true, true), zero, 0, HealthyBudget()), cc.name));

    AdmissionCounters some;
    cc.set(some, 9);
    const auto values = AsMap(AgenticKvMetrics(Options(true, true), some, 0, HealthyBudget()));
    ASSERT_TRUE(values.contains(std::string(cc.name)));
    EXPECT_DOUBLE_EQ(values.at(std::string(cc.name)), 9.0);

    // Admission counters disappear with admission; session counters do not.
    const Series admission_off = AgenticKvMetrics(Options(true, false), some, 0, std::nullopt);
    EXPECT_EQ(Has(admission_off, cc.name), !cc.needs_admission);
  }
}

// Every combination of the presence inputs emits a subsequence of the documented order with
// no duplicates, and only known names.
TEST(AdmissionMetricsTest, EveryCombinationFollowsTheDocumentedOrder) {
  const std::vector<std::string_view>& all = AllAgenticKvMetricNames();
  for (int mask = 0; mask < (1 << 6); ++mask) {
    SCOPED_TRACE(mask);
    const AgenticOptions o = Options(mask & 1, mask & 2);
    AdmissionCounters c = (mask & 4) ? BusyStep() : AdmissionCounters{};
    std::optional<BudgetView> budget;
    if (mask & 8) budget = HealthyBudget();
    if ((mask & 16) && budget.has_value()) budget->ceiling = 0;
    const Series series = AgenticKvMetrics(o, c, (mask & 32) ? 11 : 0, budget);
    size_t cursor = 0;
    for (const auto& [name, value] : series) {
      while (cursor < all.size() && all[cursor] != name) ++cursor;
      ASSERT_LT(cursor, all.size()) << name << " is out of order, repeated or unknown";
      ++cursor;
    }
  }
}

TEST(AdmissionMetricsTest, CountersAddFieldByField) {
  // Distinct values per field, so a field added to the wrong one (or left out) shows.
  AdmissionCounters step;
  step.admit = 1;
  step.wait = 2;
  step.bypass = 3;
  step.bypass_protected = 4;
  step.bypass_degraded = 5;
  step.bypass_aged = 6;
  step.cancelled = 7;
  step.refused_oversized = 8;
  step.wait_granted = 9;
  step.wait_seconds_sum = 1.5;
  step.lease_expired = 10;
  step.session_close = 11;
  step.session_close_failure = 12;
  AdmissionCounters total;
  total += step;
  EXPECT_EQ(total, step);
  total += step;
  AdmissionCounters twice;
  twice.admit = 2;
  twice.wait = 4;
  twice.bypass = 6;
  twice.bypass_protected = 8;
  twice.bypass_degraded = 10;
  twice.bypass_aged = 12;
  twice.cancelled = 14;
  twice.refused_oversized = 16;
  twice.wait_granted = 18;
  twice.wait_seconds_sum = 3.0;
  twice.lease_expired = 20;
  twice.session_close = 22;
  twice.session_close_failure = 24;
  EXPECT_EQ(total, twice);
}

TEST(AdmissionMetricsTest, PrometheusNameReplacesSlashes) {
  EXPECT_EQ(PrometheusName("agentic_kv/admission/admit"), "agentic_kv_admission_admit");
  EXPECT_EQ(PrometheusName("agentic_kv/budget/kv_token_usage_max"),
            "agentic_kv_budget_kv_token_usage_max");
  EXPECT_EQ(PrometheusName("sglang:token_usage"), "sglang:token_usage");
  EXPECT_EQ(PrometheusName("a-b.c d"), "a_b_c_d");
  EXPECT_EQ(PrometheusName("9lives"), "_9lives");
  EXPECT_EQ(PrometheusName(""), "_");
  EXPECT_EQ(PrometheusName("caf\xc3\xa9"), "caf__");
}

TEST(AdmissionMetricsTest, EveryMetricHasAValidUniquePrometheusName) {
  // [a-zA-Z_:][a-zA-Z0-9_:]*, checked by hand: std::regex trips a false GCC 12 warning under
  // the sanitizer build.
  const auto valid = [](const std::string& name) {
    const auto word = [](char ch, bool first) {
      return (ch >= 'a' && ch <= 'z') || (ch >= 'A' && ch <= 'Z') || ch == '_' || ch == ':' ||
             (!first && ch >= '0' && ch <= '9');
    };
    if (name.empty()) return false;
    for (size_t i = 0; i < name.size(); ++i) {
      if (!word(name[i], i == 0)) return false;
    }
    return true;
  };
  std::set<std::string> seen;
  ASSERT_EQ(AllAgenticKvMetricNames().size(), 26u);
  for (std::string_view name : AllAgenticKvMetricNames()) {
    SCOPED_TRACE(name);
    EXPECT_TRUE(name.starts_with("agentic_kv/"));
    const std::string prom = PrometheusName(name);
    EXPECT_TRUE(valid(prom)) << prom;
    EXPECT_TRUE(prom.starts_with("agentic_kv_")) << prom;
    EXPECT_EQ(prom.size(), name.size());
    EXPECT_TRUE(seen.insert(prom).second) << prom << " collides";
  }
}

}  // namespace
}  // namespace agentkv::control
