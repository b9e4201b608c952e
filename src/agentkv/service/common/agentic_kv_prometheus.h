// The seed's `agentic_kv/` series on GET /metrics, as the gateway and the coordinator both
// export them.
//
// GET /agentic_kv serves the seed's per-step window (control::AgenticKvMetrics) as JSON, and
// `?reset=1` starts a new step. A Prometheus scraper must not depend on who resets what, so
// /metrics exports:
// - the series that describe the present (lifecycle on, FIFO length, the budget) as gauges,
//   named by control::PrometheusName, except `agentic_kv/budget/lease_count`, which becomes
//   `agentic_kv_budget_leases` (only histograms and summaries may end in `_count`);
// - the usage window (`kv_token_usage_mean`, `kv_token_usage_max`) as gauges too: no counter
//   can stand for it, and its HELP says which window it covers;
// - for each per-step count, a counter `<PrometheusName>_total` since start, which a step
//   reset never lowers, and the queue time of granted waiters as the summary
//   `agentic_kv_admission_wait_seconds` (`_sum`, `_count`).
// The per-step counts themselves and the ratios of one step (defer_rate, degraded_rate,
// wait_seconds_mean) are not on /metrics: rate() over the counters gives them for any window.
// Every family has a HELP line that says what it measures and in which unit. Pure functions;
// thread-safe.
#ifndef AGENTKV_SERVICE_COMMON_AGENTIC_KV_PROMETHEUS_H_
#define AGENTKV_SERVICE_COMMON_AGENTIC_KV_PROMETHEUS_H_

#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "agentkv/control/admission_metrics.h"
#include "agentkv/protocol/prometheus.h"

namespace agentkv::service {

// What a process counted since start, and which parts of it are its own to export.
struct AgenticKvTotals {
  // Counts since start; only the fields of the parts enabled below are read.
  control::AdmissionCounters counts;
  // Export agentic_kv_session_close_total and _close_failure_total: the process fans out the
  // session closes (the gateway). Default: false.
  bool session = false;
  // Export the admission counters and the wait summary: the process decides admission itself
  // (the coordinator, or a gateway whose admission runs in process). Default: false.
  bool admission = false;
};

// The name a seed series has on /metrics, or "" when /metrics leaves it out (a per-step
// count, exported as its `_total` counter instead, or a ratio of one step's counts) or is
// not one of control::AllAgenticKvMetricNames().
std::string AgenticKvGaugeName(std::string_view seed_name);

// The families for /metrics: one gauge per series of `step_series` that AgenticKvGaugeName
// keeps, in series order, then the counters and the summary of `totals`' enabled parts, in
// the order of control::AllAgenticKvMetricNames(). Counters are present from start, at 0.
// Series of `step_series` outside the seed's set (a newer remote coordinator's) are skipped.
std::vector<protocol::MetricFamily> AgenticKvFamilies(
    const std::vector<std::pair<std::string, double>>& step_series, const AgenticKvTotals& totals);

}  // namespace agentkv::service

#endif  // AGENTKV_SERVICE_COMMON_AGENTIC_KV_PROMETHEUS_H_
