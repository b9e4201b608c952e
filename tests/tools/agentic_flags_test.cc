// Tests of AgenticFlags, the one declaration of the --agentic-* options.
#include "tools/agentkv/agentic_flags.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "tools/agentkv/cli_support.h"

namespace agentkv::tools {
namespace {

using ::testing::HasSubstr;

// Parses `args` (after the program name) into `app`, adding `flags` with `set`. The flags keep
// pointers to the app's options: `app` must outlive every flags.Options() call.
Status Parse(CLI::App& app, AgenticFlags& flags, AgenticFlags::Set set,
             std::vector<std::string> args) {
  flags.Add(app, set, FlagSource::kCommandLine, "Admission");
  std::vector<std::string> reversed(args.rbegin(), args.rend());
  try {
    app.parse(reversed);
  } catch (const CLI::ParseError& e) {
    return InvalidArgumentError(e.what());
  }
  return Status::Ok();
}

TEST(AgenticFlagsTest, DefaultsAreAgenticOptionsDefaults) {
  CLI::App app;
  AgenticFlags flags;
  ASSERT_TRUE(Parse(app, flags, AgenticFlags::Set::kAll, {}).ok());
  const control::AgenticOptions got = flags.Options().value();
  const control::AgenticOptions want;
  EXPECT_EQ(got.agentic_session_lifecycle, want.agentic_session_lifecycle);
  EXPECT_EQ(got.agentic_program_admission, want.agentic_program_admission);
  EXPECT_EQ(got.agentic_admission_headroom, want.agentic_admission_headroom);
  EXPECT_EQ(got.agentic_admission_pressure_threshold, want.agentic_admission_pressure_threshold);
  EXPECT_FALSE(got.agentic_admission_expected_decode_cap.has_value());
  EXPECT_EQ(got.agentic_admission_max_wait_s, want.agentic_admission_max_wait_s);
  EXPECT_EQ(got.agentic_admission_scope, want.agentic_admission_scope);
  EXPECT_EQ(got.lease_ttl_s, want.lease_ttl_s);
  EXPECT_EQ(got.staleness_s, want.staleness_s);
  EXPECT_EQ(got.poll_interval_s, want.poll_interval_s);
}

TEST(AgenticFlagsTest, ReadsEveryOptionOfTheFullSet) {
  CLI::App app;
  AgenticFlags flags;
  ASSERT_TRUE(
      Parse(app, flags, AgenticFlags::Set::kAll,
            {"--agentic-session-lifecycle", "--agentic-program-admission",
             "--agentic-admission-headroom", "0.5", "--agentic-admission-pressure-threshold", "0.7",
             "--agentic-admission-expected-decode-cap", "0", "--agentic-admission-max-wait-s", "4",
             "--agentic-admission-scope", "all", "--agentic-admission-lease-ttl-s", "9",
             "--agentic-admission-staleness-s", "8", "--agentic-admission-poll-interval-s", "1"})
          .ok());
  const control::AgenticOptions got = flags.Options().value();
  EXPECT_TRUE(got.agentic_session_lifecycle);
  EXPECT_TRUE(got.agentic_program_admission);
  EXPECT_EQ(got.agentic_admission_headroom, 0.5);
  EXPECT_EQ(got.agentic_admission_pressure_threshold, 0.7);
  // A decode cap given is kept as given, 0 included: Validate refuses it, naming the flag.
  EXPECT_EQ(got.agentic_admission_expected_decode_cap, 0);
  EXPECT_THAT(got.Validate().message(),
              HasSubstr("--agentic-admission-expected-decode-cap must be in [1, "));
  EXPECT_EQ(got.agentic_admission_max_wait_s, 4.0);
  EXPECT_EQ(got.agentic_admission_scope, control::AdmissionScope::kAll);
  EXPECT_EQ(got.lease_ttl_s, 9.0);
  EXPECT_EQ(got.staleness_s, 8.0);
  EXPECT_EQ(got.poll_interval_s, 1.0);
}

TEST(AgenticFlagsTest, TheBudgetSetHasOnlyTheBudgetOptions) {
  CLI::App app;
  AgenticFlags flags;
  EXPECT_TRUE(Parse(app, flags, AgenticFlags::Set::kBudget,
                    {"--agentic-admission-headroom", "0.5", "--agentic-admission-max-wait-s", "1"})
                  .ok());
  CLI::App no_scope_app;
  AgenticFlags no_scope;
  EXPECT_FALSE(Parse(no_scope_app, no_scope, AgenticFlags::Set::kBudget,
                     {"--agentic-admission-scope", "all"})
                   .ok());
  CLI::App no_switch_app;
  AgenticFlags no_switch;
  EXPECT_FALSE(Parse(no_switch_app, no_switch, AgenticFlags::Set::kAdmission,
                     {"--agentic-program-admission"})
                   .ok());
}

TEST(AgenticFlagsTest, AnUnknownScopeNamesTheFlag) {
  CLI::App app;
  AgenticFlags flags;
  ASSERT_TRUE(
      Parse(app, flags, AgenticFlags::Set::kAdmission, {"--agentic-admission-scope", "Train"})
          .ok());
  EXPECT_THAT(flags.Options().status().message(), HasSubstr("--agentic-admission-scope"));
}

TEST(AgenticFlagsTest, ThePolicyAndTheProgramWindowAreRead) {
  CLI::App app;
  AgenticFlags flags;
  ASSERT_TRUE(
      Parse(app, flags, AgenticFlags::Set::kAdmission,
            {"--agentic-admission-policy", "v2", "--agentic-admission-program-window-s", "2.5"})
          .ok());
  const control::AgenticOptions got = flags.Options().value();
  EXPECT_EQ(got.agentic_admission_policy, control::AdmissionPolicy::kV2);
  EXPECT_EQ(got.agentic_admission_program_window_s, 2.5);
  // The replay's budget set has the window (its arms pick the policy), not the policy.
  CLI::App budget_app;
  AgenticFlags budget;
  EXPECT_TRUE(Parse(budget_app, budget, AgenticFlags::Set::kBudget,
                    {"--agentic-admission-program-window-s", "0"})
                  .ok());
  CLI::App no_policy_app;
  AgenticFlags no_policy;
  EXPECT_FALSE(Parse(no_policy_app, no_policy, AgenticFlags::Set::kBudget,
                     {"--agentic-admission-policy", "v2"})
                   .ok());
  CLI::App bad_app;
  AgenticFlags bad;
  ASSERT_TRUE(
      Parse(bad_app, bad, AgenticFlags::Set::kAll, {"--agentic-admission-policy", "V2"}).ok());
  EXPECT_THAT(bad.Options().status().message(), HasSubstr("--agentic-admission-policy"));
}

}  // namespace
}  // namespace agentkv::tools
