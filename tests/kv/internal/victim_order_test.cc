// The contract every victim order (victim_order.h) keeps, run over each of them: the victim is
// an evictable block, never a held one, stays the victim until it leaves, and draining evicts
// every evictable block exactly once. Behaviour unique to one order is in its own test.
#include "agentkv/kv/internal/victim_order.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
#include <variant>
#include <vector>

#include "victim_order_harness.h"

namespace agentkv::kv::internal {
namespace {

using ::testing::UnorderedElementsAre;

// Every block is needed at its own id's time: a deterministic ranking for NextUseOrder.
class IdRanking : public NextUseRanking {
 public:
  int64_t NextUse(BlockKey key) const override { return static_cast<int64_t>(key.value()); }
};

constexpr int32_t kBlocks = 16;

template <typename Order>
Order MakeOrder();
template <>
LruOrder MakeOrder<LruOrder>() {
  return LruOrder();
}
template <>
GapAwareOrder MakeOrder<GapAwareOrder>() {
  return GapAwareOrder(kBlocks);
}
template <>
NextUseOrder MakeOrder<NextUseOrder>() {
  static const IdRanking ranking;
  return NextUseOrder(&ranking, kBlocks);
}

template <typename Order>
class VictimOrderContractTest : public ::testing::Test {
 protected:
  VictimOrderHarness<Order> cache_{MakeOrder<Order>(), kBlocks};
};

using Orders = ::testing::Types<LruOrder, GapAwareOrder, NextUseOrder>;
TYPED_TEST_SUITE(VictimOrderContractTest, Orders);

TYPED_TEST(VictimOrderContractTest, NothingEvictableMeansNoVictim) {
  EXPECT_EQ(this->cache_.Victim(), -1);
  this->cache_.Commit(0);
  EXPECT_EQ(this->cache_.Victim(), -1) << "a held block is not evictable";
  EXPECT_TRUE(this->cache_.Check().ok());
}

TYPED_TEST(VictimOrderContractTest, DrainEvictsEveryEvictableBlockOnceAndNoHeldOne) {
  auto& cache = this->cache_;
  cache.Commit(0);
  cache.Commit(1, 0);
  cache.Commit(2, 1);
  cache.Commit(3);
  cache.Release({0, 1, 2}, 10);
  cache.Release({3}, 20);
  cache.Hold(3);
  EXPECT_TRUE(cache.Check().ok());
  EXPECT_THAT(cache.Drain(), UnorderedElementsAre(0, 1, 2));
  EXPECT_TRUE(cache.Check().ok());
}

TYPED_TEST(VictimOrderContractTest, TheVictimStaysTheVictimUntilItLeaves) {
  auto& cache = this->cache_;
  for (int32_t b = 0; b < 4; ++b) cache.Commit(b);
  cache.Release({0, 1, 2, 3}, 5);
  const int32_t victim = cache.Victim();
  ASSERT_NE(victim, -1);
  EXPECT_EQ(cache.Victim(), victim);
  cache.Hold(victim);
  EXPECT_NE(cache.Victim(), victim);
  EXPECT_TRUE(cache.Check().ok());
}

TYPED_TEST(VictimOrderContractTest, ResetForgetsEveryQueuedBlock) {
  auto& cache = this->cache_;
  cache.Commit(0);
  cache.Release({0}, 1);
  cache.Drain();
  cache.order().Reset(kBlocks);
  EXPECT_EQ(cache.Victim(), -1);
  EXPECT_TRUE(cache.Check().ok());
}

TEST(MakeVictimOrderTest, ARankingChoosesNextUseElseTheOptionsOrder) {
  const IdRanking ranking;
  EXPECT_TRUE(std::holds_alternative<LruOrder>(MakeVictimOrder(EvictionOrder::kLru, nullptr, 4)));
  EXPECT_TRUE(
      std::holds_alternative<GapAwareOrder>(MakeVictimOrder(EvictionOrder::kGapAware, nullptr, 4)));
  EXPECT_TRUE(
      std::holds_alternative<NextUseOrder>(MakeVictimOrder(EvictionOrder::kLru, &ranking, 4)));
}

}  // namespace
}  // namespace agentkv::kv::internal
