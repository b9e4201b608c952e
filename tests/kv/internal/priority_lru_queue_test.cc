#include "agentkv/kv/internal/priority_lru_queue.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cstdint>
#include <vector>

#include "agentkv/base/rng.h"

namespace agentkv::kv::internal {
namespace {

using ::testing::ElementsAre;
using ::testing::IsEmpty;

// The arena node shape the queue links through, as the cache manager's Block has it.
struct Node {
  int32_t prev = -1;
  int32_t next = -1;
  uint8_t priority = kDefaultPriority;
};

class PriorityLruQueueTest : public ::testing::Test {
 protected:
  PriorityLruQueueTest() : nodes_(16) {}

  void Push(int32_t id, int priority, bool front = false) {
    nodes_[static_cast<size_t>(id)].priority = static_cast<uint8_t>(priority);
    queue_.Push(nodes_, id, front);
  }
  void Remove(int32_t id) { queue_.Remove(nodes_, id); }

  // Pops every node in eviction order.
  std::vector<int32_t> Drain() {
    std::vector<int32_t> order;
    for (int32_t id = queue_.Peek(); id != PriorityLruQueue<Node>::kNone; id = queue_.Peek()) {
      order.push_back(id);
      queue_.Remove(nodes_, id);
    }
    return order;
  }

  std::vector<int32_t> Bucket(int p) const {
    std::vector<int32_t> ids;
    queue_.ForEachInBucket(std::span<const Node>(nodes_), p,
                           [&](int32_t id) { ids.push_back(id); });
    return ids;
  }

  std::vector<Node> nodes_;
  PriorityLruQueue<Node> queue_;
};

TEST_F(PriorityLruQueueTest, EmptyQueueHasNoVictim) {
  EXPECT_TRUE(queue_.empty());
  EXPECT_EQ(queue_.size(), 0);
  EXPECT_EQ(queue_.Peek(), PriorityLruQueue<Node>::kNone);
  for (int p = 0; p < kNumPriorities; ++p) EXPECT_FALSE(queue_.BucketBitSet(p)) << p;
}

TEST_F(PriorityLruQueueTest, LeastRecentlyPushedFirstWithinAPriority) {
  Push(3, 35);
  Push(1, 35);
  Push(2, 35);
  EXPECT_EQ(queue_.size(), 3);
  EXPECT_THAT(Bucket(35), ElementsAre(3, 1, 2));
  EXPECT_THAT(Drain(), ElementsAre(3, 1, 2));
  EXPECT_TRUE(queue_.empty());
}

TEST_F(PriorityLruQueueTest, LowerPriorityFirstAcrossBuckets) {
  Push(0, 50);
  Push(1, 35);
  Push(2, 100);
  Push(3, 0);
  Push(4, 35);
  Push(5, 99);
  EXPECT_THAT(Drain(), ElementsAre(3, 1, 4, 0, 5, 2));
}

TEST_F(PriorityLruQueueTest, FrontInsertionIsEvictedNextWithinItsBucket) {
  Push(0, 20);
  Push(1, 20);
  Push(2, 20, /*front=*/true);
  Push(3, 10);
  // Front of bucket 20, but bucket 10 still goes first.
  EXPECT_THAT(Bucket(20), ElementsAre(2, 0, 1));
  EXPECT_THAT(Drain(), ElementsAre(3, 2, 0, 1));
}

TEST_F(PriorityLruQueueTest, FrontInsertionIntoAnEmptyBucket) {
  Push(4, 7, /*front=*/true);
  EXPECT_TRUE(queue_.BucketBitSet(7));
  Push(5, 7);
  Push(6, 7, /*front=*/true);
  EXPECT_THAT(Bucket(7), ElementsAre(6, 4, 5));
  EXPECT_THAT(Drain(), ElementsAre(6, 4, 5));
}

TEST_F(PriorityLruQueueTest, RemoveFromMiddleHeadAndTail) {
  for (int32_t id = 0; id < 5; ++id) Push(id, 40);
  Remove(2);  // middle
  EXPECT_THAT(Bucket(40), ElementsAre(0, 1, 3, 4));
  Remove(0);  // head
  EXPECT_THAT(Bucket(40), ElementsAre(1, 3, 4));
  EXPECT_EQ(queue_.Peek(), 1);
  Remove(4);  // tail
  EXPECT_THAT(Bucket(40), ElementsAre(1, 3));
  EXPECT_EQ(queue_.size(), 2);
  // Pushing after a tail removal appends after the new tail.
  Push(9, 40);
  EXPECT_THAT(Bucket(40), ElementsAre(1, 3, 9));
  // A removed node's links are cleared, so it can be pushed again anywhere.
  EXPECT_EQ(nodes_[4].prev, -1);
  EXPECT_EQ(nodes_[4].next, -1);
  Push(4, 40, /*front=*/true);
  EXPECT_THAT(Drain(), ElementsAre(4, 1, 3, 9));
}

TEST_F(PriorityLruQueueTest, RemovingTheOnlyNodeClearsItsBucketBit) {
  Push(1, 42);
  EXPECT_TRUE(queue_.BucketBitSet(42));
  Remove(1);
  EXPECT_FALSE(queue_.BucketBitSet(42));
  EXPECT_EQ(queue_.Peek(), PriorityLruQueue<Node>::kNone);
  EXPECT_THAT(Bucket(42), IsEmpty());
}

TEST_F(PriorityLruQueueTest, BitmapSpansBothWordsAtTheirEdges) {
  // 0 and 63 live in the first 64-bit word, 64 and 100 in the second.
  Push(0, 100);
  Push(1, 64);
  Push(2, 63);
  Push(3, 0);
  for (int p : {0, 63, 64, 100}) EXPECT_TRUE(queue_.BucketBitSet(p)) << p;
  for (int p : {1, 62, 65, 99}) EXPECT_FALSE(queue_.BucketBitSet(p)) << p;
  EXPECT_EQ(queue_.Peek(), 3);
  Remove(3);
  EXPECT_FALSE(queue_.BucketBitSet(0));
  EXPECT_EQ(queue_.Peek(), 2);
  Remove(2);
  EXPECT_FALSE(queue_.BucketBitSet(63));
  // The first word is empty now: the victim comes from the second.
  EXPECT_EQ(queue_.Peek(), 1);
  Remove(1);
  EXPECT_FALSE(queue_.BucketBitSet(64));
  EXPECT_TRUE(queue_.BucketBitSet(100));
  EXPECT_EQ(queue_.Peek(), 0);
  Remove(0);
  EXPECT_FALSE(queue_.BucketBitSet(100));
  EXPECT_EQ(queue_.Peek(), PriorityLruQueue<Node>::kNone);
}

TEST_F(PriorityLruQueueTest, HighestPriorityAloneIsStillAVictim) {
  Push(8, kMaxPriority);
  EXPECT_EQ(queue_.Peek(), 8);
  Push(9, 64);
  EXPECT_EQ(queue_.Peek(), 9);
}

TEST_F(PriorityLruQueueTest, RequeueAfterPriorityChangeMovesTheBucket) {
  Push(0, 35);
  Push(1, 35);
  Push(2, 35);
  // Demote 2 with evict-first (TensorRT-LLM #13080): remove, change, push to the front.
  Remove(2);
  Push(2, 0, /*front=*/true);
  EXPECT_FALSE(queue_.BucketBitSet(1));
  EXPECT_THAT(Bucket(35), ElementsAre(0, 1));
  EXPECT_THAT(Bucket(0), ElementsAre(2));
  EXPECT_THAT(Drain(), ElementsAre(2, 0, 1));
}

TEST_F(PriorityLruQueueTest, ClearEmptiesEveryBucket) {
  Push(0, 0);
  Push(1, 70);
  queue_.Clear();
  EXPECT_TRUE(queue_.empty());
  EXPECT_FALSE(queue_.BucketBitSet(0));
  EXPECT_FALSE(queue_.BucketBitSet(70));
  EXPECT_EQ(queue_.Peek(), PriorityLruQueue<Node>::kNone);
  // Nodes are reusable after Clear (their stale links are overwritten by Push).
  Push(1, 5);
  EXPECT_THAT(Drain(), ElementsAre(1));
}

// The queue against a reference: a vector of (priority, sequence) kept sorted on demand.
TEST_F(PriorityLruQueueTest, MatchesAReferenceUnderRandomOperations) {
  const uint64_t seed = 77;
  SCOPED_TRACE(testing::Message() << "seed " << seed);
  Rng rng(seed);
  constexpr int32_t kNodes = 16;
  std::vector<bool> queued(kNodes, false);
  // Reference order key per queued node: (priority, position) with front pushes taking a
  // position below every earlier one.
  std::vector<std::pair<int, int64_t>> order(kNodes);
  int64_t back = 0;
  int64_t front = 0;
  for (int op = 0; op < 20000; ++op) {
    const int32_t id = static_cast<int32_t>(rng.Uniform(0, kNodes - 1));
    if (!queued[static_cast<size_t>(id)]) {
      // Few priorities, so buckets hold several nodes; 63/64 straddle the word boundary.
      const int choices[] = {0, 35, 63, 64, 100};
      const int p = choices[rng.Uniform(0, 4)];
      const bool at_front = rng.Bernoulli(0.3);
      Push(id, p, at_front);
      queued[static_cast<size_t>(id)] = true;
      order[static_cast<size_t>(id)] = {p, at_front ? --front : ++back};
    } else {
      Remove(id);
      queued[static_cast<size_t>(id)] = false;
    }
    int32_t want = PriorityLruQueue<Node>::kNone;
    int64_t size = 0;
    for (int32_t i = 0; i < kNodes; ++i) {
      if (!queued[static_cast<size_t>(i)]) continue;
      ++size;
      if (want == PriorityLruQueue<Node>::kNone ||
          order[static_cast<size_t>(i)] < order[static_cast<size_t>(want)]) {
        want = i;
      }
    }
    ASSERT_EQ(queue_.Peek(), want) << "op " << op;
    ASSERT_EQ(queue_.size(), size) << "op " << op;
  }
}

}  // namespace
}  // namespace agentkv::kv::internal
