// Workload sources of the instant single cache (instant_replay.h): each puts a workload in the
// order one cache serves it and gives every request its chained keys and ids.
//
//   OpenLoopInOrder    an open-loop trace (open_loop_trace.h; a Mooncake file) in the order
//                      given, no session: what `agentkv cache-curve` replays.
//   MergedTimeline     an agentic workload (WEKA, Bailian, synthetic: sim::AgenticWorkload, or
//                      conversations with their start times) as one timeline of every main
//                      agent's and sub-agent's requests, each with its session, conversation
//                      and parent ids: what `agentkv agentic-curve` replays, with starts
//                      `stagger` apart (StaggeredStarts).
//
// The simulated fleet (replay.h) reads the same two workload shapes, AgenticWorkload in closed
// loop and OpenLoopRequest by arrival time. Pure functions; thread-safe.
#ifndef AGENTKV_SIM_REPLAY_INSTANT_SOURCES_H_
#define AGENTKV_SIM_REPLAY_INSTANT_SOURCES_H_

#include <cstdint>
#include <span>
#include <vector>

#include "agentkv/base/status.h"
#include "agentkv/base/strong_id.h"
#include "agentkv/base/time.h"
#include "agentkv/sim/replay/instant_replay.h"
#include "agentkv/sim/workload/agentic_workload.h"
#include "agentkv/sim/workload/open_loop_trace.h"
#include "agentkv/sim/workload/weka_trace.h"

namespace agentkv::sim {

// `requests` in the order given (not sorted by arrival; a Mooncake trace's file order): keys
// KeysFromBlockIds(hash_ids) at hash seed 0 (no namespace: an open-loop trace is one
// namespace), prompt_tokens and time = arrival as recorded, no session or conversation (each
// request would be a session of its own that nothing else reuses), no output keys (no request
// is known to be another's next turn).
InstantWorkload OpenLoopInOrder(const std::vector<OpenLoopRequest>& requests,
                                int32_t tokens_per_block);

// Ids the merged timeline gives conversation `index` (0-based, input order): the main agent
// is index + 1; sub-agent j (0-based, file order) is (index + 1) * 1000 + j + 1. Sessions use
// the same numbers. Preconditions: index < kMaxAgenticConversations,
// j < kMaxSubagentsPerConversation.
inline constexpr int64_t kMaxAgenticConversations = 999;
inline constexpr int64_t kMaxSubagentsPerConversation = 999;
ConversationId AgenticConversationId(int64_t index, int64_t subagent = -1);

// One request of a merged timeline.
struct AgenticScheduleEntry {
  // When it runs: its conversation's start + t (main agent) or + spawn + t (sub-agent; the
  // spawn is WekaSubagent::spawn(), the recorded completion minus the duration).
  TimeNs time;
  // Index of the conversation in the input.
  int32_t conversation = 0;
  // Index of the sub-agent in WekaConversation::subagents; -1 for the main agent.
  int32_t subagent = -1;
  // Index of the request in its main agent's or sub-agent's `requests`.
  int32_t request = 0;
  // Whether no later entry belongs to the same main agent or sub-agent.
  bool last_of_conversation = false;

  friend bool operator==(const AgenticScheduleEntry&, const AgenticScheduleEntry&) = default;
};

// `n` starts `stagger` apart: conversation k starts at k * stagger (saturating).
// Preconditions: n >= 0, stagger >= 0.
std::vector<TimeNs> StaggeredStarts(int64_t n, TimeNs stagger);

// Every request of every main agent and sub-agent of `conversations`, conversation k started
// at starts[k], ordered by (time, conversation, main agent before sub-agents, sub-agent index,
// request index); times saturate. Deterministic. Precondition: starts.size() ==
// conversations.size().
std::vector<AgenticScheduleEntry> MergedSchedule(const std::vector<WekaConversation>& conversations,
                                                 std::span<const TimeNs> starts);

// MergedSchedule with StaggeredStarts(stagger). Precondition: stagger >= 0.
std::vector<AgenticScheduleEntry> BuildAgenticSchedule(
    const std::vector<WekaConversation>& conversations, TimeNs stagger);

// The merged timeline as an instant workload: request i is schedule entry i, with keys
// KeysFromBlockIds(hash_ids, extra_key = conversation index + 1) at hash seed 0 (hash ids are
// local to a file; a sub-agent shares its parent's namespace), prompt_tokens = in, session and
// conversation = its id, for a sub-agent the main agent's id as an authenticated parent hint,
// ends_session on its last request, output keys the blocks of its answer that the next request
// of the same agent re-sends (ReusedOutputKeys, output_keys.h, in the same namespace: what the
// fleet's agent driver gives the engine). `describe` names the file, sub-agent and request, and
// refers to `conversations`, which must outlive the result.
// InvalidArgument for no conversations, more than kMaxAgenticConversations conversations or
// kMaxSubagentsPerConversation sub-agents in one, or conversations with different block_size.
// Precondition: starts.size() == conversations.size().
StatusOr<InstantWorkload> MergedTimeline(const std::vector<WekaConversation>& conversations,
                                         std::span<const TimeNs> starts);
// A gated workload (AgenticWorkload::gated(), an RL rollout's steps) has no fixed start times:
// InvalidArgument; only the closed-loop replay (agentkv replay) runs it.
inline StatusOr<InstantWorkload> MergedTimeline(const AgenticWorkload& workload) {
  if (workload.gated()) {
    return InvalidArgumentError(
        "the instant replay cannot run a gated workload (conversations that start when "
        "earlier groups end, such as rollout steps); replay it with `agentkv replay`");
  }
  return MergedTimeline(workload.conversations, workload.starts);
}

}  // namespace agentkv::sim

#endif  // AGENTKV_SIM_REPLAY_INSTANT_SOURCES_H_
