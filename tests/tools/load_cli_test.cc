// End-to-end tests of `agentkv load` without a server: each flag out of range is one error line
// naming it, an open-loop trace sends each request as its own session, and a run against a port
// nobody listens on (127.0.0.1:1) measures every attempt as failed while the agents go on, as they
// would against a dead fleet; Ctrl-C ends a run with what it measured. Each test spawns the built
// binary (AGENTKV_BINARY) in its private temporary directory. The runs against live emulated fleets
// are tests/integration/load_fidelity_test.cc.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <boost/json.hpp>
#include <cstdlib>
#include <string>

#include "cli_test_support.h"

namespace agentkv {
namespace {

using cli_testing::ReadFile;
using cli_testing::RunResult;
using ::testing::HasSubstr;

constexpr const char* kDead = "load --url http://127.0.0.1:1 ";
// Two small synthetic sessions (for load: their gaps compressed to almost nothing).
constexpr const char* kTiny = "--sessions 2 --context-scale 0.05 --quiet ";
constexpr const char* kFast = "--time-scale 10000 ";

class LoadCliTest : public cli_testing::CliTest {
 protected:
  void ExpectError(const std::string& args, const std::string& message) const {
    const RunResult r = Run(kDead + args);
    EXPECT_EQ(r.exit_code, 2) << args;
    cli_testing::ExpectOneErrorLine(r, "agentkv load: error: ");
    EXPECT_THAT(r.err, HasSubstr(message)) << args;
  }
  std::string Path(const std::string& name) const { return (dir_ / name).string(); }
};

TEST_F(LoadCliTest, EachFlagOutOfRangeIsNamedWithItsValue) {
  ExpectError("--connections 0", "--connections must be in [1, 65536], got 0");
  ExpectError("--timeout-s 0", "--timeout-s must be in (0, 86400], got 0");
  ExpectError("--time-scale 20000", "--time-scale must be in (0, 10000], got 20000");
  ExpectError("--output-tokens -1", "--output-tokens must be in [0, 2^20], got -1");
  ExpectError("--vocab-size 10", "--vocab-size must be in (1000, 2^31], got 10");
  ExpectError("--retries 101", "--retries must be in [0, 100], got 101");
  ExpectError("--ramp-period-s 0", "--ramp-period-s must be in [0.001, 86400], got 0");
  ExpectError("--slo-s -1", "--slo-s must be in (0, 86400], got -1");
  ExpectError("--ramp-step-users 0", "--ramp-step-users must be in [1, 1000], got 0");
  ExpectError("--sessions 0", "--sessions");
  const RunResult bad_url = Run("load --url http://127.0.0.1:89536");
  EXPECT_THAT(bad_url.err, HasSubstr("--url: base URL \"http://127.0.0.1:89536\" has an invalid "
                                     "port \"89536\""));
}

TEST_F(LoadCliTest, AnOpenLoopTraceSendsEachRequestAsItsOwnSession) {
  const std::string trace = WriteTrace(
      "m.jsonl",
      "{\"timestamp\": 0, \"input_length\": 600, \"output_length\": 1, \"hash_ids\": [1]}\n"
      "{\"timestamp\": 10, \"input_length\": 600, \"output_length\": 2, \"hash_ids\": [1]}\n"
      "{\"timestamp\": 20, \"input_length\": 10, \"output_length\": 1, \"hash_ids\": []}\n");
  const std::string mooncake = "--workload mooncake --trace '" + trace + "' ";
  ExpectError(mooncake + "--ramp", "an open-loop trace has none");
  const RunResult r = Run(std::string(kDead) + mooncake + kFast + "--quiet --json '" +
                          Path("m.json") + "' --html ''");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const boost::json::value arm = boost::json::parse(ReadFile(Path("m.json"))).at("arms").at(0);
  EXPECT_EQ(arm.at("requests_issued").to_number<int64_t>(), 3);
  EXPECT_EQ(arm.at("sessions").to_number<int64_t>(), 3);
  EXPECT_EQ(arm.at("measured").at("requests_failed").to_number<int64_t>(), 3);
  EXPECT_EQ(arm.at("measured").at("errors").at("unavailable").to_number<int64_t>(), 3);
}

TEST_F(LoadCliTest, AgainstADeadEndpointEveryAttemptFailsAndTheAgentsGoOn) {
  const RunResult replay = Run(std::string("replay --arms baseline ") + kTiny + "--json '" +
                               Path("r.json") + "' --html ''");
  ASSERT_EQ(replay.exit_code, 0) << replay.err;
  const boost::json::value predicted = boost::json::parse(ReadFile(Path("r.json")));
  const int64_t requests = predicted.at("arms").at(0).at("requests_issued").to_number<int64_t>();

  const RunResult r =
      Run(std::string(kDead) + kTiny + kFast + "--retries 1 --label baseline --json '" +
          Path("m.json") + "' --html '" + Path("m.html") + "'");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const boost::json::value measured = boost::json::parse(ReadFile(Path("m.json")));
  const boost::json::value& arm = measured.at("arms").at(0);
  EXPECT_EQ(arm.at("arm").as_string(), "baseline");
  EXPECT_EQ(arm.at("requests_issued").to_number<int64_t>(), requests);
  EXPECT_EQ(arm.at("requests_completed").to_number<int64_t>(), requests);
  EXPECT_EQ(arm.at("requests_refused").to_number<int64_t>(), requests);
  const boost::json::value& m = arm.at("measured");
  EXPECT_EQ(m.at("requests_failed").to_number<int64_t>(), requests);
  EXPECT_EQ(m.at("attempts").to_number<int64_t>(), 2 * requests);
  EXPECT_EQ(m.at("retries").to_number<int64_t>(), requests);
  EXPECT_EQ(m.at("errors").at("unavailable").to_number<int64_t>(), 2 * requests);
  EXPECT_EQ(m.at("time_scale").to_number<double>(), 10000.0);
  EXPECT_FALSE(m.at("stopped").as_bool());
  // Every session's close failed too (nobody answers), counted apart from the requests.
  EXPECT_EQ(m.at("sessions_closed").to_number<int64_t>(), 0);
  EXPECT_GT(m.at("close_errors").at("unavailable").to_number<int64_t>(), 0);
  EXPECT_THAT(ReadFile(Path("m.html")), HasSubstr("baseline"));
}

TEST_F(LoadCliTest, SigintEndsTheRunWithWhatItMeasured) {
  // At time scale 1 the synthetic agents' gaps last seconds: the run is still going at 2 s.
  const std::string json = Path("m.json");
  const std::string command = std::string("timeout -s INT --preserve-status 2 '") + AGENTKV_BINARY +
                              "' " + kDead + "--sessions 4 --context-scale 0.05 --json '" + json +
                              "' --html '' 2>'" + Path("err.txt") + "' >/dev/null";
  const int status = std::system(command.c_str());
  ASSERT_TRUE(WIFEXITED(status));
  EXPECT_EQ(WEXITSTATUS(status), 0) << ReadFile(Path("err.txt"));
  EXPECT_THAT(ReadFile(Path("err.txt")), HasSubstr("SIGINT received, stopping"));
  const boost::json::value measured = boost::json::parse(ReadFile(json));
  EXPECT_TRUE(measured.at("arms").at(0).at("measured").at("stopped").as_bool());
}

}  // namespace
}  // namespace agentkv
