// Tests of ClassifyPause: one row per combination of the previous response's stop reason and
// content and the next request's content seen in the WEKA traces, plus traces that record none.
#include "agentkv/sim/pause_type.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

namespace agentkv::sim {
namespace {

struct PauseCase {
  std::string stop;
  std::vector<std::string> output_types;
  std::vector<std::string> input_types;
  PauseType expect;
};

TEST(PauseTypeTest, ClassifiesFromStopAndContentTypes) {
  const std::vector<PauseCase> cases = {
      // A tool call answered by its result.
      {"tool_use", {"thinking", "tool_use"}, {"tool_result"}, PauseType::kToolCall},
      {"tool_use", {"text"}, {"tool_result"}, PauseType::kToolCall},
      {"", {"text", "tool_use"}, {"tool_result"}, PauseType::kToolCall},
      {"tool_use",
       {"text", "tool_use"},
       {"text", "thinking", "tool_result", "tool_use"},
       PauseType::kToolCall},
      // Text after an end of turn, or after a response that was cut off: a human's turn.
      {"end_turn", {"text", "thinking"}, {"text"}, PauseType::kHumanTurn},
      {"", {}, {"text"}, PauseType::kHumanTurn},
      {"end_turn", {"text"}, {"text", "tool_result", "tool_use"}, PauseType::kHumanTurn},
      // A tool call the user interrupted: text instead of the result.
      {"tool_use", {"thinking", "tool_use"}, {"text"}, PauseType::kHumanTurn},
      // No content types recorded (synthetic or older traces): the stop reason decides.
      {"tool_use", {}, {}, PauseType::kToolCall},
      {"end_turn", {}, {}, PauseType::kHumanTurn},
      {"", {}, {}, PauseType::kHumanTurn},
  };
  for (size_t i = 0; i < cases.size(); ++i) {
    WekaRequest previous;
    previous.stop = cases[i].stop;
    previous.output_types = cases[i].output_types;
    WekaRequest next;
    next.input_types = cases[i].input_types;
    EXPECT_EQ(ClassifyPause(previous, next), cases[i].expect)
        << "case " << i << ": expected " << PauseTypeName(cases[i].expect) << ", got "
        << PauseTypeName(ClassifyPause(previous, next));
  }
}

TEST(PauseTypeTest, NamesAreDistinct) {
  EXPECT_EQ(PauseTypeName(PauseType::kNone), "none");
  EXPECT_EQ(PauseTypeName(PauseType::kToolCall), "tool_call");
  EXPECT_EQ(PauseTypeName(PauseType::kSubagentWait), "subagent_wait");
  EXPECT_EQ(PauseTypeName(PauseType::kHumanTurn), "human_turn");
}

TEST(PauseTypeTest, EachPauseMapsToTheCachesHintOfTheSameName) {
  EXPECT_EQ(PauseKindOf(PauseType::kNone), PauseKind::kUnknown);
  for (const PauseType p :
       {PauseType::kToolCall, PauseType::kSubagentWait, PauseType::kHumanTurn}) {
    EXPECT_EQ(PauseKindName(PauseKindOf(p)), PauseTypeName(p));
  }
}

}  // namespace
}  // namespace agentkv::sim
