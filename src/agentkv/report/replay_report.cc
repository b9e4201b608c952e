// The arm table's metrics and the terminal table of a ReplayResult.
//
// One list of metric descriptors (kMetrics) drives the table rows, and the rows drive the HTML
// table and the JSON's delta_vs_baseline, so no two renderings disagree on what a delta is:
// (arm - baseline) / baseline, left out when the baseline is 0. Numbers are formatted with
// snprintf in the "C" locale conventions, so the text depends on nothing but the input (no
// locale, no clock, no hash order). Non-finite values never reach the text: cells show "-".
#include "agentkv/report/replay_report.h"

#include <algorithm>
#include <array>
#include <cmath>
#include <cstdio>
#include <functional>
#include <limits>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "agentkv/report/internal/text_wrap.h"
#include "agentkv/report/replay_verdict.h"

namespace agentkv::report {

using sim::ArmResult;
using sim::ReplayResult;
using sim::ReplaySetup;
namespace {

// ---- Number formatting ---------------------------------------------------------------------

// `value` with `decimals` digits after the point; "-" when not finite; never "-0.0".
std::string Fixed(double value, int decimals) {
  if (!std::isfinite(value)) return "-";
  std::array<char, 64> buffer{};
  std::snprintf(buffer.data(), buffer.size(), "%.*f", decimals, value);
  std::string text(buffer.data());
  if (text.front() == '-' && text.find_first_not_of("-0.") == std::string::npos) text.erase(0, 1);
  return text;
}

// Inserts thousands separators into the integer part of a plain decimal ("-1234.5").
std::string WithSeparators(std::string text) {
  const size_t begin = (!text.empty() && text.front() == '-') ? 1 : 0;
  size_t end = text.find('.');
  if (end == std::string::npos) end = text.size();
  for (size_t i = end; i > begin + 3; i -= 3) text.insert(i - 3, 1, ',');
  return text;
}

// Three significant digits with a k/M/G suffix ("12.3k", "123M"); plain below 10,000.
std::string Abbreviated(double value) {
  if (!std::isfinite(value)) return "-";
  const double magnitude = std::fabs(value);
  if (magnitude < 9999.5) return WithSeparators(Fixed(value, 0));
  static constexpr std::array<std::pair<double, const char*>, 4> kUnits = {
      {{1e3, "k"}, {1e6, "M"}, {1e9, "G"}, {1e12, "T"}}};
  size_t unit = 0;
  while (unit + 1 < kUnits.size() && magnitude >= kUnits[unit + 1].first * 0.9995) ++unit;
  const double scaled = value / kUnits[unit].first;
  const double scaled_magnitude = std::fabs(scaled);
  const int decimals = scaled_magnitude < 9.995 ? 2 : (scaled_magnitude < 99.95 ? 1 : 0);
  return Fixed(scaled, decimals) + kUnits[unit].second;
}

std::string Count(double value, NumberStyle style) {
  if (style == NumberStyle::kCompact) return Abbreviated(value);
  return WithSeparators(Fixed(value, 0));
}

// Seconds with precision that shrinks as the value grows: 0.123, 12.34, 123.4, 1,234.
std::string Seconds(double value) {
  const double magnitude = std::fabs(value);
  if (magnitude < 10) return Fixed(value, 3);
  if (magnitude < 100) return Fixed(value, 2);
  if (magnitude < 1000) return Fixed(value, 1);
  return WithSeparators(Fixed(value, 0));
}

// A series value: an integer count when it is one, else three decimals.
std::string SeriesValue(double value, NumberStyle style) {
  if (std::isfinite(value) && std::fabs(value) < 1e15 && value == std::floor(value)) {
    return Count(value, style);
  }
  return Fixed(value, 3);
}

// "(+3.1%)"; "(=)" when the values are equal. Compact style drops the decimal from 10% on.
std::string DeltaText(double change, NumberStyle style) {
  if (change == 0) return "(=)";
  const double percent = change * 100;
  const double magnitude = std::fabs(percent);
  const bool one_decimal = style == NumberStyle::kFull ? magnitude < 999.95 : magnitude < 9.95;
  std::string text = Fixed(magnitude, one_decimal ? 1 : 0);
  return std::string("(") + (percent < 0 ? "-" : "+") + text + "%)";
}

// ---- Metric descriptors --------------------------------------------------------------------

enum class Kind : uint8_t { kRatio, kCount, kSeconds, kRate };

// Whether a row is shown for every setup or only when some arm has a non-zero value.
enum class Show : uint8_t { kAlways, kWhenNonZero };

struct Metric {
  const char* section;
  const char* label;
  // The key in the JSON's delta_vs_baseline.
  const char* json_key;
  Kind kind;
  MetricSense sense;
  Show show;
  double (*value)(const ArmResult&);
};

constexpr MetricSense kUp = MetricSense::kHigherIsBetter;
constexpr MetricSense kDown = MetricSense::kLowerIsBetter;
constexpr MetricSense kFlat = MetricSense::kNeutral;

double AsDouble(int64_t v) { return static_cast<double>(v); }

double TokenHitRatio(const ArmResult& a) {
  return a.token_hit_ratio_device + a.token_hit_ratio_host;
}

// Display order. The ideal row, the admission series and the conservation rows are built
// separately below, in their place.
const Metric kMetrics[] = {
    {"prefix cache", "token hit ratio device", "token_hit_ratio_device", Kind::kRatio, kUp,
     Show::kAlways, [](const ArmResult& a) { return a.token_hit_ratio_device; }},
    {"prefix cache", "token hit ratio host", "token_hit_ratio_host", Kind::kRatio, kUp,
     Show::kAlways, [](const ArmResult& a) { return a.token_hit_ratio_host; }},
    {"prefix cache", "token hit ratio dev+host", "token_hit_ratio", Kind::kRatio, kUp,
     Show::kAlways, TokenHitRatio},
    {"prefix cache", "block hit ratio dev+host", "block_hit_ratio", Kind::kRatio, kUp,
     Show::kAlways,
     [](const ArmResult& a) { return a.block_hit_ratio_device + a.block_hit_ratio_host; }},
    {"recompute", "uncached tokens", "uncached_tokens", Kind::kCount, kDown, Show::kAlways,
     [](const ArmResult& a) { return AsDouble(a.uncached_tokens); }},
    {"recompute", "cold tokens", "cold_tokens", Kind::kCount, kDown, Show::kAlways,
     [](const ArmResult& a) { return AsDouble(a.cold_tokens); }},
    {"recompute", "evicted recompute tokens", "evicted_recompute_tokens", Kind::kCount, kDown,
     Show::kAlways, [](const ArmResult& a) { return AsDouble(a.evicted_recompute_tokens); }},
    {"recompute", "  after a tool call", "evicted_recompute_after_tool_call", Kind::kCount, kDown,
     Show::kWhenNonZero,
     [](const ArmResult& a) { return AsDouble(a.evicted_recompute_after_tool_call); }},
    {"recompute", "  after a sub-agent wait", "evicted_recompute_after_subagent_wait", Kind::kCount,
     kDown, Show::kWhenNonZero,
     [](const ArmResult& a) { return AsDouble(a.evicted_recompute_after_subagent_wait); }},
    {"recompute", "  after a human turn", "evicted_recompute_after_human_turn", Kind::kCount, kDown,
     Show::kWhenNonZero,
     [](const ArmResult& a) { return AsDouble(a.evicted_recompute_after_human_turn); }},
    {"recompute", "  on a first request", "evicted_recompute_first", Kind::kCount, kDown,
     Show::kWhenNonZero, [](const ArmResult& a) { return AsDouble(a.evicted_recompute_first); }},
    {"recompute", "preempted recompute tokens", "preempted_recompute_tokens", Kind::kCount, kDown,
     Show::kAlways, [](const ArmResult& a) { return AsDouble(a.preempted_recompute_tokens); }},
    {"throughput", "makespan (s)", "makespan_s", Kind::kSeconds, kDown, Show::kAlways,
     [](const ArmResult& a) { return a.makespan_s; }},
    {"throughput", "requests/s", "requests_per_s", Kind::kRate, kUp, Show::kAlways,
     [](const ArmResult& a) { return a.requests_per_s; }},
    {"throughput", "output tokens/s", "output_tokens_per_s", Kind::kRate, kUp, Show::kAlways,
     [](const ArmResult& a) { return a.output_tokens_per_s; }},
    {"latency", "session time mean (s)", "session_time_mean_s", Kind::kSeconds, kDown,
     Show::kAlways, [](const ArmResult& a) { return a.session_time.mean_s; }},
    {"latency", "session time p50 (s)", "session_time_p50_s", Kind::kSeconds, kDown, Show::kAlways,
     [](const ArmResult& a) { return a.session_time.p50_s; }},
    {"latency", "session time p95 (s)", "session_time_p95_s", Kind::kSeconds, kDown, Show::kAlways,
     [](const ArmResult& a) { return a.session_time.p95_s; }},
    {"latency", "session time p99 (s)", "session_time_p99_s", Kind::kSeconds, kDown, Show::kAlways,
     [](const ArmResult& a) { return a.session_time.p99_s; }},
    // Server time: a session's time in the serving stack, without the recorded client gaps.
    {"latency", "server time mean (s)", "server_time_mean_s", Kind::kSeconds, kDown, Show::kAlways,
     [](const ArmResult& a) { return a.server_time.mean_s; }},
    {"latency", "server time p50 (s)", "server_time_p50_s", Kind::kSeconds, kDown, Show::kAlways,
     [](const ArmResult& a) { return a.server_time.p50_s; }},
    {"latency", "server time p95 (s)", "server_time_p95_s", Kind::kSeconds, kDown, Show::kAlways,
     [](const ArmResult& a) { return a.server_time.p95_s; }},
    {"latency", "server time p99 (s)", "server_time_p99_s", Kind::kSeconds, kDown, Show::kAlways,
     [](const ArmResult& a) { return a.server_time.p99_s; }},
    {"latency", "queueing delay mean (s)", "queueing_delay_mean_s", Kind::kSeconds, kDown,
     Show::kAlways, [](const ArmResult& a) { return a.queueing_delay.mean_s; }},
    {"latency", "queueing delay p95 (s)", "queueing_delay_p95_s", Kind::kSeconds, kDown,
     Show::kAlways, [](const ArmResult& a) { return a.queueing_delay.p95_s; }},
    {"latency", "TTFT p50 (s)", "ttft_p50_s", Kind::kSeconds, kDown, Show::kAlways,
     [](const ArmResult& a) { return a.ttft.p50_s; }},
    {"latency", "TTFT p95 (s)", "ttft_p95_s", Kind::kSeconds, kDown, Show::kAlways,
     [](const ArmResult& a) { return a.ttft.p95_s; }},
    {"latency", "TTFT p99 (s)", "ttft_p99_s", Kind::kSeconds, kDown, Show::kAlways,
     [](const ArmResult& a) { return a.ttft.p99_s; }},
    {"latency", "admission wait mean (s)", "admission_wait_mean_s", Kind::kSeconds, kDown,
     Show::kWhenNonZero, [](const ArmResult& a) { return a.admission_wait.mean_s; }},
    {"latency", "admission wait p95 (s)", "admission_wait_p95_s", Kind::kSeconds, kDown,
     Show::kWhenNonZero, [](const ArmResult& a) { return a.admission_wait.p95_s; }},
    {"engines", "preemptions", "preemptions", Kind::kCount, kDown, Show::kAlways,
     [](const ArmResult& a) { return AsDouble(a.preemptions); }},
    {"engines", "device evictions", "device_evictions", Kind::kCount, kDown, Show::kAlways,
     [](const ArmResult& a) { return AsDouble(a.device_evictions); }},
    {"engines", "offloads", "offloads", Kind::kCount, kFlat, Show::kAlways,
     [](const ArmResult& a) { return AsDouble(a.offloads); }},
    {"engines", "drops", "drops", Kind::kCount, kDown, Show::kAlways,
     [](const ArmResult& a) { return AsDouble(a.drops); }},
    {"engines", "onboards", "onboards", Kind::kCount, kFlat, Show::kAlways,
     [](const ArmResult& a) { return AsDouble(a.onboards); }},
    {"lifecycle", "sessions closed", "sessions_closed", Kind::kCount, kFlat, Show::kAlways,
     [](const ArmResult& a) { return AsDouble(a.sessions_closed); }},
    {"lifecycle", "tokens freed by close", "tokens_freed_by_close", Kind::kCount, kFlat,
     Show::kAlways, [](const ArmResult& a) { return AsDouble(a.tokens_freed_by_close); }},
    {"lifecycle", "demoted children", "demoted_children", Kind::kCount, kFlat, Show::kAlways,
     [](const ArmResult& a) { return AsDouble(a.demoted_children); }},
    {"lifecycle", "demoted blocks", "demoted_blocks", Kind::kCount, kFlat, Show::kWhenNonZero,
     [](const ArmResult& a) { return AsDouble(a.demoted_blocks); }},
    {"lifecycle", "restored children", "restored_children", Kind::kCount, kFlat, Show::kWhenNonZero,
     [](const ArmResult& a) { return AsDouble(a.restored_children); }},
    {"lifecycle", "ttl pins", "ttl_pins", Kind::kCount, kFlat, Show::kAlways,
     [](const ArmResult& a) { return AsDouble(a.ttl_pins); }},
    {"lifecycle", "ttl expired", "ttl_expired", Kind::kCount, kDown, Show::kAlways,
     [](const ArmResult& a) { return AsDouble(a.ttl_expired); }},
    {"lifecycle", "ttl returned", "ttl_returned", Kind::kCount, kUp, Show::kWhenNonZero,
     [](const ArmResult& a) { return AsDouble(a.ttl_returned); }},
    // Continuum's counters (the continuum arm).
    {"lifecycle", "ttl declined by cost", "ttl_declined_by_cost", Kind::kCount, kFlat,
     Show::kWhenNonZero, [](const ArmResult& a) { return AsDouble(a.ttl_declined_by_cost); }},
    {"lifecycle", "ttl unpinned (pressure)", "ttl_unpinned_under_pressure", Kind::kCount, kFlat,
     Show::kWhenNonZero,
     [](const ArmResult& a) { return AsDouble(a.ttl_unpinned_under_pressure); }},
    // The working set's counters (the +working-set arms).
    {"lifecycle", "working-set waits", "working_set_waited", Kind::kCount, kFlat,
     Show::kWhenNonZero, [](const ArmResult& a) { return AsDouble(a.working_set_waited); }},
    {"lifecycle", "working-set aged", "working_set_aged", Kind::kCount, kFlat, Show::kWhenNonZero,
     [](const ArmResult& a) { return AsDouble(a.working_set_aged); }},
    {"lifecycle", "holds returned", "working_set_holds_returned", Kind::kCount, kUp,
     Show::kWhenNonZero, [](const ArmResult& a) { return AsDouble(a.working_set_holds_returned); }},
    {"lifecycle", "holds expired", "working_set_holds_expired", Kind::kCount, kDown,
     Show::kWhenNonZero, [](const ArmResult& a) { return AsDouble(a.working_set_holds_expired); }},
    // Stall offload's counters (the +stall-offload arms).
    {"engines", "stall offloaded blocks", "stall_offloaded_blocks", Kind::kCount, kFlat,
     Show::kWhenNonZero, [](const ArmResult& a) { return AsDouble(a.stall_offloaded_blocks); }},
    {"engines", "stall prefetched blocks", "stall_prefetched_blocks", Kind::kCount, kFlat,
     Show::kWhenNonZero, [](const ArmResult& a) { return AsDouble(a.stall_prefetched_blocks); }},
    {"conservation", "requests issued", "requests_issued", Kind::kCount, kFlat, Show::kAlways,
     [](const ArmResult& a) { return AsDouble(a.requests_issued); }},
    {"conservation", "requests completed", "requests_completed", Kind::kCount, kUp, Show::kAlways,
     [](const ArmResult& a) { return AsDouble(a.requests_completed); }},
};

// The RL rollout group: shown first, and only when some arm has rollout metrics (a workload
// with steps); its own list so that the table of every other workload is unchanged.
double RolloutValue(const ArmResult& a, double sim::RolloutMetrics::*field) {
  return a.rollout.has_value() ? (*a.rollout).*field : 0.0;
}

const Metric kRolloutMetrics[] = {
    {"rollout", "steps", "rollout_steps", Kind::kCount, kFlat, Show::kAlways,
     [](const ArmResult& a) { return a.rollout ? AsDouble(a.rollout->steps) : 0.0; }},
    {"rollout", "step makespan mean (s)", "rollout_step_makespan_mean_s", Kind::kSeconds, kDown,
     Show::kAlways,
     [](const ArmResult& a) {
       return RolloutValue(a, &sim::RolloutMetrics::step_makespan_mean_s);
     }},
    {"rollout", "step makespan max (s)", "rollout_step_makespan_max_s", Kind::kSeconds, kDown,
     Show::kAlways,
     [](const ArmResult& a) { return RolloutValue(a, &sim::RolloutMetrics::step_makespan_max_s); }},
    {"rollout", "trajectories/s", "rollout_trajectories_per_s", Kind::kRate, kUp, Show::kAlways,
     [](const ArmResult& a) { return RolloutValue(a, &sim::RolloutMetrics::trajectories_per_s); }},
    {"rollout", "generated tokens/s", "rollout_generated_tokens_per_s", Kind::kRate, kUp,
     Show::kAlways,
     [](const ArmResult& a) {
       return RolloutValue(a, &sim::RolloutMetrics::generated_tokens_per_s);
     }},
    {"rollout", "GPU busy fraction", "rollout_gpu_busy_fraction", Kind::kRatio, kFlat,
     Show::kAlways,
     [](const ArmResult& a) { return RolloutValue(a, &sim::RolloutMetrics::gpu_busy_fraction); }},
    {"rollout", "compute utilization", "rollout_compute_utilization", Kind::kRatio, kUp,
     Show::kWhenNonZero,
     [](const ArmResult& a) { return RolloutValue(a, &sim::RolloutMetrics::compute_utilization); }},
    {"rollout", "KV token usage mean", "rollout_kv_token_usage_mean", Kind::kRatio, kFlat,
     Show::kAlways,
     [](const ArmResult& a) { return RolloutValue(a, &sim::RolloutMetrics::kv_token_usage_mean); }},
    {"rollout", "KV token usage peak", "rollout_kv_token_usage_peak", Kind::kRatio, kFlat,
     Show::kAlways,
     [](const ArmResult& a) { return RolloutValue(a, &sim::RolloutMetrics::kv_token_usage_peak); }},
    {"rollout", "KV occupancy mean", "rollout_kv_occupancy_mean", Kind::kRatio, kFlat,
     Show::kAlways,
     [](const ArmResult& a) { return RolloutValue(a, &sim::RolloutMetrics::kv_occupancy_mean); }},
    {"rollout", "KV occupancy peak", "rollout_kv_occupancy_peak", Kind::kRatio, kFlat,
     Show::kAlways,
     [](const ArmResult& a) { return RolloutValue(a, &sim::RolloutMetrics::kv_occupancy_peak); }},
    {"rollout", "requests waiting mean", "rollout_waiting_requests_mean", Kind::kRate, kDown,
     Show::kAlways,
     [](const ArmResult& a) {
       return RolloutValue(a, &sim::RolloutMetrics::waiting_requests_mean);
     }},
    {"rollout", "requests waiting peak", "rollout_waiting_requests_peak", Kind::kCount, kDown,
     Show::kAlways,
     [](const ArmResult& a) {
       return a.rollout ? AsDouble(a.rollout->waiting_requests_peak) : 0.0;
     }},
};

std::string FormatValue(Kind kind, double value, NumberStyle style) {
  switch (kind) {
    case Kind::kRatio:
      return Fixed(value, 4);
    case Kind::kCount:
      return Count(value, style);
    case Kind::kSeconds:
      return Seconds(value);
    case Kind::kRate:
      if (style == NumberStyle::kCompact && std::fabs(value) >= 9999.5) return Abbreviated(value);
      // Rates of agentic sessions are often far below 1/s: keep three significant digits.
      if (std::fabs(value) < 1) return Fixed(value, 4);
      return WithSeparators(Fixed(value, std::fabs(value) < 100 ? 2 : 1));
  }
  return "-";
}

// (value - base) / base, or nullopt when the base is 0 or either is not finite.
std::optional<double> RelativeChange(double value, double base) {
  if (base == 0 || !std::isfinite(base) || !std::isfinite(value)) return std::nullopt;
  return (value - base) / base;
}

// A row of `values` (one per arm) with deltas against the baseline column.
ReplayTableRow MakeRow(const std::string& section, const std::string& label, const std::string& key,
                       MetricSense sense, const std::vector<double>& values, size_t baseline,
                       const std::function<std::string(double)>& format, NumberStyle style) {
  ReplayTableRow row{section, label, key, sense, {}};
  for (size_t i = 0; i < values.size(); ++i) {
    ReplayTableCell cell{format(values[i]), values[i], std::nullopt, ""};
    if (i != baseline) cell.change = RelativeChange(values[i], values[baseline]);
    if (cell.change) cell.delta = DeltaText(*cell.change, style);
    row.cells.push_back(std::move(cell));
  }
  return row;
}

bool AnyNonZero(const std::vector<double>& values) {
  return std::any_of(values.begin(), values.end(), [](double v) { return v != 0; });
}

// The agentic_kv series shown in the table: names with "admit", "wait" or "bypass", in order
// of first appearance over the arms.
std::vector<std::string> AdmissionSeries(const ReplayResult& result) {
  std::vector<std::string> names;
  for (const ArmResult& arm : result.arms) {
    for (const auto& [name, value] : arm.agentic_kv) {
      const bool admission = name.find("admit") != std::string::npos ||
                             name.find("wait") != std::string::npos ||
                             name.find("bypass") != std::string::npos;
      if (admission && std::find(names.begin(), names.end(), name) == names.end()) {
        names.push_back(name);
      }
    }
  }
  return names;
}

// The arm's value of series `name` (the first one of that name), 0 when absent.
double SeriesOf(const ArmResult& arm, const std::string& name) {
  for (const auto& [series, value] : arm.agentic_kv) {
    if (series == name) return value;
  }
  return 0;
}

// ---- Share of the ideal -------------------------------------------------------------------

// The section of the share-of-ideal rows; its name says what 0 % and 100 % are.
constexpr char kIdealShareSection[] = "share of ideal (baseline = 0%, infinite-cache = 100%)";
// The same for the shares of the oracle (ArmResult::oracle_share).
constexpr char kOracleShareSection[] = "share of oracle (baseline = 0%, oracle = 100%)";

// One row per IdealShares member: each arm's share of the baseline -> infinite-cache gap
// (sim::IdealSharesOf), "-" where it is unset. No deltas (a delta of shares says nothing the
// metric's own delta does not). Empty unless the run has arms named "baseline" and
// "infinite-cache" (a share needs both ends). With `reference` "oracle", the same rows of
// ArmResult::oracle_share in their own section.
std::vector<ReplayTableRow> IdealShareRows(const ReplayResult& result,
                                           std::string_view reference = "infinite-cache") {
  const bool oracle = reference == "oracle";
  const char* const section = oracle ? kOracleShareSection : kIdealShareSection;
  const sim::IdealShares ArmResult::*const shares =
      oracle ? &ArmResult::oracle_share : &ArmResult::ideal_share;
  std::vector<ReplayTableRow> rows;
  const auto named = [&result](std::string_view name) {
    return std::any_of(result.arms.begin(), result.arms.end(),
                       [name](const ArmResult& arm) { return arm.arm == name; });
  };
  if (!named("baseline") || !named(reference)) return rows;
  struct Share {
    const char* label;
    std::optional<double> sim::IdealShares::*member;
  };
  static constexpr Share kShares[] = {
      {"uncached tokens", &sim::IdealShares::uncached_tokens},
      {"evicted recompute tokens", &sim::IdealShares::evicted_recompute_tokens},
      {"server time mean", &sim::IdealShares::server_time_mean},
  };
  for (const Share& share : kShares) {
    ReplayTableRow row{section, share.label, "", MetricSense::kHigherIsBetter, {}};
    for (const ArmResult& arm : result.arms) {
      const std::optional<double>& value = (arm.*shares).*share.member;
      row.cells.push_back({value ? ShareOfBoundText(*value) : std::string("-"),
                           value.value_or(std::numeric_limits<double>::quiet_NaN()), std::nullopt,
                           ""});
    }
    rows.push_back(std::move(row));
  }
  return rows;
}

// ---- Table rows ----------------------------------------------------------------------------

// Each arm's value of `get`, in the arms' order.
std::vector<double> ValuesOf(const ReplayResult& result,
                             const std::function<double(const ArmResult&)>& get) {
  std::vector<double> values;
  for (const ArmResult& arm : result.arms) values.push_back(get(arm));
  return values;
}

// The row of metric `m` over `values`, with deltas against arm `baseline`.
ReplayTableRow MetricRow(const Metric& m, const std::vector<double>& values, size_t baseline,
                         NumberStyle style) {
  return MakeRow(
      m.section, m.label, m.json_key, m.sense, values, baseline,
      [&m, style](double v) { return FormatValue(m.kind, v, style); }, style);
}

// The rollout rows (kRolloutMetrics), only for a run with a rollout arm.
void AppendRolloutRows(const ReplayResult& result, size_t baseline, NumberStyle style,
                       std::vector<ReplayTableRow>& rows) {
  const bool rollout = std::any_of(result.arms.begin(), result.arms.end(),
                                   [](const ArmResult& arm) { return arm.rollout.has_value(); });
  if (!rollout) return;
  for (const Metric& m : kRolloutMetrics) {
    const std::vector<double> values = ValuesOf(result, m.value);
    if (m.show == Show::kWhenNonZero && !AnyNonZero(values)) continue;
    rows.push_back(MetricRow(m, values, baseline, style));
  }
}

// One row per admission series (AdmissionSeries) that some arm counts, named without its
// "agentic_kv/" prefix.
void AppendAdmissionRows(const ReplayResult& result, size_t baseline, NumberStyle style,
                         std::vector<ReplayTableRow>& rows) {
  for (const std::string& name : AdmissionSeries(result)) {
    const std::vector<double> values =
        ValuesOf(result, [&](const ArmResult& arm) { return SeriesOf(arm, name); });
    if (!AnyNonZero(values)) continue;
    const std::string label =
        name.rfind("agentic_kv/", 0) == 0 ? name.substr(std::string("agentic_kv/").size()) : name;
    rows.push_back(MakeRow(
        "admission", label, "", MetricSense::kNeutral, values, baseline,
        [style](double v) { return SeriesValue(v, style); }, style));
  }
}

// Each arm's share of the infinite-cache (arm `ideal`) hit ratio, from the hit ratios
// `values` of metric `m`; a delta of shares would repeat the hit-ratio delta, so this row has
// none.
ReplayTableRow ShareOfIdealHitRatioRow(const Metric& m, const std::vector<double>& values,
                                       size_t ideal, size_t baseline, NumberStyle style) {
  const double reference = values[ideal];
  std::vector<double> shares;
  for (const double v : values) shares.push_back(reference > 0 ? v / reference : 0);
  ReplayTableRow row = MakeRow(
      m.section, "share of ideal hit ratio", "", MetricSense::kHigherIsBetter, shares, baseline,
      [reference](double share) {
        return reference > 0 ? ShareOfBoundText(share) : std::string("-");
      },
      style);
  for (ReplayTableCell& cell : row.cells) {
    cell.change.reset();
    cell.delta.clear();
  }
  return row;
}

// Refusals (by admission or by an engine) only happen for requests too large for the fleet:
// their two rows only where some arm refused one.
void AppendRefusalRows(const ReplayResult& result, size_t baseline, NumberStyle style,
                       std::vector<ReplayTableRow>& rows) {
  const std::vector<double> refused =
      ValuesOf(result, [](const ArmResult& arm) { return AsDouble(arm.requests_refused); });
  if (!AnyNonZero(refused)) return;
  rows.push_back(MakeRow(
      "conservation", "requests refused", "requests_refused", MetricSense::kLowerIsBetter, refused,
      baseline, [style](double v) { return Count(v, style); }, style));
  rows.push_back(MakeRow(
      "conservation", "refused prompt tokens", "refused_prompt_tokens", MetricSense::kLowerIsBetter,
      ValuesOf(result, [](const ArmResult& arm) { return AsDouble(arm.refused_prompt_tokens); }),
      baseline, [style](double v) { return Count(v, style); }, style));
}

// ---- Terminal table ------------------------------------------------------------------------

constexpr size_t kMaxLineWidth = 160;

bool IsUtf8Continuation(char c) { return (static_cast<unsigned char>(c) & 0xC0) == 0x80; }

std::string PadLeft(const std::string& text, size_t width) {
  return text.size() >= width ? text : std::string(width - text.size(), ' ') + text;
}

std::string PadRight(const std::string& text, size_t width) {
  return text.size() >= width ? text : text + std::string(width - text.size(), ' ');
}

// The table body (without the setup header) over the arm columns `columns`, in that order;
// `max_header` > 0 truncates arm names to it.
std::vector<std::string> TableLines(const ReplayResult& result,
                                    const std::vector<ReplayTableRow>& all_rows,
                                    const std::string& separator, size_t max_header,
                                    const std::vector<size_t>& columns) {
  const size_t arms = columns.size();
  std::vector<ReplayTableRow> rows = all_rows;
  for (ReplayTableRow& row : rows) {
    std::vector<ReplayTableCell> cells;
    cells.reserve(arms);
    for (const size_t c : columns) cells.push_back(row.cells[c]);
    row.cells = std::move(cells);
  }
  std::vector<std::string> headers;
  for (const size_t c : columns) {
    std::string name = result.arms[c].arm;
    if (max_header > 2 && name.size() > max_header) {
      // Cut from the middle: arm names tend to share a prefix ("+lifecycle+...") and differ
      // at the end.
      // Both cuts land on UTF-8 character boundaries.
      size_t head = (max_header - 1) / 2;
      size_t tail = name.size() - (max_header - 1 - head);
      while (head > 0 && IsUtf8Continuation(name[head])) --head;
      while (tail < name.size() && IsUtf8Continuation(name[tail])) ++tail;
      name = name.substr(0, head) + "~" + name.substr(tail);
    }
    headers.push_back(std::move(name));
  }
  size_t label_width = std::string("metric").size();
  std::vector<size_t> value_width(arms, 0);
  std::vector<size_t> delta_width(arms, 0);
  // The widest value of a cell without a delta: such a cell may span the delta's room too
  // (a share that reads "exceeds the bound" does not widen the column's numbers).
  std::vector<size_t> bare_width(arms, 0);
  for (const ReplayTableRow& row : rows) {
    label_width = std::max(label_width, row.label.size() + 2);
    for (size_t i = 0; i < arms; ++i) {
      const ReplayTableCell& cell = row.cells[i];
      size_t& width = cell.delta.empty() ? bare_width[i] : value_width[i];
      width = std::max(width, cell.value.size());
      delta_width[i] = std::max(delta_width[i], cell.delta.size());
    }
  }
  std::vector<size_t> column_width(arms, 0);
  for (size_t i = 0; i < arms; ++i) {
    if (delta_width[i] == 0) value_width[i] = std::max(value_width[i], bare_width[i]);
    const size_t content = value_width[i] + (delta_width[i] > 0 ? delta_width[i] + 1 : 0);
    column_width[i] = std::max({content, headers[i].size(), bare_width[i]});
    // A header wider than the content widens the value part, keeping deltas left-aligned.
    value_width[i] = column_width[i] - (content - value_width[i]);
  }
  std::vector<std::string> lines;
  std::string line = PadRight("metric", label_width);
  for (size_t i = 0; i < arms; ++i) line += separator + PadLeft(headers[i], column_width[i]);
  lines.push_back(line);
  std::string section;
  for (const ReplayTableRow& row : rows) {
    if (row.section != section) {
      section = row.section;
      lines.push_back(section);
    }
    line = PadRight("  " + row.label, label_width);
    for (size_t i = 0; i < arms; ++i) {
      const ReplayTableCell& cell = row.cells[i];
      std::string text = PadLeft(cell.value, value_width[i]);
      if (cell.value.size() > value_width[i]) {
        text = PadLeft(cell.value, column_width[i]);
      } else if (delta_width[i] > 0) {
        text += " " + PadRight(cell.delta, delta_width[i]);
      }
      line += separator + text;
    }
    while (!line.empty() && line.back() == ' ') line.pop_back();
    lines.push_back(line);
  }
  return lines;
}

// Arm names are cut to no fewer characters than this; a table that still does not fit is split.
constexpr size_t kMinHeader = 10;

// The arms split into panels of whole columns that each fit kMaxLineWidth (a column wider than
// that alone is a panel of its own), in arm order; every panel but the first starts with the
// baseline column, when there is one, so each can be read on its own.
std::vector<std::vector<size_t>> Panels(const ReplayResult& result,
                                        const std::vector<ReplayTableRow>& rows) {
  const std::optional<size_t> baseline = BaselineArmIndex(result);
  std::vector<std::vector<size_t>> panels;
  std::vector<size_t> panel;
  for (size_t i = 0; i < result.arms.size(); ++i) {
    if (baseline && i == *baseline && !panels.empty()) continue;
    std::vector<size_t> wider = panel;
    wider.push_back(i);
    const bool only_the_baseline = panel.empty() || (panel.size() == 1 && baseline &&
                                                     panel[0] == *baseline && !panels.empty());
    if (!only_the_baseline &&
        internal::WidestLine(TableLines(result, rows, "  ", 0, wider)) > kMaxLineWidth) {
      panels.push_back(panel);
      panel.clear();
      if (baseline) panel.push_back(*baseline);
      panel.push_back(i);
    } else {
      panel = std::move(wider);
    }
  }
  if (!panel.empty()) panels.push_back(panel);
  return panels;
}

std::vector<std::string> HeaderLines(const ReplayResult& result) {
  const ReplaySetup& s = result.setup;
  std::vector<std::string> lines;
  lines.push_back("agentkv replay: " + s.workload);
  for (const std::string& note : s.workload_notes) lines.push_back("  trace: " + note);
  lines.push_back("  seed " + std::to_string(s.seed) + " | " + std::to_string(s.num_engines) +
                  (s.num_engines == 1 ? " engine" : " engines") + " x " + s.model + " on " + s.gpu +
                  " (TP " + std::to_string(s.tp) + ") | router: " + s.router);
  lines.push_back(
      "  KV per engine: " + WithSeparators(std::to_string(s.device_tokens_per_engine)) +
      " tokens (" + std::to_string(s.tokens_per_block) + "-token blocks) | host tier: " +
      (s.host_tokens_per_engine > 0
           ? WithSeparators(std::to_string(s.host_tokens_per_engine)) + " tokens per engine"
           : std::string("none")));
  const std::optional<size_t> baseline = BaselineArmIndex(result);
  const std::optional<size_t> ideal = IdealArmIndex(result);
  std::string refs = "  deltas vs: " + (baseline ? result.arms[*baseline].arm : std::string("-"));
  if (ideal) {
    refs += " | ideal token hit ratio (" + result.arms[*ideal].arm +
            ", device+host): " + Fixed(TokenHitRatio(result.arms[*ideal]), 4);
  }
  lines.push_back(refs);
  return lines;
}

// The arm legend: each arm's name and description.
std::vector<std::string> LegendLines(const ReplayResult& result, size_t width) {
  std::vector<std::pair<std::string, std::string>> items;
  for (const ArmResult& arm : result.arms) items.emplace_back(arm.arm, arm.description);
  return internal::LabelledLines("arms:", items, width);
}

// The verdict (replay_verdict.h), one statement per label; nothing without arms.
std::vector<std::string> VerdictTextLines(const ReplayResult& result, size_t width) {
  std::vector<std::pair<std::string, std::string>> items;
  for (VerdictLine& line : VerdictLines(result, DecideVerdict(result))) {
    items.emplace_back(std::move(line.label), std::move(line.text));
  }
  if (items.empty()) return {};
  return internal::LabelledLines("verdict (each arm against " +
                                     result.arms[*BaselineArmIndex(result)].arm +
                                     ", on mean server time and uncached tokens):",
                                 items, width);
}

}  // namespace

std::optional<size_t> BaselineArmIndex(const ReplayResult& result) {
  if (result.arms.empty()) return std::nullopt;
  for (size_t i = 0; i < result.arms.size(); ++i) {
    if (result.arms[i].arm == "baseline") return i;
  }
  return 0;
}

std::optional<size_t> IdealArmIndex(const ReplayResult& result) {
  for (size_t i = 0; i < result.arms.size(); ++i) {
    if (result.arms[i].arm == "infinite-cache") return i;
  }
  return std::nullopt;
}

std::vector<ReplayTableRow> ReplayTableRows(const ReplayResult& result, NumberStyle style) {
  std::vector<ReplayTableRow> rows;
  const std::optional<size_t> baseline = BaselineArmIndex(result);
  if (!baseline) return rows;
  const std::optional<size_t> ideal = IdealArmIndex(result);
  AppendRolloutRows(result, *baseline, style, rows);
  bool admission_done = false;
  bool ideal_share_done = false;
  for (const Metric& m : kMetrics) {
    // The shares of the ideal go after the latency rows, before the engine counters.
    if (std::string_view(m.section) == "engines" && !ideal_share_done) {
      ideal_share_done = true;
      for (ReplayTableRow& row : IdealShareRows(result)) rows.push_back(std::move(row));
      for (ReplayTableRow& row : IdealShareRows(result, "oracle")) rows.push_back(std::move(row));
    }
    // The admission series go after the engine and lifecycle counters, before conservation.
    if (std::string_view(m.section) == "conservation" && !admission_done) {
      admission_done = true;
      AppendAdmissionRows(result, *baseline, style, rows);
    }
    const std::vector<double> values = ValuesOf(result, m.value);
    if (m.show == Show::kWhenNonZero && !AnyNonZero(values)) continue;
    rows.push_back(MetricRow(m, values, *baseline, style));
    if (ideal && std::string_view(m.json_key) == "token_hit_ratio") {
      rows.push_back(ShareOfIdealHitRatioRow(m, values, *ideal, *baseline, style));
    }
  }
  AppendRefusalRows(result, *baseline, style, rows);
  return rows;
}

std::string FormatReplayTable(const ReplayResult& result) {
  std::vector<std::string> lines;
  if (result.arms.empty()) {
    lines.push_back("(no arms)");
  } else {
    std::vector<size_t> all(result.arms.size());
    for (size_t i = 0; i < all.size(); ++i) all[i] = i;
    std::vector<std::string> table =
        TableLines(result, ReplayTableRows(result, NumberStyle::kFull), "   ", 0, all);
    const std::vector<ReplayTableRow> compact = ReplayTableRows(result, NumberStyle::kCompact);
    if (internal::WidestLine(table) > kMaxLineWidth) {
      table = TableLines(result, compact, "  ", 0, all);
      // Still too wide: arm names wider than their numbers are cut, down to a readable width
      // (the full names are listed above the table).
      for (size_t max_header = 16;
           internal::WidestLine(table) > kMaxLineWidth && max_header >= kMinHeader;
           max_header -= 2) {
        table = TableLines(result, compact, "  ", max_header, all);
      }
    }
    if (internal::WidestLine(table) <= kMaxLineWidth) {
      lines.push_back("");
      lines.insert(lines.end(), table.begin(), table.end());
    } else {
      // Still too wide: the arms in panels that fit, each led by the baseline column.
      for (const std::vector<size_t>& panel : Panels(result, compact)) {
        table = TableLines(result, compact, "  ", 0, panel);
        lines.push_back("");
        lines.insert(lines.end(), table.begin(), table.end());
      }
    }
  }
  // The setup, the verdict and the arm legend go above the table, wrapped to its width.
  const size_t width = internal::WidestLine(lines);
  std::string out;
  for (const std::vector<std::string>& part :
       {HeaderLines(result), VerdictTextLines(result, width), LegendLines(result, width), lines}) {
    for (const std::string& line : part) out += line + "\n";
  }
  return out;
}

}  // namespace agentkv::report
