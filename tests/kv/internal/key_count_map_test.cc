// Tests of KeyCountMap (key_count_map.h) against std::map: random increments and decrements
// over small key universes (the key 0 included, keys crowded into one probe run so that removals
// shift slots back across the end of the table) give the same counts, sizes and contents after
// every operation; a decrement of an absent key aborts.
#include "agentkv/kv/internal/key_count_map.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cstdint>
#include <map>
#include <vector>

#include "agentkv/base/rng.h"

namespace agentkv::kv::internal {
namespace {

void ExpectSameAs(const KeyCountMap& map, const std::map<uint64_t, int32_t>& model,
                  const std::vector<uint64_t>& universe) {
  ASSERT_EQ(map.size(), model.size());
  for (const uint64_t key : universe) {
    const auto it = model.find(key);
    ASSERT_EQ(map.count(key), it == model.end() ? 0 : it->second) << "key " << key;
  }
  std::map<uint64_t, int32_t> seen;
  map.ForEach([&seen](uint64_t key, int32_t count) {
    EXPECT_TRUE(seen.emplace(key, count).second) << "key " << key << " visited twice";
  });
  ASSERT_EQ(seen, model);
}

// `n` keys, the key 0 among them when `with_zero`.
std::vector<uint64_t> Universe(Rng& rng, size_t n, bool with_zero) {
  std::vector<uint64_t> keys;
  if (with_zero) keys.push_back(0);
  while (keys.size() < n) keys.push_back(rng.Next() | 1);
  return keys;
}

TEST(KeyCountMapTest, CountsAsAMapDoesUnderRandomChurn) {
  for (uint64_t seed = 1; seed <= 6; ++seed) {
    Rng rng(seed);
    // Small universes keep the table small and its probe runs long; a larger one grows it.
    const std::vector<uint64_t> universe = Universe(rng, seed <= 3 ? 40 : 600, seed % 2 == 1);
    KeyCountMap map;
    std::map<uint64_t, int32_t> model;
    for (int op = 0; op < 20'000; ++op) {
      const uint64_t key =
          universe[static_cast<size_t>(rng.Uniform(0, static_cast<int64_t>(universe.size()) - 1))];
      const auto it = model.find(key);
      // Increments twice as often early on, decrements as often later: the map fills and drains.
      const bool increment = it == model.end() || rng.Uniform(0, 2) < (op < 10'000 ? 2 : 1);
      if (increment) {
        ASSERT_EQ(map.Increment(key), ++model[key]);
      } else {
        const int32_t left = --it->second;
        if (left == 0) model.erase(it);
        ASSERT_EQ(map.Decrement(key), left);
      }
      if (op % 97 == 0) ExpectSameAs(map, model, universe);
    }
    ExpectSameAs(map, model, universe);
  }
}

// Keys that all start their probe at the same few slots: removing one from the middle of a run
// that wraps past the end of the table must keep every later key reachable.
TEST(KeyCountMapTest, RemovalsInsideAWrappingRunKeepEveryKeyReachable) {
  Rng rng(11);
  std::vector<uint64_t> crowded;
  // The 64-slot table's homes are bits 32.. of key * golden; keep keys whose home is 61-63.
  while (crowded.size() < 24) {
    const uint64_t key = rng.Next() | 1;
    const uint64_t home = ((key * 0x9E3779B97F4A7C15ULL) >> 32) & 63U;
    if (home >= 61) crowded.push_back(key);
  }
  KeyCountMap map;
  std::map<uint64_t, int32_t> model;
  for (const uint64_t key : crowded) {
    map.Increment(key);
    model[key] = 1;
  }
  ExpectSameAs(map, model, crowded);
  for (size_t i = 0; i < crowded.size(); i += 2) {
    EXPECT_EQ(map.Decrement(crowded[i]), 0);
    model.erase(crowded[i]);
    ExpectSameAs(map, model, crowded);
  }
}

TEST(KeyCountMapDeathTest, DecrementOfAnAbsentKeyAborts) {
  KeyCountMap map;
  map.Increment(5);
  EXPECT_DEATH(map.Decrement(7), "decrement of an absent key");
  EXPECT_DEATH(map.Decrement(0), "decrement of an absent key");
  EXPECT_EQ(map.Decrement(5), 0);
  EXPECT_DEATH(map.Decrement(5), "decrement of an absent key");
}

}  // namespace
}  // namespace agentkv::kv::internal
