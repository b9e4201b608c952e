// AgenticWorkload: the common in-memory shape of an agentic workload, whatever produced it
// (the Bailian reader's conversation grouping, the synthetic generator of
// synthetic_agentic.h). Its conversations are WekaConversation values, the shape the WEKA
// reader produces and the agentic replay consumes; what the WEKA structs lack is a start time
// per conversation (a WEKA file has no absolute time, so the replay staggers files uniformly),
// hence this small wrapper instead of a new field on WekaConversation. Plain values;
// thread-compatible.
#ifndef AGENTKV_SIM_WORKLOAD_AGENTIC_WORKLOAD_H_
#define AGENTKV_SIM_WORKLOAD_AGENTIC_WORKLOAD_H_

#include <cstdint>
#include <vector>

#include "agentkv/base/time.h"
#include "agentkv/sim/workload/weka_trace.h"

namespace agentkv::sim {

// The most conversations an agentic replay drives (AgentDriver): conversation k's sub-agent j
// is ConversationId((k + 1) * 1000 + j + 1), so more would make ids collide. Workload builders
// refuse more before building them.
inline constexpr int64_t kMaxReplayConversations = 1000;
// The most conversations a streamed workload (conversation_source.h) gives a replay: from
// conversation 1000 on the driver names main agents ConversationId((k + 1) * 1000), which no
// sub-agent id takes, so ids stay distinct up to here (and namespaces k + 1 below 2^24). Memory
// follows the live conversations, not this bound.
inline constexpr int64_t kMaxStreamedConversations = 1'000'000;

struct AgenticWorkload {
  // The conversations; request times are relative to each conversation's own start.
  std::vector<WekaConversation> conversations;
  // starts[i]: when conversations[i] begins, from the start of the workload. Same size as
  // `conversations`.
  std::vector<TimeNs> starts;

  // --- Start gating (optional; both empty, or both the size of `conversations`) ---
  // Groups order conversations into phases, such as the steps of an RL rollout
  // (rollout_workload.h). groups[i] >= 0 is the group of conversations[i]; start_after_group[i]
  // is -1 (no gate) or a group g < groups[i]: conversations[i] then begins at the later of
  // starts[i] and the moment every agent (main agent and sub-agents) of every conversation whose
  // group is <= g has ended. A group no conversation belongs to counts as ended. Only the closed-
  // loop agent driver (agent_driver.h) honours gates; views that replay conversations by their
  // times (FoldConversationStarts, the instant replay) refuse a gated workload.
  std::vector<int32_t> groups;
  std::vector<int32_t> start_after_group;

  // Whether some conversation has a gate (start_after_group[i] >= 0).
  bool gated() const;

  // --- Session retention (optional; empty, or the size of `conversations`) ---
  // retained[i]: every request of conversations[i] (its main agent and its sub-agents) marks
  // its session retained, as a client sends X-Agentkv-Session-Retain: 1 for a partial-rollout
  // trajectory kept alive across steps: the gateway never ends it for idleness
  // (GatewayModelOptions::session_idle_timeout), only the agent's end closes it. Honoured by
  // the closed-loop agent driver (agent_driver.h).
  std::vector<bool> retained;

  friend bool operator==(const AgenticWorkload&, const AgenticWorkload&) = default;
};

// The conversations of `workload` with each start folded into its times: every main-agent
// request's `t` and every sub-agent's completion (hence spawn()) is shifted by the
// conversation's start, so that
// a replay that starts every conversation at 0 (stagger 0) issues them at the workload's
// times. Think times are unchanged; a shifted time past int64 nanoseconds saturates.
// Precondition: starts.size() == conversations.size() and !workload.gated().
std::vector<WekaConversation> FoldConversationStarts(const AgenticWorkload& workload);

// `n` start times of a Poisson process beginning at 0: the first is 0, each later one adds an
// exponential inter-arrival of mean `mean_interarrival` drawn from Rng(seed). Equal arguments
// give equal starts; a mean of 0 starts everything at 0; starts past int64 nanoseconds
// saturate (they never decrease). Preconditions: n >= 0, mean_interarrival >= 0.
std::vector<TimeNs> PoissonStarts(int64_t n, TimeNs mean_interarrival, uint64_t seed);

// Approximate bytes `workload` holds: its requests and their hash ids (the bulk of it: each
// request of a conversation carries its whole prompt's ids).
int64_t ApproximateBytes(const AgenticWorkload& workload);

// The workload of WEKA conversations (one file each) started by PoissonStarts(seed).
AgenticWorkload WekaWorkload(std::vector<WekaConversation> conversations, TimeNs mean_interarrival,
                             uint64_t seed);

}  // namespace agentkv::sim

#endif  // AGENTKV_SIM_WORKLOAD_AGENTIC_WORKLOAD_H_
