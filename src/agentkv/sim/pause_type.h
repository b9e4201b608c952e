// PauseType: what an agent was waiting for between two of its model requests, read from the
// trace (the previous request's `stop` and `output_types`, the next one's `input_types`) and
// from the sub-agents the next request joins. The agent driver records it on every request it
// issues (DriverRequest::pause), so that metrics and cache policies keyed on the kind of pause
// (a short tool call, a sub-agent's run, a human's turn) read one value. Plain values and pure
// functions; thread-safe.
#ifndef AGENTKV_SIM_PAUSE_TYPE_H_
#define AGENTKV_SIM_PAUSE_TYPE_H_

#include <string_view>

#include "agentkv/kv/pause_gap_estimator.h"
#include "agentkv/sim/weka_trace.h"

namespace agentkv::sim {

enum class PauseType {
  // No gap before it: the first request of a main agent or of a sub-agent.
  kNone,
  // The previous response called a tool and this request carries its result.
  kToolCall,
  // This request waits for one or more sub-agents (a Task tool call whose result is theirs).
  kSubagentWait,
  // The previous response ended the turn (or was cut off) and this request starts a new one:
  // a human's turn.
  kHumanTurn,
};

// "none", "tool_call", "subagent_wait" or "human_turn".
std::string_view PauseTypeName(PauseType pause);

// The KV cache's hint for the pause `pause` (kv::PauseKind of the same name; kNone, which
// follows no request, is kUnknown).
kv::PauseKind PauseKindOf(PauseType pause);

// The pause between `previous` and `next`, two consecutive requests of one agent, when `next`
// joins no sub-agent (the driver decides kSubagentWait from its joins). The previous response
// called a tool when its `stop` is "tool_use" or its `output_types` holds "tool_use". With
// `input_types` recorded on `next`: kToolCall when the previous response called a tool and
// `next` sends a "tool_result", else kHumanTurn (text after an end of turn, or a tool call the
// user interrupted). Without them: kToolCall when the previous response called a tool, else
// kHumanTurn.
PauseType ClassifyPause(const WekaRequest& previous, const WekaRequest& next);

}  // namespace agentkv::sim

#endif  // AGENTKV_SIM_PAUSE_TYPE_H_
