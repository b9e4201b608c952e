// The charts of the replay's HTML report (replay_report_html.cc), each drawn from a
// ReplayResult as inline SVG with the primitives of svg_chart.h: latency percentiles, session
// time against the baseline and KV usage as one small panel per arm, hit ratio and recompute.
// Arm names in the bar charts carry their arm's swatch.
//
// Per-arm bar charts are horizontal, one row per arm, so an arm's name is written in full left
// of its bars instead of being cut to the width of a bar. Every function is pure (equal results
// give byte-identical SVG) and draws a valid chart for degenerate input (no arms, no samples,
// all zeros). Thread-compatible.
#ifndef AGENTKV_REPORT_INTERNAL_REPLAY_CHARTS_H_
#define AGENTKV_REPORT_INTERNAL_REPLAY_CHARTS_H_

#include <cstddef>
#include <string>

#include "agentkv/sim/replay/replay_result.h"

namespace agentkv::report::internal {

// Arm `arm`'s colour ("#4e79a7"): a fixed palette of twenty distinct colours, in arm order,
// repeating past twenty (whose lines are then dashed). Every chart draws an arm in this colour
// and marks it data-arm="<arm>".
const char* ArmColor(size_t arm);

// The p50, p95 and p99 of one latency summary of every arm (`field`: &ArmResult::ttft or
// &ArmResult::queueing_delay) as grouped horizontal bars on one linear axis from 0, each arm's
// row labelled with its three values in seconds ("p50 / p95 / p99").
std::string PercentileChart(const sim::ReplayResult& result, const std::string& title,
                            sim::DurationSummary sim::ArmResult::*field,
                            const std::string& axis_label);

// Every arm's session times against the baseline arm's (BaselineArmIndex), quantile by
// quantile, as small multiples in a <div class="multiples">: one panel per arm but the
// baseline, each its line of 100 quantiles' relative change (arm / baseline - 1, in %, of the
// nearest-rank session times) over the baseline's 0 % line, all on one shared scale. A
// paragraph instead of panels when there are no arms, only the baseline, or no sessions.
std::string SessionTimeShiftPanels(const sim::ReplayResult& result);

// One small chart per arm of its KV usage over time (ArmResult::kv_usage), all on the same
// axes, in a <div class="multiples"> grid: the fullest sample of each of 180 time buckets, KV
// held by requests (solid) over KV held or cached (light); a bucket without samples is a gap.
std::string KvUsagePanels(const sim::ReplayResult& result);

// Device and host token hit ratio per arm, stacked, with the ideal (IdealArmIndex) as a
// dashed line.
std::string HitRatioChart(const sim::ReplayResult& result);

// Cold, evicted-recompute and preempted-recompute tokens per arm, stacked.
std::string RecomputeChart(const sim::ReplayResult& result);

}  // namespace agentkv::report::internal

#endif  // AGENTKV_REPORT_INTERNAL_REPLAY_CHARTS_H_
