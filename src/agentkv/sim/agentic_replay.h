// Agentic replay: what the agentic KV policies of kv::KvCacheManager buy on WEKA traces.
//
// Several WEKA conversations (weka_trace.h) share ONE cache, as they would share one engine:
// conversation k (file order) starts at k * stagger, and the requests of every main agent and
// sub-agent are merged into one timeline. Each request runs instantly (match, allocate,
// commit, release) with its session and conversation ids and, for a sub-agent, its parent's
// id as an authenticated hint; trace time drives the scheduler step counter, which is what the
// sub-agent idle bound counts. Each arm replays the same timeline through a fresh cache of the
// same capacity with one policy combination (LRU; per-conversation retention; finished-sub-agent
// demotion at priority 1 or 20; session release on conversation end) and reports the cache's
// own counters. The replay is the real block accounting of the engine; this file only drives
// it, as cache_curve.h does for Mooncake traces. Pure function over its inputs (progress goes
// through a callback); thread-safe.
#ifndef AGENTKV_SIM_AGENTIC_REPLAY_H_
#define AGENTKV_SIM_AGENTIC_REPLAY_H_

#include <cstdint>
#include <functional>
#include <optional>
#include <span>
#include <string_view>
#include <vector>

#include "agentkv/base/status.h"
#include "agentkv/base/strong_id.h"
#include "agentkv/base/time.h"
#include "agentkv/kv/kv_cache_options.h"
#include "agentkv/kv/kv_cache_stats.h"
#include "agentkv/sim/weka_trace.h"

namespace agentkv::sim {

// One policy combination. Every arm passes the same session, conversation and parent ids;
// only the cache options and the closing of sessions differ.
enum class AgenticArm : uint8_t {
  // `lru`: block_reuse_policy default, sessions never closed (so one eviction class): LRU.
  kLru,
  // `per_conversation`: retention records per conversation (max_num_turns), no demotion.
  kPerConversation,
  // `demote_p1`, `demote_p20`: per_conversation plus finished_subagent_priority 1 or 20.
  kDemoteP1,
  kDemoteP20,
  // `session_release`: policy default, session_close_mode release, and every main agent's and
  // sub-agent's session is closed right after its last request.
  kSessionRelease,
  // `demote_p1+release`: demote_p1 plus session release on conversation end.
  kDemoteP1Release,
};

// Every arm, in the order above (the default set and the table order).
std::span<const AgenticArm> AllAgenticArms();
// The arm's command-line name ("lru", ..., "demote_p1+release").
std::string_view AgenticArmName(AgenticArm arm);
// The arm named `name`, or nullopt.
std::optional<AgenticArm> AgenticArmFromName(std::string_view name);
// `base` with the arm's policy fields set (block_reuse_policy, finished_subagent_priority,
// session_close_mode); every other field is kept.
kv::KvCacheOptions AgenticArmCacheOptions(AgenticArm arm, const kv::KvCacheOptions& base);
// Whether the arm closes each conversation's session after its last request.
bool AgenticArmClosesSessions(AgenticArm arm);

// Ids a replay gives conversation `index` (file order, 0-based): the main agent is index + 1;
// sub-agent j (0-based, file order) is (index + 1) * 1000 + j + 1. Sessions use the same
// numbers. Preconditions: index < kMaxAgenticConversations, j < kMaxSubagentsPerConversation.
inline constexpr int64_t kMaxAgenticConversations = 999;
inline constexpr int64_t kMaxSubagentsPerConversation = 999;
ConversationId AgenticConversationId(int64_t index, int64_t subagent = -1);

// One request of the merged timeline.
struct AgenticScheduleEntry {
  // When it runs: conversation * stagger + t (main agent) or + spawn + t (sub-agent).
  TimeNs time;
  // Index of the conversation in the replay's input.
  int32_t conversation = 0;
  // Index of the sub-agent in WekaConversation::subagents; -1 for the main agent.
  int32_t subagent = -1;
  // Index of the request in its main agent's or sub-agent's `requests`.
  int32_t request = 0;
  // Whether no later entry belongs to the same main agent or sub-agent.
  bool last_of_conversation = false;

  friend bool operator==(const AgenticScheduleEntry&, const AgenticScheduleEntry&) = default;
};

// The merged timeline of `conversations` started `stagger` apart: every request of every main
// agent and sub-agent, ordered by (time, conversation, main agent before sub-agents, sub-agent
// index, request index). Deterministic. Precondition: stagger >= 0.
std::vector<AgenticScheduleEntry> BuildAgenticSchedule(
    const std::vector<WekaConversation>& conversations, TimeNs stagger);

// The outcome of one arm.
struct AgenticArmResult {
  AgenticArm arm = AgenticArm::kLru;
  // The cache's counters and gauges after the last request (and its close).
  kv::KvCacheStats stats;
  // (matched_device_blocks + matched_host_blocks) / lookup_blocks; 0 without lookups.
  double hit_ratio = 0;
  // 100 * (uncached_tokens - lru's) / lru's, when the replay ran `lru` and lru's uncached
  // tokens are positive; unset otherwise (and in the progress callback).
  std::optional<double> uncached_change_vs_lru_percent;
};

struct AgenticReplayOptions {
  // Device capacity as a fraction of the unique blocks over all conversations (distinct
  // chained keys): max(1, floor(fraction * unique)). Default: 0.25. Range: (0, 1].
  double capacity_fraction = 0.25;
  // When set, replaces capacity_fraction with exactly this many device blocks.
  // Default: unset. Range: [1, 2^30].
  std::optional<int64_t> capacity_blocks;
  // Host (cold) tier blocks; 0 disables offloading. Demoted blocks (priority 1 or 20) are
  // below the offload threshold (30) and are dropped, never offloaded. Default: 0.
  // Range: [0, 2^30].
  int64_t host_blocks = 0;
  // Start offset between consecutive conversations. Default: 60 s. Range: [0, 1e6 s].
  TimeNs stagger = TimeNs::Seconds(60);
  // Trace time per scheduler step: before each request the replay calls Step() until the
  // step counter is floor(request time / step_interval), i.e. once per step_interval elapsed.
  // With the default the idle bound of 32 steps is 0.8 s. Default: 25 ms. Range: [1 us, 1e6 s];
  // the whole replay may take at most 2^30 steps.
  TimeNs step_interval = TimeNs::Millis(25);
  // block_reuse_config.max_num_turns of the per_conversation arms. Default: 1 (TensorRT-LLM's).
  // Range: [1, 2^20].
  int32_t max_num_turns = 1;
  // finished_subagent_min_idle_iterations of the demote arms. Default: 32. Range: [0, 2^40].
  int64_t min_idle_steps = 32;
  // Arms to run, in this order. Default: AllAgenticArms(). Range: non-empty, no duplicates.
  std::vector<AgenticArm> arms{AllAgenticArms().begin(), AllAgenticArms().end()};
  // Called on the caller's thread after each arm, with its index in `arms` and its result
  // (uncached_change_vs_lru_percent unset). Default: none.
  std::function<void(size_t arm_index, const AgenticArmResult& result)> on_arm_done;

  // InvalidArgument naming the first option out of range and its value.
  Status Validate() const;
};

struct AgenticReplayResult {
  int64_t conversations = 0;
  int64_t subagents = 0;
  // Requests of main agents and sub-agents.
  int64_t requests = 0;
  // Distinct chained block keys over all requests: the device capacity at which nothing is
  // ever evicted.
  int64_t unique_blocks = 0;
  // Tokens per block (the files' common block_size).
  int32_t tokens_per_block = 0;
  int64_t device_blocks = 0;
  int64_t host_blocks = 0;
  // The time of the last request and the scheduler steps advanced until then (equal in every
  // arm).
  TimeNs span;
  int64_t steps = 0;
  // One per arm, in the order of AgenticReplayOptions::arms.
  std::vector<AgenticArmResult> arms;
};

// Replays `conversations` (file order) once per arm of `options`. Keys are
// KeysFromBlockIds(hash_ids, extra_key = conversation index + 1) at hash seed 0: hash ids are
// local to a file, and a sub-agent shares its parent's namespace. Each request, at its turn in
// BuildAgenticSchedule: advance the steps; AddRequest(keys, {prompt_tokens = in, session and
// conversation = its id, parent hint = the main agent's id, authenticated}); Reserve(its blocks
// * tokens_per_block); Commit(the keys after the match); Release; in the arms that close
// sessions, CloseSession(its id) after the last request of its main agent or sub-agent.
// CheckInvariants runs at the end of each arm.
// InvalidArgument for invalid options, no conversations, more than kMaxAgenticConversations
// conversations or kMaxSubagentsPerConversation sub-agents in one, files with different
// block_size, a request longer than the device capacity (an engine could not run it), or a
// timeline needing more than 2^30 steps; Internal if the cache refuses a call or breaks an
// invariant, which would be a bug in it or here.
StatusOr<AgenticReplayResult> RunAgenticReplay(const std::vector<WekaConversation>& conversations,
                                               const AgenticReplayOptions& options);

}  // namespace agentkv::sim

#endif  // AGENTKV_SIM_AGENTIC_REPLAY_H_
