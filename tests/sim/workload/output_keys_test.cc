// Tests of ReusedOutputBlocks / ReusedOutputKeys: which blocks of a turn's answer the next
// turn re-sends, and their keys in the next turn's chain.
#include "agentkv/sim/workload/output_keys.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cstdint>
#include <vector>

namespace agentkv::sim {
namespace {

using ::testing::ElementsAreArray;
using ::testing::IsEmpty;

constexpr int32_t kBlock = 4;

WekaRequest Turn(int64_t in, int64_t out, std::vector<uint64_t> ids) {
  WekaRequest r;
  r.input_tokens = in;
  r.output_tokens = out;
  r.hash_ids = std::move(ids);
  return r;
}

TEST(ReusedOutputBlocksTest, NextPromptThatExtendsThisOneReusesTheFullOutputBlocks) {
  // 8 prompt tokens (2 blocks) + 9 output tokens: KV of 16 tokens, blocks 2 and 3 complete.
  const WekaRequest first = Turn(8, 9, {1, 2});
  const WekaRequest second = Turn(21, 5, {1, 2, 3, 4, 5});
  EXPECT_EQ(ReusedOutputBlocks(first, second, kBlock), (OutputBlocks{2, 4}));
}

TEST(ReusedOutputBlocksTest, PartialOutputBlockAndTheLastTokenAreLeftOut) {
  // 8 + 8 tokens fill 4 blocks, but the last output token has no KV: only block 2.
  EXPECT_EQ(ReusedOutputBlocks(Turn(8, 8, {1, 2}), Turn(20, 1, {1, 2, 3, 4, 5}), kBlock),
            (OutputBlocks{2, 3}));
  // 8 + 4: the KV covers 11 tokens, no output block is full.
  EXPECT_TRUE(ReusedOutputBlocks(Turn(8, 4, {1, 2}), Turn(20, 1, {1, 2, 3, 4, 5}), kBlock).empty());
}

TEST(ReusedOutputBlocksTest, NextPromptShorterThanTheAnswerBoundsTheRange) {
  // A long answer, but the next prompt re-sends only one block of it.
  EXPECT_EQ(ReusedOutputBlocks(Turn(8, 100, {1, 2}), Turn(12, 1, {1, 2, 3}), kBlock),
            (OutputBlocks{2, 3}));
}

TEST(ReusedOutputBlocksTest, PromptThatDoesNotExtendThePreviousOneGetsNoOutputBlocks) {
  const WekaRequest first = Turn(8, 9, {1, 2});
  // A rewritten history (compaction), a changed last block, a shorter prompt.
  EXPECT_TRUE(ReusedOutputBlocks(first, Turn(20, 1, {7, 8, 9, 10, 11}), kBlock).empty());
  EXPECT_TRUE(ReusedOutputBlocks(first, Turn(20, 1, {1, 9, 3, 4, 5}), kBlock).empty());
  EXPECT_TRUE(ReusedOutputBlocks(first, Turn(8, 1, {1, 2}), kBlock).empty());
  EXPECT_TRUE(ReusedOutputBlocks(first, Turn(4, 1, {1}), kBlock).empty());
}

TEST(ReusedOutputBlocksTest, PromptIsPaddedToItsBlocksAsTheReplaySubmitsIt) {
  // `in` below the block-covered tokens: the replay submits 8 prompt tokens, so the KV covers
  // 8 + 6 - 1 = 13 tokens, blocks up to 13 / 4 = 3.
  EXPECT_EQ(ReusedOutputBlocks(Turn(5, 6, {1, 2}), Turn(20, 1, {1, 2, 3, 4, 5}), kBlock),
            (OutputBlocks{2, 3}));
  // No output recorded: the engine still generates one token, whose KV is never computed.
  EXPECT_TRUE(ReusedOutputBlocks(Turn(8, 0, {1, 2}), Turn(20, 1, {1, 2, 3, 4, 5}), kBlock).empty());
}

TEST(ReusedOutputKeysTest, KeysAreTheNextTurnsChainFromTheFirstOutputBlock) {
  const kv::BlockKeyHasher hasher(3);
  const BlockKeysOf keys_of = [&](std::span<const uint64_t> ids) {
    return hasher.KeysFromBlockIds(ids, /*extra_key=*/9);
  };
  const WekaRequest first = Turn(8, 9, {1, 2});
  const WekaRequest second = Turn(21, 5, {1, 2, 3, 4, 5});
  const std::vector<kv::BlockKey> next_keys = keys_of(second.hash_ids);
  EXPECT_THAT(ReusedOutputKeys(first, second, kBlock, keys_of),
              ElementsAreArray(next_keys.begin() + 2, next_keys.begin() + 4));
  EXPECT_THAT(ReusedOutputKeys(first, Turn(20, 1, {7, 8, 9, 10, 11}), kBlock, keys_of), IsEmpty());
}

}  // namespace
}  // namespace agentkv::sim
