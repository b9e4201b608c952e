// Invariant: kExports has one row per name of control::AllAgenticKvMetricNames(), in that
// order (the tests check it), so a series added to the seed's set cannot miss its exposition.
#include "agentkv/service/common/agentic_kv_prometheus.h"

#include <array>
#include <cstdint>

namespace agentkv::service {
namespace {

using control::AdmissionCounters;

enum class Export {
  kGauge,    // The step's value, as a gauge named `name`.
  kCounter,  // Left out of the gauges; the total since start as the counter `name`.
  kSummary,  // Left out of the gauges; granted waits as the summary `name` (_sum, _count).
  kNone,     // A ratio of one step's counts: left out.
};

enum class Part { kSession, kAdmission };

struct ExportRow {
  std::string_view seed;
  Export how;
  std::string_view name;  // The Prometheus family name; empty for kNone.
  std::string_view help;
  Part part = Part::kAdmission;
  int64_t AdmissionCounters::*count = nullptr;  // kCounter only.
};

// The HELP texts say what each series measures and its unit; the docs tables repeat them.
constexpr std::array<ExportRow, 26> kExports = {{
    {control::kLifecycleEnabledMetric, Export::kGauge, "agentic_kv_session_lifecycle_enabled",
     "1 when the gateway runs the session KV lifecycle (closes fanned out to every engine); "
     "absent when it is off.",
     Part::kSession},
    {control::kSessionCloseMetric, Export::kCounter, "agentic_kv_session_close_total",
     "Session closes fanned out to every engine since start.", Part::kSession,
     &AdmissionCounters::session_close},
    {control::kSessionCloseFailureMetric, Export::kCounter,
     "agentic_kv_session_close_failure_total",
     "Session closes since start that did not succeed on every engine (the session still "
     "ended; its KV falls back to eviction).",
     Part::kSession, &AdmissionCounters::session_close_failure},
    {control::kAdmitMetric, Export::kCounter, "agentic_kv_admission_admit_total",
     "Requests admitted at once with a lease since start.", Part::kAdmission,
     &AdmissionCounters::admit},
    {control::kBypassMetric, Export::kCounter, "agentic_kv_admission_bypass_total",
     "Requests that went on without a lease since start, for any reason (the bypass_*_total "
     "counters break out three reasons).",
     Part::kAdmission, &AdmissionCounters::bypass},
    {control::kWaitMetric, Export::kCounter, "agentic_kv_admission_wait_total",
     "Requests placed in the admission FIFO since start.", Part::kAdmission,
     &AdmissionCounters::wait},
    {control::kWaitingMetric, Export::kGauge, "agentic_kv_admission_waiting",
     "Requests waiting in the admission FIFO now."},
    {control::kCancelledMetric, Export::kCounter, "agentic_kv_admission_cancelled_total",
     "Waiting requests removed from the admission FIFO by a cancel since start.", Part::kAdmission,
     &AdmissionCounters::cancelled},
    {control::kBypassProtectedMetric, Export::kCounter,
     "agentic_kv_admission_bypass_protected_total",
     "Bypasses since start because the work was protected (for example after repeated "
     "partial-rollout aborts).",
     Part::kAdmission, &AdmissionCounters::bypass_protected},
    {control::kBypassDegradedMetric, Export::kCounter, "agentic_kv_admission_bypass_degraded_total",
     "Bypasses since start because the fleet's capacity signal was missing or stale.",
     Part::kAdmission, &AdmissionCounters::bypass_degraded},
    {control::kBypassAgedMetric, Export::kCounter, "agentic_kv_admission_bypass_aged_total",
     "Bypasses since start of requests that waited --agentic-admission-max-wait-s in the FIFO.",
     Part::kAdmission, &AdmissionCounters::bypass_aged},
    {control::kRefusedOversizedMetric, Export::kCounter,
     "agentic_kv_admission_refused_oversized_total",
     "Requests refused since start because their reservation exceeds the KV capacity of the "
     "fleet's largest engine.",
     Part::kAdmission, &AdmissionCounters::refused_oversized},
    {control::kRefusedOverShareMetric, Export::kCounter,
     "agentic_kv_admission_refused_over_share_total",
     "Requests refused since start because their session or client held more than its share "
     "of the admission ceiling for the whole maximum wait.",
     Part::kAdmission, &AdmissionCounters::refused_over_share},
    {control::kDeferRateMetric, Export::kNone, "", ""},
    {control::kDegradedRateMetric, Export::kNone, "", ""},
    {control::kWaitSecondsMeanMetric, Export::kSummary, "agentic_kv_admission_wait_seconds",
     "Seconds that requests later granted a lease spent in the admission FIFO, since start."},
    {control::kCeilingMetric, Export::kGauge, "agentic_kv_budget_ceiling",
     "Admission ceiling in tokens: floor(KV capacity of the healthy engines x headroom)."},
    {control::kReservedMetric, Export::kGauge, "agentic_kv_budget_reserved",
     "Tokens held by live admission leases."},
    {control::kAvailableTokensMetric, Export::kGauge, "agentic_kv_budget_available_tokens",
     "Tokens that can still be reserved: max(0, ceiling - reserved)."},
    {control::kReservedUtilizationMetric, Export::kGauge, "agentic_kv_budget_reserved_utilization",
     "Reserved tokens over the admission ceiling (a ratio; above 1 when the ceiling shrank "
     "under live leases); absent while the ceiling is 0."},
    {control::kLeaseCountMetric, Export::kGauge, "agentic_kv_budget_leases",
     "Live admission leases (agentic_kv/budget/lease_count in GET /agentic_kv)."},
    {control::kLeaseExpiredMetric, Export::kCounter, "agentic_kv_budget_lease_expired_total",
     "Admission leases reclaimed by the lease TTL since start (their holder never released "
     "them).",
     Part::kAdmission, &AdmissionCounters::lease_expired},
    {control::kKvTokenUsageMeanMetric, Export::kGauge, "agentic_kv_budget_kv_token_usage_mean",
     "Mean engine KV token usage (a ratio, 0 to 1), averaged over the polls since the last GET "
     "/agentic_kv?reset=1 (since start if none)."},
    {control::kKvTokenUsageMaxMetric, Export::kGauge, "agentic_kv_budget_kv_token_usage_max",
     "Worst engine KV token usage (a ratio, 0 to 1) over the polls since the last GET "
     "/agentic_kv?reset=1 (since start if none)."},
    {control::kEpochMetric, Export::kGauge, "agentic_kv_budget_epoch",
     "Generation of the healthy engine set; it changes when engines join or leave."},
    {control::kDegradedMetric, Export::kGauge, "agentic_kv_budget_degraded",
     "1 when the capacity snapshot is missing or stale (every request bypasses admission), "
     "else 0."},
}};

// The row of `seed_name`, or nullptr for a name outside the seed's set (a newer remote
// coordinator's series, for instance).
const ExportRow* RowOf(std::string_view seed_name) {
  for (const ExportRow& row : kExports) {
    if (row.seed == seed_name) return &row;
  }
  return nullptr;
}

protocol::MetricFamily Family(const ExportRow& row, std::string_view type) {
  return protocol::MetricFamily{
      std::string(row.name), std::string(row.help), std::string(type), {}};
}

void AddSample(protocol::MetricFamily& family, std::string name, double value) {
  family.samples.push_back(protocol::Sample{std::move(name), {}, value, std::nullopt});
}

bool Enabled(const ExportRow& row, const AgenticKvTotals& totals) {
  return row.part == Part::kSession ? totals.session : totals.admission;
}

}  // namespace

std::string AgenticKvGaugeName(std::string_view seed_name) {
  const ExportRow* row = RowOf(seed_name);
  return row != nullptr && row->how == Export::kGauge ? std::string(row->name) : std::string();
}

std::vector<protocol::MetricFamily> AgenticKvFamilies(
    const std::vector<std::pair<std::string, double>>& step_series, const AgenticKvTotals& totals) {
  std::vector<protocol::MetricFamily> families;
  for (const auto& [seed_name, value] : step_series) {
    const ExportRow* row = RowOf(seed_name);
    if (row == nullptr || row->how != Export::kGauge) continue;
    protocol::MetricFamily family = Family(*row, "gauge");
    AddSample(family, family.name, value);
    families.push_back(std::move(family));
  }
  for (const ExportRow& row : kExports) {
    if (!Enabled(row, totals)) continue;
    if (row.how == Export::kCounter) {
      protocol::MetricFamily family = Family(row, "counter");
      AddSample(family, family.name, static_cast<double>(totals.counts.*row.count));
      families.push_back(std::move(family));
    } else if (row.how == Export::kSummary) {
      protocol::MetricFamily family = Family(row, "summary");
      AddSample(family, family.name + "_sum", totals.counts.wait_seconds_sum);
      AddSample(family, family.name + "_count", static_cast<double>(totals.counts.wait_granted));
      families.push_back(std::move(family));
    }
  }
  return families;
}

}  // namespace agentkv::service
