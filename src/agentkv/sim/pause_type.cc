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

PauseKind ClassifyPause(const WekaRequest& previous, const WekaRequest& next) {
  const bool called_tool = previous.stop == kToolUse || Holds(previous.output_types, kToolUse);
  if (!next.input_types.empty()) {
    return called_tool && Holds(next.input_types, kToolResult) ? PauseKind::kToolCall
                                                               : PauseKind::kHumanTurn;
  }
  return called_tool ? PauseKind::kToolCall : PauseKind::kHumanTurn;
}

}  // namespace agentkv::sim
