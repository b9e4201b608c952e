// The charts of the replay's HTML report (replay_report_html.cc), each drawn from a
// ReplayResult as inline SVG with the primitives of svg_chart.h: latency percentiles, session
// time against the baseline, KV usage as one small panel per arm, hit ratio and recompute.
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

// Arm `arm`'s colour ("#4e79a7"): a fixed palette of ten, in arm order, repeating.
const char* ArmColor(size_t arm);

// The p50, p95 and p99 of one latency summary of every arm (`field`: &ArmResult::ttft or
// &ArmResult::queueing_delay) as grouped horizontal bars on one linear axis from 0, each bar
// labelled with its value in seconds.
std::string PercentileChart(const sim::ReplayResult& result, const std::string& title,
                            sim::DurationSummary sim::ArmResult::*field,
                            const std::string& axis_label);

// Every arm's session times against the baseline arm's (BaselineArmIndex), quantile by
// quantile: 100 quantiles, each the relative change (arm / baseline - 1, in %) of the
// nearest-rank session times, one line per arm, and a legend ordered by each arm's mean change.
std::string SessionTimeShiftChart(const sim::ReplayResult& result);

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
