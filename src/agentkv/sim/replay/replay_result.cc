// SummarizeDurations: nearest-rank percentiles over the samples, sorted in place.
// The rank of percentile p over n samples is ceil(p * n) (1-based), clamped to [1, n], so p50
// of {1, 2} is 1 and p99 of 1..100 is 99; an empty input gives the all-zero summary.
// IdealSharesOf: a share is a plain ratio of differences of the arms' own values, so it is
// exactly 0 for the baseline arm and 1 for the infinite-cache arm, and never NaN or infinite.
#include "agentkv/sim/replay/replay_result.h"

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <string_view>

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

std::optional<double> IdealShare(double baseline, double arm, double ideal) {
  if (!std::isfinite(baseline) || !std::isfinite(arm) || !std::isfinite(ideal)) {
    return std::nullopt;
  }
  const double gap = baseline - ideal;
  if (gap == 0) return std::nullopt;
  const double share = (baseline - arm) / gap;
  if (!std::isfinite(share)) return std::nullopt;
  return share;
}

std::vector<IdealShares> IdealSharesOf(const ReplayResult& result, std::string_view reference) {
  std::vector<IdealShares> shares(result.arms.size());
  const auto find = [&result](std::string_view name) -> const ArmResult* {
    for (const ArmResult& arm : result.arms) {
      if (arm.arm == name) return &arm;
    }
    return nullptr;
  };
  const ArmResult* baseline = find("baseline");
  const ArmResult* ideal = find(reference);
  if (baseline == nullptr || ideal == nullptr) return shares;
  const auto tokens = [](int64_t v) { return static_cast<double>(v); };
  for (size_t i = 0; i < result.arms.size(); ++i) {
    const ArmResult& arm = result.arms[i];
    shares[i].uncached_tokens =
        IdealShare(tokens(baseline->uncached_tokens), tokens(arm.uncached_tokens),
                   tokens(ideal->uncached_tokens));
    shares[i].evicted_recompute_tokens =
        IdealShare(tokens(baseline->evicted_recompute_tokens), tokens(arm.evicted_recompute_tokens),
                   tokens(ideal->evicted_recompute_tokens));
    shares[i].server_time_mean =
        IdealShare(baseline->server_time.mean_s, arm.server_time.mean_s, ideal->server_time.mean_s);
  }
  return shares;
}

void FillIdealShares(ReplayResult& result) {
  const std::vector<IdealShares> shares = IdealSharesOf(result);
  const std::vector<IdealShares> oracle = IdealSharesOf(result, "oracle");
  for (size_t i = 0; i < result.arms.size(); ++i) {
    result.arms[i].ideal_share = shares[i];
    result.arms[i].oracle_share = oracle[i];
  }
}

}  // namespace agentkv::sim
