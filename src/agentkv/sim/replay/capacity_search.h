// Sessions served at SLO: the search behind `agentkv capacity`. For one policy arm and one
// seed it finds, by bracketing and bisection, the highest session arrival rate (sessions per
// hour per engine) at which a latency metric (TTFT p95 by default) stays within its SLO.
//
// The search is a pure function of its options and of a probe callback (rate -> measured
// metrics): the command line's callback runs one replay arm (replay.h) with sessions starting
// 3600 / (rate x engines) seconds apart, tests pass closed-form functions. CapacityResult holds
// every (arm, seed) search of a run and the summaries over seeds that the reports print
// (report/capacity_report.h).
//
// The search assumes that the metric grows with load; it does not have to (a denser start can
// share more prefix, a finite workload saturates). What it reports is always consistent with
// what it probed: every rate it found to meet the SLO is at or below the capacity, every rate
// it found to miss it is at or above the lowest miss; a region that meets the SLO above the
// lowest miss is not looked for. Every probe is kept, so the curve shows what was measured.
// Deterministic; the callback is called on the caller's thread, one probe at a time.
// Thread-compatible.
#ifndef AGENTKV_SIM_REPLAY_CAPACITY_SEARCH_H_
#define AGENTKV_SIM_REPLAY_CAPACITY_SEARCH_H_

#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "agentkv/base/status.h"

namespace agentkv::sim {

// What one probe measured, in seconds: per-request TTFT percentiles and the mean server time
// per session (ArmResult::ttft, ArmResult::server_time).
struct CapacityMetrics {
  double ttft_p50_s = 0;
  double ttft_p95_s = 0;
  double ttft_p99_s = 0;
  double server_time_mean_s = 0;

  friend bool operator==(const CapacityMetrics&, const CapacityMetrics&) = default;
};

// The metric the SLO bounds.
enum class SloMetric : uint8_t { kTtftP95, kTtftP99, kServerTimeMean };

// "ttft-p95", "ttft-p99", "server-time-mean": the flag values.
std::string_view SloMetricName(SloMetric metric);
// A flag value back to its metric; InvalidArgument naming `flag`, the value and the choices.
StatusOr<SloMetric> ParseSloMetric(std::string_view name, std::string_view flag = "--slo-metric");
// `metric` of `metrics`.
double MetricValue(const CapacityMetrics& metrics, SloMetric metric);

struct CapacitySearchOptions {
  // The metric and its bound, seconds: a probe meets the SLO when the metric is finite and
  // at most slo_s. Defaults: kTtftP95, 2.0. Range of slo_s: (0, 1e6].
  SloMetric metric = SloMetric::kTtftP95;
  double slo_s = 2.0;
  // The first rate probed, sessions per hour per engine; clamped into [min_rate, max_rate].
  // Default: 60. Range: > 0, finite.
  double start_rate = 60.0;
  // The rates the search stays within. Defaults: 1 and 3600 (one session per second per
  // engine). Range: 0 < min_rate <= max_rate <= 1e9.
  double min_rate = 1.0;
  double max_rate = 3600.0;
  // Bisection stops once (lowest miss - highest meet) <= tolerance x highest meet.
  // Default: 0.05. Range: [0.001, 1].
  double tolerance = 0.05;

  // InvalidArgument naming the first bad field (CapacitySearchOptions.<field>) and its value.
  Status Validate() const;
  // The most probes a search with these options makes (bracketing both ways plus bisection).
  int64_t MaxProbes() const;

  friend bool operator==(const CapacitySearchOptions&, const CapacitySearchOptions&) = default;
};

// One probe: the rate, what it measured, the metric's value and whether it met the SLO.
struct CapacityProbe {
  double rate = 0;
  CapacityMetrics metrics;
  double value = 0;
  bool met = false;

  friend bool operator==(const CapacityProbe&, const CapacityProbe&) = default;
};

enum class CapacityOutcome : uint8_t {
  // The SLO is met at `capacity` and missed at `lowest_missed`, within the tolerance.
  kFound,
  // Met at max_rate: the capacity is at least max_rate.
  kAtLeastMax,
  // Missed even at min_rate: capacity 0.
  kNoneMet,
};

// "found", "at-least-max", "none-met".
std::string_view CapacityOutcomeName(CapacityOutcome outcome);

struct CapacitySearchResult {
  CapacityOutcome outcome = CapacityOutcome::kNoneMet;
  // The highest rate found to meet the SLO (max_rate for kAtLeastMax); 0 for kNoneMet.
  double capacity = 0;
  // The lowest rate found to miss it; unset for kAtLeastMax.
  std::optional<double> lowest_missed;
  // Every probe, in the order run (each rate once).
  std::vector<CapacityProbe> probes;

  // The probes sorted by rate.
  std::vector<CapacityProbe> ProbesByRate() const;
  // The probe at `capacity`, nullptr for kNoneMet.
  const CapacityProbe* AtCapacity() const;

  friend bool operator==(const CapacitySearchResult&, const CapacitySearchResult&) = default;
};

// Measures the metrics at `rate` (sessions per hour per engine). A failure stops the search.
using CapacityProbeFn = std::function<StatusOr<CapacityMetrics>(double rate)>;

// Called after each probe with the number of probes run so far (1-based) and the probe.
using CapacityProbeDone = std::function<void(int64_t probe_number, const CapacityProbe& probe)>;

// Searches the capacity: probes start_rate (clamped); while it is met doubles the rate (up to
// max_rate) until one misses, while it misses halves it (down to min_rate) until one meets;
// then bisects the bracket (arithmetic midpoint) until it is within the tolerance. At most
// options.MaxProbes() probes. InvalidArgument for invalid options; a probe's failure as
// "probe at N sessions/h/engine: " and its status.
StatusOr<CapacitySearchResult> SearchCapacity(const CapacitySearchOptions& options,
                                              const CapacityProbeFn& probe,
                                              const CapacityProbeDone& done = {});

// A value over seeds: median (the mean of the middle two for an even count), min and max.
struct SeedSpread {
  double median = 0;
  double min = 0;
  double max = 0;

  friend bool operator==(const SeedSpread&, const SeedSpread&) = default;
};

// The spread of `values`; nullopt when empty.
std::optional<SeedSpread> SpreadOf(std::vector<double> values);

// Every search of one `agentkv capacity` run.
struct CapacityResult {
  // The workload in words ("synthetic: 48 sessions, context scale 0.5") and the fleet.
  std::string workload;
  int32_t num_engines = 1;
  // Sessions of the workload (main agents; the load a probe's rate spreads out).
  int64_t sessions = 0;
  CapacitySearchOptions options;
  std::vector<uint64_t> seeds;
  std::vector<std::string> arms;
  // searches[arm][seed], in the order of arms and seeds.
  std::vector<std::vector<CapacitySearchResult>> searches;

  // The arm deltas are taken against: the first named "baseline"; nullopt without one.
  std::optional<size_t> BaselineArm() const;
  // Arm `arm`'s capacity over seeds.
  SeedSpread Capacity(size_t arm) const;
  // Arm `arm`'s capacity over the baseline's of the same seed, over the seeds where the
  // baseline's is above 0; nullopt without a baseline arm or such a seed.
  std::optional<SeedSpread> VsBaseline(size_t arm) const;

  friend bool operator==(const CapacityResult&, const CapacityResult&) = default;
};

}  // namespace agentkv::sim

#endif  // AGENTKV_SIM_REPLAY_CAPACITY_SEARCH_H_
