#include "agentkv/load/prompt_book.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <vector>

#include "agentkv/base/rng.h"

namespace agentkv::load {
namespace {

using testing::ElementsAreArray;

std::vector<kv::BlockKey> Keys(std::initializer_list<uint64_t> values) {
  std::vector<kv::BlockKey> keys;
  for (uint64_t v : values) keys.emplace_back(v);
  return keys;
}

std::vector<int64_t> Slice(const std::vector<int64_t>& ids, size_t begin, size_t end) {
  return {ids.begin() + static_cast<std::ptrdiff_t>(begin),
          ids.begin() + static_cast<std::ptrdiff_t>(end)};
}

TEST(PromptBookTest, RefusesABadBlockSizeOrVocabulary) {
  EXPECT_EQ(PromptBook::Create(0, 32000, 1).status().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(PromptBook::Create(4, PromptBook::kFirstToken, 1).status().code(),
            StatusCode::kInvalidArgument);
  EXPECT_EQ(PromptBook::Create(4, PromptBook::kMaxVocabSize + 1, 1).status().code(),
            StatusCode::kInvalidArgument);
  EXPECT_TRUE(PromptBook::Create(4, PromptBook::kFirstToken + 1, 1).ok());
  EXPECT_TRUE(PromptBook::Create(4, PromptBook::kMaxVocabSize, 1).ok());
}

TEST(PromptBookTest, EqualKeyChainsGiveEqualPrefixesAndTailsAreUnique) {
  const PromptBook book = PromptBook::Create(4, 32000, 7).value();
  const std::vector<int64_t> a = book.Prompt(Keys({11, 12, 13}), 14, /*request_salt=*/1);
  const std::vector<int64_t> b = book.Prompt(Keys({11, 12, 99}), 14, /*request_salt=*/2);
  ASSERT_EQ(a.size(), 14u);
  ASSERT_EQ(b.size(), 14u);
  EXPECT_EQ(Slice(a, 0, 8), Slice(b, 0, 8));
  EXPECT_NE(Slice(a, 8, 12), Slice(b, 8, 12));
  // The two tail tokens past the keyed blocks belong to the request.
  EXPECT_NE(Slice(a, 12, 14), Slice(b, 12, 14));
  for (int64_t id : a) {
    EXPECT_GE(id, PromptBook::kFirstToken);
    EXPECT_LT(id, 32000);
  }
  // Ids cover the range: a vocabulary of two ids gives both.
  const PromptBook tiny = PromptBook::Create(64, PromptBook::kFirstToken + 2, 7).value();
  const std::vector<int64_t> ids = tiny.Prompt(Keys({1}), 64, 0);
  EXPECT_EQ(*std::min_element(ids.begin(), ids.end()), PromptBook::kFirstToken);
  EXPECT_EQ(*std::max_element(ids.begin(), ids.end()), PromptBook::kFirstToken + 1);
  // A prompt shorter than its blocks stops at its length.
  EXPECT_EQ(book.Prompt(Keys({11, 12, 13}), 6, 1), Slice(a, 0, 6));
}

TEST(PromptBookTest, DifferentSaltsShareNothing) {
  const PromptBook one = PromptBook::Create(4, 32000, 1).value();
  const PromptBook two = PromptBook::Create(4, 32000, 2).value();
  EXPECT_NE(one.Prompt(Keys({5}), 4, 0), two.Prompt(Keys({5}), 4, 0));
}

TEST(PromptBookTest, TheNextTurnResendsTheAnswerTheServerGenerated) {
  PromptBook book = PromptBook::Create(4, 32000, 3).value();
  // Turn 1: two full blocks and 2 tail tokens; the server answers 7 tokens. Prompt + output is
  // 17 tokens, of which 16 have KV: blocks 2 and 3 (positions 8-15) are the answer's.
  const std::vector<int64_t> prompt = book.Prompt(Keys({1, 2}), 10, 100);
  const std::vector<int64_t> output = {5001, 5002, 5003, 5004, 5005, 5006, 5007};
  book.RememberAnswer(Keys({3, 4, 5}), /*first_block=*/2, prompt, output, SessionId(9));
  EXPECT_EQ(book.remembered_blocks(), 2);  // Block 4 would end with the last token: not kept.
  std::vector<int64_t> sent = prompt;
  sent.insert(sent.end(), output.begin(), output.end());
  // Turn 2 re-sends blocks 1-4 and adds its own.
  const std::vector<int64_t> next = book.Prompt(Keys({1, 2, 3, 4, 6}), 20, 101);
  EXPECT_THAT(Slice(next, 0, 16), ElementsAreArray(Slice(sent, 0, 16)));
  // Forgetting the session derives the blocks again.
  book.Forget(SessionId(9));
  EXPECT_EQ(book.remembered_blocks(), 0);
  EXPECT_NE(Slice(book.Prompt(Keys({1, 2, 3}), 12, 102), 8, 12), Slice(sent, 8, 12));
}

// Model: two prompts share a token prefix exactly as long as their key chains agree, whatever
// the answers remembered before.
TEST(PromptBookTest, SharedTokenPrefixFollowsSharedKeyPrefixOnRandomChains) {
  Rng rng(17);
  PromptBook book = PromptBook::Create(8, 50000, 5).value();
  for (int round = 0; round < 200; ++round) {
    std::vector<kv::BlockKey> a;
    std::vector<kv::BlockKey> b;
    const int64_t shared = rng.Uniform(0, 5);
    for (int64_t i = 0; i < shared; ++i) {
      a.emplace_back(static_cast<uint64_t>(rng.Uniform(0, 39)));
      b.push_back(a.back());
    }
    for (int64_t i = 0; i < 3; ++i) {
      a.emplace_back(static_cast<uint64_t>(rng.Uniform(1000, 1 << 30)));
      b.emplace_back(static_cast<uint64_t>(rng.Uniform(int64_t{1} << 31, int64_t{1} << 32)));
    }
    const std::vector<int64_t> pa = book.Prompt(a, static_cast<int64_t>(a.size()) * 8, 1);
    const std::vector<int64_t> pb = book.Prompt(b, static_cast<int64_t>(b.size()) * 8, 2);
    size_t common = 0;
    while (common < pa.size() && common < pb.size() && pa[common] == pb[common]) ++common;
    EXPECT_GE(common, static_cast<size_t>(shared) * 8);
    EXPECT_LT(common, static_cast<size_t>(shared + 1) * 8);
    if (rng.Uniform(0, 2) == 0) {
      book.RememberAnswer(std::vector<kv::BlockKey>(a.end() - 1, a.end()),
                          static_cast<int64_t>(a.size()) - 1, Slice(pa, 0, pa.size() - 8),
                          Slice(pa, pa.size() - 8, pa.size()), SessionId(round % 4));
    }
    if (round % 16 == 0) book.Forget(SessionId(round % 4));
  }
}

}  // namespace
}  // namespace agentkv::load
