// ClassifyPause reads only the two requests it is given; the join rule lives in the driver.
#include "agentkv/sim/pause_type.h"

#include <algorithm>
#include <string>
#include <vector>

namespace agentkv::sim {
namespace {

constexpr std::string_view kToolUse = "tool_use";
constexpr std::string_view kToolResult = "tool_result";

bool Holds(const std::vector<std::string>& types, std::string_view type) {
  return std::find(types.begin(), types.end(), type) != types.end();
}

}  // namespace

std::string_view PauseTypeName(PauseType pause) {
  switch (pause) {
    case PauseType::kNone:
      return "none";
    case PauseType::kToolCall:
      return "tool_call";
    case PauseType::kSubagentWait:
      return "subagent_wait";
    case PauseType::kHumanTurn:
      return "human_turn";
  }
  return "none";
}

kv::PauseKind PauseKindOf(PauseType pause) {
  switch (pause) {
    case PauseType::kNone:
      return kv::PauseKind::kUnknown;
    case PauseType::kToolCall:
      return kv::PauseKind::kToolCall;
    case PauseType::kSubagentWait:
      return kv::PauseKind::kSubagentWait;
    case PauseType::kHumanTurn:
      return kv::PauseKind::kHumanTurn;
  }
  return kv::PauseKind::kUnknown;
}

PauseType ClassifyPause(const WekaRequest& previous, const WekaRequest& next) {
  const bool called_tool = previous.stop == kToolUse || Holds(previous.output_types, kToolUse);
  if (!next.input_types.empty()) {
    return called_tool && Holds(next.input_types, kToolResult) ? PauseType::kToolCall
                                                               : PauseType::kHumanTurn;
  }
  return called_tool ? PauseType::kToolCall : PauseType::kHumanTurn;
}

}  // namespace agentkv::sim
