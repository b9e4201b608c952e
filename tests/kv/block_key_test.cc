#include "agentkv/kv/block_key.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cstdint>
#include <set>
#include <sstream>
#include <vector>

namespace agentkv::kv {
namespace {

using ::testing::ElementsAreArray;
using ::testing::IsEmpty;
using ::testing::SizeIs;

// Tokens first, first+1, ..., first+n-1.
std::vector<int32_t> Tokens(int32_t first, int32_t n) {
  std::vector<int32_t> t;
  for (int32_t i = 0; i < n; ++i) t.push_back(first + i);
  return t;
}

class BlockKeyTest : public ::testing::Test {
 protected:
  static constexpr int32_t kTokensPerBlock = 4;
  BlockKeyHasher hasher_{/*seed=*/42};
};

TEST_F(BlockKeyTest, OneKeyPerFullBlockInChainOrder) {
  const std::vector<int32_t> tokens = Tokens(100, 12);
  const std::vector<BlockKey> keys = hasher_.KeysFromTokens(tokens, kTokensPerBlock);
  ASSERT_THAT(keys, SizeIs(3));
  // Each key chains on the previous one, starting from the root of extra key 0.
  BlockKey parent = hasher_.RootKey();
  for (size_t i = 0; i < keys.size(); ++i) {
    const std::span<const int32_t> block(tokens.data() + i * kTokensPerBlock, kTokensPerBlock);
    EXPECT_EQ(keys[i], BlockKeyHasher::TokenBlockKey(parent, block)) << "block " << i;
    parent = keys[i];
  }
  EXPECT_EQ(std::set<BlockKey>(keys.begin(), keys.end()).size(), keys.size());
}

// Blocks of 1, 16 and 32 tokens are hashed by an unrolled path in batches, other sizes (64
// among them) by the general loop; the batch and the one-block derivations must agree for each, and
// every token of a block must count: a change at any position, or two 8-byte words traded, gives
// another key.
TEST_F(BlockKeyTest, EveryBlockSizeChainsTheSameWayAndEveryTokenCounts) {
  for (const int32_t size : {16, 32, 24, 1, 64, 63}) {
    SCOPED_TRACE(testing::Message() << size << " tokens per block");
    const std::vector<int32_t> tokens = Tokens(5000, 3 * size);
    const std::vector<BlockKey> keys = hasher_.KeysFromTokens(tokens, size);
    ASSERT_THAT(keys, SizeIs(3));
    BlockKey parent = hasher_.RootKey();
    for (size_t i = 0; i < keys.size(); ++i) {
      const std::span<const int32_t> block(tokens.data() + i * static_cast<size_t>(size),
                                           static_cast<size_t>(size));
      EXPECT_EQ(keys[i], BlockKeyHasher::TokenBlockKey(parent, block)) << "block " << i;
      parent = keys[i];
    }
    const std::vector<int32_t> base = Tokens(7, size);
    const BlockKey root = hasher_.RootKey();
    std::set<BlockKey> seen = {BlockKeyHasher::TokenBlockKey(root, base)};
    for (int32_t pos = 0; pos < size; ++pos) {
      for (const int32_t value : {0, 1, 8, 1 << 20, (1 << 30) - 1}) {
        std::vector<int32_t> changed = base;
        if (changed[static_cast<size_t>(pos)] == value) continue;
        changed[static_cast<size_t>(pos)] = value;
        EXPECT_TRUE(seen.insert(BlockKeyHasher::TokenBlockKey(root, changed)).second)
            << "position " << pos << " set to " << value;
      }
    }
    // The two 8-byte words of each 16 bytes traded (tokens 4k, 4k+1 with 4k+2, 4k+3).
    for (int32_t lane = 0; lane + 4 <= size; lane += 4) {
      std::vector<int32_t> traded = base;
      std::swap(traded[static_cast<size_t>(lane)], traded[static_cast<size_t>(lane + 2)]);
      std::swap(traded[static_cast<size_t>(lane + 1)], traded[static_cast<size_t>(lane + 3)]);
      EXPECT_NE(BlockKeyHasher::TokenBlockKey(root, traded),
                BlockKeyHasher::TokenBlockKey(root, base))
          << "lane at token " << lane;
    }
  }
}

TEST_F(BlockKeyTest, ManyRandomBlocksGetDistinctKeys) {
  // 200,000 blocks of 16 random token ids below a 256K vocabulary, all under one parent.
  uint64_t state = 12345;
  auto next = [&state] {
    state += 0x9E3779B97F4A7C15ULL;
    uint64_t z = state;
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ULL;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBULL;
    return z ^ (z >> 31);
  };
  std::set<uint64_t> keys;
  std::vector<int32_t> block(16);
  for (int i = 0; i < 200'000; ++i) {
    for (int32_t& t : block) t = static_cast<int32_t>(next() % 262'144);
    keys.insert(BlockKeyHasher::TokenBlockKey(hasher_.RootKey(), block).value());
  }
  EXPECT_EQ(keys.size(), 200'000u);
}

TEST_F(BlockKeyTest, SamePrefixGivesSameLeadingKeys) {
  std::vector<int32_t> a = Tokens(0, 16);
  std::vector<int32_t> b = a;
  b[13] = 999;  // Differs only in block 3.
  const std::vector<BlockKey> ka = hasher_.KeysFromTokens(a, kTokensPerBlock);
  const std::vector<BlockKey> kb = hasher_.KeysFromTokens(b, kTokensPerBlock);
  ASSERT_THAT(ka, SizeIs(4));
  ASSERT_THAT(kb, SizeIs(4));
  EXPECT_EQ(ka[0], kb[0]);
  EXPECT_EQ(ka[1], kb[1]);
  EXPECT_EQ(ka[2], kb[2]);
  EXPECT_NE(ka[3], kb[3]);
}

TEST_F(BlockKeyTest, ChangingAnEarlierBlockChangesEveryLaterKey) {
  std::vector<int32_t> a = Tokens(0, 20);
  std::vector<int32_t> b = a;
  b[5] = -1;  // Block 1 differs; blocks 2.. have equal tokens but a different parent.
  const std::vector<BlockKey> ka = hasher_.KeysFromTokens(a, kTokensPerBlock);
  const std::vector<BlockKey> kb = hasher_.KeysFromTokens(b, kTokensPerBlock);
  ASSERT_THAT(ka, SizeIs(5));
  ASSERT_THAT(kb, SizeIs(5));
  EXPECT_EQ(ka[0], kb[0]);
  for (size_t i = 1; i < ka.size(); ++i) EXPECT_NE(ka[i], kb[i]) << "block " << i;
}

TEST_F(BlockKeyTest, EqualBlocksUnderDifferentParentsGetDifferentKeys) {
  // The same four tokens twice in a row: position in the chain, not content alone, decides.
  const std::vector<int32_t> tokens = {7, 7, 7, 7, 7, 7, 7, 7};
  const std::vector<BlockKey> keys = hasher_.KeysFromTokens(tokens, kTokensPerBlock);
  ASSERT_THAT(keys, SizeIs(2));
  EXPECT_NE(keys[0], keys[1]);
}

TEST_F(BlockKeyTest, PartialTrailingBlockGetsNoKey) {
  EXPECT_THAT(hasher_.KeysFromTokens(Tokens(0, 3), kTokensPerBlock), IsEmpty());
  EXPECT_THAT(hasher_.KeysFromTokens(Tokens(0, 0), kTokensPerBlock), IsEmpty());
  const std::vector<BlockKey> full = hasher_.KeysFromTokens(Tokens(0, 8), kTokensPerBlock);
  const std::vector<BlockKey> with_partial = hasher_.KeysFromTokens(Tokens(0, 11), kTokensPerBlock);
  EXPECT_THAT(with_partial, ElementsAreArray(full));
}

TEST_F(BlockKeyTest, TokensPerBlockOneKeysEveryToken) {
  const std::vector<BlockKey> keys = hasher_.KeysFromTokens(Tokens(0, 5), 1);
  ASSERT_THAT(keys, SizeIs(5));
  const std::vector<int32_t> first = {0};
  EXPECT_EQ(keys[0], BlockKeyHasher::TokenBlockKey(hasher_.RootKey(), first));
}

TEST_F(BlockKeyTest, SeedChangesEveryKey) {
  const BlockKeyHasher other(43);
  EXPECT_NE(hasher_.RootKey(), other.RootKey());
  const std::vector<BlockKey> a = hasher_.KeysFromTokens(Tokens(0, 12), kTokensPerBlock);
  const std::vector<BlockKey> b = other.KeysFromTokens(Tokens(0, 12), kTokensPerBlock);
  ASSERT_THAT(b, SizeIs(a.size()));
  for (size_t i = 0; i < a.size(); ++i) EXPECT_NE(a[i], b[i]) << "block " << i;
  const std::vector<uint64_t> ids = {1, 2, 3};
  const std::vector<BlockKey> ia = hasher_.KeysFromBlockIds(ids);
  const std::vector<BlockKey> ib = other.KeysFromBlockIds(ids);
  for (size_t i = 0; i < ia.size(); ++i) EXPECT_NE(ia[i], ib[i]) << "block " << i;
}

TEST_F(BlockKeyTest, ExtraKeyChangesEveryKeyAndEntersOnlyThroughTheRoot) {
  const std::vector<int32_t> tokens = Tokens(0, 12);
  const std::vector<BlockKey> plain = hasher_.KeysFromTokens(tokens, kTokensPerBlock);
  const std::vector<BlockKey> salted = hasher_.KeysFromTokens(tokens, kTokensPerBlock, 7);
  ASSERT_THAT(salted, SizeIs(3));
  for (size_t i = 0; i < plain.size(); ++i) EXPECT_NE(plain[i], salted[i]) << "block " << i;
  EXPECT_NE(hasher_.RootKey(0), hasher_.RootKey(7));
  EXPECT_NE(hasher_.RootKey(7), hasher_.RootKey(8));
  // The salt is hashed into the root only (vLLM: cache_salt in block 0 only): later blocks
  // chain on their parent exactly as an unsalted chain does.
  BlockKey parent = hasher_.RootKey(7);
  for (size_t i = 0; i < salted.size(); ++i) {
    const std::span<const int32_t> block(tokens.data() + i * kTokensPerBlock, kTokensPerBlock);
    EXPECT_EQ(salted[i], BlockKeyHasher::TokenBlockKey(parent, block)) << "block " << i;
    parent = salted[i];
  }
}

TEST_F(BlockKeyTest, AppendKeysFromTokensAppendsAfterExistingKeys) {
  std::vector<BlockKey> out = {BlockKey(1), BlockKey(2)};
  hasher_.AppendKeysFromTokens(Tokens(0, 9), kTokensPerBlock, 3, out);
  const std::vector<BlockKey> fresh = hasher_.KeysFromTokens(Tokens(0, 9), kTokensPerBlock, 3);
  ASSERT_THAT(out, SizeIs(4));
  EXPECT_EQ(out[0], BlockKey(1));
  EXPECT_EQ(out[1], BlockKey(2));
  EXPECT_EQ(out[2], fresh[0]);
  EXPECT_EQ(out[3], fresh[1]);
}

TEST_F(BlockKeyTest, BlockIdChainsLikeTokenChains) {
  const std::vector<uint64_t> ids = {10, 20, 30};
  const std::vector<BlockKey> keys = hasher_.KeysFromBlockIds(ids);
  ASSERT_THAT(keys, SizeIs(3));
  BlockKey parent = hasher_.RootKey();
  for (size_t i = 0; i < ids.size(); ++i) {
    EXPECT_EQ(keys[i], BlockKeyHasher::IdBlockKey(parent, ids[i])) << "block " << i;
    parent = keys[i];
  }
  // A different earlier id changes every later key; a different extra key changes all.
  const std::vector<uint64_t> other_ids = {11, 20, 30};
  const std::vector<BlockKey> other = hasher_.KeysFromBlockIds(other_ids);
  for (size_t i = 0; i < ids.size(); ++i) EXPECT_NE(keys[i], other[i]) << "block " << i;
  const std::vector<BlockKey> salted = hasher_.KeysFromBlockIds(ids, 5);
  for (size_t i = 0; i < ids.size(); ++i) EXPECT_NE(keys[i], salted[i]) << "block " << i;
  EXPECT_THAT(hasher_.KeysFromBlockIds({}), IsEmpty());
}

TEST_F(BlockKeyTest, ChainsAreDeterministicAcrossHashersWithTheSameSeed) {
  // Two ranks build their own hasher from the same seed and must agree on every key.
  const BlockKeyHasher rank0(0xC0FFEE);
  const BlockKeyHasher rank1(0xC0FFEE);
  const std::vector<int32_t> tokens = Tokens(-50, 64);
  EXPECT_EQ(rank0.RootKey(9), rank1.RootKey(9));
  EXPECT_EQ(rank0.KeysFromTokens(tokens, 8, 9), rank1.KeysFromTokens(tokens, 8, 9));
  const std::vector<uint64_t> ids = {3, 1, 4, 1, 5, 9, 2, 6};
  EXPECT_EQ(rank0.KeysFromBlockIds(ids, 9), rank1.KeysFromBlockIds(ids, 9));
  // A copy is an equal hasher.
  const BlockKeyHasher copy = rank0;
  EXPECT_EQ(copy.KeysFromTokens(tokens, 8), rank1.KeysFromTokens(tokens, 8));
}

TEST_F(BlockKeyTest, TokenAndIdDerivationsDoNotAlias) {
  // A block identified by id v and a one-token block of token v under the same parent are
  // different blocks.
  const BlockKey root = hasher_.RootKey();
  const std::vector<int32_t> token = {5};
  EXPECT_NE(BlockKeyHasher::IdBlockKey(root, 5), BlockKeyHasher::TokenBlockKey(root, token));
}

TEST_F(BlockKeyTest, PrintsAsHex) {
  std::ostringstream os;
  os << BlockKey(0xabc);
  EXPECT_EQ(os.str(), "0xabc");
  std::ostringstream after;
  after << BlockKey(255) << " " << 255;  // The stream is back in decimal afterwards.
  EXPECT_EQ(after.str(), "0xff 255");
}

TEST_F(BlockKeyTest, HashOfAKeyIsItsValue) {
  EXPECT_EQ(std::hash<BlockKey>()(BlockKey(12345)), 12345u);
  EXPECT_LT(BlockKey(1), BlockKey(2));
}

}  // namespace
}  // namespace agentkv::kv
