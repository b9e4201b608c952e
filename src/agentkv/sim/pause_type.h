// ClassifyPause: what an agent did between two of its model requests, read from the trace (the
// previous request's `stop` and `output_types`, the next one's `input_types`), as a PauseKind
// (base/pause.h). The agent driver and the instant replay's sources give every request the
// pause that FOLLOWS it (a request's next_pause; the agent's last request's is kSessionEnd),
// deciding kSubagentWait themselves from the sub-agents the next request joins. Pure functions;
// thread-safe.
#ifndef AGENTKV_SIM_PAUSE_TYPE_H_
#define AGENTKV_SIM_PAUSE_TYPE_H_

#include "agentkv/base/pause.h"
#include "agentkv/sim/weka_trace.h"

namespace agentkv::sim {

// The pause between `previous` and `next`, two consecutive requests of one agent, when `next`
// joins no sub-agent (the driver decides kSubagentWait from its joins): kToolCall or
// kHumanTurn. The previous response called a tool when its `stop` is "tool_use" or its
// `output_types` holds "tool_use". With `input_types` recorded on `next`: kToolCall when the
// previous response called a tool and `next` sends a "tool_result", else kHumanTurn (text after
// an end of turn, or a tool call the user interrupted). Without them: kToolCall when the
// previous response called a tool, else kHumanTurn.
PauseKind ClassifyPause(const WekaRequest& previous, const WekaRequest& next);

}  // namespace agentkv::sim

#endif  // AGENTKV_SIM_PAUSE_TYPE_H_
