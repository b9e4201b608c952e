// LruOrder: the device queue's own order. Which block is the next victim after a sequence of
// releases, holds and re-prioritizations.
#include "agentkv/kv/internal/lru_order.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "victim_order_harness.h"

namespace agentkv::kv::internal {
namespace {

using ::testing::ElementsAre;

class LruOrderTest : public ::testing::Test {
 protected:
  VictimOrderHarness<LruOrder> cache_{LruOrder(), 8};
};

TEST_F(LruOrderTest, LeastRecentlyReleasedFirstIgnoringReleaseRanks) {
  for (int32_t b = 0; b < 3; ++b) cache_.Commit(b);
  // The last use a caller passes is for the gap-aware order: LRU keeps release order.
  cache_.Release({1}, 300);
  cache_.Release({0}, 100);
  cache_.Release({2}, 200);
  EXPECT_THAT(cache_.Drain(), ElementsAre(1, 0, 2));
}

TEST_F(LruOrderTest, LowerPriorityFirstAndFrontRequeueFirstInItsBucket) {
  for (int32_t b = 0; b < 4; ++b) cache_.Commit(b);
  cache_.Release({0});
  cache_.Release({1});
  cache_.Release({2});
  cache_.Release({3});
  cache_.SetPriority(0, 80);
  cache_.SetPriority(3, 10);
  cache_.SetPriority(2, kDefaultPriority, /*front=*/true);
  EXPECT_THAT(cache_.Drain(), ElementsAre(3, 2, 1, 0));
}

TEST_F(LruOrderTest, AHeldAndReleasedBlockBecomesMostRecent) {
  for (int32_t b = 0; b < 3; ++b) cache_.Commit(b);
  cache_.Release({0});
  cache_.Release({1});
  cache_.Release({2});
  cache_.Hold(0);
  cache_.Release({0});
  EXPECT_THAT(cache_.Drain(), ElementsAre(1, 2, 0));
}

TEST_F(LruOrderTest, KeepsNoStateAndNothingIsUnneeded) {
  cache_.Commit(0);
  cache_.Commit(1, 0);
  cache_.Release({0, 1});
  cache_.order().OnSessionEnded(1, cache_.blocks(), cache_.host_queue());
  EXPECT_FALSE(cache_.order().Unneeded(1));
  EXPECT_EQ(cache_.order().MemoryBytes(), 0);
  EXPECT_THAT(cache_.Drain(), ElementsAre(1, 0)) << "released deepest first";
}

}  // namespace
}  // namespace agentkv::kv::internal
