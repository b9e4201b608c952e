// Tests of NextUseIndex and of the oracle arm it drives in the instant single cache: the index's
// next uses (prompt and output keys, truncation, a request's own output keys while it runs),
// and the optimality of the oracle under the instant replay's accounting, proved against a
// brute-force search over every eviction choice on small random traces (evicting more than
// needed included), and against caches that may keep orphans, whose prefix is gone.
#include "agentkv/sim/replay/next_use_index.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <bit>
#include <cstdint>
#include <limits>
#include <optional>
#include <string>
#include <unordered_map>
#include <utility>
#include <vector>

#include "agentkv/base/rng.h"
#include "agentkv/kv/block_key.h"
#include "agentkv/sim/replay/instant_replay.h"
#include "tests/sim/arm_names.h"

namespace agentkv::sim {
namespace {

using testing_support::Arms;

constexpr int32_t kBlockTokens = 4;
constexpr int64_t kNever = kv::NextUseRanking::kNever;

// A request on the chain of block ids `ids`, with output blocks `outputs` chained after it.
InstantRequest Request(const std::vector<uint64_t>& ids, const std::vector<uint64_t>& outputs = {},
                       int64_t extra_tokens = 0) {
  InstantRequest r;
  const kv::BlockKeyHasher hasher(0);
  std::vector<uint64_t> all = ids;
  all.insert(all.end(), outputs.begin(), outputs.end());
  const std::vector<kv::BlockKey> keys = hasher.KeysFromBlockIds(all);
  r.keys.assign(keys.begin(), keys.begin() + static_cast<std::ptrdiff_t>(ids.size()));
  r.output_keys.assign(keys.begin() + static_cast<std::ptrdiff_t>(ids.size()), keys.end());
  r.options.prompt_tokens = static_cast<int64_t>(ids.size()) * kBlockTokens + extra_tokens;
  return r;
}

InstantWorkload Workload(std::vector<InstantRequest> requests) {
  InstantWorkload w;
  w.tokens_per_block = kBlockTokens;
  w.requests = std::move(requests);
  return w;
}

TEST(NextUseIndexTest, RanksEachKeyByTheNextPromptThatLooksItUp) {
  // 0: [1 2] -> out 3; 1: [5]; 2: [1 2 3]; 3: [1].
  const InstantWorkload w =
      Workload({Request({1, 2}, {3}), Request({5}), Request({1, 2, 3}), Request({1})});
  NextUseIndex index(w, /*capacity=*/8);
  const kv::BlockKey k1 = w.requests[0].keys[0];
  const kv::BlockKey k2 = w.requests[0].keys[1];
  const kv::BlockKey k3 = w.requests[0].output_keys[0];
  EXPECT_EQ(index.NextUse(k1), kNever) << "not mentioned yet";
  const std::span<const kv::BlockKey> outputs = index.Enter(0);
  ASSERT_EQ(outputs.size(), 1u);
  EXPECT_EQ(outputs[0], k3);
  EXPECT_EQ(index.NextUse(k1), 2);
  EXPECT_EQ(index.NextUse(k2), 2);
  EXPECT_EQ(index.NextUse(k3), kNever) << "request 0 commits it again while it runs";
  index.Leave(0);
  EXPECT_EQ(index.NextUse(k3), 2);
  index.Enter(1);
  index.Leave(1);
  EXPECT_EQ(index.NextUse(w.requests[1].keys[0]), kNever);
  index.Enter(2);
  EXPECT_EQ(index.NextUse(k1), 3);
  EXPECT_EQ(index.NextUse(k2), kNever);
  EXPECT_EQ(index.NextUse(k3), kNever);
  index.Leave(2);
  EXPECT_EQ(index.prompt_blocks(2), 3);
  EXPECT_EQ(index.output_blocks(0), 1);
}

TEST(NextUseIndexTest, CountsOnlyWhatTheDeviceLooksUpAndCommits) {
  // At 2 blocks: request 0 is truncated to [1 2] and commits no output; request 1's prompt [1]
  // leaves room for one output block; request 2 uses key 3 only beyond the device.
  const InstantWorkload w =
      Workload({Request({1, 2, 3}, {4}), Request({1}, {7, 8}), Request({1, 2, 3})});
  NextUseIndex index(w, /*capacity=*/2);
  EXPECT_EQ(index.prompt_blocks(0), 2);
  EXPECT_EQ(index.output_blocks(0), 0);
  EXPECT_EQ(index.output_blocks(1), 1);
  EXPECT_TRUE(index.Enter(0).empty());
  index.Leave(0);
  EXPECT_EQ(index.NextUse(w.requests[0].keys[0]), 1);
  EXPECT_EQ(index.NextUse(w.requests[0].keys[1]), 2);
  EXPECT_EQ(index.NextUse(w.requests[0].keys[2]), kNever) << "not looked up at 2 blocks";
}

// ---- Optimality ------------------------------------------------------------------------

// The instant replay's accounting as a search over cache contents: a state is a set of keys
// (bit i = key i). Request i matches the longest prefix of its looked-up prompt in the state,
// holds it, needs room for the rest of its prompt and its output blocks beside everything it
// keeps, then caches all of them. Before it runs, ANY set of unheld keys may be evicted, as long
// as the rest fits: more than needed, and, with `orphans`, a block without its parent (the
// cache itself never keeps one: evicting a block cascades to its dependents).
class BruteForce {
 public:
  BruteForce(const InstantWorkload& w, int64_t capacity, bool orphans)
      : capacity_(capacity), orphans_(orphans) {
    for (const InstantRequest& r : w.requests) {
      const auto n = static_cast<int64_t>(r.keys.size());
      const int64_t c = std::min(n, capacity);
      const int64_t o =
          c == n ? std::min(static_cast<int64_t>(r.output_keys.size()), capacity - c) : 0;
      Step s;
      uint64_t parent = 0;
      for (int64_t p = 0; p < c; ++p) {
        s.prompt.push_back(Bit(r.keys[static_cast<size_t>(p)], parent));
        parent = s.prompt.back();
        s.added |= parent;
      }
      for (int64_t q = 0; q < o; ++q) {
        parent = Bit(r.output_keys[static_cast<size_t>(q)], parent);
        s.added |= parent;
      }
      s.new_slots = c + o;
      s.prompt_tokens = r.options.prompt_tokens;
      steps_.push_back(std::move(s));
    }
  }

  // The fewest uncached tokens any eviction choice reaches.
  int64_t MinUncachedTokens() { return Best(0, 0); }

 private:
  struct Step {
    std::vector<uint64_t> prompt;  // The bit of each looked-up prompt key, in order.
    uint64_t added = 0;            // Bits the request caches.
    int64_t new_slots = 0;
    int64_t prompt_tokens = 0;
  };

  // The bit of `key`, whose parent's bit is `parent` (0 at a root).
  uint64_t Bit(kv::BlockKey key, uint64_t parent) {
    auto [it, inserted] = bits_.try_emplace(key.value(), bits_.size());
    EXPECT_LT(it->second, 64u);
    if (inserted) parent_.push_back(parent);
    return uint64_t{1} << it->second;
  }

  // Whether every key of `state` has its parent in `state`.
  bool PrefixClosed(uint64_t state) const {
    for (uint64_t rest = state; rest != 0; rest &= rest - 1) {
      const uint64_t parent = parent_[static_cast<size_t>(std::countr_zero(rest))];
      if (parent != 0 && (state & parent) == 0) return false;
    }
    return true;
  }

  int64_t Best(size_t i, uint64_t state) {
    if (i == steps_.size()) return 0;
    const uint64_t memo_key = state * 64 + i;
    if (auto it = memo_.find(memo_key); it != memo_.end()) return it->second;
    const Step& s = steps_[i];
    int64_t m = 0;
    uint64_t held = 0;
    while (m < static_cast<int64_t>(s.prompt.size()) &&
           (state & s.prompt[static_cast<size_t>(m)]) != 0) {
      held |= s.prompt[static_cast<size_t>(m)];
      ++m;
    }
    const int64_t cost = std::max<int64_t>(0, s.prompt_tokens - m * kBlockTokens);
    const int64_t need = s.new_slots - m;
    const uint64_t evictable = state & ~held;
    int64_t best = std::numeric_limits<int64_t>::max();
    // Every subset `kept` of the evictable keys (the rest is evicted).
    for (uint64_t kept = evictable;; kept = (kept - 1) & evictable) {
      if (std::popcount(kept | held) + need <= capacity_ &&
          (orphans_ || PrefixClosed(kept | held))) {
        best = std::min(best, cost + Best(i + 1, kept | held | s.added));
      }
      if (kept == 0) break;
    }
    memo_[memo_key] = best;
    return best;
  }

  int64_t capacity_;
  bool orphans_;
  std::unordered_map<uint64_t, uint64_t> bits_;
  std::vector<uint64_t> parent_;
  std::vector<Step> steps_;
  std::unordered_map<uint64_t, int64_t> memo_;
};

// A small random trace over a prefix tree: each request extends a new root or a prefix of an
// earlier request's chain (its prompt and outputs) by 0-2 new blocks and has 0-1 output blocks,
// or repeats a prefix of an earlier chain with the block after it as its answer, so prefixes,
// sibling branches, outputs cached before the request that commits them, and repeats all occur.
// Without `repeated_answers`, every output block is new when its request runs.
InstantWorkload RandomTrace(Rng& rng, bool repeated_answers) {
  std::vector<std::vector<uint64_t>> chains;
  uint64_t next_id = 1;
  std::vector<InstantRequest> requests;
  const int64_t count = rng.Uniform(2, 7);
  for (int64_t r = 0; r < count; ++r) {
    std::vector<uint64_t> prompt;
    std::vector<uint64_t> outputs;
    if (!chains.empty() && rng.Uniform(0, 3) != 0) {
      const std::vector<uint64_t>& base =
          chains[static_cast<size_t>(rng.Uniform(0, static_cast<int64_t>(chains.size()) - 1))];
      const int64_t length = rng.Uniform(0, static_cast<int64_t>(base.size()));
      prompt.assign(base.begin(), base.begin() + length);
      // Sometimes the answer is one an earlier request already produced (a repeated turn).
      if (repeated_answers && length > 0 && length < static_cast<int64_t>(base.size()) &&
          rng.Uniform(0, 2) == 0) {
        outputs.push_back(base[static_cast<size_t>(length)]);
      }
    }
    if (outputs.empty()) {
      for (int64_t add = rng.Uniform(0, 2); add > 0; --add) prompt.push_back(next_id++);
      if (prompt.empty()) prompt.push_back(next_id++);
      if (rng.Uniform(0, 1) == 1) outputs.push_back(next_id++);
    }
    requests.push_back(Request(prompt, outputs, rng.Uniform(0, kBlockTokens - 1)));
    std::vector<uint64_t> chain = prompt;
    chain.insert(chain.end(), outputs.begin(), outputs.end());
    chains.push_back(std::move(chain));
  }
  return Workload(std::move(requests));
}

struct OracleRun {
  int64_t oracle = 0;
  int64_t lru = 0;
};

OracleRun RunOracleAndLru(const InstantWorkload& w, int64_t capacity) {
  InstantReplayOptions options;
  options.arms = Arms({"oracle", "baseline"});
  options.capacity_blocks = capacity;
  options.truncate_long_requests = true;
  StatusOr<InstantReplayResult> r = RunInstantReplay(w, options);
  EXPECT_TRUE(r.ok()) << r.status();
  if (!r.ok()) return {};
  return {r->points[0].stats.uncached_tokens, r->points[1].stats.uncached_tokens};
}

// Every eviction choice the cache can make (any subset of the unheld blocks, more than needed
// included; the rest closed under prefixes): none does better than the oracle.
TEST(OracleArmTest, MatchesTheBruteForceOptimumOnRandomTraces) {
  constexpr uint64_t kSeed = 2026120119;
  Rng rng(kSeed);
  int64_t below_lru = 0;
  for (int iteration = 0; iteration < 3000; ++iteration) {
    SCOPED_TRACE("seed " + std::to_string(kSeed) + ", iteration " + std::to_string(iteration));
    const InstantWorkload w = RandomTrace(rng, /*repeated_answers=*/true);
    const int64_t unique = UniqueBlocks(w);
    ASSERT_LE(unique, 48);
    const int64_t capacity = rng.Uniform(1, std::min<int64_t>(unique, 7));
    const OracleRun run = RunOracleAndLru(w, capacity);
    EXPECT_EQ(run.oracle, BruteForce(w, capacity, /*orphans=*/false).MinUncachedTokens())
        << "capacity " << capacity;
    EXPECT_LE(run.oracle, run.lru);
    if (run.oracle < run.lru) ++below_lru;
    if (HasFailure()) break;
  }
  // The traces are hard enough that the oracle often beats LRU.
  EXPECT_GT(below_lru, 100);
}

// Keeping orphans (a block whose parent was evicted, useful again once the parent is recomputed)
// never helps either when every answer is new: recomputing the parent costs what keeping it
// instead would have saved.
TEST(OracleArmTest, KeepingOrphansDoesNotBeatItWhenAnswersAreNew) {
  constexpr uint64_t kSeed = 2026120120;
  Rng rng(kSeed);
  for (int iteration = 0; iteration < 3000; ++iteration) {
    SCOPED_TRACE("seed " + std::to_string(kSeed) + ", iteration " + std::to_string(iteration));
    const InstantWorkload w = RandomTrace(rng, /*repeated_answers=*/false);
    const int64_t unique = UniqueBlocks(w);
    const int64_t capacity = rng.Uniform(1, std::min<int64_t>(unique, 7));
    const OracleRun run = RunOracleAndLru(w, capacity);
    EXPECT_EQ(run.oracle, BruteForce(w, capacity, /*orphans=*/true).MinUncachedTokens())
        << "capacity " << capacity;
    if (HasFailure()) break;
  }
}

// A request whose answer is cached already computes it again into blocks of its own: evicting
// the cached copy to make room for them is free. At 3 blocks, [X] [A]->B fill the cache; [A]->B
// again evicts B (not X, although B is needed sooner; LRU evicts X), so [A B] and [X] both hit.
TEST(OracleArmTest, EvictsACachedAnswerItsRequestRecomputesFirst) {
  const InstantWorkload w =
      Workload({Request({7}), Request({1}, {2}), Request({1}, {2}), Request({1, 2}), Request({7})});
  const OracleRun run = RunOracleAndLru(w, 3);
  EXPECT_EQ(run.oracle, 2 * kBlockTokens);
  EXPECT_EQ(run.oracle, BruteForce(w, 3, /*orphans=*/true).MinUncachedTokens());
  EXPECT_GT(run.lru, run.oracle);
}

// The one exception, an artifact of the accounting: an answer already cached is computed again
// into blocks of its own and shared only at commit, so its request needs room for both copies.
// Evicting the cached copy is free, except that the cache takes its children along; a
// cache that could keep the orphaned child would win here. At 3 blocks: [A B]->C caches A B C;
// [A]->B must free a block: the oracle evicts C (its child would go with B), and [A B C] misses
// C; an orphan-keeping cache evicts B alone, recomputes it as [A]'s answer and hits all of
// [A B C].
TEST(OracleArmTest, AnOrphanBeatsItOnlyThroughARecomputedAnswer) {
  const InstantWorkload w = Workload(
      {Request({1, 2}, {3}, 3), Request({1}, {2}, 2), Request({1, 2, 3}, {4}), Request({9})});
  const OracleRun run = RunOracleAndLru(w, 3);
  EXPECT_EQ(run.oracle, BruteForce(w, 3, /*orphans=*/false).MinUncachedTokens());
  EXPECT_EQ(run.oracle, 11 + 2 + kBlockTokens + kBlockTokens);
  EXPECT_EQ(BruteForce(w, 3, /*orphans=*/true).MinUncachedTokens(), 11 + 2 + 0 + kBlockTokens);
}

TEST(OracleArmTest, IsRefusedWithAHostTierAndWithFeatures) {
  InstantReplayOptions options;
  options.arms = Arms({"oracle"});
  options.host_blocks = 4;
  EXPECT_THAT(RunInstantReplay(Workload({Request({1})}), options).status().message(),
              ::testing::HasSubstr("oracle evicts from the device tier only"));
  EXPECT_FALSE(ParseArm("oracle+lifecycle").ok());
}

}  // namespace
}  // namespace agentkv::sim
