#include "agentkv/control/engine_gauges.h"

#include <algorithm>

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

}  // namespace

EngineSnapshot SnapshotFromGauges(std::string engine_id, std::span<const RankGauges> ranks) {
  EngineSnapshot s;
  s.engine_id = std::move(engine_id);
  s.max_total_num_tokens =
      static_cast<int64_t>(MaxOverRanks(ranks, &RankGauges::max_total_num_tokens).value_or(0));
  s.num_used_tokens =
      static_cast<int64_t>(MaxOverRanks(ranks, &RankGauges::num_used_tokens).value_or(0));
  const std::optional<double> usage = MaxOverRanks(ranks, &RankGauges::token_usage);
  s.token_usage =
      usage.has_value() ? *usage : MaxOverRanks(ranks, &RankGauges::full_token_usage).value_or(0.0);
  if (s.token_usage == 0.0 && s.max_total_num_tokens > 0) {
    s.token_usage =
        static_cast<double>(s.num_used_tokens) / static_cast<double>(s.max_total_num_tokens);
  }
  return s;
}

}  // namespace agentkv::control
