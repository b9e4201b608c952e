#include "agentkv/service/common/agentic_kv_prometheus.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <map>
#include <set>
#include <string>
#include <utility>
#include <vector>

namespace agentkv::service {
namespace {

using ::testing::HasSubstr;
using Series = std::vector<std::pair<std::string, double>>;

// Every seed series with a distinct value (its index + 1).
Series EverySeries() {
  Series series;
  double value = 1.0;
  for (std::string_view name : control::AllAgenticKvMetricNames()) {
    series.emplace_back(std::string(name), value++);
  }
  return series;
}

// Distinct counts per field, so a counter wired to the wrong field shows.
AgenticKvTotals AllTotals() {
  AgenticKvTotals totals;
  totals.session = true;
  totals.admission = true;
  control::AdmissionCounters& c = totals.counts;
  c.session_close = 101;
  c.session_close_failure = 102;
  c.admit = 103;
  c.bypass = 104;
  c.wait = 105;
  c.cancelled = 106;
  c.bypass_protected = 107;
  c.bypass_degraded = 108;
  c.bypass_aged = 109;
  c.refused_oversized = 110;
  c.refused_over_share = 113;
  c.lease_expired = 111;
  c.wait_granted = 112;
  c.wait_seconds_sum = 12.5;
  return totals;
}

std::map<std::string, protocol::MetricFamily> ByName(
    const std::vector<protocol::MetricFamily>& families) {
  std::map<std::string, protocol::MetricFamily> out;
  for (const protocol::MetricFamily& family : families) {
    EXPECT_TRUE(out.emplace(family.name, family).second) << family.name << " twice";
  }
  return out;
}

TEST(AgenticKvPrometheusTest, GaugesKeepThePresentAndDropThePerStepCounts) {
  const std::vector<std::string> gauges = {"agentic_kv_session_lifecycle_enabled",
                                           "agentic_kv_admission_waiting",
                                           "agentic_kv_budget_ceiling",
                                           "agentic_kv_budget_reserved",
                                           "agentic_kv_budget_available_tokens",
                                           "agentic_kv_budget_reserved_utilization",
                                           "agentic_kv_budget_leases",
                                           "agentic_kv_budget_kv_token_usage_mean",
                                           "agentic_kv_budget_kv_token_usage_max",
                                           "agentic_kv_budget_epoch",
                                           "agentic_kv_budget_degraded"};
  std::vector<std::string> kept;
  for (const auto& [seed, value] : EverySeries()) {
    const std::string name = AgenticKvGaugeName(seed);
    if (!name.empty()) kept.push_back(name);
  }
  EXPECT_EQ(kept, gauges);
  EXPECT_EQ(AgenticKvGaugeName(control::kLeaseCountMetric), "agentic_kv_budget_leases");
  EXPECT_EQ(AgenticKvGaugeName(control::kAdmitMetric), "");
  EXPECT_EQ(AgenticKvGaugeName(control::kDeferRateMetric), "");
  EXPECT_EQ(AgenticKvGaugeName("agentic_kv/not/a_series"), "");

  // Without totals, only the gauges, in series order, each with its step value.
  const std::vector<protocol::MetricFamily> families =
      AgenticKvFamilies(EverySeries(), AgenticKvTotals{});
  ASSERT_EQ(families.size(), gauges.size());
  for (size_t i = 0; i < families.size(); ++i) {
    EXPECT_EQ(families[i].name, gauges[i]);
    EXPECT_EQ(families[i].type, "gauge");
    ASSERT_EQ(families[i].samples.size(), 1u);
    EXPECT_EQ(families[i].samples[0].name, gauges[i]);
  }
  // lease_count is series 21 of the table (refused_over_share came before it): value 21.
  EXPECT_EQ(ByName(families).at("agentic_kv_budget_leases").samples[0].value, 21.0);
}

TEST(AgenticKvPrometheusTest, EveryPerStepCountIsACounterSinceStart) {
  const std::map<std::string, protocol::MetricFamily> families =
      ByName(AgenticKvFamilies({}, AllTotals()));
  const std::map<std::string, double> expected = {
      {"agentic_kv_session_close_total", 101},
      {"agentic_kv_session_close_failure_total", 102},
      {"agentic_kv_admission_admit_total", 103},
      {"agentic_kv_admission_bypass_total", 104},
      {"agentic_kv_admission_wait_total", 105},
      {"agentic_kv_admission_cancelled_total", 106},
      {"agentic_kv_admission_bypass_protected_total", 107},
      {"agentic_kv_admission_bypass_degraded_total", 108},
      {"agentic_kv_admission_bypass_aged_total", 109},
      {"agentic_kv_admission_refused_oversized_total", 110},
      {"agentic_kv_admission_refused_over_share_total", 113},
      {"agentic_kv_budget_lease_expired_total", 111}};
  for (const auto& [name, value] : expected) {
    SCOPED_TRACE(name);
    ASSERT_EQ(families.count(name), 1u);
    const protocol::MetricFamily& family = families.at(name);
    EXPECT_EQ(family.type, "counter");
    ASSERT_EQ(family.samples.size(), 1u);
    EXPECT_EQ(family.samples[0].value, value);
  }
  // Each counter is the seed name's Prometheus form plus _total: every per-step count of the
  // seed's set has one.
  for (std::string_view seed :
       {control::kSessionCloseMetric, control::kSessionCloseFailureMetric, control::kAdmitMetric,
        control::kBypassMetric, control::kWaitMetric, control::kCancelledMetric,
        control::kBypassProtectedMetric, control::kBypassDegradedMetric, control::kBypassAgedMetric,
        control::kRefusedOversizedMetric, control::kRefusedOverShareMetric,
        control::kLeaseExpiredMetric}) {
    EXPECT_EQ(expected.count(control::PrometheusName(seed) + "_total"), 1u) << seed;
  }
  const protocol::MetricFamily& wait = families.at("agentic_kv_admission_wait_seconds");
  EXPECT_EQ(wait.type, "summary");
  const std::vector<protocol::Sample> samples = {
      {"agentic_kv_admission_wait_seconds_sum", {}, 12.5, std::nullopt},
      {"agentic_kv_admission_wait_seconds_count", {}, 112, std::nullopt}};
  EXPECT_EQ(wait.samples, samples);
  EXPECT_EQ(families.size(), expected.size() + 1);
}

TEST(AgenticKvPrometheusTest, EachPartOfTheTotalsIsExportedOnlyByItsOwner) {
  AgenticKvTotals session_only = AllTotals();
  session_only.admission = false;
  std::set<std::string> names;
  for (const auto& family : AgenticKvFamilies({}, session_only)) names.insert(family.name);
  EXPECT_EQ(names, (std::set<std::string>{"agentic_kv_session_close_total",
                                          "agentic_kv_session_close_failure_total"}));

  AgenticKvTotals admission_only = AllTotals();
  admission_only.session = false;
  names.clear();
  for (const auto& family : AgenticKvFamilies({}, admission_only)) names.insert(family.name);
  EXPECT_EQ(names.count("agentic_kv_session_close_total"), 0u);
  EXPECT_EQ(names.count("agentic_kv_admission_admit_total"), 1u);
  EXPECT_EQ(names.count("agentic_kv_admission_wait_seconds"), 1u);
  EXPECT_EQ(names.size(), 11u);

  // Counters are there from start, at zero.
  AgenticKvTotals zero;
  zero.admission = true;
  const auto families = ByName(AgenticKvFamilies({}, zero));
  EXPECT_EQ(families.at("agentic_kv_admission_admit_total").samples[0].value, 0.0);
}

TEST(AgenticKvPrometheusTest, NoNameBreaksTheConventionsAndEveryHelpExplains) {
  const std::vector<protocol::MetricFamily> families =
      AgenticKvFamilies(EverySeries(), AllTotals());
  for (const protocol::MetricFamily& family : families) {
    SCOPED_TRACE(family.name);
    EXPECT_TRUE(family.name.starts_with("agentic_kv_"));
    const bool counter = family.type == "counter";
    EXPECT_EQ(family.name.ends_with("_total"), counter);
    if (family.type != "summary") {
      for (const char* suffix : {"_count", "_sum", "_bucket"}) {
        EXPECT_FALSE(family.name.ends_with(suffix)) << suffix;
      }
    }
    // A sentence, not a name: no help is a metric name, seed or Prometheus.
    EXPECT_THAT(family.help, ::testing::EndsWith("."));
    EXPECT_GT(family.help.size(), 30u);
    EXPECT_NE(family.help.find(' '), std::string::npos);
    for (std::string_view seed : control::AllAgenticKvMetricNames()) {
      EXPECT_NE(family.help, seed);
      EXPECT_NE(family.help, control::PrometheusName(seed));
    }
  }
  const std::string text = protocol::WritePrometheusText(families);
  EXPECT_THAT(text, HasSubstr("# HELP agentic_kv_budget_leases Live admission leases"));
  EXPECT_THAT(text, HasSubstr("# TYPE agentic_kv_admission_admit_total counter\n"
                              "agentic_kv_admission_admit_total 103.0\n"));
  EXPECT_EQ(text.find("agentic_kv_budget_lease_count"), std::string::npos);
  EXPECT_EQ(text.find("defer_rate"), std::string::npos);
  EXPECT_TRUE(protocol::ParsePrometheusFamilies(text).ok());
}

TEST(AgenticKvPrometheusTest, SeriesOutsideTheSeedsSetAreSkipped) {
  const auto families = AgenticKvFamilies({{"agentic_kv/admission/from_a_newer_coordinator", 1.0},
                                           {std::string(control::kWaitingMetric), 3.0}},
                                          AgenticKvTotals{});
  ASSERT_EQ(families.size(), 1u);
  EXPECT_EQ(families[0].name, "agentic_kv_admission_waiting");
  EXPECT_EQ(families[0].samples[0].value, 3.0);
}

}  // namespace
}  // namespace agentkv::service
