// Tests of WorkingSetFlags, the one declaration of the --agentic-working-set-* options.
#include "tools/agentkv/working_set_flags.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <string>
#include <vector>

namespace agentkv::tools {
namespace {

using ::testing::HasSubstr;

StatusOr<control::WorkingSetOptions> Parse(std::vector<std::string> args) {
  CLI::App app;
  WorkingSetFlags flags;
  flags.Add(app, "Working set");
  std::vector<std::string> reversed(args.rbegin(), args.rend());
  try {
    app.parse(reversed);
  } catch (const CLI::ParseError& e) {
    return InvalidArgumentError(e.what());
  }
  return flags.Options();
}

TEST(WorkingSetFlagsTest, DefaultsAreWorkingSetOptionsDefaultsAndPassTheirOwnChecks) {
  // A default read back as seconds must not exceed its own bound by an ulp.
  StatusOr<control::WorkingSetOptions> got = Parse({});
  ASSERT_TRUE(got.ok()) << got.status();
  const control::WorkingSetOptions want;
  EXPECT_EQ(got->headroom, want.headroom);
  EXPECT_EQ(got->hold_quantile, want.hold_quantile);
  EXPECT_EQ(got->default_hold, want.default_hold);
  EXPECT_EQ(got->max_hold, want.max_hold);
  EXPECT_EQ(got->max_wait, want.max_wait);
  EXPECT_EQ(got->returning_waits, want.returning_waits);
  EXPECT_EQ(got->reserve_expected_peak, want.reserve_expected_peak);
}

TEST(WorkingSetFlagsTest, ValuesAreReadAndBadOnesNameTheirFlag) {
  StatusOr<control::WorkingSetOptions> got =
      Parse({"--agentic-working-set-headroom", "1.5", "--agentic-working-set-max-hold-s", "60",
             "--agentic-working-set-default-hold-s", "60", "--agentic-working-set-max-wait-s", "10",
             "--agentic-working-set-returning-waits", "false"});
  ASSERT_TRUE(got.ok()) << got.status();
  EXPECT_EQ(got->headroom, 1.5);
  EXPECT_EQ(got->max_hold, TimeNs::Seconds(60));
  EXPECT_EQ(got->default_hold, TimeNs::Seconds(60));
  EXPECT_EQ(got->max_wait, TimeNs::Seconds(10));
  EXPECT_FALSE(got->returning_waits);
  EXPECT_THAT(Parse({"--agentic-working-set-headroom", "9"}).status().message(),
              HasSubstr("--agentic-working-set-headroom must be in (0, 8], got 9"));
  EXPECT_THAT(Parse({"--agentic-working-set-hold-quantile", "1"}).status().message(),
              HasSubstr("--agentic-working-set-hold-quantile"));
  EXPECT_THAT(Parse({"--agentic-working-set-default-hold-s", "31"}).status().message(),
              HasSubstr("--agentic-working-set-default-hold-s"));
  EXPECT_THAT(Parse({"--agentic-working-set-max-wait-s", "-1"}).status().message(),
              HasSubstr("--agentic-working-set-max-wait-s"));
}

}  // namespace
}  // namespace agentkv::tools
