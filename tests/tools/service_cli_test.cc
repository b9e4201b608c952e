// End-to-end tests of the long-running commands' startup checks (`agentkv gateway`,
// `agentkv coordinator`): every invalid value, from a flag or from the environment, is refused
// before anything binds, with one `error:` line naming the option, the value and the valid
// range, and exit code 2. No test here opens a socket.
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <stdlib.h>

#include <string>
#include <utility>
#include <vector>

#include "cli_test_support.h"

namespace agentkv {
namespace {

using cli_testing::RunResult;
using ::testing::HasSubstr;
using ::testing::Not;

class ServiceCliTest : public cli_testing::CliTest {};

// A gateway command line that would start (were its values valid) without any engine.
constexpr const char* kGateway =
    "gateway --engine-urls http://127.0.0.1:9 --no-check-prerequisites";

void ExpectGatewayError(const RunResult& r, const std::string& needle) {
  cli_testing::ExpectOneErrorLine(r, "agentkv gateway: error: ");
  EXPECT_THAT(r.err, HasSubstr(needle));
}

void ExpectCoordinatorError(const RunResult& r, const std::string& needle) {
  cli_testing::ExpectOneErrorLine(r, "agentkv coordinator: error: ");
  EXPECT_THAT(r.err, HasSubstr(needle));
}

// An open door: the session lifecycle on a non-loopback address with no credential would let
// anyone who reaches the port close anyone's session, so the gateway refuses to start.
TEST_F(ServiceCliTest, GatewayRefusesAnOpenDoorNamingTheWaysOut) {
  const std::string gateway = kGateway;
  const RunResult r = Run(gateway + " --host 0.0.0.0 --agentic-session-lifecycle");
  ExpectGatewayError(r, "--agentic-session-lifecycle on --host 0.0.0.0 (not loopback)");
  for (const char* way : {"--tenant-keys-file", "--bearer-token", "--allow-unauthenticated"}) {
    EXPECT_THAT(r.err, HasSubstr(way));
  }
  // A bad tenant keys file stops it too, naming the file and the line but never a key.
  const std::string keys =
      WriteTrace("tenants.txt", "# tenants\nacme 0123456789abcdef-secret\nbeta short-secret\n");
  const RunResult bad = Run(gateway +
                            " --host 0.0.0.0 --agentic-session-lifecycle "
                            "--tenant-keys-file '" +
                            keys + "'");
  ExpectGatewayError(bad, keys + ":3: the key of tenant beta is shorter than 16 bytes");
  EXPECT_THAT(bad.err, Not(HasSubstr("secret")));
  ExpectGatewayError(Run(gateway + " --max-new-sessions-per-s -1"), "--max-new-sessions-per-s");
  ExpectGatewayError(Run(gateway + " --new-sessions-burst 0"), "--new-sessions-burst");
}

TEST_F(ServiceCliTest, GatewayRefusesEachOutOfRangeValueNamingFlagRangeAndValue) {
  const std::string gateway = kGateway;
  ExpectGatewayError(Run(gateway + " --port 70000"), "--port must be in [0, 65535], got 70000");
  ExpectGatewayError(Run(gateway + " --coordinator-heartbeat-interval-s -1"),
                     "--coordinator-heartbeat-interval-s must be in [0, 3600], got -1");
  ExpectGatewayError(Run(gateway + " --coordinator-heartbeat-timeout-s 0"),
                     "--coordinator-heartbeat-timeout-s must be in (0, 3600], got 0");
  ExpectGatewayError(Run(gateway + " --coordinator-breaker-failures 0"),
                     "--coordinator-breaker-failures must be in [1, 1000], got 0");
  ExpectGatewayError(Run(gateway + " --coordinator-breaker-cooldown-s 1e9"),
                     "--coordinator-breaker-cooldown-s must be in (0, 3600], got 1000000000");
  // The seed's admission options are checked when admission is on (a disabled feature never
  // blocks a start, as in Relax).
  ExpectGatewayError(Run(gateway + " --agentic-program-admission --agentic-admission-headroom 1.5"),
                     "--agentic-admission-headroom must be in (0, 1], got 1.5");
  ExpectGatewayError(Run(gateway + " --close-timeout-s 0"),
                     "--close-timeout-s must be finite and > 0, got 0");
  ExpectGatewayError(Run(gateway + " --upstream-connections 0"), "--upstream-connections");
  ExpectGatewayError(Run(gateway + " --max-inflight-bytes -1"),
                     "--max-inflight-bytes must be in [0, 4611686018427387904], got -1");
  ExpectGatewayError(Run(gateway + " --max-body-bytes -1"), "--max-body-bytes must be in [0, ");
  ExpectGatewayError(Run(gateway + " --router-policy fastest"), "--router-policy");
  ExpectGatewayError(Run(gateway + " --session-header 'X Session'"), "--session-header");
  ExpectGatewayError(Run(gateway + " --agentic-admission-scope everything"),
                     "--agentic-admission-scope");
}

// The hardening limits: durations past a year, token counts past 2^40, counts out of range,
// and a poll timing under which one stalled engine would age the capacity snapshot.
TEST_F(ServiceCliTest, GatewayRefusesValuesPastTheirBounds) {
  const std::string gateway = kGateway;
  ExpectGatewayError(Run(gateway + " --agentic-program-admission --metrics-timeout-s 5"),
                     "--agentic-admission-poll-interval-s (2) + 2 x --metrics-timeout-s (5) "
                     "must be < --agentic-admission-staleness-s (6)");
  ExpectGatewayError(Run(gateway + " --metrics-timeout-s 0"),
                     "--metrics-timeout-s must be finite and > 0, got 0");
  ExpectGatewayError(Run(gateway + " --session-idle-timeout-s 1e12"),
                     "--session-idle-timeout-s must be at most 31536000 (a year), got 1e+12");
  ExpectGatewayError(Run(gateway + " --max-sessions 0"), "--max-sessions must be in [1, ");
  ExpectGatewayError(Run(gateway + " --max-sessions 10 --max-retained-sessions 11"),
                     "--max-retained-sessions must be in [0, --max-sessions = 10], got 11");
  ExpectGatewayError(Run(gateway + " --context-length 0"), "--context-length must be in [1, ");
  ExpectGatewayError(Run(gateway + " --default-max-tokens 9223372036854775807"),
                     "--default-max-tokens must be in [0, 1099511627776]");
  ExpectGatewayError(Run(gateway + " --shutdown-grace-s nan"), "--shutdown-grace-s");
  ExpectGatewayError(
      Run(gateway + " --agentic-program-admission --agentic-admission-expected-decode-cap "
                    "9223372036854775807"),
      "--agentic-admission-expected-decode-cap must be in [1, 1099511627776]");
  ExpectCoordinatorError(Run("coordinator --metrics-timeout-s 3"),
                         "2 x --metrics-timeout-s (3) must be < --agentic-admission-staleness-s");
  ExpectCoordinatorError(Run("coordinator --agentic-admission-lease-ttl-s 1e300"),
                         "--agentic-admission-lease-ttl-s must be at most 31536000 (a year)");
}

TEST_F(ServiceCliTest, EmulatorsRefuseDurationsOutOfRange) {
  for (const char* mode : {"engine", "fleet"}) {
    const RunResult r = Run(std::string("emulate ") + mode + " --shutdown-grace-s 1e300");
    cli_testing::ExpectOneErrorLine(r, std::string("agentkv emulate ") + mode + ": error: ");
    EXPECT_THAT(r.err, HasSubstr("--shutdown-grace-s must be in [0, 3600]"));
  }
  const RunResult r =
      Run("emulate router --worker-urls http://127.0.0.1:9 --health-check-interval-secs -1");
  cli_testing::ExpectOneErrorLine(r, "agentkv emulate router: error: ");
  EXPECT_THAT(r.err, HasSubstr("--health-check-interval-secs must be in [0, 86400], got -1"));
}

// Every engine flag the cost model or the scheduler would refuse is refused by its own name
// (none of these starts a server: each fails before anything binds).
TEST_F(ServiceCliTest, EngineEmulatorRefusesEachBadValueByItsFlag) {
  const std::vector<std::pair<std::string, std::string>> cases = {
      {"--tp 3", "--tp must be one of 1, 2, 4, 8, got 3"},
      {"--tp 0", "--tp must be one of 1, 2, 4, 8, got 0"},
      {"--model foo", "--model: unknown model preset \"foo\""},
      {"--gpu a100x", "--gpu: unknown gpu preset \"a100x\""},
      {"--max-running-requests 0", "--max-running-requests must be in [1, 1048576], got 0"},
      {"--max-prefill-tokens 0", "--max-prefill-tokens must be in [1, 1073741824], got 0"},
      {"--chunked-prefill-size -1", "--chunked-prefill-size must be in [0, 1073741824], got -1"},
      {"--hicache-tokens -1", "--hicache-tokens must be in [0, 1099511627776], got -1"},
  };
  for (const auto& [flags, message] : cases) {
    for (const char* mode : {"engine", "fleet"}) {
      const RunResult r = Run(std::string("emulate ") + mode + " " + flags);
      cli_testing::ExpectOneErrorLine(r, std::string("agentkv emulate ") + mode + ": error: ");
      EXPECT_THAT(r.err, HasSubstr(message)) << mode << " " << flags;
    }
  }
}

TEST_F(ServiceCliTest, GatewayNeedsExactlyOneUpstream) {
  ExpectGatewayError(Run("gateway --no-check-prerequisites"), "--router-url");
  ExpectGatewayError(
      Run("gateway --router-url http://127.0.0.1:9 --engine-urls http://127.0.0.1:8"),
      "--router-url");
  ExpectGatewayError(Run("gateway --router-url https://127.0.0.1:9"), "https");
}

// A port past 65535 once wrapped (89536 went to port 24000): every URL flag of every command
// refuses a port outside [1, 65535], naming the flag and the value, before anything binds.
TEST_F(ServiceCliTest, EveryUrlFlagRefusesAPortOutsideOneTo65535) {
  const std::string bad = "http://127.0.0.1:89536";
  const std::string message =
      "base URL \"" + bad + "\" has an invalid port \"89536\": a port is in [1, 65535]";
  ExpectGatewayError(Run("gateway --no-check-prerequisites --router-url " + bad),
                     "--router-url: " + message);
  ExpectGatewayError(
      Run("gateway --no-check-prerequisites --engine-urls http://127.0.0.1:9 " + bad + "@1"),
      "--engine-urls: " + message);
  ExpectGatewayError(Run(std::string(kGateway) + " --coordinator-url " + bad),
                     "--coordinator-url: " + message);
  ExpectGatewayError(
      Run(std::string(kGateway) + " --coordinator-url http://127.0.0.1:0"),
      "--coordinator-url: base URL \"http://127.0.0.1:0\" has an invalid port \"0\"");
  ExpectCoordinatorError(Run("coordinator --router-url " + bad), "--router-url: " + message);
  ExpectCoordinatorError(Run("coordinator --engine-urls " + bad), "--engine-urls: " + message);
  const RunResult router = Run("emulate router --worker-urls " + bad + "@0");
  cli_testing::ExpectOneErrorLine(router, "agentkv emulate router: error: ");
  EXPECT_THAT(router.err, HasSubstr("--worker-urls: " + message));
}

TEST_F(ServiceCliTest, GatewayReadsFlagsFromTheEnvironmentAndChecksThemTheSame) {
  ASSERT_EQ(setenv("AGENTKV_AGENTIC_ADMISSION_HEADROOM", "2", 1), 0);
  const RunResult r = Run(std::string(kGateway) + " --agentic-program-admission");
  unsetenv("AGENTKV_AGENTIC_ADMISSION_HEADROOM");
  ExpectGatewayError(r, "--agentic-admission-headroom must be in (0, 1], got 2");
}

TEST_F(ServiceCliTest, CoordinatorRefusesEachOutOfRangeValueNamingFlagRangeAndValue) {
  ExpectCoordinatorError(Run("coordinator --port -1"), "--port must be in [0, 65535], got -1");
  ExpectCoordinatorError(Run("coordinator --agentic-admission-staleness-s 1"),
                         "--agentic-admission-staleness-s");
  ExpectCoordinatorError(Run("coordinator --agentic-admission-max-wait-s -3"),
                         "--agentic-admission-max-wait-s");
  ExpectCoordinatorError(Run("coordinator --threads 0"), "--threads must be in [1, 256], got 0");
  ExpectCoordinatorError(Run("coordinator --log-level loud"), "--log-level");
  ExpectCoordinatorError(Run("coordinator --agentic-admission-lease-ttl-s 1e-9"),
                         "--agentic-admission-lease-ttl-s must be >= 1 (a shorter lease is "
                         "reclaimed while its attempt runs, which turns admission off), got 1e-09");
  ExpectCoordinatorError(Run("coordinator --instance-timeout-s 0"),
                         "--instance-timeout-s must be in (0, 86400], got 0");
}

TEST_F(ServiceCliTest, HelpNamesTheSeedFlags) {
  for (const char* command : {"gateway --help", "coordinator --help"}) {
    const RunResult r = Run(command);
    EXPECT_EQ(r.exit_code, 0) << r.err;
    EXPECT_THAT(r.out, HasSubstr("--agentic-admission-headroom")) << command;
    EXPECT_THAT(r.out, HasSubstr("--agentic-admission-max-wait-s")) << command;
  }
  EXPECT_THAT(Run("gateway --help").out, HasSubstr("--agentic-session-lifecycle"));
  EXPECT_THAT(Run("gateway --help").out, HasSubstr("--upstream-connections"));
  EXPECT_THAT(Run("gateway --help").out, HasSubstr("--max-inflight-bytes INT=268435456"));
}

TEST_F(ServiceCliTest, EveryServerCommandOffersTheAccessLog) {
  for (const char* command : {"gateway --help", "coordinator --help", "emulate engine --help",
                              "emulate router --help", "emulate fleet --help"}) {
    const RunResult r = Run(command);
    EXPECT_EQ(r.exit_code, 0) << command << ": " << r.err;
    EXPECT_THAT(r.out, HasSubstr("--access-log")) << command;
    EXPECT_THAT(r.out, HasSubstr("one JSON line per answered request")) << command;
  }
  // Replay serves nothing: no access log.
  EXPECT_THAT(Run("replay --help").out, ::testing::Not(HasSubstr("--access-log")));
}

}  // namespace
}  // namespace agentkv
