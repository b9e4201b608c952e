// Replay report: a ReplayResult (replay_result.h) rendered as a terminal table, as JSON and as
// a self-contained HTML report with SVG charts.
//
// Every arm is compared with the baseline arm (the first arm named "baseline", else the first
// arm) and hit ratios are set next to the ideal of an arm named "infinite-cache" when there is
// one. All functions are pure (no I/O, no clocks): equal results render to byte-identical
// strings, so the JSON can be diffed as a determinism gate. Thread-safe.
#ifndef AGENTKV_REPORT_REPLAY_REPORT_H_
#define AGENTKV_REPORT_REPLAY_REPORT_H_

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "agentkv/sim/replay/replay_result.h"

namespace agentkv::report {

// The arm deltas are taken against: the first arm named "baseline", else arm 0; nullopt when
// there are no arms.
std::optional<size_t> BaselineArmIndex(const sim::ReplayResult& result);

// The first arm named "infinite-cache" (the hit-ratio ideal), or nullopt.
std::optional<size_t> IdealArmIndex(const sim::ReplayResult& result);

// Which direction of a metric's change is an improvement (for colouring deltas).
enum class MetricSense : uint8_t { kHigherIsBetter, kLowerIsBetter, kNeutral };

// How numbers are written in table cells: kFull writes counts with thousands separators
// ("12,345,678"); kCompact abbreviates them ("12.35M") for narrow terminals.
enum class NumberStyle : uint8_t { kFull, kCompact };

// One cell of the arm table.
struct ReplayTableCell {
  // The value as shown ("0.4123", "12,345", "87.5%").
  std::string value;
  // The value before formatting (for the shares of the ideal, the share as a fraction, NaN
  // where the share is unset and the cell shows "-").
  double number = 0;
  // The relative change against the baseline arm, (value - baseline) / baseline, as a fraction.
  // nullopt in the baseline column, when the baseline is 0, and for rows without deltas.
  std::optional<double> change;
  // `change` as shown: "(+3.1%)", "(-10.2%)", "(=)" for no change; empty when `change` is
  // nullopt.
  std::string delta;
};

// One metric of the arm table.
struct ReplayTableRow {
  // The section the row belongs to ("prefix cache", "latency", ...); rows of one section are
  // adjacent.
  std::string section;
  // The metric, with its unit where it has one ("session time p95 (s)").
  std::string label;
  // The metric's name in the JSON's delta_vs_baseline ("session_time_p95_s"); empty for rows
  // that are not there (the share of the ideal, the admission series).
  std::string key;
  MetricSense sense = MetricSense::kNeutral;
  // One cell per arm, in arm order.
  std::vector<ReplayTableCell> cells;
};

// The metrics of the arm table, in display order: prefix-cache hit ratios (and the fraction of
// the infinite-cache ideal reached), recompute tokens, throughput, latency percentiles (session
// time, then server time per session), each arm's share of the baseline -> infinite-cache gap
// (ArmResult::ideal_share, as a percentage, "exceeds the bound" above 100 % (ShareOfBoundText),
// "-" and a NaN number where unset; the section is
// there only when the run has arms named "baseline" and "infinite-cache"), then the same of
// the baseline -> oracle gap (ArmResult::oracle_share; only with arms named "baseline" and
// "oracle"), engine
// counters, admission counters (the arms' agentic_kv series whose names contain "admit",
// "wait" or "bypass" and that are non-zero in some arm) and conservation; for an RL rollout
// (some arm has ArmResult::rollout) the rollout group opens the table. Rows that only
// apply to some setups (admission wait, demotion restores, ...) are left out when they are zero
// in every arm. Empty when there are no arms.
std::vector<ReplayTableRow> ReplayTableRows(const sim::ReplayResult& result, NumberStyle style);

// A plain-text report: a header with the setup, the verdict (replay_verdict.h) and the arm
// legend, both word-wrapped to the table's width (with at least 40 columns of text beside their
// names), then the arm table with one column per arm (right-aligned, sized to content) and the
// delta against the baseline in every other column; a cell without a delta may span the
// delta's room ("exceeds the bound"). Switches to NumberStyle::kCompact and truncated arm
// headers when the full table would be wider than 160 columns. Ends with a newline.
std::string FormatReplayTable(const sim::ReplayResult& result);

// The result as pretty-printed JSON (2-space indent; arrays of plain values on one line):
// {"setup": {...every ReplaySetup field}, "baseline": name (null without arms), "arms": [{"arm",
// "description", every scalar field of ArmResult by its field name, the duration summaries
// as objects (session_time, queueing_delay, ttft, admission_wait, server_time,
// request_server_time), the ideal shares as "<metric>_ideal_share" (uncached_tokens,
// evicted_recompute_tokens, server_time_mean; null when unset), the oracle shares as
// "<metric>_oracle_share" (the same metrics; null when unset), "agentic_kv" as an object in
// series order, "delta_vs_baseline": {row key: fraction}, "kv_usage" as [time_s, used,
// evictable, capacity, waiting] rows, "session_times_s", and "rollout" (every RolloutMetrics
// field) only when the arm has it}]}. The deltas are those of the table rows with a key; one is
// left out when the baseline's value is 0, and the baseline's own are 0. Non-finite doubles are
// written as null. Ends with a newline.
std::string ReplayResultJson(const sim::ReplayResult& result);

// A self-contained HTML5 report that is also well-formed XML (no scripts, no external
// resources): the verdict first (replay_verdict.h, <section id="verdict">); the setup; the arm
// table, compact numbers with the delta under each value and the exact value as a tooltip,
// each row's definition on its label, each arm's colour over its column, laid out to fit a
// 1280 px screen with the small default run; inline SVG charts, each arm in one colour of its
// own (internal/replay_charts.h): TTFT and queueing-delay percentiles per arm, session time
// against the baseline by quantile and KV usage over time as small multiples on shared axes,
// token hit ratio against the ideal and recomputed tokens; the arms; and the glossary of every
// row shown (replay_glossary.h). Shares of a bound past 100 % read "exceeds the bound". Text
// from the result is escaped; degenerate input (no samples, zero makespan, one arm, all zeros)
// never puts NaN or infinity into coordinates.
std::string ReplayResultHtml(const sim::ReplayResult& result);

}  // namespace agentkv::report

#endif  // AGENTKV_REPORT_REPLAY_REPORT_H_
