#include "agentkv/service/gateway/gateway_metrics.h"

#include <gtest/gtest.h>

#include <string>

namespace agentkv::service {
namespace {

TEST(MergeAgenticKvSeriesTest, SessionSeriesAreTheGatewaysAndTheRestTheBackends) {
  const std::vector<std::pair<std::string, double>> backend = {
      {"agentic_kv/session/lifecycle_enabled", 1.0},
      {"agentic_kv/session/close", 99.0},
      {"agentic_kv/admission/admit", 3.0},
      {"agentic_kv/admission/waiting", 0.0},
      {"agentic_kv/budget/reserved", 12.0}};
  const auto series = MergeAgenticKvSeries(/*lifecycle=*/true, 2, 1, backend);
  const std::vector<std::pair<std::string, double>> expected = {
      {"agentic_kv/session/lifecycle_enabled", 1.0}, {"agentic_kv/session/close", 2.0},
      {"agentic_kv/session/close_failure", 1.0},     {"agentic_kv/admission/admit", 3.0},
      {"agentic_kv/admission/waiting", 0.0},         {"agentic_kv/budget/reserved", 12.0}};
  EXPECT_EQ(series, expected);
  // Lifecycle off and nothing closed: no session series at all.
  EXPECT_TRUE(MergeAgenticKvSeries(false, 0, 0, {}).empty());
  EXPECT_EQ(AgenticKvJson(expected).substr(0, 47),
            R"({"agentic_kv/session/lifecycle_enabled":1.0,"ag)");
}

TEST(GatewayMetricsTest, CountsRequestsByRouteAndCodeWithACumulativeHistogram) {
  GatewayMetrics metrics;
  metrics.ObserveRequest("/generate", 200, 0.02);
  metrics.ObserveRequest("/generate", 200, 3.0);
  metrics.ObserveRequest("/generate", 400, 0.001);
  metrics.ObserveRequest("/v1/completions", 502, 1000.0);
  metrics.CountParentHintRejected();
  metrics.CountSessionClose(true);
  metrics.CountSessionClose(false);
  EXPECT_EQ(metrics.requests("/generate", 200), 2);
  EXPECT_EQ(metrics.requests("/generate", 502), 0);
  EXPECT_EQ(metrics.parent_hint_rejected(), 1);
  EXPECT_EQ(metrics.StepCloses(true), (std::pair<int64_t, int64_t>{2, 1}));
  EXPECT_EQ(metrics.StepCloses(false), (std::pair<int64_t, int64_t>{0, 0}));
  EXPECT_EQ(metrics.close_totals(), (std::pair<int64_t, int64_t>{2, 1}));
  GatewayReadings readings;
  readings.in_flight = 4;
  readings.active_sessions = 2;
  readings.sessions_evicted = 5;
  readings.sessions_refused = 6;
  readings.retained_sessions = 3;
  readings.retain_refused = 11;
  readings.coordinator_failures = {
      .acquire = 7, .release = 8, .cancel = 9, .metrics = 10, .heartbeat = 12};
  readings.coordinator_breaker = {.open = true, .opens = 13, .bypassed = 14};
  const std::string text = protocol::WritePrometheusText(metrics.Families(readings));
  for (const char* line :
       {"agentkv_gateway_requests_total{route=\"/generate\",code=\"200\"} 2.0\n",
        "agentkv_gateway_requests_total{route=\"/generate\",code=\"400\"} 1.0\n",
        "agentkv_gateway_request_duration_seconds_bucket{route=\"/generate\",le=\"0.005\"} 1.0\n",
        "agentkv_gateway_request_duration_seconds_bucket{route=\"/generate\",le=\"0.025\"} 2.0\n",
        "agentkv_gateway_request_duration_seconds_bucket{route=\"/generate\",le=\"5.0\"} 3.0\n",
        "agentkv_gateway_request_duration_seconds_bucket{route=\"/v1/completions\",le=\"600.0\"} "
        "0.0\n",
        "agentkv_gateway_request_duration_seconds_bucket{route=\"/v1/completions\",le=\"+Inf\"} "
        "1.0\n",
        "agentkv_gateway_request_duration_seconds_count{route=\"/generate\"} 3.0\n",
        "agentkv_gateway_parent_hint_rejected_total 1.0\n",
        "agentkv_gateway_session_close_failure_total 1.0\n",
        "agentkv_gateway_in_flight_requests 4.0\n",
        "agentkv_gateway_sessions_active 2.0\n",
        "agentkv_gateway_sessions_evicted_total 5.0\n",
        "agentkv_gateway_sessions_refused_total 6.0\n",
        "agentkv_gateway_sessions_retained 3.0\n",
        "agentkv_gateway_sessions_retain_refused_total 11.0\n",
        "# TYPE agentkv_gateway_sessions_retained gauge\n",
        "# TYPE agentkv_gateway_sessions_retain_refused_total counter\n",
        "agentkv_gateway_coordinator_failures_total{op=\"acquire\"} 7.0\n",
        "agentkv_gateway_coordinator_failures_total{op=\"release\"} 8.0\n",
        "agentkv_gateway_coordinator_failures_total{op=\"cancel\"} 9.0\n",
        "agentkv_gateway_coordinator_failures_total{op=\"metrics\"} 10.0\n",
        "agentkv_gateway_coordinator_failures_total{op=\"heartbeat\"} 12.0\n",
        "# TYPE agentkv_gateway_coordinator_breaker_open gauge\n",
        "agentkv_gateway_coordinator_breaker_open 1.0\n",
        "agentkv_gateway_coordinator_breaker_opens_total 13.0\n",
        "agentkv_gateway_coordinator_breaker_bypass_total 14.0\n"}) {
    EXPECT_NE(text.find(line), std::string::npos) << line << "\n" << text;
  }
  // The text parses back.
  EXPECT_TRUE(protocol::ParsePrometheusFamilies(text).ok());
}

}  // namespace
}  // namespace agentkv::service
