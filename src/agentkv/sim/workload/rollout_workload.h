// A seeded generator of an RL rollout: the KV-bound agentic workload that Relax-style frameworks
// run (docs/WORKLOADS.md "RL rollout").
//
// A rollout step takes `prompts` tasks (B) and samples `group_size` trajectories (G) per task,
// a GRPO group. Every trajectory is a multi-turn tool-using program: its first prompt is the
// system+tools prompt (shared by every trajectory of the run) plus the task statement (shared by
// the G members of its group); each later prompt is the previous prompt plus the previous output
// plus the tool's observation, so each turn's hash ids extend the previous turn's. Every turn
// stops with `tool_use` (the next request follows the tool's duration) except the last, which
// stops with `end_turn`; a trajectory ends after its drawn number of turns, or earlier when its
// next prompt would outgrow the context window. Trajectories have no sub-agents.
//
// Block ids (64-token blocks) are global to the workload: ids [0, system blocks) are the
// system+tools prompt, then each group's task statement gets its own range, and ids at or above
// RolloutWorkload::shared_prefix_ids are each trajectory's own (never shared). A replay hashes
// ids below shared_prefix_ids in one namespace for every conversation (AgentDriverOptions::
// shared_prefix_ids), so group members share their prompt's KV and diverge after it.
//
// Steps are gated, not timed: every conversation starts at 0 and carries the step it belongs to
// (AgenticWorkload::groups) and the last step that must have ended before it begins
// (AgenticWorkload::start_after_group): synchronous mode gates step s on step s - 1;
// asynchronous mode with staleness bound k gates step s on step s - 1 - k, so that a trajectory
// of step s + k may start while steps s .. s + k - 1 are unfinished, but never before step s - 1
// (and so every earlier step) has ended: at most k + 1 steps are in flight, and a trajectory is
// at most k steps behind the newest one running.
//
// Pure functions of their options; thread-safe. Same options (seed included), same output.
#ifndef AGENTKV_SIM_WORKLOAD_ROLLOUT_WORKLOAD_H_
#define AGENTKV_SIM_WORKLOAD_ROLLOUT_WORKLOAD_H_

#include <cstdint>
#include <string_view>

#include "agentkv/base/status.h"
#include "agentkv/base/time.h"
#include "agentkv/sim/workload/agentic_workload.h"
#include "agentkv/sim/workload/synthetic_agentic.h"

namespace agentkv::sim {

// How the steps of a rollout follow each other.
enum class RolloutMode : uint8_t {
  // Step s + 1's trajectories start when the last trajectory of step s ends.
  kSynchronous,
  // Bounded staleness: step s's trajectories start when every trajectory of step
  // s - 1 - staleness (and so of every earlier step) has ended.
  kAsynchronous,
};

// "sync" or "async".
std::string_view RolloutModeName(RolloutMode mode);

// Every distribution's source is in docs/WORKLOADS.md ("RL rollout").
struct RolloutWorkloadOptions {
  // Seed of the one Rng every draw comes from. Default: 1. Any value.
  uint64_t seed = 1;
  // Tasks per step (B). Default: 8 (with the defaults below, 64 trajectories per step keep
  // two engines of the default preset KV-bound: docs/WORKLOADS.md). Range [1, 1000].
  int64_t prompts = 8;
  // Trajectories sampled per task: the GRPO group size (G; n = 8-16 in agentic RL). Default: 8.
  // Range [1, 1000].
  int64_t group_size = 8;
  // Rollout steps. Default: 2. Range [1, 1000]. prompts * group_size * steps must be at most
  // kMaxRolloutTrajectories (the agent driver's conversation limit).
  int64_t steps = 2;
  // Default: kSynchronous.
  RolloutMode mode = RolloutMode::kSynchronous;
  // Staleness bound k of kAsynchronous (ignored when synchronous). Default: 1. Range [1, 1000].
  int64_t staleness = 1;

  // System+tools prompt opening every trajectory, tokens; the same ids in every trajectory.
  // Default: 15,000 (the WEKA traces' tools+system prefix). Range [0, 10^6].
  int64_t system_prompt_tokens = 15'000;
  // The task statement after it, tokens, drawn once per task and shared by its group. Median
  // 4,560 (first WEKA request minus the prefix, p50 over the 39 shared traces); sigma 0.5
  // assumed.
  LogNormal task_prompt_tokens{4560.0, 0.5};
  // Turns (model requests) per trajectory, rounded and clamped to [1, max_turns]. Median 48
  // (WEKA requests per trace p50); sigma 0.765 gives the mean of 64.3 turns of the
  // SWE-rebench OpenHands trajectories: sqrt(2 ln(64.3 / 48)).
  LogNormal turns{48.0, 0.765};
  // The agent's step budget. Default: 100. Range [1, 100000].
  int64_t max_turns = 100;
  // Output tokens per turn (kept in the next prompt). Log-normal maximum-likelihood fit to the
  // 1,210 main-agent outputs of the 39 WEKA traces: median 320, sigma 0.879.
  LogNormal output_tokens{320.0, 0.879};
  // The tool's observation appended after a tool_use turn, tokens (prompt growth minus the
  // previous output). Maximum-likelihood fit to the 929 positive growths after tool_use turns
  // of the WEKA traces: median 421, sigma 1.89; clamped to max_observation_tokens.
  LogNormal observation_tokens{421.0, 1.89};
  // Tool output truncation. Default: 8,192. Range [1, 10^6].
  int64_t max_observation_tokens = 8'192;
  // The tool's duration: the gap between a tool_use turn's completion and the next request,
  // seconds. Maximum-likelihood fit to the 1,010 think times after tool_use turns of the WEKA
  // traces: median 14.95 s, sigma 1.283 (observed p50 10 s, p90 112 s); clamped to
  // max_tool_s.
  LogNormal tool_s{14.95, 1.283};
  // The tool timeout. Default: 600 s. Range (0, 86400].
  double max_tool_s = 600.0;
  // The context window: a trajectory ends (its turn stops with end_turn) when its next prompt
  // plus that turn's output would exceed it. Default: 65,536. Range [1, 10^7].
  int64_t max_context_tokens = 65'536;
  // Mark every trajectory's session retained (AgenticWorkload::retained), as a framework with
  // partial rollout or fully async retention does for trajectories it keeps alive across steps:
  // the gateway then never ends one for idleness during a long tool call, only its end closes
  // it. Default: false.
  bool retain_sessions = false;

  friend bool operator==(const RolloutWorkloadOptions&, const RolloutWorkloadOptions&) = default;
};

// prompts * group_size * steps may not exceed this (AgentDriver's conversation limit).
inline constexpr int64_t kMaxRolloutTrajectories = kMaxReplayConversations;

// OK, or InvalidArgument naming the first field out of range and its value, e.g.
// `RolloutWorkloadOptions.group_size: must be in [1, 1000], got 0` or
// `RolloutWorkloadOptions.prompts * group_size * steps: must be in [1, 1000], got 1024`.
[[nodiscard]] Status ValidateRolloutWorkloadOptions(const RolloutWorkloadOptions& options);

struct RolloutWorkload {
  // Conversation index = (step * prompts + prompt) * group_size + sample. Conversation ids
  // "rollout-s<step>-p<prompt>-g<sample>", source "rollout", block size 64; starts all 0;
  // groups[i] = step; start_after_group[i] = the gating step, -1 for none; retained[i] =
  // retain_sessions for every i (empty when false).
  AgenticWorkload workload;
  // Ids below this are prompt blocks (system+tools and every task statement); the replay
  // passes it as ReplayOptions::shared_prefix_ids. Ids at or above it are per trajectory.
  uint64_t shared_prefix_ids = 0;
  // Blocks of the system+tools prompt (ids [0, system_prompt_blocks)).
  int64_t system_prompt_blocks = 0;
};

// Generates the rollout. Per trajectory, request 0 has `t` 0 and think_time 0; each later
// request's think_time is the tool duration after the previous one and `t` the previous `t`
// plus it (server time excluded, as in every generated workload); `hash_ids` has
// floor(input_tokens / 64) ids and extends the previous request's. The errors of
// ValidateRolloutWorkloadOptions.
StatusOr<RolloutWorkload> GenerateRolloutWorkload(const RolloutWorkloadOptions& options);

}  // namespace agentkv::sim

#endif  // AGENTKV_SIM_WORKLOAD_ROLLOUT_WORKLOAD_H_
