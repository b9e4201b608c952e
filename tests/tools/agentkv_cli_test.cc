// End-to-end tests of the `agentkv` binary: exit codes, the one-line error format, and the
// cache-curve table on a hand-computable trace. Each test spawns the built binary
// (AGENTKV_BINARY) through the shell with stdout and stderr captured in temporary files.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <filesystem>
#include <string>

#include "cli_test_support.h"

namespace agentkv {
namespace {

using cli_testing::RunResult;
using ::testing::HasSubstr;
using ::testing::StartsWith;

class AgentkvCliTest : public cli_testing::CliTest {};

// The failure contract of cache-curve: one `error:` line on stderr.
void ExpectOneErrorLine(const RunResult& r) {
  cli_testing::ExpectOneErrorLine(r, "agentkv cache-curve: error: ");
}

constexpr const char* kValidLine =
    R"({"timestamp": 0, "input_length": 1024, "output_length": 1, "hash_ids": [1, 2]})";

TEST_F(AgentkvCliTest, MissingTraceFileIsOneErrorLine) {
  const std::string missing = (dir_ / "does_not_exist.jsonl").string();
  const RunResult r = Run("cache-curve --trace '" + missing + "'");
  ExpectOneErrorLine(r);
  EXPECT_EQ(r.err, "agentkv cache-curve: error: cannot open trace file \"" + missing +
                       "\": No such file or directory\n");
  EXPECT_EQ(r.out, "");
}

TEST_F(AgentkvCliTest, MalformedLineNamesFileLineAndField) {
  const std::string trace = WriteTrace(
      "bad_field.jsonl",
      std::string(kValidLine) + "\n" +
          R"({"timestamp": 0, "input_length": 5, "output_length": 1, "hash_ids": [1, "x"]})" +
          "\n");
  const RunResult r = Run("cache-curve --trace '" + trace + "'");
  ExpectOneErrorLine(r);
  EXPECT_THAT(r.err, HasSubstr(trace + ":2: field \"hash_ids\": expected an array of "
                                       "non-negative integers"));
}

TEST_F(AgentkvCliTest, MalformedJsonNamesFileAndLine) {
  const std::string trace =
      WriteTrace("bad_json.jsonl", std::string(kValidLine) + "\n\n{\"timestamp\": \n");
  const RunResult r = Run("cache-curve --trace '" + trace + "'");
  ExpectOneErrorLine(r);
  EXPECT_THAT(r.err, HasSubstr(trace + ":3: malformed JSON: "));
}

TEST_F(AgentkvCliTest, NegativeCapacityBlocksNamesTheFlagAndValue) {
  const std::string trace = WriteTrace("neg_capacity.jsonl", std::string(kValidLine) + "\n");
  const RunResult r = Run("cache-curve --trace '" + trace + "' --capacity-blocks -5");
  ExpectOneErrorLine(r);
  EXPECT_THAT(r.err, HasSubstr("--capacity-blocks"));
  EXPECT_THAT(r.err, HasSubstr("got -5"));
}

TEST_F(AgentkvCliTest, ParseErrorsUseTheSameFormat) {
  ExpectOneErrorLine(Run("cache-curve"));  // --trace is required.
  ExpectOneErrorLine(Run("cache-curve --trace x --no-such-flag"));
  ExpectOneErrorLine(Run("cache-curve --trace x --capacity-blocks abc"));

  const RunResult no_command = Run("");
  EXPECT_EQ(no_command.exit_code, 2);
  EXPECT_THAT(no_command.err, StartsWith("agentkv: error: "));
}

TEST_F(AgentkvCliTest, HelpExplainsTheOutput) {
  const RunResult r = Run("cache-curve --help");
  EXPECT_EQ(r.exit_code, 0) << r.err;
  EXPECT_THAT(r.out, HasSubstr("--trace"));
  EXPECT_THAT(r.out, HasSubstr("hit_ratio"));
}

// The hand scenario of cache_curve_test: 4 hits of 10 blocks, 3 evictions at capacity 2.
TEST_F(AgentkvCliTest, PrintsTheCurveTable) {
  std::string text;
  for (const char* ids : {"[1, 2]", "[1, 3]", "[1, 2]", "[1, 2, 4]", "[5]"}) {
    text += std::string(R"({"timestamp": 0, "input_length": 1536, "output_length": 1, )") +
            R"("hash_ids": )" + ids + "}\n";
  }
  const std::string trace = WriteTrace("hand.jsonl", text);
  const RunResult r = Run("cache-curve --trace '" + trace + "' --capacity-blocks 2 --quiet");
  EXPECT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(r.err, "");
  EXPECT_THAT(r.out, HasSubstr("5 requests, 5 unique blocks"));
  EXPECT_THAT(r.out, HasSubstr("capacity%"));
  EXPECT_THAT(r.out, HasSubstr("hit_ratio"));
  // capacity% blocks hits total hit_ratio evictions
  EXPECT_THAT(r.out, ::testing::ContainsRegex("40\\.00 +2 +4 +10 +0\\.4000 +3\n"));
}

}  // namespace
}  // namespace agentkv
