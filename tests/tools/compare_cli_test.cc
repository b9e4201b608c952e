// End-to-end tests of `agentkv compare A.json B.json`: the table of two tiny results written by
// the test, --arms, --json OUT, and the one-line errors (a missing file, not JSON, not a replay
// result). Each test spawns the built binary (AGENTKV_BINARY) in its private temporary
// directory.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <boost/json.hpp>
#include <fstream>
#include <string>

#include "cli_test_support.h"

namespace agentkv {
namespace {

using cli_testing::ReadFile;
using cli_testing::RunResult;
using ::testing::ContainsRegex;
using ::testing::HasSubstr;
using ::testing::Not;

constexpr const char* kA =
    R"({"arms": [{"arm": "baseline", "requests_completed": 100, "ttft": {"p95_s": 2.0}},
                 {"arm": "agentkv", "requests_completed": 100}]})";
constexpr const char* kB =
    R"({"arms": [{"arm": "baseline", "requests_completed": 120, "ttft": {"p95_s": 1.0}}]})";

class CompareCliTest : public cli_testing::CliTest {
 protected:
  // Writes `text` as <name> in the test's directory and returns its quoted path.
  std::string WriteFile(const std::string& name, const std::string& text) const {
    std::ofstream(dir_ / name) << text;
    return "'" + (dir_ / name).string() + "'";
  }
};

TEST_F(CompareCliTest, PrintsEachSharedArmAndTheOthers) {
  const RunResult r = Run("compare " + WriteFile("a.json", kA) + " " + WriteFile("b.json", kB));
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(r.err, "");
  EXPECT_THAT(r.out, HasSubstr("arm baseline\n"));
  EXPECT_THAT(r.out, ContainsRegex("requests completed +100 +120 +\\+20 +\\+20\\.0%"));
  EXPECT_THAT(r.out, ContainsRegex("TTFT p95 \\(s\\) +2 +1 +-1 +-50\\.0%"));
  EXPECT_THAT(r.out, ContainsRegex("TTFT p50 \\(s\\) +- +- +- +-\n"));
  EXPECT_THAT(r.out, HasSubstr("arms only in A"));
  EXPECT_THAT(r.out, HasSubstr(": agentkv\n"));
}

TEST_F(CompareCliTest, ArmsAndJsonOut) {
  const std::string out = (dir_ / "cmp.json").string();
  const RunResult r = Run("compare " + WriteFile("a.json", kA) + " " + WriteFile("b.json", kB) +
                          " --arms baseline --json '" + out + "'");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_THAT(r.out, Not(HasSubstr("only in")));
  const boost::json::value json = boost::json::parse(ReadFile(out));
  EXPECT_EQ(json.at("arms").at(0).at("arm").as_string(), "baseline");
  EXPECT_EQ(json.at("arms").at(0).at("metrics").at(0).at("difference").to_number<double>(), 20.0);
}

TEST_F(CompareCliTest, BadInputIsOneErrorLineNamingTheFile) {
  const std::string a = WriteFile("a.json", kA);
  RunResult r = Run("compare " + a + " '" + (dir_ / "missing.json").string() + "'");
  cli_testing::ExpectOneErrorLine(r, "agentkv compare: error: ");
  EXPECT_THAT(r.err, HasSubstr("missing.json: cannot read the file"));

  r = Run("compare " + a + " " + WriteFile("bad.json", "{\"arms\": ["));
  cli_testing::ExpectOneErrorLine(r, "agentkv compare: error: ");
  EXPECT_THAT(r.err, HasSubstr("bad.json: not JSON"));

  r = Run("compare " + a + " " + WriteFile("other.json", "{\"probes\": []}"));
  cli_testing::ExpectOneErrorLine(r, "agentkv compare: error: ");
  EXPECT_THAT(r.err, HasSubstr("other.json: not a replay result: no `arms` array"));

  r = Run("compare " + a + " " + a + " --arms nope");
  cli_testing::ExpectOneErrorLine(r, "agentkv compare: error: ");
  EXPECT_THAT(r.err, HasSubstr("\"nope\""));
}

TEST_F(CompareCliTest, HelpExplainsAAndB) {
  const RunResult r = Run("compare --help");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_THAT(r.out, HasSubstr("typically the prediction, B the measurement"));
}

}  // namespace
}  // namespace agentkv
