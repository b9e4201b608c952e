#include "agentkv/control/engine_gauges.h"

#include <gtest/gtest.h>

#include <vector>

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

}  // namespace
}  // namespace agentkv::control
