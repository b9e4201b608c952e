// Tests of GapOrderHeap (internal/gap_order_heap.h): bucket first, then effective last use,
// then push order; lazy removal and re-push; compaction against a brute-force model.
#include "agentkv/kv/internal/gap_order_heap.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cstdint>
#include <map>
#include <random>
#include <tuple>
#include <vector>

namespace agentkv::kv::internal {
namespace {

using ::testing::ElementsAre;

std::vector<int32_t> Drain(GapOrderHeap& heap) {
  std::vector<int32_t> order;
  for (int32_t b = heap.Top(); b != GapOrderHeap::kNone; b = heap.Top()) {
    order.push_back(b);
    heap.Remove(b);
  }
  return order;
}

TEST(GapOrderHeapTest, LowerBucketFirstThenEarlierLastUseThenPushOrder) {
  GapOrderHeap heap;
  heap.Reset(6);
  const int64_t uses[] = {50, 10, 10, 70, 5, GapOrderHeap::kUnneeded};
  const int buckets[] = {35, 35, 35, 35, 60, 35};
  for (int32_t b = 0; b < 6; ++b) {
    heap.set_last_use(b, uses[b]);
    heap.Push(b, buckets[b]);
  }
  EXPECT_EQ(heap.size(), 6);
  EXPECT_THAT(Drain(heap), ElementsAre(5, 1, 2, 0, 3, 4));
  EXPECT_EQ(heap.size(), 0);
}

TEST(GapOrderHeapTest, FreshSlotsRankFirstInBucketAfterTheUnneeded) {
  GapOrderHeap heap;
  heap.Reset(3);
  EXPECT_EQ(heap.last_use(0), GapOrderHeap::kFirstInBucket);
  heap.set_last_use(1, GapOrderHeap::kUnneeded);
  heap.set_last_use(2, 0);
  for (int32_t b = 2; b >= 0; --b) heap.Push(b, 35);
  EXPECT_THAT(Drain(heap), ElementsAre(1, 0, 2));
  heap.set_last_use(1, 7);
  heap.ClearLastUse(1);
  EXPECT_EQ(heap.last_use(1), GapOrderHeap::kFirstInBucket);
}

TEST(GapOrderHeapTest, RepushReplacesTheEntryAndRemoveIsIdempotent) {
  GapOrderHeap heap;
  heap.Reset(3);
  for (int32_t b = 0; b < 3; ++b) {
    heap.set_last_use(b, b);
    heap.Push(b, 35);
  }
  // Block 0 moves to a higher bucket; block 2 to an earlier last use.
  heap.Push(0, 40);
  EXPECT_EQ(heap.bucket(0), 40);
  heap.set_last_use(2, -1);
  heap.Push(2, 35);
  heap.Remove(1);
  heap.Remove(1);
  EXPECT_FALSE(heap.queued(1));
  EXPECT_EQ(heap.size(), 2);
  EXPECT_THAT(Drain(heap), ElementsAre(2, 0));
}

// Model check: random pushes, re-pushes and removals (enough to trigger compactions) give the
// brute-force minimum of (bucket, last use, push order) at every Top.
TEST(GapOrderHeapTest, MatchesABruteForceModelThroughCompactions) {
  constexpr int32_t kBlocks = 300;
  GapOrderHeap heap;
  heap.Reset(kBlocks);
  std::map<int32_t, std::tuple<int, int64_t, uint64_t>> model;
  std::mt19937 rng(11);
  uint64_t pushes = 0;
  for (int op = 0; op < 20000; ++op) {
    const auto b = static_cast<int32_t>(rng() % kBlocks);
    if (rng() % 3 == 0) {
      heap.Remove(b);
      model.erase(b);
    } else {
      const int bucket = static_cast<int>(rng() % 4);
      const auto use = static_cast<int64_t>(rng() % 50);
      heap.set_last_use(b, use);
      heap.Push(b, bucket);
      model[b] = {bucket, use, pushes++};
    }
    ASSERT_EQ(heap.size(), static_cast<int64_t>(model.size()));
    int32_t expected = GapOrderHeap::kNone;
    for (const auto& [block, key] : model) {
      if (expected == GapOrderHeap::kNone || key < model.at(expected)) expected = block;
    }
    ASSERT_EQ(heap.Top(), expected) << "op " << op;
  }
}

}  // namespace
}  // namespace agentkv::kv::internal
