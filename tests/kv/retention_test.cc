#include "agentkv/kv/retention.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <optional>
#include <string>

namespace agentkv::kv {
namespace {

using ::testing::HasSubstr;

TokenRangeRetention Range(int64_t start, std::optional<int64_t> end, Priority priority,
                          std::optional<int64_t> duration = std::nullopt) {
  TokenRangeRetention r;
  r.token_start = start;
  r.token_end = end;
  r.priority = priority;
  if (duration.has_value()) r.duration = Step(*duration);
  return r;
}

void ExpectInvalid(const RetentionConfig& config, const std::string& field,
                   const std::string& value) {
  const Status s = config.Validate();
  EXPECT_EQ(s.code(), StatusCode::kInvalidArgument) << s;
  EXPECT_THAT(s.message(), HasSubstr(field));
  EXPECT_THAT(s.message(), HasSubstr(value));
}

TEST(RetentionTest, DefaultsMatchTensorRtLlm) {
  EXPECT_EQ(kMinPriority, 0);
  EXPECT_EQ(kMaxPriority, 100);
  EXPECT_EQ(kDefaultPriority, 35);
  const RetentionConfig config;
  EXPECT_TRUE(config.token_ranges.empty());
  EXPECT_EQ(config.decode_priority, 35);
  EXPECT_FALSE(config.decode_duration.has_value());
  EXPECT_TRUE(config.Validate().ok());
  const TokenRangeRetention range;
  EXPECT_EQ(range.token_start, 0);
  EXPECT_FALSE(range.token_end.has_value());
  EXPECT_EQ(range.priority, 35);
  EXPECT_FALSE(range.duration.has_value());
}

TEST(RetentionTest, ValidConfigsPass) {
  RetentionConfig config;
  config.token_ranges = {Range(0, 10, 0), Range(10, 20, 100, 1), Range(20, std::nullopt, 50)};
  config.decode_priority = 100;
  config.decode_duration = Step(1);
  EXPECT_TRUE(config.Validate().ok()) << config.Validate();
  // Ranges need not be sorted.
  config.token_ranges = {Range(30, std::nullopt, 50), Range(0, 30, 10)};
  EXPECT_TRUE(config.Validate().ok()) << config.Validate();
}

TEST(RetentionTest, RangePriorityOutOfRangeNamesFieldAndValue) {
  RetentionConfig config;
  config.token_ranges = {Range(0, 4, 35), Range(4, 8, 101)};
  ExpectInvalid(config, "token_ranges[1].priority", "101");
  config.token_ranges = {Range(0, 4, -1)};
  ExpectInvalid(config, "token_ranges[0].priority", "-1");
}

TEST(RetentionTest, NegativeStartNamesFieldAndValue) {
  RetentionConfig config;
  config.token_ranges = {Range(-3, 4, 35)};
  ExpectInvalid(config, "token_ranges[0].token_start", "-3");
}

TEST(RetentionTest, EmptyOrInvertedRangeNamesFieldAndValue) {
  RetentionConfig config;
  config.token_ranges = {Range(8, 8, 35)};
  ExpectInvalid(config, "token_ranges[0].token_end", "8");
  config.token_ranges = {Range(0, 2, 35), Range(8, 5, 35)};
  ExpectInvalid(config, "token_ranges[1].token_end", "5");
}

TEST(RetentionTest, NonPositiveDurationNamesFieldAndValue) {
  RetentionConfig config;
  config.token_ranges = {Range(0, 4, 35, 0)};
  ExpectInvalid(config, "token_ranges[0].duration", "0");
  config.token_ranges = {Range(0, 4, 35, -2)};
  ExpectInvalid(config, "token_ranges[0].duration", "-2");
}

TEST(RetentionTest, OverlappingRangesAreRejected) {
  RetentionConfig config;
  config.token_ranges = {Range(0, 10, 35), Range(9, 20, 35)};
  ExpectInvalid(config, "token_ranges overlap", "9");
  // An open-ended range overlaps everything after its start, regardless of listing order.
  config.token_ranges = {Range(50, 60, 35), Range(40, std::nullopt, 35)};
  ExpectInvalid(config, "token_ranges overlap", "50");
  // Touching ranges do not overlap.
  config.token_ranges = {Range(0, 10, 35), Range(10, 20, 35)};
  EXPECT_TRUE(config.Validate().ok()) << config.Validate();
}

TEST(RetentionTest, DecodeFieldsOutOfRangeNameFieldAndValue) {
  RetentionConfig config;
  config.decode_priority = 200;
  ExpectInvalid(config, "decode_priority", "200");
  config.decode_priority = -5;
  ExpectInvalid(config, "decode_priority", "-5");
  config.decode_priority = 35;
  config.decode_duration = Step(0);
  ExpectInvalid(config, "decode_duration", "0");
}

TEST(RetentionForBlockTest, BlockTakesTheRangeOfItsFirstToken) {
  // 4 tokens per block, 16 prompt tokens. Range [2, 9) holds the first tokens of blocks 1
  // (token 4) and 2 (token 8); block 0 starts at token 0, outside it, even though its tokens
  // 2 and 3 are inside.
  RetentionConfig config;
  config.token_ranges = {Range(2, 9, 60, 7)};
  EXPECT_FALSE(RetentionForBlock(config, 0, 4, 16).priority.has_value());
  const BlockRetention b1 = RetentionForBlock(config, 1, 4, 16);
  EXPECT_EQ(b1.priority, 60);
  EXPECT_EQ(b1.duration, Step(7));
  EXPECT_EQ(RetentionForBlock(config, 2, 4, 16).priority, 60);
  const BlockRetention b3 = RetentionForBlock(config, 3, 4, 16);
  EXPECT_FALSE(b3.priority.has_value());
  EXPECT_FALSE(b3.duration.has_value());
}

TEST(RetentionForBlockTest, RangeEndIsExclusive) {
  RetentionConfig config;
  config.token_ranges = {Range(0, 8, 60)};
  EXPECT_EQ(RetentionForBlock(config, 1, 4, 100).priority, 60);             // token 4
  EXPECT_FALSE(RetentionForBlock(config, 2, 4, 100).priority.has_value());  // token 8
}

TEST(RetentionForBlockTest, OpenRangeRunsToTheEndOfThePrompt) {
  RetentionConfig config;
  config.token_ranges = {Range(4, std::nullopt, 70)};
  config.decode_priority = 10;
  EXPECT_FALSE(RetentionForBlock(config, 0, 4, 10).priority.has_value());
  EXPECT_EQ(RetentionForBlock(config, 1, 4, 10).priority, 70);
  // Block 2 holds prompt tokens 8, 9 and decode tokens 10, 11: its first token is prompt.
  EXPECT_EQ(RetentionForBlock(config, 2, 4, 10).priority, 70);
  EXPECT_EQ(RetentionForBlock(config, 3, 4, 10).priority, 10);
}

TEST(RetentionForBlockTest, BlocksStartingAfterThePromptAreDecodeBlocks) {
  RetentionConfig config;
  config.token_ranges = {Range(0, std::nullopt, 90, 3)};
  config.decode_priority = 20;
  config.decode_duration = Step(5);
  // Prompt of exactly 8 tokens: block 2 (token 8) is the first decode block.
  EXPECT_EQ(RetentionForBlock(config, 1, 4, 8).priority, 90);
  EXPECT_EQ(RetentionForBlock(config, 1, 4, 8).duration, Step(3));
  const BlockRetention decode = RetentionForBlock(config, 2, 4, 8);
  EXPECT_EQ(decode.priority, 20);
  EXPECT_EQ(decode.duration, Step(5));
  // A decode block gets the decode priority even when the prompt ranges would cover it.
  EXPECT_EQ(RetentionForBlock(config, 50, 4, 8).priority, 20);
  // A prompt of zero tokens makes every block a decode block.
  EXPECT_EQ(RetentionForBlock(config, 0, 4, 0).priority, 20);
}

TEST(RetentionForBlockTest, DefaultDecodeRetentionStillSetsThePriority) {
  // A config with only prompt ranges still gives decode blocks the (default) decode priority.
  RetentionConfig config;
  config.token_ranges = {Range(0, 4, 80)};
  const BlockRetention decode = RetentionForBlock(config, 3, 4, 8);
  EXPECT_EQ(decode.priority, kDefaultPriority);
  EXPECT_FALSE(decode.duration.has_value());
}

TEST(RetentionForBlockTest, SecondOfSeveralRangesIsFound) {
  RetentionConfig config;
  config.token_ranges = {Range(0, 4, 11), Range(4, 8, 22), Range(12, 16, 33)};
  EXPECT_EQ(RetentionForBlock(config, 0, 4, 16).priority, 11);
  EXPECT_EQ(RetentionForBlock(config, 1, 4, 16).priority, 22);
  EXPECT_FALSE(RetentionForBlock(config, 2, 4, 16).priority.has_value());  // gap [8, 12)
  EXPECT_EQ(RetentionForBlock(config, 3, 4, 16).priority, 33);
}

}  // namespace
}  // namespace agentkv::kv
