// The capacity report's verdict: what a reader of one `agentkv capacity` run wants first, which
// arms serve more sessions per hour at the SLO than the baseline beyond noise, by how much,
// which to turn on, and how far that is from the bounds (the arms named "infinite-cache" and
// "oracle"). The terminal table (capacity_report.cc) prints it before the table and the HTML
// page opens with it, in the words and layout of the replay's verdict (replay_verdict.h).
//
// What the run knows of its own noise is the bisection's bracket: under the search's
// monotonicity assumption each (arm, seed) capacity lies in [capacity, lowest miss) (up from
// max_rate for a capacity at max_rate, below min_rate for one of 0). On top of it each seed's
// result carries the replay's seed-to-seed spread, kSeedNoise. An arm's change against the
// baseline therefore counts only where, on every seed, it stays beyond the noise floor across
// the whole of both brackets. Pure functions; thread-safe.
#ifndef AGENTKV_REPORT_CAPACITY_VERDICT_H_
#define AGENTKV_REPORT_CAPACITY_VERDICT_H_

#include <cstddef>
#include <optional>
#include <vector>

#include "agentkv/report/replay_verdict.h"
#include "agentkv/sim/replay/capacity_search.h"

namespace agentkv::report {

// One arm's capacity against another's (the baseline's, or the best arm's for "as good").
struct CapacityComparison {
  // Over the seeds, the least and the most relative change ((arm - other) / other) that both
  // brackets allow: the minimum over seeds of arm's low end over other's high end, minus 1, and
  // the maximum of arm's high end over other's low end, minus 1. -1 <= least <= most <= +inf.
  double least_change = 0;
  double most_change = 0;
  // kBetter when least_change > noise, kWorse when most_change < -noise, else kWithinNoise.
  ArmStanding standing = ArmStanding::kWithinNoise;
};

// One arm against the baseline (higher capacity is better).
struct CapacityArmVerdict {
  size_t arm = 0;
  // Median capacity (sessions/h/engine) over seeds, minus the baseline's.
  double delta = 0;
  // Median over seeds of capacity / baseline's - 1 where the baseline's is above 0
  // (CapacityResult::VsBaseline); nullopt where it is 0 on every seed.
  std::optional<double> change;
  // Whether some seed's capacity is at max_rate, so `delta` and `change` are lower bounds.
  bool at_least = false;
  CapacityComparison vs_baseline;
};

struct CapacityVerdict {
  // CapacityResult::BaselineArm; nullopt without an arm named "baseline" (then everything
  // below is empty).
  std::optional<size_t> baseline;
  // The seed noise floor the standings were decided with (a fraction, >= 0).
  double noise = kSeedNoise;
  // Every arm but the baseline and the bounds, in arm order.
  std::vector<CapacityArmVerdict> arms;
  // The arms that beat the baseline, best first: by `change`, then `delta`, then arm order.
  // Indices into `arms`.
  std::vector<size_t> ranked;
  // The first of `ranked` and those of `ranked` that it does not beat beyond the noise (the
  // arms to choose between); indices into `arms`. Empty when no arm beats the baseline.
  std::vector<size_t> leaders;
  // The bound arms present ("infinite-cache", then "oracle"), against the baseline.
  std::vector<CapacityArmVerdict> bounds;
};

// Arm `arm` against arm `other` of `result`, seed by seed, with noise floor `noise`.
// Preconditions: both are arm indices of `result`, whose searches hold one per seed.
CapacityComparison CompareCapacity(const sim::CapacityResult& result, size_t arm, size_t other,
                                   double noise);

// Decides the verdict with noise floor `noise` (a fraction; negative or not finite is taken as
// 0). An arm named "infinite-cache" or "oracle" is a bound, never a candidate.
CapacityVerdict DecideCapacityVerdict(const sim::CapacityResult& result, double noise = kSeedNoise);

// The verdict in words, in reading order: the answer ("turn on" or "keep"), the arms as good as
// the best, the other arms that beat the baseline, those within noise and those worse (each
// only when there is one), the bounds and the best arm's share of each bound's gain, and how
// noise was decided. Plain text (not escaped). Empty without a baseline arm.
std::vector<VerdictLine> CapacityVerdictLines(const sim::CapacityResult& result,
                                              const CapacityVerdict& verdict);

}  // namespace agentkv::report

#endif  // AGENTKV_REPORT_CAPACITY_VERDICT_H_
