// End-to-end tests of `agentkv cost-model` and of `agentkv replay --cost-model FILE`: the
// tables and the validation table, a measured-constants file changing the predictions, the
// one-line errors naming a file's bad key or value, and the replay still running (with
// different timings) on a file's constants. Each test spawns the built binary (AGENTKV_BINARY)
// in its private temporary directory.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <fstream>
#include <sstream>
#include <string>
#include <string_view>
#include <vector>

#include "cli_test_support.h"

namespace agentkv {
namespace {

using cli_testing::ReadFile;
using cli_testing::RunResult;
using ::testing::ContainsRegex;
using ::testing::HasSubstr;
using ::testing::Not;

class CostModelCliTest : public cli_testing::CliTest {
 protected:
  // Writes `text` as <name> in the test's directory and returns its quoted path.
  std::string WriteFile(const std::string& name, const std::string& text) const {
    std::ofstream(dir_ / name) << text;
    return "'" + (dir_ / name).string() + "'";
  }
};

// The value of the TTFT row for `prompt` tokens in the command's output, "" when absent: an
// indented line of exactly three words, `prompt`, a decimal number and an integer. (Read word by
// word: std::regex trips GCC 12's -Wmaybe-uninitialized under the sanitizers.)
std::string TtftRow(const std::string& out, const std::string& prompt) {
  auto all_of = [](const std::string& word, std::string_view allowed) {
    return !word.empty() && word.find_first_not_of(allowed) == std::string::npos;
  };
  std::istringstream lines(out);
  for (std::string line; std::getline(lines, line);) {
    if (line.empty() || line[0] != ' ') continue;
    std::istringstream words(line);
    std::vector<std::string> w;
    for (std::string word; words >> word;) w.push_back(word);
    if (w.size() == 3 && w[0] == prompt && all_of(w[1], "0123456789.") &&
        all_of(w[2], "0123456789")) {
      return w[1];
    }
  }
  return "";
}

TEST_F(CostModelCliTest, DefaultPresetPrintsEveryTableAndTheValidation) {
  const RunResult r = Run("cost-model");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(r.err, "");
  EXPECT_THAT(r.out, HasSubstr("llama-3.1-8b on h100, tp 1"));
  EXPECT_THAT(r.out, HasSubstr("mfu 0.68, decode_mfu 0.23, mbu 0.8"));
  EXPECT_THAT(r.out, HasSubstr("KV capacity 450911 tokens"));
  // One 8,192-token chunk: 222.8 ms at mfu 0.68.
  EXPECT_EQ(TtftRow(r.out, "8192"), "222.8");
  EXPECT_THAT(r.out, HasSubstr("Prefill throughput, one step of 128 x 128-token prompts"));
  EXPECT_THAT(r.out, HasSubstr("Decode ITL ms"));
  EXPECT_THAT(r.out, ContainsRegex("10000 +[0-9.]+ +29\\.7 +9\\.4"));
  EXPECT_THAT(r.out, HasSubstr("Validation against published measurements"));
  EXPECT_THAT(r.out,
              ContainsRegex("host-to-GPU KV load bandwidth, end to end +44\\.16 +44 +1\\.00"));
}

TEST_F(CostModelCliTest, OtherPresetsHaveNoValidationTable) {
  const RunResult r = Run("cost-model --model qwen2.5-32b --gpu h200 --tp 2");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_THAT(r.out, HasSubstr("qwen2.5-32b on h200, tp 2"));
  EXPECT_THAT(r.out, Not(HasSubstr("Validation")));
}

TEST_F(CostModelCliTest, MeasuredConstantsFromAFileReplaceTheBuiltInOnes) {
  const std::string file = WriteFile("fleet.toml",
                                     "# measured on our fleet\n"
                                     "[cost-model]\n"
                                     "mfu = 0.5\n"
                                     "host_link_efficiency = 1\n"
                                     "overlap_host_load = false\n"
                                     "step_overhead_us = 1000\n");
  const RunResult r = Run("cost-model --cost-model " + file);
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_THAT(r.out, HasSubstr("constants from"));
  EXPECT_THAT(r.out, HasSubstr("mfu 0.5, decode_mfu 0.23"));
  EXPECT_THAT(r.out, HasSubstr("host link 64.0 GB/s"));
  EXPECT_THAT(r.out, HasSubstr("overlap_host_load false"));
  // The uncalibrated 302.6 ms of one 8,192-token chunk at mfu 0.5.
  EXPECT_EQ(TtftRow(r.out, "8192"), "302.6");
  // Keys also work at the top level, without a section.
  const RunResult top = Run("cost-model --cost-model " + WriteFile("top.ini", "mfu = 0.5\n"));
  ASSERT_EQ(top.exit_code, 0) << top.err;
  EXPECT_EQ(TtftRow(top.out, "8192"), "302.6");
}

TEST_F(CostModelCliTest, BadFilesGiveOneErrorLineNamingTheKeyAndValue) {
  const std::string prefix = "agentkv cost-model: error: cost model file ";
  struct Case {
    std::string text;
    std::string expect;
  };
  for (const Case& c : {
           Case{"mfu = fast\n", "mfu = \"fast\" is not a number"},
           Case{"mfu = 1.5\n", "mfu = 1.5 is out of range (0, 1]"},
           Case{"decode_mfu = 0\n", "decode_mfu = 0 is out of range"},
           Case{"overlap_host_load = maybe\n",
                "overlap_host_load = \"maybe\" is not true or false"},
           Case{"step_overhead_us = -3\n", "step_overhead_us = -3 is out of range"},
           Case{"mfuu = 0.5\n", "unknown key \"mfuu\""},
           Case{"[replay]\nmfu = 0.5\n", "unknown section [replay]"},
           Case{"mfu = 0.5\nmfu = 0.6\n", "mfu = \"0.5, 0.6\" is not one value"},
           Case{"mfu = 0.5\n[cost-model]\nmfu = 0.6\n", "key \"mfu\" is given twice"},
       }) {
    const RunResult r = Run("cost-model --cost-model " + WriteFile("bad.toml", c.text));
    cli_testing::ExpectOneErrorLine(r, prefix);
    EXPECT_THAT(r.err, HasSubstr(c.expect)) << c.text;
  }
  const RunResult missing = Run("cost-model --cost-model '" + (dir_ / "none.toml").string() + "'");
  cli_testing::ExpectOneErrorLine(missing, prefix);
}

TEST_F(CostModelCliTest, UnfitPresetIsOneErrorLine) {
  const RunResult r = Run("cost-model --model llama-3.1-70b --tp 1");
  cli_testing::ExpectOneErrorLine(r, "agentkv cost-model: error: ");
  EXPECT_THAT(r.err, HasSubstr("does not fit"));
}

// The replay runs on a file's constants, and they reach its engines: the timing columns move,
// the cache accounting of an arm without a host tier does not depend on compute speed alone.
TEST_F(CostModelCliTest, ReplayRunsWithMeasuredConstants) {
  const std::string workload =
      "replay --quiet --sessions 4 --context-scale 0.1 --arms baseline,+host-tier --html ''";
  const RunResult calibrated =
      Run(workload + " --json '" + (dir_ / "calibrated.json").string() + "'");
  ASSERT_EQ(calibrated.exit_code, 0) << calibrated.err;
  const std::string file = WriteFile("slow.toml", "mfu = 0.2\ndecode_mfu = 0.1\n");
  const RunResult slow =
      Run(workload + " --cost-model " + file + " --json '" + (dir_ / "slow.json").string() + "'");
  ASSERT_EQ(slow.exit_code, 0) << slow.err;
  EXPECT_THAT(slow.out, HasSubstr("TTFT p50"));
  EXPECT_NE(ReadFile(dir_ / "calibrated.json"), ReadFile(dir_ / "slow.json"));
  // Same file, same bytes.
  const RunResult again =
      Run(workload + " --cost-model " + file + " --json '" + (dir_ / "again.json").string() + "'");
  ASSERT_EQ(again.exit_code, 0) << again.err;
  EXPECT_EQ(ReadFile(dir_ / "slow.json"), ReadFile(dir_ / "again.json"));
  // A bad file is the replay's one error line.
  const RunResult bad =
      Run(workload + " --json '' --cost-model " + WriteFile("bad.toml", "mbu = 7\n"));
  cli_testing::ExpectOneErrorLine(bad, "agentkv replay: error: cost model file ");
  EXPECT_THAT(bad.err, HasSubstr("mbu = 7"));
}

}  // namespace
}  // namespace agentkv
