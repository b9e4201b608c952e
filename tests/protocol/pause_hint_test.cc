// Tests of the pause hint (pause_hint.h): one parser for the header, the body member and the
// working set's member, with one error format naming the field; the priority map.
#include "agentkv/protocol/pause_hint.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

namespace agentkv::protocol {
namespace {

using ::testing::HasSubstr;

TEST(PauseHintTest, ParsesEveryNameAndTheEmptyValueAsNoHint) {
  EXPECT_EQ(*ParsePauseHint(kPauseField, ""), PauseKind::kUnknown);
  for (const PauseKind kind : kAllPauseKinds) {
    for (const std::string_view field : {kPauseHeader, kPauseField}) {
      const StatusOr<PauseKind> parsed = ParsePauseHint(field, PauseKindName(kind));
      ASSERT_TRUE(parsed.ok()) << parsed.status();
      EXPECT_EQ(*parsed, kind);
    }
  }
}

TEST(PauseHintTest, TheErrorNamesTheFieldAndTheValueInOneFormat) {
  for (const std::string_view field : {kPauseHeader, kPauseField, std::string_view("next_pause")}) {
    const Status s = ParsePauseHint(field, "soon").status();
    EXPECT_EQ(s.code(), StatusCode::kInvalidArgument);
    EXPECT_EQ(s.message(), std::string(field) +
                               ": expected unknown, tool_call, subagent_wait, human_turn or "
                               "session_end, got \"soon\"");
  }
  EXPECT_FALSE(ParsePauseHint(kPauseField, "Tool_Call").ok());
}

TEST(PauseHintTest, PrioritiesMapEachReturningOrEndingKind) {
  const StatusOr<PausePriorities> map =
      ParsePausePriorities("tool_call=1,subagent_wait=2,human_turn=3,session_end=4");
  ASSERT_TRUE(map.ok()) << map.status();
  EXPECT_EQ(map->For(PauseKind::kToolCall), 1);
  EXPECT_EQ(map->For(PauseKind::kSubagentWait), 2);
  EXPECT_EQ(map->For(PauseKind::kHumanTurn), 3);
  EXPECT_EQ(map->For(PauseKind::kSessionEnd), 4);
  EXPECT_EQ(map->For(PauseKind::kUnknown), std::nullopt);
  EXPECT_THAT(ParsePausePriorities("unknown=1").status().message(),
              HasSubstr("names an unknown pause"));
}

}  // namespace
}  // namespace agentkv::protocol
