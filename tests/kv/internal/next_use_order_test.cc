// NextUseOrder: which block is the next victim by the caller's ranking (Belady's MIN).
#include "agentkv/kv/internal/next_use_order.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cstdint>
#include <map>

#include "victim_order_harness.h"

namespace agentkv::kv::internal {
namespace {

using ::testing::ElementsAre;

// Ranks set by the test per block (keys are 1000 + block in the harness); 0 by default.
class TableRanking : public NextUseRanking {
 public:
  int64_t NextUse(BlockKey key) const override {
    auto it = next_use.find(static_cast<int32_t>(key.value() - 1000));
    return it == next_use.end() ? 0 : it->second;
  }
  std::map<int32_t, int64_t> next_use;
};

class NextUseOrderTest : public ::testing::Test {
 protected:
  TableRanking ranking_;
  VictimOrderHarness<NextUseOrder> cache_{NextUseOrder(&ranking_, 8), 8};
};

TEST_F(NextUseOrderTest, NeededFarthestAheadFirstNeverNeededBeforeAll) {
  ranking_.next_use = {{0, 5}, {1, NextUseRanking::kNever}, {2, 9}, {3, 1}};
  for (int32_t b = 0; b < 4; ++b) cache_.Commit(b);
  cache_.Release({0});
  cache_.Release({1});
  cache_.Release({2});
  cache_.Release({3});
  EXPECT_THAT(cache_.Drain(), ElementsAre(1, 2, 0, 3));
}

TEST_F(NextUseOrderTest, TheDeeperBlockFirstOnEqualNextUse) {
  ranking_.next_use = {{0, 4}, {1, 4}, {2, 4}};
  cache_.Commit(0);
  cache_.Commit(1, 0);
  cache_.Commit(2, 1);
  cache_.Release({0, 1, 2});
  EXPECT_THAT(cache_.Drain(), ElementsAre(2, 1, 0));
}

TEST_F(NextUseOrderTest, PrioritiesAndReleaseRanksDoNotOrderVictims) {
  ranking_.next_use = {{0, 1}, {1, 2}};
  cache_.Commit(0);
  cache_.Commit(1);
  cache_.Release({0}, 1);
  cache_.Release({1}, 999);
  cache_.SetPriority(0, 0, /*front=*/true);
  EXPECT_THAT(cache_.Drain(), ElementsAre(1, 0));
}

TEST_F(NextUseOrderTest, RefreshRereadsTheRankButNeverLaterThanAQueuedChild) {
  ranking_.next_use = {{0, 3}, {1, 5}, {2, 4}};
  cache_.Commit(0);
  cache_.Commit(1, 0);
  cache_.Commit(2);
  cache_.Release({0, 1});
  cache_.Release({2});
  ranking_.next_use[0] = 100;  // later than its child 1 (5): capped at 5, after the child
  ranking_.next_use[2] = 1;
  cache_.order().Refresh(0, cache_.blocks());
  cache_.order().Refresh(2, cache_.blocks());
  EXPECT_THAT(cache_.Drain(), ElementsAre(1, 0, 2));
}

TEST_F(NextUseOrderTest, RefreshOfAHeldBlockIsANoOp) {
  ranking_.next_use = {{0, 3}, {1, 5}};
  cache_.Commit(0);
  cache_.Commit(1);
  cache_.Release({0});
  cache_.Release({1});
  cache_.Hold(0);
  ranking_.next_use[0] = 100;
  cache_.order().Refresh(0, cache_.blocks());
  cache_.Release({0});  // re-read when it becomes evictable again
  EXPECT_THAT(cache_.Drain(), ElementsAre(0, 1));
}

TEST_F(NextUseOrderTest, CheckQueuedFindsABlockTheOrderWasNotToldOf) {
  cache_.Commit(0);
  cache_.Release({0});
  EXPECT_TRUE(cache_.Check().ok());
  cache_.Commit(1);
  cache_.block(1).ref_count = 0;
  cache_.PushBehindTheOrdersBack(1);
  EXPECT_EQ(cache_.Check().code(), StatusCode::kInternal);
}

}  // namespace
}  // namespace agentkv::kv::internal
