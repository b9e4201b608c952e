// Tests of AgentBlockIds: an agent's request ids kept once per run of extending turns give back
// every request's ids exactly, and hold the final context of a run, not the sum of its prompts.
#include "agentkv/sim/workload/agent_block_ids.h"

#include <gtest/gtest.h>

#include <cstdint>
#include <vector>

#include "agentkv/base/rng.h"

namespace agentkv::sim {
namespace {

WekaRequest WithIds(std::vector<uint64_t> ids) {
  WekaRequest r;
  r.hash_ids = std::move(ids);
  return r;
}

TEST(AgentBlockIdsTest, ExtendingTurnsShareTheirIds) {
  std::vector<WekaRequest> requests = {WithIds({1, 2}),    WithIds({1, 2, 3, 4}),
                                       WithIds({1, 2, 3}), WithIds({1, 2, 3, 4, 5}),
                                       WithIds({}),        WithIds({9})};
  const std::vector<WekaRequest> before = requests;
  const AgentBlockIds ids(requests);
  ASSERT_EQ(ids.size(), before.size());
  for (size_t i = 0; i < before.size(); ++i) {
    EXPECT_EQ(std::vector<uint64_t>(ids.At(i).begin(), ids.At(i).end()), before[i].hash_ids) << i;
    EXPECT_TRUE(requests[i].hash_ids.empty()) << i;
  }
  // {1, 2} and {1, 2, 3, 4} share one range of 4; {1, 2, 3} does not extend it, so it opens a
  // range that {1, 2, 3, 4, 5} extends (5 ids); {} opens an empty one that {9} extends.
  EXPECT_EQ(ids.pooled(), 4u + 5u + 1u);
}

// Random agents whose turns mostly extend the previous one and sometimes rewrite it.
TEST(AgentBlockIdsTest, RandomAgentsGiveBackEveryRequestsIds) {
  for (uint64_t seed = 1; seed <= 50; ++seed) {
    Rng rng(seed);
    std::vector<WekaRequest> requests;
    std::vector<uint64_t> context;
    uint64_t next_id = 0;
    size_t total = 0;
    // What the pool must hold: a turn that extends the previous one adds its new ids, one that
    // rewrote the history (shorter than the last) all of its ids.
    size_t expected_pool = 0;
    for (int turn = 0; turn < 40; ++turn) {
      const size_t last = context.size();
      if (rng.Bernoulli(0.1)) context.resize(context.size() / 2);  // a compaction
      if (rng.Bernoulli(0.05)) context.clear();                    // a new history
      const bool rewritten = context.size() < last;
      const size_t kept = context.size();
      for (uint64_t n = rng.Uniform(0, 6); n > 0; --n) context.push_back(next_id++);
      expected_pool += rewritten ? context.size() : context.size() - kept;
      requests.push_back(WithIds(context));
      total += context.size();
    }
    const std::vector<WekaRequest> before = requests;
    const AgentBlockIds ids(requests);
    for (size_t i = 0; i < before.size(); ++i) {
      ASSERT_EQ(std::vector<uint64_t>(ids.At(i).begin(), ids.At(i).end()), before[i].hash_ids)
          << "seed " << seed << " request " << i;
    }
    EXPECT_EQ(ids.pooled(), expected_pool) << "seed " << seed;
    EXPECT_LT(ids.pooled(), total) << "seed " << seed;
  }
}

}  // namespace
}  // namespace agentkv::sim
