#include "agentkv/control/engine_gauges.h"

#include <gtest/gtest.h>

#include <limits>
#include <vector>

#include "agentkv/base/bounds.h"

namespace agentkv::control {
namespace {

// test_parse_engine_kv_gauges_uses_max_across_tp_ranks: two tp_rank series per gauge give
// the max, not the sum.
TEST(EngineGaugesTest, TpReplicatedGaugesAggregateByMax) {
  const std::vector<RankGauges> ranks = {
      {.max_total_num_tokens = 262144,
       .num_used_tokens = 239901,
       .token_usage = 0.915,
       .full_token_usage = std::nullopt},
      {.max_total_num_tokens = 262144,
       .num_used_tokens = 230000,
       .token_usage = 0.877,
       .full_token_usage = std::nullopt},
  };
  const EngineSnapshot s = SnapshotFromGauges("http://engine-0", ranks);
  EXPECT_EQ(s.engine_id, "http://engine-0");
  EXPECT_EQ(s.max_total_num_tokens, 262144);
  EXPECT_EQ(s.num_used_tokens, 239901);
  EXPECT_DOUBLE_EQ(s.token_usage, 0.915);
}

TEST(EngineGaugesTest, UsageFallsBackToFullTokenUsageThenUsedOverCapacity) {
  const std::vector<RankGauges> full = {{.max_total_num_tokens = 1000,
                                         .num_used_tokens = 100,
                                         .token_usage = std::nullopt,
                                         .full_token_usage = 0.4}};
  EXPECT_DOUBLE_EQ(SnapshotFromGauges("e", full).token_usage, 0.4);
  const std::vector<RankGauges> used = {{.max_total_num_tokens = 1000,
                                         .num_used_tokens = 250,
                                         .token_usage = std::nullopt,
                                         .full_token_usage = std::nullopt}};
  EXPECT_DOUBLE_EQ(SnapshotFromGauges("e", used).token_usage, 0.25);
  const std::vector<RankGauges> none = {{}};
  const EngineSnapshot empty = SnapshotFromGauges("e", none);
  EXPECT_EQ(empty.max_total_num_tokens, 0);
  EXPECT_DOUBLE_EQ(empty.token_usage, 0.0);
}

// An engine's /metrics is outside input: values a double holds but a token count cannot
// (NaN, infinities, negatives, 1e19, past kMaxTokens) make the engine unhealthy instead of
// reaching an undefined double-to-int64 conversion.
TEST(EngineGaugesTest, NonsenseGaugesMakeTheEngineUnhealthy) {
  const double kNan = std::numeric_limits<double>::quiet_NaN();
  const double kInf = std::numeric_limits<double>::infinity();
  // {max_total_num_tokens, num_used_tokens, token_usage, full_token_usage}.
  const std::optional<double> kNone;
  for (const RankGauges& bad : std::vector<RankGauges>{
           {kNan, kNone, kNone, kNone},
           {kInf, kNone, kNone, kNone},
           {-1.0, kNone, kNone, kNone},
           {1e19, kNone, kNone, kNone},
           {static_cast<double>(kMaxTokens) * 2, kNone, kNone, kNone},
           {1000.0, 1e300, kNone, kNone},
           {1000.0, kNone, kNan, kNone},
           {1000.0, kNone, kNone, -kInf},
       }) {
    const EngineSnapshot s = SnapshotFromGauges("e", std::vector<RankGauges>{bad});
    EXPECT_FALSE(s.healthy);
    EXPECT_EQ(s.max_total_num_tokens, 0);
    EXPECT_EQ(s.token_usage, 0);
  }
  const EngineSnapshot edge = SnapshotFromGauges(
      "e", std::vector<RankGauges>{{static_cast<double>(kMaxTokens), kNone, kNone, kNone}});
  EXPECT_TRUE(edge.healthy);
  EXPECT_EQ(edge.max_total_num_tokens, kMaxTokens);
}

}  // namespace
}  // namespace agentkv::control
