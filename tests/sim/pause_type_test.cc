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
  PauseKind expect;
};

TEST(PauseTypeTest, ClassifiesFromStopAndContentTypes) {
  const std::vector<PauseCase> cases = {
      // A tool call answered by its result.
      {"tool_use", {"thinking", "tool_use"}, {"tool_result"}, PauseKind::kToolCall},
      {"tool_use", {"text"}, {"tool_result"}, PauseKind::kToolCall},
      {"", {"text", "tool_use"}, {"tool_result"}, PauseKind::kToolCall},
      {"tool_use",
       {"text", "tool_use"},
       {"text", "thinking", "tool_result", "tool_use"},
       PauseKind::kToolCall},
      // Text after an end of turn, or after a response that was cut off: a human's turn.
      {"end_turn", {"text", "thinking"}, {"text"}, PauseKind::kHumanTurn},
      {"", {}, {"text"}, PauseKind::kHumanTurn},
      {"end_turn", {"text"}, {"text", "tool_result", "tool_use"}, PauseKind::kHumanTurn},
      // A tool call the user interrupted: text instead of the result.
      {"tool_use", {"thinking", "tool_use"}, {"text"}, PauseKind::kHumanTurn},
      // No content types recorded (synthetic or older traces): the stop reason decides.
      {"tool_use", {}, {}, PauseKind::kToolCall},
      {"end_turn", {}, {}, PauseKind::kHumanTurn},
      {"", {}, {}, PauseKind::kHumanTurn},
  };
  for (size_t i = 0; i < cases.size(); ++i) {
    WekaRequest previous;
    previous.stop = cases[i].stop;
    previous.output_types = cases[i].output_types;
    WekaRequest next;
    next.input_types = cases[i].input_types;
    EXPECT_EQ(ClassifyPause(previous, next), cases[i].expect)
        << "case " << i << ": expected " << PauseKindName(cases[i].expect) << ", got "
        << PauseKindName(ClassifyPause(previous, next));
  }
}

}  // namespace
}  // namespace agentkv::sim
