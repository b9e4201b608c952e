// End-to-end tests of `agentkv replay`: the arm table, the JSON and HTML reports, determinism,
// the config file, every workload reader, the one-line error format and stderr hygiene. Each
// test spawns the built binary (AGENTKV_BINARY) through the shell with stdout and stderr
// captured in its private temporary directory, and always names its report paths there (or
// "") so that nothing is written into the working directory. Workloads are small (4 synthetic
// sessions at context scale 0.1, or a few trace lines) so that each test takes well under a
// second in a Debug build.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <boost/json.hpp>
#include <boost/property_tree/ptree.hpp>
#include <boost/property_tree/xml_parser.hpp>
#include <cstdint>
#include <exception>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "agentkv/sim/replay/replay_arms.h"
#include "cli_test_support.h"

#ifndef AGENTKV_DATA_DIR
#error "AGENTKV_DATA_DIR must name the repository's data directory (tests/tools/CMakeLists.txt)"
#endif

namespace agentkv {
namespace {

using cli_testing::ReadFile;
using cli_testing::RunResult;
using ::testing::ContainsRegex;
using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::MatchesRegex;
using ::testing::Not;
using ::testing::StartsWith;

// A synthetic run small enough for a Debug build: 4 sessions at a tenth of the recorded sizes.
constexpr const char* kSmallWorkload = "--sessions 4 --context-scale 0.1";

// The smallest WEKA trace of the shared set (6.7 kB, 4 requests).
constexpr const char* kSmallWekaTrace = "weka/trace_0288.json.gz";

// A Mooncake JSONL trace: 512-token blocks, two requests sharing a three-block prefix.
constexpr const char* kMooncakeTrace =
    R"({"timestamp": 0, "input_length": 1100, "output_length": 10, "hash_ids": [1, 2, 3]}
{"timestamp": 500, "input_length": 1600, "output_length": 20, "hash_ids": [1, 2, 3, 4]}
{"timestamp": 1000, "input_length": 700, "output_length": 5, "hash_ids": [7, 8]}
{"timestamp": 2500, "input_length": 2100, "output_length": 30, "hash_ids": [1, 2, 3, 4, 9]}
)";

// A Bailian JSONL trace: 16-token blocks; chat 1 -> 3 -> 4 is one three-turn conversation and
// chat 2 a second, one-turn one.
constexpr const char* kBailianTrace =
    R"({"chat_id": 1, "parent_chat_id": -1, "timestamp": 0.0, "input_length": 40,)"
    R"( "output_length": 8, "type": "text", "turn": 1, "hash_ids": [1, 2, 3]})"
    "\n"
    R"({"chat_id": 2, "parent_chat_id": -1, "timestamp": 0.5, "input_length": 20,)"
    R"( "output_length": 4, "type": "text", "turn": 1, "hash_ids": [10, 11]})"
    "\n"
    R"({"chat_id": 3, "parent_chat_id": 1, "timestamp": 3.0, "input_length": 70,)"
    R"( "output_length": 6, "type": "text", "turn": 2, "hash_ids": [1, 2, 3, 4, 5]})"
    "\n"
    R"({"chat_id": 4, "parent_chat_id": 3, "timestamp": 6.0, "input_length": 100,)"
    R"( "output_length": 9, "type": "search", "turn": 3, "hash_ids": [1, 2, 3, 4, 5, 6, 7]})"
    "\n";

class ReplayCliTest : public cli_testing::CliTest {
 protected:
  // `path` inside the test's directory, single-quoted for the shell.
  std::string Quoted(const std::string& name) const { return "'" + (dir_ / name).string() + "'"; }

  // `agentkv replay <args>` with the reports written as report.json and report.html in the
  // test's directory.
  RunResult Replay(const std::string& args) const {
    return Run("replay " + args + " --json " + Quoted("report.json") + " --html " +
               Quoted("report.html"));
  }

  // The JSON report of the last Replay, parsed; a null value (and a test failure) when it is
  // missing or malformed.
  boost::json::value ReportJson() const {
    const std::string text = ReadFile(dir_ / "report.json");
    boost::system::error_code error;
    boost::json::value report = boost::json::parse(text, error);
    EXPECT_FALSE(error) << error.message() << " in:\n" << text;
    return report;
  }

  // A command line that must be refused, and what the error line must contain.
  struct Refused {
    std::string args;
    std::string error_regex;
  };

  // Each of `cases` exits with code 2 and one error line matching its regex, prints nothing
  // on stdout and writes no report.
  void ExpectEachRefused(const std::vector<Refused>& cases) const {
    for (const Refused& c : cases) {
      SCOPED_TRACE(c.args);
      const RunResult r = Replay(c.args);
      cli_testing::ExpectOneErrorLine(r, "agentkv replay: error: ");
      EXPECT_THAT(r.err, ::testing::ContainsRegex(c.error_regex));
      EXPECT_EQ(r.out, "");
      EXPECT_FALSE(std::filesystem::exists(dir_ / "report.json"));
      EXPECT_FALSE(std::filesystem::exists(dir_ / "report.html"));
    }
  }

  // The names of the arms of `report`, in report order.
  static std::vector<std::string> ArmNames(const boost::json::value& report) {
    std::vector<std::string> names;
    for (const boost::json::value& arm : report.at("arms").as_array()) {
      names.emplace_back(arm.at("arm").as_string());
    }
    return names;
  }
};

// How many times `needle` occurs in `text`.
int64_t Occurrences(const std::string& text, const std::string& needle) {
  int64_t count = 0;
  for (size_t at = text.find(needle); at != std::string::npos; at = text.find(needle, at + 1)) {
    ++count;
  }
  return count;
}

// The failure contract of replay: one `error:` line on stderr.
void ExpectOneErrorLine(const RunResult& r) {
  cli_testing::ExpectOneErrorLine(r, "agentkv replay: error: ");
}

TEST_F(ReplayCliTest, SmallSyntheticRunPrintsTableAndWritesBothReports) {
  const RunResult r = Replay(std::string(kSmallWorkload) + " --arms baseline,+lifecycle");
  ASSERT_EQ(r.exit_code, 0) << r.err;

  // The table: a header naming the arms in order, then one row per metric.
  EXPECT_THAT(r.out, HasSubstr("synthetic: 4 sessions, context scale 0.1, seed 1"));
  EXPECT_THAT(r.out, ContainsRegex("\nmetric +baseline +\\+lifecycle\n"));
  EXPECT_THAT(r.out, ContainsRegex("\n  token hit ratio device +0\\.[0-9]{4} +0\\.[0-9]{4}"));
  EXPECT_THAT(r.out, ContainsRegex("\n  requests completed +[0-9,]+ +[0-9,]+"));

  const boost::json::value report = ReportJson();
  ASSERT_TRUE(report.is_object());
  EXPECT_THAT(ArmNames(report), ElementsAre("baseline", "+lifecycle"));
  EXPECT_EQ(report.at("setup").at("num_engines").to_number<int64_t>(), 2);
  EXPECT_EQ(report.at("setup").at("seed").to_number<int64_t>(), 1);
  EXPECT_EQ(report.at("baseline").as_string(), "baseline");
  const boost::json::value& baseline = report.at("arms").at(0);
  EXPECT_EQ(baseline.at("sessions").to_number<int64_t>(), 4);
  EXPECT_GT(baseline.at("requests_issued").to_number<int64_t>(), 0);
  EXPECT_EQ(baseline.at("requests_completed"), baseline.at("requests_issued"));
  // Only the +lifecycle arm closes sessions, and every arm replays the same requests.
  const boost::json::value& lifecycle = report.at("arms").at(1);
  EXPECT_EQ(baseline.at("sessions_closed").to_number<int64_t>(), 0);
  EXPECT_GT(lifecycle.at("sessions_closed").to_number<int64_t>(), 0);
  EXPECT_EQ(lifecycle.at("requests_issued"), baseline.at("requests_issued"));

  // read_xml checks that the elements nest and close (not that closing tags repeat the opening
  // names), so every chart's <svg> is also matched against its </svg>.
  const std::string html = ReadFile(dir_ / "report.html");
  EXPECT_THAT(html, HasSubstr("<svg"));
  EXPECT_EQ(Occurrences(html, "<svg"), Occurrences(html, "</svg>"));
  std::istringstream html_stream(html);
  boost::property_tree::ptree tree;
  try {
    boost::property_tree::read_xml(html_stream, tree);
  } catch (const std::exception& e) {
    ADD_FAILURE() << "the HTML report is not well-formed XML: " << e.what();
  }
  EXPECT_EQ(tree.count("html"), 1U);

  EXPECT_THAT(r.err, HasSubstr("agentkv replay: wrote " + (dir_ / "report.json").string() + "\n"));
  EXPECT_THAT(r.err, HasSubstr("agentkv replay: wrote " + (dir_ / "report.html").string() + "\n"));
}

TEST_F(ReplayCliTest, SameSeedSameBytesOtherSeedOtherBytes) {
  const std::string args = std::string(kSmallWorkload) + " --arms baseline,+lifecycle --html ''";
  ASSERT_EQ(Run("replay " + args + " --json " + Quoted("first.json")).exit_code, 0);
  ASSERT_EQ(Run("replay " + args + " --json " + Quoted("second.json")).exit_code, 0);
  ASSERT_EQ(Run("replay " + args + " --seed 2 --json " + Quoted("seed2.json")).exit_code, 0);

  const std::string first = ReadFile(dir_ / "first.json");
  ASSERT_THAT(first, HasSubstr("\"arms\""));
  EXPECT_EQ(first, ReadFile(dir_ / "second.json"));
  const std::string seed2 = ReadFile(dir_ / "seed2.json");
  ASSERT_THAT(seed2, HasSubstr("\"arms\""));
  EXPECT_NE(first, seed2);
  EXPECT_THAT(seed2, HasSubstr("\"seed\": 2"));
}

TEST_F(ReplayCliTest, ArmsRunOnSeveralThreadsGiveTheSameBytes) {
  // Every default arm, one at a time and four at once: the report must not depend on it.
  const std::string args = std::string(kSmallWorkload) + " --html ''";
  const RunResult one = Run("replay " + args + " --jobs 1 --json " + Quoted("one.json"));
  ASSERT_EQ(one.exit_code, 0) << one.err;
  const RunResult four = Run("replay " + args + " --jobs 4 --json " + Quoted("four.json"));
  ASSERT_EQ(four.exit_code, 0) << four.err;
  const std::string first = ReadFile(dir_ / "one.json");
  ASSERT_THAT(first, HasSubstr("\"infinite-cache\""));
  EXPECT_EQ(first, ReadFile(dir_ / "four.json"));
  EXPECT_EQ(one.out, four.out);
}

TEST_F(ReplayCliTest, EmptyReportPathsWriteNoFiles) {
  // Run from an empty working directory, so that a "" taken for the default path would show.
  const std::filesystem::path work = dir_ / "work";
  std::filesystem::create_directories(work);
  const std::filesystem::path previous = std::filesystem::current_path();
  std::filesystem::current_path(work);
  const RunResult r =
      Run("replay " + std::string(kSmallWorkload) + " --arms baseline --json '' --html ''");
  std::filesystem::current_path(previous);

  EXPECT_EQ(r.exit_code, 0) << r.err;
  EXPECT_THAT(r.out, HasSubstr("requests completed"));
  EXPECT_TRUE(std::filesystem::is_empty(work));
  EXPECT_THAT(r.err, Not(HasSubstr("wrote")));
}

TEST_F(ReplayCliTest, ConfigFileSetsFlagsAndCommandLineWins) {
  // Keys are the long flag names without the dashes, under the [replay] section, as the --help
  // footer says. Every run also passes --sessions on the command line, so that a config file
  // that is ignored replays 4 sessions at the default scale, not the 48-session default.
  const std::string config = WriteTrace("replay.toml", R"([replay]
arms = ["baseline", "+host-tier"]
sessions = 3
context-scale = 0.1
num-engines = 1
seed = 7
)");
  const RunResult r = Replay("--config '" + config + "' --sessions 4");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  boost::json::value report = ReportJson();
  ASSERT_TRUE(report.is_object());
  ASSERT_THAT(ArmNames(report), ElementsAre("baseline", "+host-tier"));
  EXPECT_EQ(report.at("setup").at("num_engines").to_number<int64_t>(), 1);
  EXPECT_EQ(report.at("setup").at("seed").to_number<int64_t>(), 7);
  EXPECT_EQ(std::string(report.at("setup").at("workload").as_string()),
            "synthetic: 4 sessions, context scale 0.1, seed 7");

  const RunResult overridden = Replay("--config '" + config + "' --sessions 4 --num-engines 3");
  ASSERT_EQ(overridden.exit_code, 0) << overridden.err;
  report = ReportJson();
  ASSERT_TRUE(report.is_object());
  EXPECT_EQ(report.at("setup").at("num_engines").to_number<int64_t>(), 3);
  EXPECT_THAT(ArmNames(report), ElementsAre("baseline", "+host-tier"));
}

// A typo in a config file used to be ignored (exit 0, the flag at its default).
TEST_F(ReplayCliTest, ConfigFileRejectsUnknownKeysNamingFileAndLine) {
  const std::string config = WriteTrace("run.toml", "# a typo\n[replay]\nsessionz = 8\n");
  const RunResult r = Replay("--config '" + config + "' " + kSmallWorkload + " --arms baseline");
  ExpectOneErrorLine(r);
  EXPECT_EQ(r.err, "agentkv replay: error: config file " + config +
                       ":3: unknown option \"sessionz\" in [replay]\n");
  EXPECT_FALSE(std::filesystem::exists(dir_ / "report.json"));
}

// A value out of range fails the same way whether it comes from the file or the command line.
TEST_F(ReplayCliTest, ConfigFileValuesAreCheckedAsFlags) {
  const std::string config = WriteTrace("run.toml", "[replay]\nnum-engines = 0\n");
  const RunResult file = Replay("--config '" + config + "' " + kSmallWorkload);
  const RunResult flag = Replay(std::string("--num-engines 0 ") + kSmallWorkload);
  ExpectOneErrorLine(file);
  EXPECT_EQ(file.err, flag.err);
  EXPECT_EQ(file.err, "agentkv replay: error: --num-engines must be in [1, 1024], got 0\n");
}

TEST_F(ReplayCliTest, MissingConfigFileIsOneErrorLine) {
  const std::string missing = (dir_ / "no_such_config.toml").string();
  const RunResult r = Replay("--config '" + missing + "' " + kSmallWorkload + " --arms baseline");
  ExpectOneErrorLine(r);
  EXPECT_THAT(r.err, HasSubstr(missing));
  EXPECT_FALSE(std::filesystem::exists(dir_ / "report.json"));
}

// Every bad flag or input: exit code 2, one error line naming what is wrong, no report.
TEST_F(ReplayCliTest, BadInputsAreOneErrorLineNamingTheProblem) {
  const std::string small = kSmallWorkload;
  const std::vector<Refused> cases = {
      {small + " --arms baseline,+bogus", "\"\\+bogus\".*unknown feature \"bogus\""},
      {small + " --arms baseline,continuum-ttl", "continuum-ttl.*renamed.*fixed-ttl.*continuum"},
      {small + " --continuum-memory-price 2", "--continuum-memory-price must be in"},
      {small + " --arms +stall-offload", "\"\\+stall-offload\".*add \\+host-tier"},
      {small + " --stall-offload-pressure 0", "--stall-offload-pressure must be in \\(0, 1"},
      {small + " --stall-offload-quantile 1", "--stall-offload-quantile must be in \\(0, 1\\)"},
      {small + " --stall-offload-min-stall-s -1", "--stall-offload-min-stall-s must be in"},
      {"--workload weka", "--workload weka needs --trace"},
      {small + " --trace " + Quoted("x.json"), "--trace needs --workload"},
      {small + " --hicache-ratio 0", "hicache.ratio must be in"},
      {small + " --num-engines 0", "num.engines must be in"},
      {small + " --router random", "router.*'random'"},
      {small + " --agentic-admission-headroom 2", "--agentic-admission-headroom must be in"},
      {small + " --finished-subagent-min-idle-s -1",
       "--finished-subagent-min-idle-s must be in \\[0, 1000000\\], got -1"},
      {small + " --agentic-subagent-demotion-delivery anywhere",
       "agentic-subagent-demotion-delivery.*anywhere"},
      {small + " --agentic-subagent-routing sibling", "agentic-subagent-routing.*sibling"},
      {"--workload weka --trace /nonexistent/x.json",
       "cannot open trace file \"/nonexistent/x.json\""},
      {"--workload bailian --trace " + Quoted("missing.jsonl"), "missing\\.jsonl"},
      {"--workload weka " + small + " --trace " + Quoted("x.json"),
       "--sessions and --context-scale apply to --workload synthetic only"},
      {small + " --no-such-flag", "no-such-flag"},
  };
  ExpectEachRefused(cases);
}

// Two bad inputs: the error is the one checked first. The flags alone are checked before
// anything is read or built: --jobs, then the combinations --workload rules out or needs, then
// the numbers (the workload's, the fleet's, the policies', the working set's), then the report
// paths; then the names (arms, presets, cost model); then the traces; then the fleet's size.
TEST_F(ReplayCliTest, OfTwoBadInputsTheFirstCheckedIsReported) {
  const std::string small = kSmallWorkload;
  const std::vector<Refused> cases = {
      {"--jobs 300 --workload weka", "--jobs must be in"},
      {"--workload weka --tp 9", "--workload weka needs --trace"},
      {"--workload rollout --rollout-prompts 0 --tp 9", "--rollout-prompts must be in"},
      {"--context-scale 2 --tp 9", "--context-scale must be in"},
      {small + " --max-total-tokens -1 --finished-subagent-priority 101",
       "--max-total-tokens must be in"},
      {small + " --stall-offload-min-stall-s -1 --agentic-working-set-headroom -1",
       "--stall-offload-min-stall-s must be in"},
      {small + " --arms nope --model nope", "unknown arm \"nope\""},
      {small + " --model nope --cost-model " + Quoted("missing.toml"),
       "unknown model preset \"nope\""},
      {"--cost-model " + Quoted("missing.toml") + " --workload weka --trace /nonexistent/x.json",
       "cost model file"},
      {"--workload weka --trace /nonexistent/x.json --num-engines 1024 --max-total-tokens "
       "1099511627776",
       "cannot open trace file"},
  };
  ExpectEachRefused(cases);

  // The working set's options before the report paths, the report paths before the arms.
  const std::string directory = Quoted(".");
  RunResult r = Run("replay " + small + " --agentic-working-set-headroom -1 --json " + directory +
                    " --html ''");
  cli_testing::ExpectOneErrorLine(r, "agentkv replay: error: ");
  EXPECT_THAT(r.err, HasSubstr("--agentic-working-set-headroom must be in"));
  r = Run("replay " + small + " --arms nope --json " + directory + " --html ''");
  cli_testing::ExpectOneErrorLine(r, "agentkv replay: error: ");
  EXPECT_THAT(r.err, HasSubstr("is a directory"));
}

TEST_F(ReplayCliTest, UnwritableJsonPathIsOneErrorLineAndLeavesNoFile) {
  const std::filesystem::path missing_dir = dir_ / "no_such_dir";
  const RunResult r =
      Run("replay " + std::string(kSmallWorkload) + " --arms baseline --json '" +
          (missing_dir / "report.json").string() + "' --html " + Quoted("report.html"));
  ExpectOneErrorLine(r);
  EXPECT_THAT(r.err, HasSubstr((missing_dir / "report.json").string()));
  EXPECT_FALSE(std::filesystem::exists(missing_dir));
  // The JSON is written first; its failure stops the run before the HTML.
  EXPECT_FALSE(std::filesystem::exists(dir_ / "report.html"));
}

TEST_F(ReplayCliTest, JsonPathNamingADirectoryLeavesNoTemporaryFile) {
  const std::filesystem::path target = dir_ / "a_directory";
  std::filesystem::create_directories(target);
  const RunResult r = Run("replay " + std::string(kSmallWorkload) + " --arms baseline --json '" +
                          target.string() + "' --html ''");
  ExpectOneErrorLine(r);
  EXPECT_THAT(r.err, HasSubstr(target.string()));
  EXPECT_TRUE(std::filesystem::is_directory(target));
  EXPECT_TRUE(std::filesystem::is_empty(target));
  for (const auto& entry : std::filesystem::directory_iterator(dir_)) {
    EXPECT_EQ(entry.path().filename().string().rfind("a_directory.tmp", 0), std::string::npos)
        << "left behind: " << entry.path();
  }
}

TEST_F(ReplayCliTest, WekaTraceCompletesEveryRequest) {
  const std::filesystem::path trace = std::filesystem::path(AGENTKV_DATA_DIR) / kSmallWekaTrace;
  ASSERT_TRUE(std::filesystem::exists(trace)) << "no bundled trace " << trace;
  const RunResult r = Replay("--workload weka --trace '" + trace.string() +
                             "' --arms baseline,+lifecycle --num-engines 1");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_THAT(r.out, HasSubstr("weka: 1 files"));
  const boost::json::value report = ReportJson();
  ASSERT_TRUE(report.is_object());
  EXPECT_THAT(ArmNames(report), ElementsAre("baseline", "+lifecycle"));
  EXPECT_EQ(report.at("setup").at("num_engines").to_number<int64_t>(), 1);
  for (const boost::json::value& arm : report.at("arms").as_array()) {
    SCOPED_TRACE(arm.at("arm").as_string().c_str());
    const int64_t issued = arm.at("requests_issued").to_number<int64_t>();
    EXPECT_GT(issued, 0);
    EXPECT_EQ(arm.at("requests_completed").to_number<int64_t>(), issued);
  }
}

// A public trace whose background sub-agents record "duration_ms": null is replayed, not
// refused, and the run says what it filled in, in the table and in the JSON.
TEST_F(ReplayCliTest, WekaTraceWithNullFieldsReplaysAndSaysWhatItFilledIn) {
  const std::string trace =
      (std::filesystem::path(AGENTKV_DATA_DIR) / "weka-null-fields" / "trace_0295.json.gz")
          .string();
  const RunResult r =
      Replay("--workload weka --trace '" + trace + "' --arms baseline --num-engines 1");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  constexpr const char* kNote = "4 sub-agents without duration_ms: spawned at their recorded t";
  EXPECT_THAT(r.out, HasSubstr(std::string("\n  trace: ") + kNote + "\n"));
  const boost::json::value report = ReportJson();
  ASSERT_TRUE(report.is_object());
  const boost::json::array& notes = report.at("setup").at("workload_notes").as_array();
  ASSERT_EQ(notes.size(), 1u);
  EXPECT_EQ(notes[0].as_string(), kNote);
  const boost::json::value& arm = report.at("arms").at(0);
  // 416 requests: main agent and sub-agents, counted with Python's json module.
  EXPECT_EQ(arm.at("requests_issued").to_number<int64_t>(), 416);
  EXPECT_EQ(arm.at("requests_completed").to_number<int64_t>(), 416);

  // A trace with every optional field present has no notes.
  const std::string full = (std::filesystem::path(AGENTKV_DATA_DIR) / kSmallWekaTrace).string();
  ASSERT_EQ(Replay("--workload weka --trace '" + full + "' --arms baseline").exit_code, 0);
  EXPECT_TRUE(ReportJson().at("setup").at("workload_notes").as_array().empty());
}

// The gateway's idle timeout ends a rollout trajectory's session during each long tool call
// (with +lifecycle, a close on every engine) unless the trajectories are retained, as partial
// rollout keeps them: then only a trajectory's end closes its session.
TEST_F(ReplayCliTest, RetainedRolloutSessionsOutliveTheIdleTimeout) {
  const std::string rollout =
      "--workload rollout --rollout-prompts 2 --rollout-group-size 2 --arms +lifecycle "
      "--session-idle-timeout-s 2";
  ASSERT_EQ(Replay(rollout).exit_code, 0);
  const int64_t plain = ReportJson().at("arms").at(0).at("sessions_closed").to_number<int64_t>();
  ASSERT_EQ(Replay(rollout + " --rollout-retain-sessions").exit_code, 0);
  const boost::json::value report = ReportJson();
  const boost::json::value& retained = report.at("arms").at(0);
  // 2 steps x 2 prompts x 2 samples, each closed once, at its end, on each of the 2 engines.
  EXPECT_EQ(retained.at("sessions_closed").to_number<int64_t>(), 16);
  EXPECT_GT(plain, 16);

  const RunResult bad = Replay(std::string(kSmallWorkload) + " --session-idle-timeout-s -1");
  ExpectOneErrorLine(bad);
  EXPECT_THAT(bad.err, HasSubstr("--session-idle-timeout-s must be in [0, 31536000], got -1"));
  const RunResult not_rollout = Replay(std::string(kSmallWorkload) + " --rollout-retain-sessions");
  ExpectOneErrorLine(not_rollout);
  EXPECT_THAT(not_rollout.err,
              HasSubstr("--rollout-retain-sessions applies to --workload rollout only"));
}

TEST_F(ReplayCliTest, MooncakeTraceReplaysOpenLoop) {
  const std::string trace = WriteTrace("mooncake.jsonl", kMooncakeTrace);
  const RunResult r = Replay("--workload mooncake --trace '" + trace + "' --arms baseline");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_THAT(r.out, HasSubstr("mooncake: 4 requests, open loop"));
  const boost::json::value report = ReportJson();
  ASSERT_TRUE(report.is_object());
  EXPECT_EQ(report.at("arms").at(0).at("requests_issued").to_number<int64_t>(), 4);
  EXPECT_EQ(report.at("arms").at(0).at("requests_completed").to_number<int64_t>(), 4);
}

TEST_F(ReplayCliTest, BailianTraceGroupsConversationsByParent) {
  const std::string trace = WriteTrace("bailian.jsonl", kBailianTrace);
  const RunResult r =
      Replay("--workload bailian --trace '" + trace + "' --arms baseline,+lifecycle");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_THAT(r.out, HasSubstr("bailian: 4 requests in 2 conversations"));
  const boost::json::value report = ReportJson();
  ASSERT_TRUE(report.is_object());
  EXPECT_EQ(report.at("arms").at(0).at("requests_issued").to_number<int64_t>(), 4);
  EXPECT_EQ(report.at("arms").at(0).at("requests_completed").to_number<int64_t>(), 4);
}

TEST_F(ReplayCliTest, TheOracleArmRunsOnEveryWorkload) {
  const std::string mooncake = WriteTrace("mooncake.jsonl", kMooncakeTrace);
  const std::string bailian = WriteTrace("bailian.jsonl", kBailianTrace);
  const std::string weka = (std::filesystem::path(AGENTKV_DATA_DIR) / kSmallWekaTrace).string();
  for (const std::string& workload :
       {std::string(kSmallWorkload), "--workload mooncake --trace '" + mooncake + "'",
        "--workload bailian --trace '" + bailian + "'", "--workload weka --trace '" + weka + "'",
        std::string("--workload rollout --rollout-prompts 2 --rollout-group-size 2")}) {
    SCOPED_TRACE(workload);
    const RunResult r = Replay(workload + " --arms baseline,oracle");
    ASSERT_EQ(r.exit_code, 0) << r.err;
    const boost::json::value report = ReportJson();
    ASSERT_TRUE(report.is_object());
    EXPECT_THAT(ArmNames(report), ElementsAre("baseline", "oracle"));
    const boost::json::value& baseline = report.at("arms").at(0);
    const boost::json::value& oracle = report.at("arms").at(1);
    EXPECT_EQ(oracle.at("requests_completed").to_number<int64_t>(),
              oracle.at("requests_issued").to_number<int64_t>());
    EXPECT_LE(oracle.at("uncached_tokens").to_number<int64_t>(),
              baseline.at("uncached_tokens").to_number<int64_t>());
    // Null when the oracle did no better than the baseline (no gap), else 0 and 1.
    const boost::json::value& share = oracle.at("uncached_tokens_oracle_share");
    if (!share.is_null()) {
      EXPECT_DOUBLE_EQ(share.as_double(), 1.0);
      EXPECT_DOUBLE_EQ(baseline.at("uncached_tokens_oracle_share").as_double(), 0.0);
    }
  }
}

// --help lists exactly the arms the command runs without --arms, in their order (the code's own
// list), then arms that run only when named, each of which parses.
TEST_F(ReplayCliTest, HelpListsExactlyTheDefaultArms) {
  const RunResult r = Run("replay --help");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const std::vector<std::string>& defaults = sim::DefaultArmNames();
  const std::string heading = "Arms (--arms, comma-separated; default: these " +
                              std::to_string(defaults.size()) + ", run in this order):";
  EXPECT_THAT(r.out, HasSubstr("\n" + heading + "\n"));
  EXPECT_EQ(cli_testing::HelpArmEntries(r.out, heading, "Run only when named:"), defaults);
  const std::vector<std::string> others =
      cli_testing::HelpArmEntries(r.out, "Run only when named:", "");
  EXPECT_FALSE(others.empty());
  for (std::string name : others) {
    EXPECT_EQ(std::count(defaults.begin(), defaults.end(), name), 0) << name;
    if (name.ends_with("=P")) name.replace(name.size() - 1, 1, "20");
    EXPECT_TRUE(sim::ParseArm(name).ok()) << name;
  }
  EXPECT_THAT(r.out, HasSubstr("Comma-separated arms (default: the " +
                               std::to_string(defaults.size()) + " listed below)"));
  // The synthetic workload's KV default, as the flags apply it.
  EXPECT_THAT(r.out, HasSubstr("synthetic default: 262144"));
  EXPECT_THAT(r.out, HasSubstr("gets 262144 tokens of KV"));
}

TEST_F(ReplayCliTest, HelpNamesEveryArmAndTheConfigFlag) {
  const RunResult r = Run("replay --help");
  EXPECT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(r.err, "");
  for (const char* word : {"baseline", "+lifecycle", "+admission", "+subagent-demotion",
                           "+host-tier", "all", "continuum", "fixed-ttl", "infinite-cache",
                           "--config", "--arms", "--workload", "--json", "--html", "--quiet"}) {
    EXPECT_THAT(r.out, HasSubstr(word));
  }
}

TEST_F(ReplayCliTest, QuietIsSilentAndPlainStderrHasNoProgressLine) {
  const std::string args = std::string(kSmallWorkload) + " --arms baseline,+lifecycle";
  const RunResult quiet = Replay(args + " --quiet");
  EXPECT_EQ(quiet.exit_code, 0) << quiet.err;
  EXPECT_EQ(quiet.err, "");
  EXPECT_THAT(quiet.out, HasSubstr("token hit ratio"));
  EXPECT_TRUE(std::filesystem::exists(dir_ / "report.json"));

  // stderr is a file here, not a terminal: exactly the two "wrote" lines and the summary. (The
  // progress line would need a run over 2 s to show even on a terminal; the exact match below
  // rejects any extra output, including a '\r'.)
  const RunResult plain = Replay(args);
  EXPECT_EQ(plain.exit_code, 0) << plain.err;
  EXPECT_EQ(plain.err.find('\r'), std::string::npos) << plain.err;
  const std::string wrote = "agentkv replay: wrote " + (dir_ / "report.json").string() +
                            "\nagentkv replay: wrote " + (dir_ / "report.html").string() + "\n";
  ASSERT_THAT(plain.err, StartsWith(wrote));
  EXPECT_THAT(plain.err.substr(wrote.size()),
              MatchesRegex("agentkv replay: 2 arms in [0-9]+\\.[0-9] s\n"));
}

// A rollout small enough for a Debug build: 2 steps x 2 tasks x 2 samples of short contexts.
constexpr const char* kSmallRollout =
    "--workload rollout --rollout-prompts 2 --rollout-group-size 2 "
    "--rollout-max-context-tokens 24000";

TEST_F(ReplayCliTest, RolloutWithNoOtherFlagRunsTheDefaultPoint) {
  const RunResult r = Replay("--workload rollout --arms baseline");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_THAT(r.out, HasSubstr("rollout: 2 steps x 8 prompts x 8 samples, sync, seed 1"));
  // The rollout group opens the table.
  EXPECT_THAT(r.out, ContainsRegex("\nmetric +baseline\nrollout\n  steps +2\n"));
  EXPECT_THAT(r.out, ContainsRegex("\n  GPU busy fraction +0\\.[0-9]{4}\n"));
  const boost::json::value report = ReportJson();
  ASSERT_TRUE(report.is_object());
  const boost::json::value& baseline = report.at("arms").at(0);
  EXPECT_EQ(baseline.at("sessions").to_number<int64_t>(), 128);
  EXPECT_EQ(baseline.at("requests_completed"), baseline.at("requests_issued"));
  EXPECT_EQ(baseline.at("rollout").at("trajectories").to_number<int64_t>(), 128);
  EXPECT_EQ(baseline.at("rollout").at("steps").to_number<int64_t>(), 2);
}

TEST_F(ReplayCliTest, RolloutIsDeterministicAndItsModeIsNamed) {
  const std::string args = std::string(kSmallRollout) + " --arms baseline,+lifecycle --html ''";
  ASSERT_EQ(Run("replay " + args + " --json " + Quoted("first.json")).exit_code, 0);
  ASSERT_EQ(Run("replay " + args + " --json " + Quoted("second.json")).exit_code, 0);
  const std::string first = ReadFile(dir_ / "first.json");
  ASSERT_THAT(first, HasSubstr("\"rollout\": {"));
  EXPECT_EQ(first, ReadFile(dir_ / "second.json"));
  const RunResult async = Run("replay " + args +
                              " --rollout-mode async --rollout-staleness 1 --rollout-steps 3 "
                              "--json " +
                              Quoted("async.json"));
  ASSERT_EQ(async.exit_code, 0) << async.err;
  EXPECT_THAT(async.out,
              HasSubstr("rollout: 3 steps x 2 prompts x 2 samples, async (staleness 1)"));
  EXPECT_NE(ReadFile(dir_ / "async.json"), first);
}

TEST_F(ReplayCliTest, BadRolloutFlagsAreOneErrorLineNamingFlagAndValue) {
  const std::string rollout = kSmallRollout;
  const std::vector<Refused> cases = {
      {"--workload rollout --rollout-prompts 0",
       "--rollout-prompts must be in \\[1, 1000\\], got 0"},
      {"--workload rollout --rollout-group-size 1001",
       "--rollout-group-size must be in \\[1, 1000\\], got 1001"},
      {rollout + " --rollout-steps -2", "--rollout-steps must be in \\[1, 1000\\], got -2"},
      {rollout + " --rollout-staleness 0", "--rollout-staleness must be in \\[1, 1000\\], got 0"},
      {"--workload rollout --rollout-max-context-tokens 0",
       "--rollout-max-context-tokens must be in \\[1, 10000000\\], got 0"},
      {rollout + " --rollout-steps 300",
       "--rollout-prompts x --rollout-group-size x --rollout-steps must be at most 1000, got 2 x "
       "2 x 300 = 1200"},
      {rollout + " --rollout-mode fast", "rollout-mode.*fast"},
      {std::string(kSmallWorkload) + " --rollout-prompts 4",
       "--rollout-prompts applies to --workload rollout only"},
      {rollout + " --sessions 4", "do not apply to --workload rollout"},
      {rollout + " --trace " + Quoted("x.json"), "--trace needs --workload"},
  };
  ExpectEachRefused(cases);
}

TEST_F(ReplayCliTest, HelpDescribesTheRolloutWorkloadAndItsFlags) {
  const RunResult r = Run("replay --help");
  EXPECT_EQ(r.exit_code, 0) << r.err;
  for (const char* word :
       {"rollout", "--rollout-prompts", "--rollout-group-size", "--rollout-steps", "--rollout-mode",
        "--rollout-staleness", "--rollout-max-context-tokens"}) {
    EXPECT_THAT(r.out, HasSubstr(word));
  }
}

}  // namespace
}  // namespace agentkv
