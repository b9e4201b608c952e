// End-to-end tests of the `agentkv` binary: exit codes, the one-line error format, and the
// cache-curve table on a hand-computable trace. Each test spawns the built binary
// (AGENTKV_BINARY) through the shell with stdout and stderr captured in temporary files.
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <sys/wait.h>

#include <algorithm>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>

namespace agentkv {
namespace {

using ::testing::HasSubstr;
using ::testing::StartsWith;

struct RunResult {
  int exit_code = -1;
  std::string out;
  std::string err;
};

// A temporary path private to the running test, so that tests may run in parallel.
std::filesystem::path TempPath(const std::string& name) {
  const std::string test = ::testing::UnitTest::GetInstance()->current_test_info()->name();
  return std::filesystem::path(::testing::TempDir()) / ("agentkv_cli_test_" + test + "_" + name);
}

std::string ReadFile(const std::filesystem::path& path) {
  std::ifstream in(path);
  std::ostringstream text;
  text << in.rdbuf();
  return text.str();
}

void WriteFile(const std::filesystem::path& path, const std::string& text) {
  std::ofstream out(path);
  out << text;
}

// Runs `agentkv <args>` (args are passed through the shell as written).
RunResult RunAgentkv(const std::string& args) {
  const std::filesystem::path out = TempPath("stdout.txt");
  const std::filesystem::path err = TempPath("stderr.txt");
  const std::string command = std::string("'") + AGENTKV_BINARY + "' " + args + " >'" +
                              out.string() + "' 2>'" + err.string() + "'";
  const int status = std::system(command.c_str());
  RunResult result;
  result.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  result.out = ReadFile(out);
  result.err = ReadFile(err);
  return result;
}

// Asserts the failure contract: exit code 2 and exactly one `error:` line on stderr.
void ExpectOneErrorLine(const RunResult& r) {
  EXPECT_EQ(r.exit_code, 2) << r.err;
  EXPECT_EQ(std::count(r.err.begin(), r.err.end(), '\n'), 1) << r.err;
  EXPECT_THAT(r.err, StartsWith("agentkv cache-curve: error: "));
}

constexpr const char* kValidLine =
    R"({"timestamp": 0, "input_length": 1024, "output_length": 1, "hash_ids": [1, 2]})";

TEST(AgentkvCliTest, MissingTraceFileIsOneErrorLine) {
  const std::filesystem::path missing = TempPath("does_not_exist.jsonl");
  const RunResult r = RunAgentkv("cache-curve --trace '" + missing.string() + "'");
  ExpectOneErrorLine(r);
  EXPECT_EQ(r.err, "agentkv cache-curve: error: cannot open trace file \"" + missing.string() +
                       "\": No such file or directory\n");
  EXPECT_EQ(r.out, "");
}

TEST(AgentkvCliTest, MalformedLineNamesFileLineAndField) {
  const std::filesystem::path trace = TempPath("bad_field.jsonl");
  WriteFile(trace,
            std::string(kValidLine) + "\n" +
                R"({"timestamp": 0, "input_length": 5, "output_length": 1, "hash_ids": [1, "x"]})" +
                "\n");
  const RunResult r = RunAgentkv("cache-curve --trace '" + trace.string() + "'");
  ExpectOneErrorLine(r);
  EXPECT_THAT(r.err, HasSubstr(trace.string() + ":2: field \"hash_ids\": expected an array of "
                                                "non-negative integers"));
  std::filesystem::remove(trace);
}

TEST(AgentkvCliTest, MalformedJsonNamesFileAndLine) {
  const std::filesystem::path trace = TempPath("bad_json.jsonl");
  WriteFile(trace, std::string(kValidLine) + "\n\n{\"timestamp\": \n");
  const RunResult r = RunAgentkv("cache-curve --trace '" + trace.string() + "'");
  ExpectOneErrorLine(r);
  EXPECT_THAT(r.err, HasSubstr(trace.string() + ":3: malformed JSON: "));
  std::filesystem::remove(trace);
}

TEST(AgentkvCliTest, NegativeCapacityBlocksNamesTheFlagAndValue) {
  const std::filesystem::path trace = TempPath("neg_capacity.jsonl");
  WriteFile(trace, std::string(kValidLine) + "\n");
  const RunResult r =
      RunAgentkv("cache-curve --trace '" + trace.string() + "' --capacity-blocks -5");
  ExpectOneErrorLine(r);
  EXPECT_THAT(r.err, HasSubstr("--capacity-blocks"));
  EXPECT_THAT(r.err, HasSubstr("got -5"));
  std::filesystem::remove(trace);
}

TEST(AgentkvCliTest, ParseErrorsUseTheSameFormat) {
  ExpectOneErrorLine(RunAgentkv("cache-curve"));  // --trace is required.
  ExpectOneErrorLine(RunAgentkv("cache-curve --trace x --no-such-flag"));
  ExpectOneErrorLine(RunAgentkv("cache-curve --trace x --capacity-blocks abc"));

  const RunResult no_command = RunAgentkv("");
  EXPECT_EQ(no_command.exit_code, 2);
  EXPECT_THAT(no_command.err, StartsWith("agentkv: error: "));
}

TEST(AgentkvCliTest, HelpExplainsTheOutput) {
  const RunResult r = RunAgentkv("cache-curve --help");
  EXPECT_EQ(r.exit_code, 0) << r.err;
  EXPECT_THAT(r.out, HasSubstr("--trace"));
  EXPECT_THAT(r.out, HasSubstr("hit_ratio"));
}

// The hand scenario of cache_curve_test: 4 hits of 10 blocks, 3 evictions at capacity 2.
TEST(AgentkvCliTest, PrintsTheCurveTable) {
  const std::filesystem::path trace = TempPath("hand.jsonl");
  std::string text;
  for (const char* ids : {"[1, 2]", "[1, 3]", "[1, 2]", "[1, 2, 4]", "[5]"}) {
    text += std::string(R"({"timestamp": 0, "input_length": 1, "output_length": 1, "hash_ids": )") +
            ids + "}\n";
  }
  WriteFile(trace, text);
  const RunResult r =
      RunAgentkv("cache-curve --trace '" + trace.string() + "' --capacity-blocks 2 --quiet");
  EXPECT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(r.err, "");
  EXPECT_THAT(r.out, HasSubstr("5 requests, 5 unique blocks"));
  EXPECT_THAT(r.out, HasSubstr("capacity%"));
  EXPECT_THAT(r.out, HasSubstr("hit_ratio"));
  // capacity% blocks hits total hit_ratio evictions
  EXPECT_THAT(r.out, ::testing::ContainsRegex("40\\.00 +2 +4 +10 +0\\.4000 +3\n"));
  std::filesystem::remove(trace);
}

}  // namespace
}  // namespace agentkv
