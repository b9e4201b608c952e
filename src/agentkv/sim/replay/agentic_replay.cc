#include "agentkv/sim/replay/agentic_replay.h"

#include <sstream>
#include <string>
#include <utility>

#include "agentkv/engine/kv_pool.h"

namespace agentkv::sim {
namespace {

constexpr TimeNs kMaxStagger = TimeNs::Seconds(1e6);

std::string Seconds(TimeNs t) {
  std::ostringstream out;
  out << t.seconds() << " s";
  return out.str();
}

// The runner's options for `options`, without the callback.
InstantReplayOptions RunnerOptions(const AgenticReplayOptions& options) {
  InstantReplayOptions runner;
  runner.arms = options.arms;
  runner.capacity_fractions = {options.capacity_fraction};
  runner.capacity_blocks = options.capacity_blocks;
  runner.host_blocks = options.host_blocks;
  runner.step_interval = options.step_interval;
  runner.truncate_long_requests = false;
  runner.max_num_turns = options.max_num_turns;
  runner.min_idle_steps = options.min_idle_steps;
  return runner;
}

}  // namespace

Status AgenticReplayOptions::Validate() const {
  if (stagger.ns() < 0 || stagger > kMaxStagger) {
    return InvalidArgumentError("stagger must be in [0, 1e6] s, got " + Seconds(stagger));
  }
  return RunnerOptions(*this).Validate();
}

StatusOr<AgenticReplayResult> RunAgenticReplay(const std::vector<WekaConversation>& conversations,
                                               const AgenticReplayOptions& options) {
  AGENTKV_RETURN_IF_ERROR(options.Validate());
  AGENTKV_ASSIGN_OR_RETURN(
      const InstantWorkload workload,
      MergedTimeline(conversations,
                     StaggeredStarts(static_cast<int64_t>(conversations.size()), options.stagger)));
  InstantReplayOptions runner = RunnerOptions(options);
  if (options.on_arm_done) runner.on_point_done = options.on_arm_done;
  AGENTKV_ASSIGN_OR_RETURN(InstantReplayResult run, RunInstantReplay(workload, runner));

  AgenticReplayResult result;
  result.conversations = static_cast<int64_t>(conversations.size());
  for (const WekaConversation& c : conversations) {
    result.subagents += static_cast<int64_t>(c.subagents.size());
    result.requests += c.TotalRequests();
  }
  result.unique_blocks = run.unique_blocks;
  result.tokens_per_block = run.tokens_per_block;
  // Not the first point's: an infinite-cache arm runs at its own capacity.
  result.device_blocks = options.capacity_blocks.value_or(
      engine::BlocksForFraction(options.capacity_fraction, run.unique_blocks));
  result.host_blocks = run.host_blocks;
  result.span = run.span;
  result.steps = run.steps;
  result.arms = std::move(run.points);
  return result;
}

}  // namespace agentkv::sim
