// Tests of BlockKeySet against std::set: random keys (0 included, repeats, growth past many
// doublings) give the same answers to insert, erase and contains.
#include "agentkv/kv/block_key_set.h"

#include <gtest/gtest.h>

#include <cstdint>
#include <set>

#include "agentkv/base/rng.h"

namespace agentkv::kv {
namespace {

TEST(BlockKeySetTest, AnswersAsASetDoes) {
  for (uint64_t seed = 1; seed <= 5; ++seed) {
    Rng rng(seed);
    BlockKeySet set;
    std::set<uint64_t> model;
    EXPECT_FALSE(set.contains(BlockKey(0)));
    for (int i = 0; i < 20'000; ++i) {
      // Small keys repeat (and 0 comes up); large ones are hash-like.
      const uint64_t key = rng.Bernoulli(0.3) ? rng.Uniform(0, 50) : rng.Next();
      const int64_t draw = rng.Uniform(0, 99);
      if (draw < 45) {
        EXPECT_EQ(set.insert(BlockKey(key)), model.insert(key).second) << key;
      } else if (draw < 65) {
        // Erase a key known to be in half the time (a random one is rarely in).
        const uint64_t victim = model.empty() || rng.Bernoulli(0.5) ? key : *model.begin();
        EXPECT_EQ(set.erase(BlockKey(victim)), model.erase(victim) == 1) << victim;
      } else {
        EXPECT_EQ(set.contains(BlockKey(key)), model.contains(key)) << key;
      }
    }
    EXPECT_EQ(set.size(), model.size());
    for (const uint64_t key : model) EXPECT_TRUE(set.contains(BlockKey(key)));
    // Emptied by erasing every key, it holds none and takes them back.
    for (const uint64_t key : model) EXPECT_TRUE(set.erase(BlockKey(key))) << key;
    EXPECT_EQ(set.size(), 0U);
    for (const uint64_t key : model) EXPECT_FALSE(set.contains(BlockKey(key))) << key;
    for (const uint64_t key : model) EXPECT_TRUE(set.insert(BlockKey(key))) << key;
    EXPECT_EQ(set.size(), model.size());
  }
}

}  // namespace
}  // namespace agentkv::kv
