// End-to-end tests of `agentkv agentic-curve`: exit codes, the one-line error format, the help
// text, and the table on the hand scenario of agentic_replay_test. Each test spawns the built
// binary (AGENTKV_BINARY) through the shell with stdout and stderr captured in temporary files.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <filesystem>
#include <string>

#include "agentkv/sim/replay/replay_arms.h"
#include "cli_test_support.h"

namespace agentkv {
namespace {

using cli_testing::RunResult;
using ::testing::ContainsRegex;
using ::testing::HasSubstr;

class AgenticCurveCliTest : public cli_testing::CliTest {};

// The failure contract of agentic-curve: one `error:` line and nothing on stdout.
void ExpectOneErrorLine(const RunResult& r) {
  cli_testing::ExpectOneErrorLine(r, "agentkv agentic-curve: error: ");
  EXPECT_EQ(r.out, "");
}

// The hand scenario of agentic_replay_test (a.json with a sub-agent, b.json), 64-token blocks
// and 10 tokens past the last full block of every prompt.
constexpr const char* kTraceA = R"({"id": "a", "block_size": 64, "requests": [
  {"t": 0, "in": 138, "out": 1, "hash_ids": [1, 2]},
  {"t": 2, "type": "subagent", "agent_id": "agent_001", "requests": [
    {"t": 0, "in": 202, "out": 1, "hash_ids": [11, 12, 13]}]},
  {"t": 5, "in": 330, "out": 1, "hash_ids": [1, 2, 3, 4, 5]}]})";
constexpr const char* kTraceB = R"({"id": "b", "requests": [
  {"t": 0, "in": 202, "out": 1, "hash_ids": [21, 22, 23]},
  {"t": 6, "in": 266, "out": 1, "hash_ids": [21, 22, 23, 24]}]})";

TEST_F(AgenticCurveCliTest, MissingTraceFileIsOneErrorLine) {
  const std::string missing = (dir_ / "does_not_exist.json").string();
  const RunResult r = Run("agentic-curve --traces '" + missing + "'");
  ExpectOneErrorLine(r);
  EXPECT_EQ(r.err, "agentkv agentic-curve: error: cannot open trace file \"" + missing +
                       "\": No such file or directory\n");
}

TEST_F(AgenticCurveCliTest, MalformedTraceNamesFileAndFieldPath) {
  WriteTrace("a.json", kTraceA);
  const std::string bad =
      WriteTrace("b.json", R"({"requests": [{"t": 0, "in": 1, "out": 1, "hash_ids": [1]},)"
                           R"( {"t": 1, "in": 1, "out": 1, "hash_ids": [1, "x"]}]})");
  const RunResult r = Run("agentic-curve --traces '" + (dir_ / "traces").string() + "'");
  ExpectOneErrorLine(r);
  EXPECT_THAT(r.err, HasSubstr(bad + ":1: requests[1].hash_ids: expected an array of non-negative "
                                     "integers, element 1 is \"x\""));
}

TEST_F(AgenticCurveCliTest, BadFlagsNameTheFlagAndValue) {
  const std::string a = WriteTrace("a.json", kTraceA);
  const RunResult fraction = Run("agentic-curve --traces '" + a + "' --capacity-fraction 1.5");
  ExpectOneErrorLine(fraction);
  EXPECT_THAT(fraction.err, HasSubstr("--capacity-fraction must be in (0, 1], got 1.5"));

  const RunResult step = Run("agentic-curve --traces '" + a + "' --step-ms 0");
  ExpectOneErrorLine(step);
  EXPECT_THAT(step.err, HasSubstr("--step-ms"));

  const RunResult arm = Run("agentic-curve --traces '" + a + "' --arms lru,fifo");
  ExpectOneErrorLine(arm);
  EXPECT_THAT(arm.err, HasSubstr("--arms: unknown arm \"fifo\" (arms: lru, per_conversation,"));

  const RunResult small = Run("agentic-curve --traces '" + a + "' --capacity-blocks 3");
  ExpectOneErrorLine(small);
  EXPECT_THAT(small.err, HasSubstr("below the longest request"));

  const RunResult empty = Run("agentic-curve --traces '" + dir_.string() + "'");
  ExpectOneErrorLine(empty);
  EXPECT_THAT(empty.err, HasSubstr("holds no *.json or *.json.gz files"));
}

// --help lists exactly agentic-curve's default arms, in order (the code's own list).
TEST_F(AgenticCurveCliTest, HelpListsExactlyTheDefaultArms) {
  const RunResult r = Run("agentic-curve --help");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const std::vector<std::string>& defaults = sim::AgenticCurveArmNames();
  const std::string heading = "Arms (each a fresh cache of the same capacity; default: these " +
                              std::to_string(defaults.size());
  EXPECT_EQ(cli_testing::HelpArmEntries(r.out, heading, "Run only when named:"), defaults);
  const std::vector<std::string> others =
      cli_testing::HelpArmEntries(r.out, "Run only when named:", "");
  EXPECT_THAT(others, ::testing::Contains("oracle"));
  for (const std::string& name : others) {
    EXPECT_EQ(std::count(defaults.begin(), defaults.end(), name), 0) << name;
    EXPECT_TRUE(sim::ParseArm(name).ok()) << name;
  }
}

// The public trace with "duration_ms": null is replayed and the table says what was filled in.
TEST_F(AgenticCurveCliTest, TraceWithNullFieldsIsReadAndNoted) {
  const std::string trace =
      (std::filesystem::path(AGENTKV_DATA_DIR) / "weka-null-fields" / "trace_0295.json.gz")
          .string();
  const RunResult r = Run("agentic-curve --traces '" + trace + "' --arms lru --quiet");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_THAT(r.out, HasSubstr("1 conversations, 8 sub-agents, 416 requests"));
  EXPECT_THAT(
      r.out,
      HasSubstr("\n  trace: 4 sub-agents without duration_ms: spawned at their recorded t\n"));
}

TEST_F(AgenticCurveCliTest, ParseErrorsUseTheSameFormat) {
  ExpectOneErrorLine(Run("agentic-curve"));  // --traces is required.
  ExpectOneErrorLine(Run("agentic-curve --traces x --no-such-flag"));
  ExpectOneErrorLine(Run("agentic-curve --traces x --capacity-blocks 5 --capacity-fraction 0.5"));
}

TEST_F(AgenticCurveCliTest, HelpExplainsArmsAndColumns) {
  const RunResult r = Run("agentic-curve --help");
  EXPECT_EQ(r.exit_code, 0) << r.err;
  for (const char* word :
       {"--traces", "--capacity-fraction", "--stagger-s", "--step-ms", "demote_p1+release",
        "session_release", "hit_ratio", "vs_lru%", "close_freed_tokens", "oracle", "Belady"}) {
    EXPECT_THAT(r.out, HasSubstr(word));
  }
}

// The numbers of agentic_replay_test's hand scenario: lru hits 2 of 17 blocks, demote_p1 5.
TEST_F(AgenticCurveCliTest, PrintsOneRowPerArm) {
  const std::string a = WriteTrace("a.json", kTraceA);
  const std::string b = WriteTrace("b.json", kTraceB);
  const RunResult r = Run("agentic-curve --traces '" + a + "' '" + b +
                          "' --capacity-blocks 8 --stagger-s 1 --arms lru,demote_p1");
  EXPECT_EQ(r.exit_code, 0) << r.err;
  EXPECT_THAT(r.out, HasSubstr("2 conversations, 1 sub-agents, 5 requests; 12 unique blocks"));
  EXPECT_THAT(r.out, HasSubstr("device 8 blocks"));
  // arm hit_ratio uncached vs_lru% evictions demoted_blocks demoted restored drops freed
  EXPECT_THAT(r.out, ContainsRegex("\nlru +0\\.1176 +1010 +\\+0\\.00 +7 +0 +0 +0 +0 +0\n"));
  EXPECT_THAT(r.out, ContainsRegex("\ndemote_p1 +0\\.2941 +818 +-19\\.01 +4 +3 +1 +0 +0 +0\n"));
  // One progress line for reading and one per arm.
  EXPECT_EQ(std::count(r.err.begin(), r.err.end(), '\n'), 3) << r.err;
  EXPECT_THAT(r.err, HasSubstr("arm 2/2 demote_p1 replayed"));

  const RunResult quiet = Run("agentic-curve --traces '" + a + "' '" + b +
                              "' --capacity-blocks 8 --stagger-s 1 --quiet");
  EXPECT_EQ(quiet.exit_code, 0) << quiet.err;
  EXPECT_EQ(quiet.err, "");
  EXPECT_THAT(quiet.out, HasSubstr("demote_p1+release"));
}

// --subagent-models exclude leaves out a sub-agent whose models are not its main agent's.
TEST_F(AgenticCurveCliTest, SubagentModelsExcludeLeavesOutOtherModels) {
  const std::string a = WriteTrace("a.json", R"({"id": "a", "block_size": 64, "requests": [
  {"t": 0, "model": "m", "in": 138, "out": 1, "hash_ids": [1, 2]},
  {"t": 2, "type": "subagent", "agent_id": "agent_001", "models": ["h"], "requests": [
    {"t": 0, "in": 202, "out": 1, "hash_ids": [11, 12, 13]}]},
  {"t": 5, "model": "m", "in": 330, "out": 1, "hash_ids": [1, 2, 3, 4, 5]}]})");
  const std::string traces = "agentic-curve --quiet --traces '" + a +
                             "' --capacity-blocks 8 --arms lru --subagent-models ";
  const RunResult shared = Run(traces + "share");
  EXPECT_EQ(shared.exit_code, 0) << shared.err;
  EXPECT_THAT(shared.out, HasSubstr("1 conversations, 1 sub-agents, 3 requests"));
  const RunResult excluded = Run(traces + "exclude");
  EXPECT_EQ(excluded.exit_code, 0) << excluded.err;
  EXPECT_THAT(excluded.out, HasSubstr("1 conversations, 0 sub-agents, 2 requests"));
  const RunResult bad = Run(traces + "drop");
  EXPECT_EQ(bad.exit_code, 2);
  EXPECT_THAT(bad.err, HasSubstr("--subagent-models"));
}

// Any arm of the replay grammar that needs no fleet runs; the aliases are its names.
TEST_F(AgenticCurveCliTest, AcceptsTheReplayArmGrammar) {
  const std::string a = WriteTrace("a.json", kTraceA);
  const std::string b = WriteTrace("b.json", kTraceB);
  const std::string traces = "agentic-curve --quiet --traces '" + a + "' '" + b +
                             "' --capacity-blocks 8 --stagger-s 1 --arms ";
  const RunResult r = Run(traces + "baseline,+subagent-demotion=1,+subagent-demotion=20+lifecycle");
  EXPECT_EQ(r.exit_code, 0) << r.err;
  // demote_p1's numbers under its canonical name, against baseline as against lru; the arm
  // column widens for the long name.
  EXPECT_THAT(r.out, ContainsRegex("\nbaseline +0\\.1176 +1010 +\\+0\\.00 +7 "));
  EXPECT_THAT(r.out, ContainsRegex("\n\\+subagent-demotion=1 +0\\.2941 +818 +-19\\.01 +4 "));
  EXPECT_THAT(r.out, ContainsRegex("\n\\+subagent-demotion=20\\+lifecycle +0\\.2941 "));

  const RunResult oracle = Run(traces + "lru,oracle");
  EXPECT_EQ(oracle.exit_code, 0) << oracle.err;
  EXPECT_THAT(oracle.out, ContainsRegex("\noracle +0\\.[0-9]+ +[0-9]+ +-?[0-9.]+ "));

  const RunResult fleet = Run(traces + "lru,+admission");
  EXPECT_EQ(fleet.exit_code, 2);
  EXPECT_THAT(fleet.err, HasSubstr("arm \"+admission\": admission needs the simulated fleet"));
}

}  // namespace
}  // namespace agentkv
