#include "agentkv/control/agentic_options.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <functional>
#include <limits>
#include <string>
#include <vector>

namespace agentkv::control {
namespace {

using ::testing::HasSubstr;

constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();
constexpr double kInf = std::numeric_limits<double>::infinity();

struct BadOption {
  // The whole expected message, so both the flag form and the value text are pinned.
  std::string message;
  std::function<void(AgenticOptions&)> apply;
};

// One entry per bound of each numeric option, plus NaN and infinity where a double could
// carry them.
std::vector<BadOption> OutOfRangeOptions() {
  return {
      {"--agentic-admission-headroom must be in (0, 1], got 1.5",
       [](AgenticOptions& o) { o.agentic_admission_headroom = 1.5; }},
      {"--agentic-admission-headroom must be in (0, 1], got 0",
       [](AgenticOptions& o) { o.agentic_admission_headroom = 0.0; }},
      {"--agentic-admission-headroom must be in (0, 1], got -0.1",
       [](AgenticOptions& o) { o.agentic_admission_headroom = -0.1; }},
      {"--agentic-admission-headroom must be in (0, 1], got nan",
       [](AgenticOptions& o) { o.agentic_admission_headroom = kNaN; }},
      {"--agentic-admission-pressure-threshold must be in (0, 1], got 1.01",
       [](AgenticOptions& o) { o.agentic_admission_pressure_threshold = 1.01; }},
      {"--agentic-admission-pressure-threshold must be in (0, 1], got 0",
       [](AgenticOptions& o) { o.agentic_admission_pressure_threshold = 0.0; }},
      {"--agentic-admission-pressure-threshold must be in (0, 1], got inf",
       [](AgenticOptions& o) { o.agentic_admission_pressure_threshold = kInf; }},
      {"--agentic-admission-expected-decode-cap must be in [1, 1099511627776], got 0",
       [](AgenticOptions& o) { o.agentic_admission_expected_decode_cap = 0; }},
      {"--agentic-admission-expected-decode-cap must be in [1, 1099511627776], got -3",
       [](AgenticOptions& o) { o.agentic_admission_expected_decode_cap = -3; }},
      {"--agentic-admission-expected-decode-cap must be in [1, 1099511627776], got "
       "9223372036854775807",
       [](AgenticOptions& o) {
         o.agentic_admission_expected_decode_cap = std::numeric_limits<int64_t>::max();
       }},
      {"--agentic-admission-max-wait-s must be at most 31536000 (a year), got 1e+20",
       [](AgenticOptions& o) { o.agentic_admission_max_wait_s = 1e20; }},
      {"--agentic-admission-lease-ttl-s must be at most 31536000 (a year), got 31536001",
       [](AgenticOptions& o) { o.lease_ttl_s = 31536001; }},
      {"--agentic-admission-max-wait-s must be >= 0, got -1",
       [](AgenticOptions& o) { o.agentic_admission_max_wait_s = -1.0; }},
      {"--agentic-admission-max-wait-s must be >= 0, got nan",
       [](AgenticOptions& o) { o.agentic_admission_max_wait_s = kNaN; }},
      {"--agentic-admission-max-wait-s must be finite, got inf",
       [](AgenticOptions& o) { o.agentic_admission_max_wait_s = kInf; }},
      {"--agentic-admission-lease-ttl-s must be > 0, got 0",
       [](AgenticOptions& o) { o.lease_ttl_s = 0.0; }},
      {"--agentic-admission-lease-ttl-s must be finite, got inf",
       [](AgenticOptions& o) { o.lease_ttl_s = kInf; }},
      {"--agentic-admission-lease-ttl-s must be >= 1 (a shorter lease is reclaimed while its "
       "attempt runs, which turns admission off), got 1e-09",
       [](AgenticOptions& o) { o.lease_ttl_s = 1e-9; }},
      {"--agentic-admission-lease-ttl-s must be >= --agentic-admission-poll-interval-s (5), got 3",
       [](AgenticOptions& o) {
         o.poll_interval_s = 5.0;
         o.staleness_s = 10.0;
         o.lease_ttl_s = 3.0;
       }},
      {"--agentic-admission-poll-interval-s must be > 0, got -2",
       [](AgenticOptions& o) { o.poll_interval_s = -2.0; }},
      {"--agentic-admission-staleness-s must be > 0, got 0",
       [](AgenticOptions& o) { o.staleness_s = 0.0; }},
      {"--agentic-admission-staleness-s must be >= --agentic-admission-poll-interval-s (2), "
       "got 1.5",
       [](AgenticOptions& o) { o.staleness_s = 1.5; }},
  };
}

// The services that poll the fleet also check that one slow engine cannot age the snapshot.
TEST(AgenticOptionsTest, PollTimingKeepsAPollCycleInsideTheStaleness) {
  AgenticOptions o;
  o.agentic_program_admission = true;
  EXPECT_TRUE(CheckPollTiming(o, "--metrics-timeout-s", 1.5).ok());  // 2 + 3 < 6.
  const Status slow = CheckPollTiming(o, "--metrics-timeout-s", 5.0);
  EXPECT_EQ(slow.code(), StatusCode::kInvalidArgument);
  EXPECT_THAT(slow.message(), testing::StartsWith("--agentic-admission-poll-interval-s (2) + 2 x "
                                                  "--metrics-timeout-s (5) must be < "
                                                  "--agentic-admission-staleness-s (6)"));
  EXPECT_FALSE(CheckPollTiming(o, "--metrics-timeout-s", 2.0).ok());  // Exactly 6: not below.
  EXPECT_FALSE(CheckPollTiming(o, "--metrics-timeout-s", 0).ok());
  EXPECT_FALSE(CheckPollTiming(o, "--metrics-timeout-s", std::nan("")).ok());
  o.staleness_s = 20;
  EXPECT_TRUE(CheckPollTiming(o, "--metrics-timeout-s", 5.0).ok());
  o.agentic_program_admission = false;  // Off: only the timeout itself is checked.
  o.staleness_s = 6;
  EXPECT_TRUE(CheckPollTiming(o, "--metrics-timeout-s", 5.0).ok());
}

TEST(AgenticOptionsTest, DefaultsAreTheSeedsAndValid) {
  const AgenticOptions o;
  EXPECT_FALSE(o.agentic_session_lifecycle);
  EXPECT_FALSE(o.agentic_program_admission);
  EXPECT_DOUBLE_EQ(o.agentic_admission_headroom, 0.90);
  EXPECT_DOUBLE_EQ(o.agentic_admission_pressure_threshold, 0.92);
  EXPECT_FALSE(o.agentic_admission_expected_decode_cap.has_value());
  EXPECT_DOUBLE_EQ(o.agentic_admission_max_wait_s, 30.0);
  EXPECT_EQ(o.agentic_admission_scope, AdmissionScope::kTrain);
  EXPECT_DOUBLE_EQ(o.lease_ttl_s, 600.0);
  EXPECT_DOUBLE_EQ(o.staleness_s, 6.0);
  EXPECT_DOUBLE_EQ(o.poll_interval_s, 2.0);
  EXPECT_TRUE(o.Validate().ok()) << o.Validate();

  AgenticOptions on;
  on.agentic_session_lifecycle = true;
  on.agentic_program_admission = true;
  EXPECT_TRUE(on.Validate().ok()) << on.Validate();
}

TEST(AgenticOptionsTest, RejectsEachOutOfRangeOptionOnlyWhenAdmissionIsOn) {
  for (const BadOption& bad : OutOfRangeOptions()) {
    SCOPED_TRACE(bad.message);
    AgenticOptions off;
    bad.apply(off);
    EXPECT_TRUE(off.Validate().ok()) << "admission off must not validate: " << off.Validate();

    AgenticOptions on;
    on.agentic_program_admission = true;
    bad.apply(on);
    const Status status = on.Validate();
    EXPECT_EQ(status.code(), StatusCode::kInvalidArgument) << status;
    EXPECT_EQ(status.message(), bad.message);

    // The session lifecycle alone does not turn admission validation on.
    AgenticOptions lifecycle_only;
    lifecycle_only.agentic_session_lifecycle = true;
    bad.apply(lifecycle_only);
    EXPECT_TRUE(lifecycle_only.Validate().ok()) << lifecycle_only.Validate();
  }
}

TEST(AgenticOptionsTest, AcceptsTheInclusiveBounds) {
  AgenticOptions o;
  o.agentic_program_admission = true;
  o.agentic_admission_headroom = 1.0;
  o.agentic_admission_pressure_threshold = 1.0;
  o.agentic_admission_expected_decode_cap = 1;
  o.agentic_admission_max_wait_s = 0.0;
  o.poll_interval_s = 0.5;
  o.staleness_s = 0.5;  // Equal to the poll interval is allowed.
  o.lease_ttl_s = 1.0;  // kMinLeaseTtlSeconds.
  EXPECT_TRUE(o.Validate().ok()) << o.Validate();

  o.agentic_admission_headroom = 1e-9;
  o.agentic_admission_pressure_threshold = 1e-9;
  EXPECT_TRUE(o.Validate().ok()) << o.Validate();
}

TEST(AgenticOptionsTest, ReportsTheFirstBadOptionInDeclarationOrder) {
  AgenticOptions o;
  o.agentic_program_admission = true;
  o.agentic_admission_headroom = 2.0;
  o.agentic_admission_max_wait_s = -1.0;
  EXPECT_THAT(o.Validate().message(), HasSubstr("--agentic-admission-headroom"));
  o.agentic_admission_headroom = 0.5;
  EXPECT_THAT(o.Validate().message(), HasSubstr("--agentic-admission-max-wait-s"));
}

TEST(AgenticOptionsTest, ExpectedDecodeCapDefaultsToTheMaxResponseLength) {
  AgenticOptions o;
  EXPECT_EQ(o.ExpectedDecodeCap(8192), 8192);
  o.agentic_admission_expected_decode_cap = 1024;
  EXPECT_EQ(o.ExpectedDecodeCap(8192), 1024);
  // The cap is used as given even when it exceeds the response length; the reservation takes
  // the minimum with the remaining completion budget.
  o.agentic_admission_expected_decode_cap = 16384;
  EXPECT_EQ(o.ExpectedDecodeCap(8192), 16384);
}

TEST(AgenticOptionsTest, DurationsConvertSecondsAndSaturate) {
  AgenticOptions o;
  EXPECT_EQ(o.max_wait(), TimeNs::Seconds(30));
  EXPECT_EQ(o.lease_ttl(), TimeNs::Seconds(600));
  EXPECT_EQ(o.staleness(), TimeNs::Seconds(6));
  EXPECT_EQ(o.poll_interval(), TimeNs::Millis(2000));
  o.agentic_admission_max_wait_s = 0.25;
  EXPECT_EQ(o.max_wait(), TimeNs::Millis(250));
  o.agentic_admission_max_wait_s = 1e300;  // Valid (finite, >= 0) but past TimeNs's range.
  EXPECT_EQ(o.max_wait(), TimeNs(std::numeric_limits<int64_t>::max()));
}

struct ScopeCase {
  std::string text;
  bool ok;
  AdmissionScope scope;
};

TEST(AgenticOptionsTest, ParsesExactlyTrainAndAll) {
  const std::vector<ScopeCase> cases = {
      {"train", true, AdmissionScope::kTrain},
      {"all", true, AdmissionScope::kAll},
      {"Train", false, {}},
      {"ALL", false, {}},
      {" all", false, {}},
      {"train ", false, {}},
      {"", false, {}},
      {"eval", false, {}},
      {"train+eval", false, {}},
  };
  for (const ScopeCase& c : cases) {
    SCOPED_TRACE("\"" + c.text + "\"");
    const StatusOr<AdmissionScope> parsed = ParseAdmissionScope(c.text);
    ASSERT_EQ(parsed.ok(), c.ok) << parsed.status();
    if (c.ok) {
      EXPECT_EQ(*parsed, c.scope);
      EXPECT_EQ(AdmissionScopeName(*parsed), c.text);
    } else {
      EXPECT_EQ(parsed.status().code(), StatusCode::kInvalidArgument);
      EXPECT_EQ(parsed.status().message(),
                "--agentic-admission-scope must be \"train\" or \"all\", got \"" + c.text + "\"");
    }
  }
}

TEST(AgenticOptionsTest, ScopeNamesRoundTrip) {
  for (const AdmissionScope scope : {AdmissionScope::kTrain, AdmissionScope::kAll}) {
    const StatusOr<AdmissionScope> parsed = ParseAdmissionScope(AdmissionScopeName(scope));
    ASSERT_TRUE(parsed.ok()) << parsed.status();
    EXPECT_EQ(*parsed, scope);
  }
}

TEST(AgenticOptionsTest, InScopeCoversEvalOnlyUnderAll) {
  EXPECT_TRUE(InScope(AdmissionScope::kTrain, /*is_train=*/true));
  EXPECT_FALSE(InScope(AdmissionScope::kTrain, /*is_train=*/false));
  EXPECT_TRUE(InScope(AdmissionScope::kAll, /*is_train=*/true));
  EXPECT_TRUE(InScope(AdmissionScope::kAll, /*is_train=*/false));
}

TEST(AgenticOptionsTest, ParsesExactlySeedAndV2AndChecksTheProgramWindow) {
  EXPECT_EQ(*ParseAdmissionPolicy("seed"), AdmissionPolicy::kSeed);
  EXPECT_EQ(*ParseAdmissionPolicy("v2"), AdmissionPolicy::kV2);
  for (const AdmissionPolicy policy : {AdmissionPolicy::kSeed, AdmissionPolicy::kV2}) {
    EXPECT_EQ(*ParseAdmissionPolicy(AdmissionPolicyName(policy)), policy);
  }
  for (const char* bad : {"V2", "seed ", "", "v1", "fifo"}) {
    const StatusOr<AdmissionPolicy> parsed = ParseAdmissionPolicy(bad);
    ASSERT_FALSE(parsed.ok()) << bad;
    EXPECT_EQ(
        parsed.status().message(),
        "--agentic-admission-policy must be \"seed\" or \"v2\", got \"" + std::string(bad) + "\"");
  }
  AgenticOptions o;
  EXPECT_EQ(o.agentic_admission_policy, AdmissionPolicy::kSeed);
  EXPECT_EQ(o.program_window(), TimeNs::Seconds(5));
  o.agentic_program_admission = true;
  o.agentic_admission_program_window_s = 0;
  EXPECT_TRUE(o.Validate().ok()) << o.Validate();
  o.agentic_admission_program_window_s = -1;
  EXPECT_THAT(o.Validate().message(),
              HasSubstr("--agentic-admission-program-window-s must be >= 0"));
  o.agentic_program_admission = false;
  EXPECT_TRUE(o.Validate().ok());
}

}  // namespace
}  // namespace agentkv::control
