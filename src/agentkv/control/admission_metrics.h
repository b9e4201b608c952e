// The `agentic_kv/` metric set of session lifecycle and program-aware admission, as pure code.
//
// The coordinator and the lifecycle planner keep plain counters (AdmissionCounters); the
// budget ledger describes itself as a BudgetView. Once per step the caller passes both to
// AgenticKvMetrics(), which applies the seed's presence rules and returns the series under
// their exact Relax names, in one fixed order, so trackers, golden files and the Prometheus
// exposition (PrometheusName) all see the same set. Resetting counters and draining the usage
// window per step is the caller's job. Stateless functions over value types; thread-safe.
#ifndef AGENTKV_CONTROL_ADMISSION_METRICS_H_
#define AGENTKV_CONTROL_ADMISSION_METRICS_H_

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "agentkv/control/agentic_options.h"

namespace agentkv::control {

// Counts since the last per-step reset. Every field starts at 0.
struct AdmissionCounters {
  // Outcomes of acquire. `bypass` counts every bypass, including the three reasons below;
  // a cancelled waiter counts only in `cancelled`.
  int64_t admit = 0;             // Admitted at once with a lease.
  int64_t wait = 0;              // Placed in the global FIFO.
  int64_t bypass = 0;            // Continued without a lease, for any reason.
  int64_t bypass_protected = 0;  // ... because the work was protected.
  int64_t bypass_degraded = 0;   // ... because the capacity signal was missing or stale.
  int64_t bypass_aged = 0;       // ... because it waited --agentic-admission-max-wait-s.
  int64_t cancelled = 0;         // Waiters removed by a cancel.
  // Refused because the reservation exceeds the whole ceiling (agentkv's addition; not part
  // of the seed's admit + wait + bypass denominator).
  int64_t refused_oversized = 0;
  // Refused because the request's session or client stayed over its share of the ceiling for
  // the whole maximum wait (agentkv's addition, outside the same denominator).
  int64_t refused_over_share = 0;
  // Waiters that later got a lease, and the sum of their queue times in seconds.
  int64_t wait_granted = 0;
  double wait_seconds_sum = 0.0;
  // Leases reclaimed by the lease TTL.
  int64_t lease_expired = 0;
  // Session closes fanned out to the engines, and those that did not succeed everywhere.
  int64_t session_close = 0;
  int64_t session_close_failure = 0;

  // Adds every field of `other`: a step's counts carried into a total since start.
  AdmissionCounters& operator+=(const AdmissionCounters& other);

  friend bool operator==(const AdmissionCounters&, const AdmissionCounters&) = default;
};

// The ledger's state at the time of the metrics read (Relax's BudgetState.snapshot()), with
// the usage window already drained by the ledger.
struct BudgetView {
  int64_t epoch = 0;                 // Generation of the healthy engine set.
  int64_t ceiling = 0;               // Admission ceiling in tokens.
  int64_t reserved = 0;              // Tokens held by live leases.
  int64_t available_tokens = 0;      // max(0, ceiling - reserved).
  int64_t lease_count = 0;           // Live leases.
  double kv_token_usage_mean = 0.0;  // Window mean of the per-poll mean engine usage.
  double kv_token_usage_max = 0.0;   // Window peak of the per-poll worst-engine usage.
  bool degraded = false;             // Capacity signal missing or stale.
};

// Every series name, in the order AgenticKvMetrics emits them (the order of the seed's
// metric table): session, then admission, then budget.
inline constexpr std::string_view kLifecycleEnabledMetric = "agentic_kv/session/lifecycle_enabled";
inline constexpr std::string_view kSessionCloseMetric = "agentic_kv/session/close";
inline constexpr std::string_view kSessionCloseFailureMetric = "agentic_kv/session/close_failure";
inline constexpr std::string_view kAdmitMetric = "agentic_kv/admission/admit";
inline constexpr std::string_view kBypassMetric = "agentic_kv/admission/bypass";
inline constexpr std::string_view kWaitMetric = "agentic_kv/admission/wait";
inline constexpr std::string_view kWaitingMetric = "agentic_kv/admission/waiting";
inline constexpr std::string_view kCancelledMetric = "agentic_kv/admission/cancelled";
inline constexpr std::string_view kBypassProtectedMetric = "agentic_kv/admission/bypass_protected";
inline constexpr std::string_view kBypassDegradedMetric = "agentic_kv/admission/bypass_degraded";
inline constexpr std::string_view kBypassAgedMetric = "agentic_kv/admission/bypass_aged";
inline constexpr std::string_view kRefusedOversizedMetric =
    "agentic_kv/admission/refused_oversized";
inline constexpr std::string_view kRefusedOverShareMetric =
    "agentic_kv/admission/refused_over_share";
inline constexpr std::string_view kDeferRateMetric = "agentic_kv/admission/defer_rate";
inline constexpr std::string_view kDegradedRateMetric = "agentic_kv/admission/degraded_rate";
inline constexpr std::string_view kWaitSecondsMeanMetric = "agentic_kv/admission/wait_seconds_mean";
inline constexpr std::string_view kCeilingMetric = "agentic_kv/budget/ceiling";
inline constexpr std::string_view kReservedMetric = "agentic_kv/budget/reserved";
inline constexpr std::string_view kAvailableTokensMetric = "agentic_kv/budget/available_tokens";
inline constexpr std::string_view kReservedUtilizationMetric =
    "agentic_kv/budget/reserved_utilization";
inline constexpr std::string_view kLeaseCountMetric = "agentic_kv/budget/lease_count";
inline constexpr std::string_view kLeaseExpiredMetric = "agentic_kv/budget/lease_expired";
inline constexpr std::string_view kKvTokenUsageMeanMetric = "agentic_kv/budget/kv_token_usage_mean";
inline constexpr std::string_view kKvTokenUsageMaxMetric = "agentic_kv/budget/kv_token_usage_max";
inline constexpr std::string_view kEpochMetric = "agentic_kv/budget/epoch";
inline constexpr std::string_view kDegradedMetric = "agentic_kv/budget/degraded";

// All 25 names above, in emission order.
const std::vector<std::string_view>& AllAgenticKvMetricNames();

// The series of one step, in the order of AllAgenticKvMetricNames(), each present only when
// its rule holds:
// - session/lifecycle_enabled: 1.0 when options.agentic_session_lifecycle; else absent.
// - session/close, session/close_failure: the counter, when non-zero.
// Only when options.agentic_program_admission (else no admission/ or budget/ series):
// - admission/admit, bypass, wait, cancelled, bypass_protected, bypass_degraded,
//   bypass_aged, and budget/lease_expired: the counter, when non-zero.
// - admission/waiting: `waiting`, always (a gauge; 0 means the FIFO is empty).
// - admission/defer_rate = wait / (admit + wait + bypass) and
//   admission/degraded_rate = bypass_degraded / (admit + wait + bypass): both present when
//   that denominator is non-zero, both absent otherwise.
// - admission/wait_seconds_mean = wait_seconds_sum / wait_granted, when wait_granted > 0.
// - budget/ceiling, reserved, available_tokens, lease_count, kv_token_usage_mean,
//   kv_token_usage_max, epoch, degraded (1.0 or 0.0): when `budget` is given.
// - budget/reserved_utilization = reserved / ceiling: when `budget` is given and its ceiling
//   is non-zero.
std::vector<std::pair<std::string, double>> AgenticKvMetrics(
    const AgenticOptions& options, const AdmissionCounters& counters, int64_t waiting,
    const std::optional<BudgetView>& budget);

// The Prometheus metric name for an `agentic_kv/...` series: every byte outside
// [a-zA-Z0-9_:] becomes '_' ("agentic_kv/admission/admit" -> "agentic_kv_admission_admit"),
// and a name that is empty or starts with a digit gets a leading '_', so the result always
// matches [a-zA-Z_:][a-zA-Z0-9_:]*.
std::string PrometheusName(std::string_view agentic_kv_name);

}  // namespace agentkv::control

#endif  // AGENTKV_CONTROL_ADMISSION_METRICS_H_
