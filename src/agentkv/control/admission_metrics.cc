// Invariant: AgenticKvMetrics emits a subsequence of AllAgenticKvMetricNames(), in that
// order and without duplicates; the tests check it for every presence combination.
#include "agentkv/control/admission_metrics.h"

namespace agentkv::control {
namespace {

class SeriesBuilder {
 public:
  void Add(std::string_view name, double value) { series_.emplace_back(std::string(name), value); }
  void AddIfNonZero(std::string_view name, int64_t count) {
    if (count != 0) Add(name, static_cast<double>(count));
  }
  std::vector<std::pair<std::string, double>> Take() && { return std::move(series_); }

 private:
  std::vector<std::pair<std::string, double>> series_;
};

bool IsPrometheusNameChar(char c) {
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_' ||
         c == ':';
}

}  // namespace

AdmissionCounters& AdmissionCounters::operator+=(const AdmissionCounters& other) {
  admit += other.admit;
  wait += other.wait;
  bypass += other.bypass;
  bypass_protected += other.bypass_protected;
  bypass_degraded += other.bypass_degraded;
  bypass_aged += other.bypass_aged;
  cancelled += other.cancelled;
  refused_oversized += other.refused_oversized;
  refused_over_share += other.refused_over_share;
  wait_granted += other.wait_granted;
  wait_seconds_sum += other.wait_seconds_sum;
  lease_expired += other.lease_expired;
  session_close += other.session_close;
  session_close_failure += other.session_close_failure;
  return *this;
}

const std::vector<std::string_view>& AllAgenticKvMetricNames() {
  static const auto* const kNames = new std::vector<std::string_view>{
      kLifecycleEnabledMetric,
      kSessionCloseMetric,
      kSessionCloseFailureMetric,
      kAdmitMetric,
      kBypassMetric,
      kWaitMetric,
      kWaitingMetric,
      kCancelledMetric,
      kBypassProtectedMetric,
      kBypassDegradedMetric,
      kBypassAgedMetric,
      kRefusedOversizedMetric,
      kRefusedOverShareMetric,
      kDeferRateMetric,
      kDegradedRateMetric,
      kWaitSecondsMeanMetric,
      kCeilingMetric,
      kReservedMetric,
      kAvailableTokensMetric,
      kReservedUtilizationMetric,
      kLeaseCountMetric,
      kLeaseExpiredMetric,
      kKvTokenUsageMeanMetric,
      kKvTokenUsageMaxMetric,
      kEpochMetric,
      kDegradedMetric,
  };
  return *kNames;
}

std::vector<std::pair<std::string, double>> AgenticKvMetrics(
    const AgenticOptions& options, const AdmissionCounters& counters, int64_t waiting,
    const std::optional<BudgetView>& budget) {
  SeriesBuilder out;
  if (options.agentic_session_lifecycle) out.Add(kLifecycleEnabledMetric, 1.0);
  out.AddIfNonZero(kSessionCloseMetric, counters.session_close);
  out.AddIfNonZero(kSessionCloseFailureMetric, counters.session_close_failure);
  if (!options.agentic_program_admission) return std::move(out).Take();

  out.AddIfNonZero(kAdmitMetric, counters.admit);
  out.AddIfNonZero(kBypassMetric, counters.bypass);
  out.AddIfNonZero(kWaitMetric, counters.wait);
  out.Add(kWaitingMetric, static_cast<double>(waiting));
  out.AddIfNonZero(kCancelledMetric, counters.cancelled);
  out.AddIfNonZero(kBypassProtectedMetric, counters.bypass_protected);
  out.AddIfNonZero(kBypassDegradedMetric, counters.bypass_degraded);
  out.AddIfNonZero(kBypassAgedMetric, counters.bypass_aged);
  out.AddIfNonZero(kRefusedOversizedMetric, counters.refused_oversized);
  out.AddIfNonZero(kRefusedOverShareMetric, counters.refused_over_share);
  const int64_t decisions = counters.admit + counters.wait + counters.bypass;
  if (decisions != 0) {
    const double denominator = static_cast<double>(decisions);
    out.Add(kDeferRateMetric, static_cast<double>(counters.wait) / denominator);
    out.Add(kDegradedRateMetric, static_cast<double>(counters.bypass_degraded) / denominator);
  }
  if (counters.wait_granted != 0) {
    out.Add(kWaitSecondsMeanMetric,
            counters.wait_seconds_sum / static_cast<double>(counters.wait_granted));
  }

  if (budget.has_value()) {
    out.Add(kCeilingMetric, static_cast<double>(budget->ceiling));
    out.Add(kReservedMetric, static_cast<double>(budget->reserved));
    out.Add(kAvailableTokensMetric, static_cast<double>(budget->available_tokens));
    if (budget->ceiling != 0) {
      out.Add(kReservedUtilizationMetric,
              static_cast<double>(budget->reserved) / static_cast<double>(budget->ceiling));
    }
    out.Add(kLeaseCountMetric, static_cast<double>(budget->lease_count));
  }
  // The TTL reclaim counter belongs to the coordinator, not the ledger view, so it is
  // reported even in a step whose caller has no view.
  out.AddIfNonZero(kLeaseExpiredMetric, counters.lease_expired);
  if (budget.has_value()) {
    out.Add(kKvTokenUsageMeanMetric, budget->kv_token_usage_mean);
    out.Add(kKvTokenUsageMaxMetric, budget->kv_token_usage_max);
    out.Add(kEpochMetric, static_cast<double>(budget->epoch));
    out.Add(kDegradedMetric, budget->degraded ? 1.0 : 0.0);
  }
  return std::move(out).Take();
}

std::string PrometheusName(std::string_view agentic_kv_name) {
  std::string name;
  name.reserve(agentic_kv_name.size() + 1);
  if (agentic_kv_name.empty() || (agentic_kv_name[0] >= '0' && agentic_kv_name[0] <= '9')) {
    name.push_back('_');
  }
  for (const char c : agentic_kv_name) name.push_back(IsPrometheusNameChar(c) ? c : '_');
  return name;
}

}  // namespace agentkv::control
