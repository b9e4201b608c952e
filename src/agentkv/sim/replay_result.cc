// SummarizeDurations: nearest-rank percentiles over the samples, sorted in place.
// The rank of percentile p over n samples is ceil(p * n) (1-based), clamped to [1, n], so p50
// of {1, 2} is 1 and p99 of 1..100 is 99; an empty input gives the all-zero summary.
#include "agentkv/sim/replay_result.h"

#include <algorithm>
#include <cmath>
#include <cstddef>

namespace agentkv::sim {
namespace {

// The value at nearest rank ceil(p * n) of the ascending, non-empty `sorted`.
double NearestRank(const std::vector<double>& sorted, double p) {
  const double n = static_cast<double>(sorted.size());
  // The small tolerance keeps p * n from landing just above an integer through rounding
  // (0.95 * 100 is 95.00000000000001 in binary), which would skip to the next rank.
  const double rank = std::ceil(p * n - 1e-9);
  const size_t index = rank <= 1 ? 0 : static_cast<size_t>(rank) - 1;
  return sorted[std::min(index, sorted.size() - 1)];
}

}  // namespace

DurationSummary SummarizeDurations(std::vector<double>& seconds) {
  DurationSummary summary;
  if (seconds.empty()) return summary;
  std::sort(seconds.begin(), seconds.end());
  double sum = 0;
  for (const double s : seconds) sum += s;
  summary.count = static_cast<int64_t>(seconds.size());
  summary.mean_s = sum / static_cast<double>(seconds.size());
  summary.p50_s = NearestRank(seconds, 0.50);
  summary.p90_s = NearestRank(seconds, 0.90);
  summary.p95_s = NearestRank(seconds, 0.95);
  summary.p99_s = NearestRank(seconds, 0.99);
  summary.max_s = seconds.back();
  return summary;
}

}  // namespace agentkv::sim
