// Tests of LruMap: recency order, eviction with a predicate, and a randomized comparison with
// an obviously correct reference (a vector in recency order).
#include "agentkv/service/emulator/lru_map.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <optional>
#include <random>
#include <utility>
#include <vector>

namespace agentkv::service {
namespace {

TEST(LruMapTest, EvictsTheLeastRecentlyTouchedEntryThePredicateAllows) {
  LruMap<int, int> map;
  for (int k = 1; k <= 3; ++k) map.Touch(k, [k] { return k * 10; });
  bool inserted = true;
  EXPECT_EQ(map.Touch(
                1, [] { return -1; }, &inserted),
            10);  // 1 becomes the most recent.
  EXPECT_FALSE(inserted);
  // Order now 2, 3, 1; 2 is kept by the predicate, so 3 goes.
  std::optional<std::pair<int, int>> evicted =
      map.EvictOldest([](int key, int) { return key != 2; });
  ASSERT_TRUE(evicted.has_value());
  EXPECT_EQ(evicted->first, 3);
  EXPECT_EQ(evicted->second, 30);
  EXPECT_EQ(map.Find(3), nullptr);
  EXPECT_EQ(map.size(), 2u);
  EXPECT_FALSE(map.EvictOldest([](int, int) { return false; }).has_value());
  EXPECT_TRUE(map.Erase(2));
  EXPECT_FALSE(map.Erase(2));
  EXPECT_EQ(*map.Find(1), 10);
}

TEST(LruMapTest, MatchesARecencyOrderedReference) {
  for (uint64_t seed = 1; seed <= 20; ++seed) {
    std::mt19937_64 rng(seed);
    LruMap<int, int> map;
    std::vector<std::pair<int, int>> reference;  // Least recent first.
    for (int op = 0; op < 500; ++op) {
      const int key = static_cast<int>(rng() % 16);
      auto it = std::find_if(reference.begin(), reference.end(),
                             [key](const auto& e) { return e.first == key; });
      switch (rng() % 3) {
        case 0: {
          const int value = op;
          bool inserted = false;
          const int got = map.Touch(
              key, [value] { return value; }, &inserted);
          EXPECT_EQ(inserted, it == reference.end()) << "seed " << seed;
          std::pair<int, int> entry = it == reference.end() ? std::pair{key, value} : *it;
          if (it != reference.end()) reference.erase(it);
          reference.push_back(entry);
          EXPECT_EQ(got, entry.second) << "seed " << seed;
          break;
        }
        case 1:
          EXPECT_EQ(map.Erase(key), it != reference.end()) << "seed " << seed;
          if (it != reference.end()) reference.erase(it);
          break;
        default: {
          const int parity = static_cast<int>(rng() % 2);
          auto evictable = [parity](int k, int) { return k % 2 == parity; };
          auto expected = std::find_if(reference.begin(), reference.end(),
                                       [&](const auto& e) { return evictable(e.first, e.second); });
          std::optional<std::pair<int, int>> got = map.EvictOldest(evictable);
          ASSERT_EQ(got.has_value(), expected != reference.end()) << "seed " << seed;
          if (got.has_value()) {
            EXPECT_EQ(*got, *expected) << "seed " << seed;
            reference.erase(expected);
          }
        }
      }
      ASSERT_EQ(map.size(), reference.size()) << "seed " << seed;
    }
  }
}

}  // namespace
}  // namespace agentkv::service
