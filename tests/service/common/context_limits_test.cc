// Tests of ContextLimits: SGLang's two length checks and its max_new_tokens clamp, as a table
// of (context length, pool, input, max_new_tokens) -> outcome, and the exact messages.
#include "agentkv/service/common/context_limits.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cstdint>
#include <limits>
#include <optional>
#include <string>
#include <vector>

namespace agentkv::service {
namespace {

using ::testing::HasSubstr;

constexpr int64_t kInt64Max = std::numeric_limits<int64_t>::max();

TEST(ContextLimitsTest, DerivesSglangsLimitsFromTheContextAndThePool) {
  // Context 0 means the pool: max_req_len = pool - 1, max_req_input_len = pool - 6.
  ContextLimits pool_only = ContextLimits::Create(0, 1024).value();
  EXPECT_EQ(pool_only.context_length(), 1024);
  EXPECT_EQ(pool_only.max_req_len(), 1023);
  EXPECT_EQ(pool_only.max_req_input_len(), 1018);
  // A context longer than the pool: the pool bounds a request.
  ContextLimits long_context = ContextLimits::Create(131072, 4096).value();
  EXPECT_EQ(long_context.max_req_len(), 4095);
  EXPECT_EQ(long_context.max_req_input_len(), 4090);
  // A context shorter than the pool bounds it.
  EXPECT_EQ(ContextLimits::Create(2048, 1 << 20)->max_req_len(), 2047);
}

TEST(ContextLimitsTest, CreateRefusesOutOfRangeAndTinyPools) {
  EXPECT_THAT(ContextLimits::Create(-1, 1024).status().message(), HasSubstr("--context-length"));
  EXPECT_THAT(ContextLimits::Create(int64_t{1} << 41, 1024).status().message(),
              HasSubstr("--context-length"));
  EXPECT_THAT(ContextLimits::Create(0, 6).status().message(), HasSubstr("too small"));
  EXPECT_TRUE(ContextLimits::Create(0, 7).ok());
}

struct Row {
  int64_t context;
  int64_t pool;
  int64_t input;
  int64_t max_new;
  // The tokenizer's message (a substring), or "" when it accepts.
  std::string tokenizer_error;
  // Whether the scheduler refuses the input.
  bool scheduler_refuses;
  // The clamped max_new_tokens when both accept.
  int64_t clamped;
};

TEST(ContextLimitsTest, FollowsSglangsTokenizerThenSchedulerRules) {
  const std::vector<Row> table = {
      // Fits: unchanged.
      {0, 1024, 100, 128, "", false, 128},
      // Input + max_new_tokens reaching the context: the tokenizer's 400.
      {0, 1024, 100, 924,
       "Requested token count exceeds the model's maximum context length of "
       "1024 tokens. You requested a total of 1024 tokens: 100 tokens",
       false, 0},
      // 2^63-1: the exact total, no overflow.
      {0, 1024, 100, kInt64Max,
       "You requested a total of 9223372036854775907 tokens: 100 tokens from the input messages "
       "and 9223372036854775807 tokens for the completion",
       false, 0},
      // An input of the context length or more: the tokenizer's first message.
      {0, 1024, 1024, 1,
       "The input (1024 tokens) is longer than the model's context length (1024 "
       "tokens).",
       false, 0},
      // Within the context but over max_req_input_len (pool - 6): the scheduler's abort.
      {0, 1024, 1018, 0, "", true, 0},
      {0, 1024, 1017, 0, "", false, 0},
      // A long context over a small pool: the tokenizer accepts, the scheduler clamps.
      {131072, 4096, 100, 100000, "", false, 4095 - 100 - 1},
      {131072, 4096, 5000, 10, "", true, 0},
  };
  for (const Row& row : table) {
    SCOPED_TRACE(testing::Message() << "context " << row.context << " pool " << row.pool
                                    << " input " << row.input << " max_new " << row.max_new);
    const ContextLimits limits = ContextLimits::Create(row.context, row.pool).value();
    const Status tokenizer = limits.CheckTokenizer(row.input, row.max_new);
    if (!row.tokenizer_error.empty()) {
      EXPECT_EQ(tokenizer.code(), StatusCode::kInvalidArgument);
      EXPECT_THAT(tokenizer.message(), HasSubstr(row.tokenizer_error));
      continue;
    }
    ASSERT_TRUE(tokenizer.ok()) << tokenizer;
    const std::optional<std::string> refusal = limits.SchedulerRefusal(row.input);
    EXPECT_EQ(refusal.has_value(), row.scheduler_refuses);
    if (refusal.has_value()) {
      EXPECT_THAT(*refusal, HasSubstr("Input length (" + std::to_string(row.input) +
                                      " tokens) exceeds the maximum allowed length (" +
                                      std::to_string(limits.max_req_input_len()) + " tokens)"));
      continue;
    }
    EXPECT_EQ(limits.ClampMaxNewTokens(row.input, row.max_new), row.clamped);
  }
}

// Whatever the inputs, an accepted request fits the pool: input + clamped output stays below
// max_req_len, itself below the pool.
TEST(ContextLimitsTest, AcceptedRequestsAlwaysFitThePool) {
  for (int64_t context : {0, 64, 1000, 1 << 20}) {
    const ContextLimits limits = ContextLimits::Create(context, 512).value();
    for (int64_t input = 0; input < 1100; input += 7) {
      for (int64_t max_new : {int64_t{0}, int64_t{1}, int64_t{300}, int64_t{1} << 40, kInt64Max}) {
        if (!limits.CheckTokenizer(input, max_new).ok() || limits.SchedulerRefusal(input)) {
          continue;
        }
        const int64_t clamped = limits.ClampMaxNewTokens(input, max_new);
        EXPECT_GE(clamped, 0);
        EXPECT_LT(input + clamped, 512) << "context " << context << " input " << input;
      }
    }
  }
}

// The tokenizer rule alone, as the gateway applies it knowing only the context length: the
// bound itself refuses, one below passes; without max_new_tokens only the input is checked.
TEST(CheckContextLengthTest, RefusesWhatEveryEngineWouldRefuse) {
  EXPECT_TRUE(CheckContextLength(4096, 4095, std::nullopt).ok());
  EXPECT_EQ(CheckContextLength(4096, 4096, std::nullopt).message(),
            "The input (4096 tokens) is longer than the model's context length (4096 tokens).");
  EXPECT_TRUE(CheckContextLength(4096, 100, 3995).ok());
  EXPECT_EQ(CheckContextLength(4096, 100, 3996).message(),
            "Requested token count exceeds the model's maximum context length of 4096 tokens. "
            "You requested a total of 4096 tokens: 100 tokens from the input messages and 3996 "
            "tokens for the completion. Please reduce the number of tokens in the input "
            "messages or the completion to fit within the limit.");
  EXPECT_THAT(CheckContextLength(4096, 1, kInt64Max).message(),
              HasSubstr("You requested a total of 9223372036854775808 tokens"));
}

}  // namespace
}  // namespace agentkv::service
