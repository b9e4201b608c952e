#include "agentkv/kv/internal/next_use_heap.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cstdint>
#include <map>
#include <tuple>
#include <vector>

#include "agentkv/base/rng.h"

namespace agentkv::kv::internal {
namespace {

using ::testing::ElementsAre;
using ::testing::IsEmpty;

// Pops every queued block in victim order.
std::vector<int32_t> Drain(NextUseHeap& heap) {
  std::vector<int32_t> order;
  for (int32_t b = heap.Top(); b != NextUseHeap::kNone; b = heap.Top()) {
    order.push_back(b);
    heap.Remove(b);
  }
  return order;
}

TEST(NextUseHeapTest, FarthestNextUseFirstThenDeeperThenLargerKey) {
  NextUseHeap heap;
  heap.Reset(8);
  heap.SetDepth(0, 0);
  heap.SetDepth(1, 1);
  heap.SetDepth(2, 2);
  heap.SetDepth(3, 2);
  heap.Push(0, /*next_use=*/5, /*key=*/10);
  heap.Push(1, 5, 11);
  heap.Push(2, 5, 12);
  heap.Push(3, 5, 13);
  heap.Push(4, 9, 1);
  heap.Push(5, 2, 99);
  EXPECT_EQ(heap.size(), 6);
  EXPECT_THAT(Drain(heap), ElementsAre(4, 3, 2, 1, 0, 5));
  EXPECT_EQ(heap.size(), 0);
}

TEST(NextUseHeapTest, RemovedAndReRankedBlocksKeepOnlyTheirLatestEntry) {
  NextUseHeap heap;
  heap.Reset(4);
  heap.Push(0, 1, 0);
  heap.Push(1, 2, 1);
  heap.Push(2, 3, 2);
  heap.Remove(2);
  heap.Remove(2);      // A no-op.
  heap.Push(0, 7, 0);  // Re-ranked: its old entry is stale.
  EXPECT_FALSE(heap.queued(2));
  EXPECT_TRUE(heap.queued(0));
  EXPECT_EQ(heap.size(), 2);
  EXPECT_THAT(Drain(heap), ElementsAre(0, 1));
  EXPECT_THAT(Drain(heap), IsEmpty());
}

TEST(NextUseHeapTest, MatchesAnOrderedSetUnderRandomOperations) {
  constexpr uint64_t kSeed = 19;
  Rng rng(kSeed);
  constexpr int32_t kBlocks = 64;
  NextUseHeap heap;
  heap.Reset(kBlocks);
  // The reference: (next_use, depth, key) -> block, largest first.
  std::map<std::tuple<int64_t, int32_t, uint64_t>, int32_t> model;
  std::vector<std::tuple<int64_t, int32_t, uint64_t>> rank_of(kBlocks);
  std::vector<bool> in(kBlocks, false);
  for (int32_t b = 0; b < kBlocks; ++b) heap.SetDepth(b, static_cast<int32_t>(rng.Uniform(0, 3)));
  for (int step = 0; step < 20000; ++step) {
    const auto b = static_cast<int32_t>(rng.Uniform(0, kBlocks - 1));
    const int64_t op = rng.Uniform(0, 2);
    if (op == 0) {
      if (in[static_cast<size_t>(b)]) model.erase(rank_of[static_cast<size_t>(b)]);
      const int64_t next_use = rng.Uniform(0, 50);
      rank_of[static_cast<size_t>(b)] = {next_use, heap.depth(b), static_cast<uint64_t>(b)};
      model[rank_of[static_cast<size_t>(b)]] = b;
      in[static_cast<size_t>(b)] = true;
      heap.Push(b, next_use, static_cast<uint64_t>(b));
    } else if (op == 1) {
      if (in[static_cast<size_t>(b)]) model.erase(rank_of[static_cast<size_t>(b)]);
      in[static_cast<size_t>(b)] = false;
      heap.Remove(b);
    } else {
      const int32_t expected = model.empty() ? NextUseHeap::kNone : model.rbegin()->second;
      ASSERT_EQ(heap.Top(), expected) << "seed " << kSeed << " step " << step;
    }
    ASSERT_EQ(heap.size(), static_cast<int64_t>(model.size()));
  }
}

}  // namespace
}  // namespace agentkv::kv::internal
