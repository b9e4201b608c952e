// Tests of BlockKeySet against std::set: random keys (0 included, repeats, growth past many
// doublings) give the same answers to insert and contains.
#include "agentkv/sim/fleet/block_key_set.h"

#include <gtest/gtest.h>

#include <cstdint>
#include <set>

#include "agentkv/base/rng.h"

namespace agentkv::sim {
namespace {

TEST(BlockKeySetTest, AnswersAsASetDoes) {
  for (uint64_t seed = 1; seed <= 5; ++seed) {
    Rng rng(seed);
    BlockKeySet set;
    std::set<uint64_t> model;
    EXPECT_FALSE(set.contains(kv::BlockKey(0)));
    for (int i = 0; i < 20'000; ++i) {
      // Small keys repeat (and 0 comes up); large ones are hash-like.
      const uint64_t key = rng.Bernoulli(0.3) ? rng.Uniform(0, 50) : rng.Next();
      if (rng.Bernoulli(0.6)) {
        EXPECT_EQ(set.insert(kv::BlockKey(key)), model.insert(key).second) << key;
      } else {
        EXPECT_EQ(set.contains(kv::BlockKey(key)), model.contains(key)) << key;
      }
    }
    EXPECT_EQ(set.size(), model.size());
    for (const uint64_t key : model) EXPECT_TRUE(set.contains(kv::BlockKey(key)));
  }
}

}  // namespace
}  // namespace agentkv::sim
