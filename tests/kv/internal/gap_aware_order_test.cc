// GapAwareOrder: which block is the next victim after releases ranked by effective last use,
// re-queues, and sessions that end.
#include "agentkv/kv/internal/gap_aware_order.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "victim_order_harness.h"

namespace agentkv::kv::internal {
namespace {

using ::testing::ElementsAre;

class GapAwareOrderTest : public ::testing::Test {
 protected:
  VictimOrderHarness<GapAwareOrder> cache_{GapAwareOrder(8), 8};
};

TEST_F(GapAwareOrderTest, EarliestEffectiveLastUseFirstWithinABucket) {
  for (int32_t b = 0; b < 3; ++b) cache_.Commit(b);
  cache_.Release({0}, 300);  // a session back soon
  cache_.Release({1}, 100);  // one waiting for a human
  cache_.Release({2}, 200);
  EXPECT_THAT(cache_.Drain(), ElementsAre(1, 2, 0));
}

TEST_F(GapAwareOrderTest, EqualLastUsesLeaveInReleaseOrderAsLru) {
  for (int32_t b = 0; b < 3; ++b) cache_.Commit(b);
  cache_.Release({2}, 7);
  cache_.Release({0}, 7);
  cache_.Release({1}, 7);
  EXPECT_THAT(cache_.Drain(), ElementsAre(2, 0, 1));
}

TEST_F(GapAwareOrderTest, ABlockKeepsTheLatestLastUseAnyRequestGaveIt) {
  cache_.Commit(0);
  cache_.Commit(1);
  cache_.Release({0}, 500);
  cache_.Hold(0);
  cache_.Release({0}, 50);  // a later request that expects a long pause
  cache_.Release({1}, 100);
  EXPECT_EQ(cache_.order().last_use(0), 500);
  EXPECT_THAT(cache_.Drain(), ElementsAre(1, 0));
}

TEST_F(GapAwareOrderTest, BucketsComeBeforeLastUseAndFrontRequeuesFirstInTheirBucket) {
  for (int32_t b = 0; b < 4; ++b) cache_.Commit(b);
  cache_.Release({0}, 10);
  cache_.Release({1}, 20);
  cache_.Release({2}, 30);
  cache_.Release({3}, 40);
  cache_.SetPriority(0, 80);                                // earliest, but a higher bucket
  cache_.SetPriority(3, kDefaultPriority, /*front=*/true);  // evict first in its bucket
  EXPECT_TRUE(cache_.Check().ok());
  EXPECT_THAT(cache_.Drain(), ElementsAre(3, 1, 2, 0));
}

TEST_F(GapAwareOrderTest, AnEndedSessionsBlocksGoFirstUpToAForkStillInUse) {
  // 0 -> 1 -> 2 is the ended session's chain; 0 -> 3 another session's, still live.
  cache_.Commit(0);
  cache_.Commit(3, 0);
  cache_.Hold(0);  // the ended session's request reuses the prefix
  cache_.Commit(1, 0);
  cache_.Commit(2, 1);
  cache_.Release({0, 3}, 900);
  cache_.Release({0, 1, 2}, 800);
  cache_.order().OnSessionEnded(2, cache_.blocks(), cache_.host_queue());
  EXPECT_TRUE(cache_.order().Unneeded(2));
  EXPECT_TRUE(cache_.order().Unneeded(1));
  EXPECT_FALSE(cache_.order().Unneeded(0)) << "block 3 still needs its prefix";
  EXPECT_TRUE(cache_.Check().ok());
  EXPECT_THAT(cache_.Drain(), ElementsAre(2, 1, 3, 0));
}

TEST_F(GapAwareOrderTest, ASessionEndStopsAtAHeldBlock) {
  cache_.Commit(0);
  cache_.Commit(1, 0);
  cache_.Release({0, 1}, 10);
  cache_.Hold(1);
  cache_.order().OnSessionEnded(1, cache_.blocks(), cache_.host_queue());
  EXPECT_FALSE(cache_.order().Unneeded(1));
  EXPECT_FALSE(cache_.order().Unneeded(0));
}

TEST_F(GapAwareOrderTest, AnUnneededHostBlockMovesToTheFrontOfTheHostQueue) {
  cache_.Commit(0);
  cache_.Commit(1);
  cache_.Release({0}, 10);
  cache_.Release({1}, 20);
  cache_.Offload(0);
  cache_.Offload(1);
  cache_.order().OnSessionEnded(1, cache_.blocks(), cache_.host_queue());
  EXPECT_TRUE(cache_.order().Unneeded(1));
  EXPECT_EQ(cache_.host_queue().Peek(cache_.blocks()), 1);
}

TEST_F(GapAwareOrderTest, ATakenSlotForgetsItsRankAndARankedReleaseRestoresIt) {
  cache_.Commit(0);
  cache_.Release({0}, 10);
  cache_.order().OnSessionEnded(0, cache_.blocks(), cache_.host_queue());
  ASSERT_TRUE(cache_.order().Unneeded(0));
  cache_.Drain();
  cache_.Commit(0);
  EXPECT_EQ(cache_.order().last_use(0), GapOrderHeap::kFirstInBucket);
  EXPECT_FALSE(cache_.order().Unneeded(0));
}

TEST_F(GapAwareOrderTest, CheckQueuedFindsABlockTheOrderWasNotToldOf) {
  cache_.Commit(0);
  cache_.Release({0}, 1);
  cache_.Commit(1);
  cache_.block(1).ref_count = 0;
  cache_.PushBehindTheOrdersBack(1);
  EXPECT_EQ(cache_.Check().code(), StatusCode::kInternal);
}

}  // namespace
}  // namespace agentkv::kv::internal
