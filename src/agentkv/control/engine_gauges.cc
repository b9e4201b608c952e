#include "agentkv/control/engine_gauges.h"

#include <algorithm>
#include <cmath>

#include "agentkv/base/bounds.h"

namespace agentkv::control {
namespace {

// The max over ranks of the gauge `field` selects, or nullopt when no rank exports it.
template <typename Field>
std::optional<double> MaxOverRanks(std::span<const RankGauges> ranks, Field field) {
  std::optional<double> best;
  for (const RankGauges& r : ranks) {
    const std::optional<double>& v = r.*field;
    if (v.has_value() && (!best.has_value() || *v > *best)) best = *v;
  }
  return best;
}

// A token gauge as a count: nullopt when it is not a finite value in [0, kMaxTokens] (a
// double outside int64's range would make the conversion undefined).
std::optional<int64_t> TokenCount(double value) {
  if (!(value >= 0 && value <= static_cast<double>(kMaxTokens))) return std::nullopt;
  return static_cast<int64_t>(value);
}

}  // namespace

EngineSnapshot SnapshotFromGauges(std::string engine_id, std::span<const RankGauges> ranks) {
  EngineSnapshot s;
  s.engine_id = std::move(engine_id);
  const std::optional<int64_t> capacity =
      TokenCount(MaxOverRanks(ranks, &RankGauges::max_total_num_tokens).value_or(0));
  const std::optional<int64_t> used =
      TokenCount(MaxOverRanks(ranks, &RankGauges::num_used_tokens).value_or(0));
  const std::optional<double> usage = MaxOverRanks(ranks, &RankGauges::token_usage);
  s.token_usage =
      usage.has_value() ? *usage : MaxOverRanks(ranks, &RankGauges::full_token_usage).value_or(0.0);
  if (!capacity.has_value() || !used.has_value() || !std::isfinite(s.token_usage)) {
    s.healthy = false;
    s.token_usage = 0;
    return s;
  }
  s.max_total_num_tokens = *capacity;
  s.num_used_tokens = *used;
  if (s.token_usage == 0.0 && s.max_total_num_tokens > 0) {
    s.token_usage =
        static_cast<double>(s.num_used_tokens) / static_cast<double>(s.max_total_num_tokens);
  }
  return s;
}

}  // namespace agentkv::control
