#include "agentkv/kv/internal/priority_lru_queue.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cstdint>
#include <optional>
#include <set>
#include <tuple>
#include <vector>

#include "agentkv/base/rng.h"

namespace agentkv::kv::internal {
namespace {

using ::testing::ElementsAre;
using ::testing::IsEmpty;

// The arena node shape the queue needs, as the cache manager's Block has it.
struct Node {
  uint32_t queue_pos = kNotQueued;
  uint8_t priority = kDefaultPriority;
};

// A node that may be in one of several queues, told apart by tag.
struct TaggedNode {
  uint32_t queue_pos = kNotQueued;
  uint8_t priority = kDefaultPriority;
  int tag = 0;
  int queue_tag() const { return tag; }
};

class PriorityLruQueueTest : public ::testing::Test {
 protected:
  PriorityLruQueueTest() : nodes_(kMaxNodes) {}

  static constexpr int32_t kMaxNodes = 4096;

  void Push(int32_t id, int priority, bool front = false) {
    nodes_[static_cast<size_t>(id)].priority = static_cast<uint8_t>(priority);
    queue_.Push(nodes_, id, front);
  }
  void Remove(int32_t id) { queue_.Remove(nodes_, id); }
  int32_t Peek() { return queue_.Peek(nodes_); }

  // Pops every node in eviction order.
  std::vector<int32_t> Drain() {
    std::vector<int32_t> order;
    for (int32_t id = Peek(); id != PriorityLruQueue<Node>::kNone; id = Peek()) {
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
  EXPECT_EQ(Peek(), PriorityLruQueue<Node>::kNone);
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
  EXPECT_EQ(Peek(), 1);
  Remove(4);  // tail
  EXPECT_THAT(Bucket(40), ElementsAre(1, 3));
  EXPECT_EQ(queue_.size(), 2);
  // Pushing after a tail removal appends after the new tail.
  Push(9, 40);
  EXPECT_THAT(Bucket(40), ElementsAre(1, 3, 9));
  // A removed node is marked unqueued, so it can be pushed again anywhere.
  EXPECT_EQ(nodes_[4].queue_pos, kNotQueued);
  Push(4, 40, /*front=*/true);
  EXPECT_THAT(Drain(), ElementsAre(4, 1, 3, 9));
}

TEST_F(PriorityLruQueueTest, RemovingTheOnlyNodeClearsItsBucketBit) {
  Push(1, 42);
  EXPECT_TRUE(queue_.BucketBitSet(42));
  Remove(1);
  EXPECT_FALSE(queue_.BucketBitSet(42));
  EXPECT_EQ(Peek(), PriorityLruQueue<Node>::kNone);
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
  EXPECT_EQ(Peek(), 3);
  Remove(3);
  EXPECT_FALSE(queue_.BucketBitSet(0));
  EXPECT_EQ(Peek(), 2);
  Remove(2);
  EXPECT_FALSE(queue_.BucketBitSet(63));
  // The first word is empty now: the victim comes from the second.
  EXPECT_EQ(Peek(), 1);
  Remove(1);
  EXPECT_FALSE(queue_.BucketBitSet(64));
  EXPECT_TRUE(queue_.BucketBitSet(100));
  EXPECT_EQ(Peek(), 0);
  Remove(0);
  EXPECT_FALSE(queue_.BucketBitSet(100));
  EXPECT_EQ(Peek(), PriorityLruQueue<Node>::kNone);
}

TEST_F(PriorityLruQueueTest, HighestPriorityAloneIsStillAVictim) {
  Push(8, kMaxPriority);
  EXPECT_EQ(Peek(), 8);
  Push(9, 64);
  EXPECT_EQ(Peek(), 9);
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
  EXPECT_EQ(Peek(), PriorityLruQueue<Node>::kNone);
  // Nodes are reusable after Clear once their owner marks them unqueued.
  for (Node& n : nodes_) n.queue_pos = kNotQueued;
  Push(1, 5);
  EXPECT_THAT(Drain(), ElementsAre(1));
}

// The queue against a reference: a set ordered by (bucket, position), front pushes taking a
// position below every earlier one. Sizes from a handful of nodes (short rings, mostly stale
// entries) to thousands (rings that grow and compact many times, also in the middle of a
// PushAll); a third of the operations evict the victim, as the cache does, the rest push
// nodes one by one or in batches, or remove them anywhere.
TEST_F(PriorityLruQueueTest, MatchesAReferenceUnderRandomOperations) {
  for (const auto& [seed, num_nodes, ops] :
       {std::tuple{77ULL, 16, 20000}, std::tuple{78ULL, 300, 40000},
        std::tuple{79ULL, kMaxNodes, 60000}}) {
    SCOPED_TRACE(testing::Message() << "seed " << seed << ", " << num_nodes << " nodes");
    queue_.Clear();
    for (Node& n : nodes_) n = Node{};
    Rng rng(seed);
    using Key = std::tuple<int, int64_t, int32_t>;  // bucket, position, id
    std::set<Key> reference;
    std::vector<std::optional<Key>> key_of(static_cast<size_t>(num_nodes));
    int64_t back = 0;
    int64_t front = 0;
    for (int op = 0; op < ops; ++op) {
      if (rng.Bernoulli(0.33) && !reference.empty()) {
        const int32_t victim = Peek();
        ASSERT_EQ(victim, std::get<2>(*reference.begin())) << "op " << op;
        Remove(victim);
        reference.erase(reference.begin());
        key_of[static_cast<size_t>(victim)].reset();
        continue;
      }
      // Nodes a finished request returns, pushed together (runs of one bucket and changes).
      if (rng.Bernoulli(0.1)) {
        std::vector<int32_t> batch;
        const int64_t want = rng.Uniform(1, 40);
        for (int64_t tries = 0; tries < 3 * want && std::ssize(batch) < want; ++tries) {
          const int32_t id = static_cast<int32_t>(rng.Uniform(0, num_nodes - 1));
          if (key_of[static_cast<size_t>(id)].has_value()) continue;
          const int p = rng.Bernoulli(0.8) ? 35 : 64;
          nodes_[static_cast<size_t>(id)].priority = static_cast<uint8_t>(p);
          key_of[static_cast<size_t>(id)] = Key{p, ++back, id};
          reference.insert(*key_of[static_cast<size_t>(id)]);
          batch.push_back(id);
        }
        queue_.PushAll(nodes_, batch);
        ASSERT_EQ(queue_.size(), static_cast<int64_t>(reference.size())) << "op " << op;
        continue;
      }
      const int32_t id = static_cast<int32_t>(rng.Uniform(0, num_nodes - 1));
      std::optional<Key>& key = key_of[static_cast<size_t>(id)];
      if (!key.has_value()) {
        // Few priorities, so buckets hold several nodes; 63/64 straddle the word boundary.
        const int choices[] = {0, 35, 63, 64, 100};
        const int p = choices[rng.Uniform(0, 4)];
        const bool at_front = rng.Bernoulli(0.3);
        Push(id, p, at_front);
        key = Key{p, at_front ? --front : ++back, id};
        reference.insert(*key);
      } else {
        Remove(id);
        reference.erase(*key);
        key.reset();
      }
      ASSERT_EQ(queue_.size(), static_cast<int64_t>(reference.size())) << "op " << op;
      ASSERT_EQ(Peek(),
                reference.empty() ? PriorityLruQueue<Node>::kNone : std::get<2>(*reference.begin()))
          << "op " << op;
      if (op % 997 == 0) {
        for (const int p : {0, 35, 63, 64, 100}) {
          std::vector<int32_t> want;
          for (const Key& k : reference) {
            if (std::get<0>(k) == p) want.push_back(std::get<2>(k));
          }
          ASSERT_EQ(Bucket(p), want) << "bucket " << p << ", op " << op;
          ASSERT_EQ(queue_.BucketBitSet(p), !want.empty()) << "bucket " << p << ", op " << op;
        }
      }
    }
  }
}

// Nodes that move between two queues (a cache's two tiers): an entry left behind in one queue
// never comes back to life when its node is queued in the other, even at the same bucket and
// position.
TEST(PriorityLruQueueTagTest, AnEntryLeftInAnotherQueueStaysStale) {
  std::vector<TaggedNode> nodes(4);
  PriorityLruQueue<TaggedNode> device(/*tag=*/0);
  PriorityLruQueue<TaggedNode> host(/*tag=*/1);
  for (int32_t id = 0; id < 3; ++id) device.Push(nodes, id);
  // Node 1 moves to the host queue: same bucket, and its position there may equal the one its
  // stale device entry has.
  device.Remove(nodes, 1);
  nodes[1].tag = 1;
  host.Push(nodes, 1);
  nodes[3].tag = 1;
  host.Push(nodes, 3, /*front=*/true);
  std::vector<int32_t> in_device;
  device.ForEachInBucket(nodes, kDefaultPriority, [&](int32_t id) { in_device.push_back(id); });
  EXPECT_THAT(in_device, ElementsAre(0, 2));
  EXPECT_EQ(device.size(), 2);
  EXPECT_EQ(device.Peek(nodes), 0);
  device.Remove(nodes, 0);
  EXPECT_EQ(device.Peek(nodes), 2);
  EXPECT_EQ(host.Peek(nodes), 3);
  host.Remove(nodes, 3);
  EXPECT_EQ(host.Peek(nodes), 1);
}

// A node removed from one bucket and pushed into another is live only in the second, and the
// rings keep their order through many rounds of growth and compaction.
TEST_F(PriorityLruQueueTest, ReQueuedNodesAreLiveOnlyWhereTheyWerePushedLast) {
  for (int round = 0; round < 50; ++round) {
    for (int32_t id = 0; id < 64; ++id) Push(id, 10);
    for (int32_t id = 0; id < 64; id += 2) {
      Remove(id);
      Push(id, 20);
    }
    std::vector<int32_t> odd;
    std::vector<int32_t> even;
    for (int32_t id = 1; id < 64; id += 2) odd.push_back(id);
    for (int32_t id = 0; id < 64; id += 2) even.push_back(id);
    ASSERT_EQ(Bucket(10), odd) << "round " << round;
    ASSERT_EQ(Bucket(20), even) << "round " << round;
    ASSERT_EQ(Drain().size(), 64U);
  }
  EXPECT_TRUE(queue_.empty());
  EXPECT_LT(queue_.MemoryBytes(), 64 * 1024) << "stale entries are dropped, not kept";
}

}  // namespace
}  // namespace agentkv::kv::internal
