// Capacity report: what `agentkv capacity` found (sim::CapacityResult, capacity_search.h)
// rendered as a terminal table, as JSON and as a self-contained HTML page with the capacity
// curve (the SLO metric against load, one line per arm and seed, on log axes).
//
// Every arm's capacity is the median over seeds with [min, max]; "vs baseline" is the ratio of
// an arm's capacity to the baseline arm's (the first arm named "baseline") of the same seed,
// median [min, max] over the seeds where the baseline's is above 0. A capacity at max_rate is
// written ">= max" (a lower bound, as is the ratio of an arm with one: ">= 12.00x"); one of 0 means
// the SLO was missed even at min_rate. Every rendering leads with the verdict
// (capacity_verdict.h): which arms serve more sessions at the SLO than the baseline beyond
// noise, by how much, and the bounds. All functions are pure (no I/O, no clocks): equal results
// render to byte-identical strings. Thread-safe.
#ifndef AGENTKV_REPORT_CAPACITY_REPORT_H_
#define AGENTKV_REPORT_CAPACITY_REPORT_H_

#include <string>

#include "agentkv/sim/replay/capacity_search.h"

namespace agentkv::report {

// The seconds between session starts of a probe at `rate` sessions per hour per engine on
// `num_engines` engines: 3600 / (rate x num_engines). Preconditions: rate > 0, num_engines > 0.
double SessionInterarrivalS(double rate, int32_t num_engines);

// A rate as the report writes it: three significant digits or whole ("3600", "42.5", "7.25").
std::string CapacityRateText(double rate);

// A header (workload, fleet, SLO, rates, seeds); the verdict (a title, then each statement of
// CapacityVerdictLines under its label, wrapped to the table's width; nothing without a
// baseline arm); one row per arm (capacity median [min, max] in sessions/h/engine, vs
// baseline, the SLO metric at the capacity (median over seeds), the probes run over all seeds)
// and a note per arm and seed whose capacity is 0 or >= max. Ends with a newline.
std::string FormatCapacityTable(const sim::CapacityResult& result);

// The result as pretty-printed JSON: {"workload", "num_engines", "sessions", "options":
// {"metric", "slo_s", "start_rate", "min_rate", "max_rate", "tolerance", "max_probes"},
// "seeds", "baseline" (null without one), "verdict" (null without a baseline: {"noise",
// "turn_on" (null when none), "leaders", "arms" and "bounds": [{"arm", "standing" ("better",
// "within-noise", "worse"), "delta", "change", "at_least", "least_change", "most_change"}],
// "lines": [{"label", "text"}]}), "arms": [{"arm", "capacity": {"median", "min", "max"},
// "vs_baseline": {...} or null, "runs": [{"seed", "outcome" ("found", "at-least-max",
// "none-met"), "capacity", "lowest_missed" (null when unset), "metric_at_capacity" (null for
// none-met), "probes": [{"rate", "interarrival_s", "ttft_p50_s", "ttft_p95_s", "ttft_p99_s",
// "server_time_mean_s", "value", "met", "order" (1-based, the order run)}, sorted by rate]}]}]}.
// Non-finite doubles are written as null. Ends with a newline.
std::string CapacityResultJson(const sim::CapacityResult& result);

// The curve: x = sessions/h/engine and y = the SLO metric, both log10; per arm and seed a
// polyline through its probes sorted by rate (the first seed solid, the others thinner; the
// infinite-cache arm, the bound, dashed) and a circle per probe (filled: met, hollow: missed,
// its values as a tooltip); the SLO as a horizontal dashed line; arm names in a legend.
std::string CapacityChart(const sim::CapacityResult& result);

// A self-contained HTML5 page that is also well-formed XML (no scripts, no external
// resources): the verdict, the setup, the arm table, the curve (CapacityChart) and every probe.
std::string CapacityResultHtml(const sim::CapacityResult& result);

}  // namespace agentkv::report

#endif  // AGENTKV_REPORT_CAPACITY_REPORT_H_
