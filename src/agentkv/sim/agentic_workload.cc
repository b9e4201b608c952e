// Invariant: FoldConversationStarts changes only `t` of main-agent requests and `spawn` of
// sub-agents; sizes and order are kept.
#include "agentkv/sim/agentic_workload.h"

#include "agentkv/base/check.h"

namespace agentkv::sim {

std::vector<WekaConversation> FoldConversationStarts(const AgenticWorkload& workload) {
  AGENTKV_CHECK_EQ(workload.starts.size(), workload.conversations.size());
  std::vector<WekaConversation> folded = workload.conversations;
  for (size_t i = 0; i < folded.size(); ++i) {
    const TimeNs start = workload.starts[i];
    for (WekaRequest& request : folded[i].requests) request.t += start;
    for (WekaSubagent& subagent : folded[i].subagents) subagent.spawn += start;
  }
  return folded;
}

}  // namespace agentkv::sim
