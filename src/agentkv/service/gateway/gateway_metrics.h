// GatewayMetrics: the gateway's own Prometheus series, and the merge of the seed's
// `agentic_kv/` series for GET /metrics and GET /agentic_kv (their Prometheus form is
// service/common/agentic_kv_prometheus.h, shared with the coordinator).
//
// Own series: agentkv_gateway_requests_total{route,code} (code 499 = the client left first),
// agentkv_gateway_request_duration_seconds{route} (a histogram over the whole exchange,
// admission wait included), agentkv_gateway_parent_hint_rejected_total,
// agentkv_gateway_untrusted_bypass_total,
// agentkv_gateway_session_close_total / _close_failure_total (cumulative),
// agentkv_gateway_sessions_evicted_total / _sessions_refused_total (the --max-sessions bound),
// agentkv_gateway_sessions_retain_refused_total (the --max-retained-sessions bound),
// agentkv_gateway_sessions_rate_limited_total (--max-new-sessions-per-s),
// agentkv_gateway_coordinator_failures_total{op} (a remote coordinator's failed calls),
// agentkv_gateway_coordinator_breaker_open / _breaker_opens_total / _breaker_bypass_total (the
// circuit breaker in front of a remote coordinator), agentkv_gateway_inflight_refused_total (the
// --max-inflight-bytes bound), and the gauges agentkv_gateway_in_flight_requests,
// agentkv_gateway_inflight_bytes, agentkv_gateway_sessions_active and
// agentkv_gateway_sessions_retained. The
// agentic_kv/ session series are the gateway's (it runs the lifecycle); the admission/ and budget/
// series come from the AdmissionBackend. Thread-safe.
#ifndef AGENTKV_SERVICE_GATEWAY_GATEWAY_METRICS_H_
#define AGENTKV_SERVICE_GATEWAY_GATEWAY_METRICS_H_

#include <array>
#include <cstdint>
#include <map>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "agentkv/protocol/prometheus.h"
#include "agentkv/service/admission/admission_backend.h"
#include "agentkv/sync/mutex.h"

namespace agentkv::service {

// Upper bounds of the request duration histogram, in seconds.
inline constexpr std::array<double, 16> kRequestDurationBuckets = {
    0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 120, 300, 600};

// The agentic_kv/ series of one read: the session series from the gateway's own close counts
// (lifecycle_enabled when `lifecycle`, close and close_failure when non-zero; the seed's
// presence rules), followed by the backend's series except its own session/ ones (which would
// duplicate them), in the backend's order.
std::vector<std::pair<std::string, double>> MergeAgenticKvSeries(
    bool lifecycle, int64_t step_close, int64_t step_close_failure,
    const std::vector<std::pair<std::string, double>>& backend_series);

// {"agentic_kv/...": value, ...} in series order.
std::string AgenticKvJson(const std::vector<std::pair<std::string, double>>& series);

// What the rest of the gateway reports at read time.
struct GatewayReadings {
  int64_t in_flight = 0;
  int64_t active_sessions = 0;
  // Active sessions marked retained.
  int64_t retained_sessions = 0;
  // Since start: sessions ended early under --max-sessions, new sessions refused there, and
  // retention marks refused under --max-retained-sessions.
  int64_t sessions_evicted = 0;
  int64_t sessions_refused = 0;
  int64_t retain_refused = 0;
  AdmissionBackendFailures coordinator_failures;
  CoordinatorBreakerState coordinator_breaker;
  // Bytes held against --max-inflight-bytes now, and requests refused (503) for it since start.
  int64_t inflight_bytes = 0;
  int64_t inflight_refused = 0;
};

class GatewayMetrics {
 public:
  // One finished exchange on `route` (a path such as "/generate") answered `code` after
  // `seconds`.
  void ObserveRequest(std::string_view route, int code, double seconds);
  void CountParentHintRejected();
  // A request whose X-Agentkv-Protected or X-Agentkv-Scope asked to skip admission without the
  // gateway's bearer token (ignored).
  void CountUntrustedBypass();
  // A request refused with 429 because it would have opened a session past its client's
  // --max-new-sessions-per-s bucket.
  void CountSessionRateLimited();
  // One close fan-out outcome.
  void CountSessionClose(bool ok);

  // Session closes and failed closes since the last reset (the per-step agentic_kv/session/
  // counters); with `reset`, they restart at 0 in the same step.
  std::pair<int64_t, int64_t> StepCloses(bool reset);
  // Session closes and failed closes since start.
  std::pair<int64_t, int64_t> close_totals() const;

  int64_t parent_hint_rejected() const;
  int64_t untrusted_bypass() const;
  int64_t sessions_rate_limited() const;
  // Requests answered with `code` on `route` so far.
  int64_t requests(std::string_view route, int code) const;

  // The gateway's own families, with `readings`.
  std::vector<protocol::MetricFamily> Families(const GatewayReadings& readings) const;

 private:
  struct Histogram {
    std::array<int64_t, kRequestDurationBuckets.size()> buckets{};  // Not cumulative.
    double sum = 0;
    int64_t count = 0;
  };

  // Families' parts: the requests by route and code and their durations; the gateway's own
  // counters (hints, bypasses, closes, session refusals).
  void AppendRequestFamilies(std::vector<protocol::MetricFamily>& families) const
      AGENTKV_REQUIRES(mu_);
  void AppendCounterFamilies(const GatewayReadings& readings,
                             std::vector<protocol::MetricFamily>& families) const
      AGENTKV_REQUIRES(mu_);

  mutable sync::Mutex mu_;
  std::map<std::pair<std::string, int>, int64_t> requests_ AGENTKV_GUARDED_BY(mu_);
  std::map<std::string, Histogram> durations_ AGENTKV_GUARDED_BY(mu_);
  int64_t parent_hint_rejected_ AGENTKV_GUARDED_BY(mu_) = 0;
  int64_t untrusted_bypass_ AGENTKV_GUARDED_BY(mu_) = 0;
  int64_t sessions_rate_limited_ AGENTKV_GUARDED_BY(mu_) = 0;
  int64_t close_total_ AGENTKV_GUARDED_BY(mu_) = 0;
  int64_t close_failure_total_ AGENTKV_GUARDED_BY(mu_) = 0;
  int64_t step_close_ AGENTKV_GUARDED_BY(mu_) = 0;
  int64_t step_close_failure_ AGENTKV_GUARDED_BY(mu_) = 0;
};

}  // namespace agentkv::service

#endif  // AGENTKV_SERVICE_GATEWAY_GATEWAY_METRICS_H_
