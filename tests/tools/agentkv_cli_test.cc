// End-to-end tests of the `agentkv` binary: exit codes, the one-line error format, and the
// cache-curve table on a hand-computable trace. Each test spawns the built binary
// (AGENTKV_BINARY) through the shell with stdout and stderr captured in temporary files.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <filesystem>
#include <string>
#include <utility>
#include <vector>

#include "cli_test_support.h"

namespace agentkv {
namespace {

using cli_testing::RunResult;
using ::testing::HasSubstr;
using ::testing::Not;
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

TEST_F(AgentkvCliTest, AMissingOrUnknownCommandIsNamedWithTheValidOnes) {
  const std::string commands =
      "(commands: cache-curve, agentic-curve, replay, capacity, cost-model, compare, load, "
      "emulate, "
      "coordinator, gateway; see agentkv --help)\n";
  const std::vector<std::pair<std::string, std::string>> cases = {
      {"", "agentkv: error: a command is required " + commands},
      {"frobnicate", "agentkv: error: unknown command \"frobnicate\" " + commands},
      // A nested command names its own path and its own subcommands.
      {"emulate engin",
       "agentkv emulate: error: unknown command \"engin\" (commands: engine, router, fleet; "
       "see agentkv emulate --help)\n"},
  };
  for (const auto& [args, error] : cases) {
    const RunResult r = Run(args);
    EXPECT_EQ(r.exit_code, 2) << args;
    EXPECT_EQ(r.err, error) << args;
  }
  // A flag error inside a nested command is prefixed by the whole path.
  const RunResult flag = Run("emulate router --policy fastest");
  EXPECT_EQ(flag.exit_code, 2);
  EXPECT_THAT(flag.err, StartsWith("agentkv emulate router: error: --policy"));
}

TEST_F(AgentkvCliTest, VersionPrintsTheBuildsVersion) {
  const RunResult r = Run("--version");
  EXPECT_EQ(r.exit_code, 0) << r.err;
  EXPECT_THAT(r.out, StartsWith("agentkv "));
  // The project version: MAJOR.MINOR.PATCH.
  const std::string version = r.out.substr(8);
  EXPECT_EQ(std::count(version.begin(), version.end(), '.'), 2) << r.out;
  EXPECT_EQ(r.err, "");
}

// The help of an off-by-default flag names the flag only: no CLI11 "{false}" default value.
TEST_F(AgentkvCliTest, NegativeFlagsShowNoDefaultValueInHelp) {
  for (const char* command : {"emulate engine --help", "gateway --help"}) {
    const RunResult r = Run(command);
    EXPECT_EQ(r.exit_code, 0) << r.err;
    EXPECT_THAT(r.out, Not(HasSubstr("{false}"))) << command;
    EXPECT_THAT(r.out, Not(HasSubstr("{true}"))) << command;
  }
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
