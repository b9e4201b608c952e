// Agentic replay (`agentkv agentic-curve`): what the agentic KV policies of kv::KvCacheManager
// buy on WEKA traces. A view of the instant single cache (instant_replay.h): several WEKA
// conversations share ONE cache, as they would share one engine; conversation k (file order)
// starts at k * stagger and every main agent's and sub-agent's requests are merged into one
// timeline (MergedTimeline of instant_sources.h); trace time drives the scheduler step counter,
// which is what the sub-agent idle bound counts. Each arm (the one arm grammar of
// replay_arms.h; agentic-curve's own names lru, per_conversation, demote_p1, demote_p20,
// session_release and demote_p1+release are its aliases) replays the same timeline through a
// fresh cache of the same capacity and reports the cache's own counters. This file only maps
// its options onto the runner's and counts the workload. Pure function over its inputs
// (progress goes through a callback); thread-safe.
#ifndef AGENTKV_SIM_REPLAY_AGENTIC_REPLAY_H_
#define AGENTKV_SIM_REPLAY_AGENTIC_REPLAY_H_

#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "agentkv/base/status.h"
#include "agentkv/base/time.h"
#include "agentkv/sim/replay/instant_replay.h"
#include "agentkv/sim/replay/instant_sources.h"
#include "agentkv/sim/replay/replay_arms.h"
#include "agentkv/sim/workload/weka_trace.h"

namespace agentkv::sim {

// One arm's outcome: the instant point at the replay's one capacity. Its
// uncached_change_vs_baseline_percent is the change against the lru (= baseline) arm.
using AgenticArmResult = InstantPoint;

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
  // Trace time per scheduler step: before each request the cache advances to step
  // floor(request time / step_interval), i.e. once per step_interval elapsed. With the default
  // the idle bound of 32 steps is 0.8 s. Default: 25 ms. Range: [1 us, 1e6 s]; the whole replay
  // may take at most 2^30 steps.
  TimeNs step_interval = TimeNs::Millis(25);
  // block_reuse_config.max_num_turns of the per-conversation arms. Default: 1 (TensorRT-LLM's).
  // Range: [1, 2^20].
  int32_t max_num_turns = 1;
  // finished_subagent_min_idle_iterations of the demotion arms. Default: 32. Range: [0, 2^40].
  int64_t min_idle_steps = 32;
  // Arms to run (replay_arms.h, aliases included; the command line parses their names), in
  // this order. Default: AgenticCurveArms(). Range: non-empty, distinct names (ValidateArms),
  // arms the instant single cache runs.
  std::vector<ArmSpec> arms = AgenticCurveArms();
  // Called on the caller's thread after each arm, with its index in `arms` and its result
  // (the change column unset). Default: none.
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

// Replays `conversations` (file order, started `stagger` apart) once per arm of `options`
// through RunInstantReplay: MergedTimeline of the conversations, one capacity, step_interval,
// no truncation (a request longer than the device is refused: an engine could not run it).
// InvalidArgument for invalid options, conversations MergedTimeline refuses, a request longer
// than the device capacity, or a timeline needing more than 2^30 steps; Internal if the cache
// refuses a call or breaks an invariant, which would be a bug in it or here.
StatusOr<AgenticReplayResult> RunAgenticReplay(const std::vector<WekaConversation>& conversations,
                                               const AgenticReplayOptions& options);

}  // namespace agentkv::sim

#endif  // AGENTKV_SIM_REPLAY_AGENTIC_REPLAY_H_
