// Invariants of a generated rollout: every request's hash_ids has floor(input_tokens / 64) ids
// and extends the previous request's; the first floor(prompt / 64) ids of a trajectory are the
// ids of its group's prompt (system ids [0, system blocks) first), equal across the group and
// below shared_prefix_ids; every other id is at or above shared_prefix_ids and belongs to one
// trajectory only; every turn but the last stops with tool_use; groups[i] is the step of
// conversation i and start_after_group[i] < groups[i]. All randomness comes from one Rng seeded
// with options.seed, drawn in a fixed order: every task prompt (steps, then prompts), then every
// trajectory in conversation order.
#include "agentkv/sim/workload/rollout_workload.h"

#include <algorithm>
#include <cmath>
#include <string>
#include <utility>
#include <vector>

#include "agentkv/base/check.h"
#include "agentkv/base/rng.h"
#include "agentkv/sim/workload/option_checks.h"

namespace agentkv::sim {
namespace {

constexpr int64_t kBlock = kSyntheticBlockSize;
constexpr std::string_view kToolUse = "tool_use";
constexpr std::string_view kEndTurn = "end_turn";

// A token count drawn from `d`, rounded, in [1, cap].
int64_t DrawTokens(const LogNormal& d, int64_t cap, Rng& rng) {
  const double v = d.Sample(rng);
  if (!(v < static_cast<double>(cap))) return cap;
  return std::max<int64_t>(1, std::llround(v));
}

// Generates the trajectories, drawing every id from one counter.
class TrajectoryGenerator {
 public:
  TrajectoryGenerator(const RolloutWorkloadOptions& options, Rng& rng, uint64_t first_own_id)
      : options_(options), rng_(rng), next_id_(first_own_id) {}

  // One trajectory over `prompt_ids` (floor(prompt_tokens / 64) ids).
  WekaConversation Generate(std::string id, const std::vector<uint64_t>& prompt_ids,
                            int64_t prompt_tokens) {
    WekaConversation conversation;
    conversation.source = "rollout";
    conversation.id = std::move(id);
    conversation.block_size = static_cast<int32_t>(kBlock);
    const int64_t turns =
        std::clamp<int64_t>(std::llround(options_.turns.Sample(rng_)), 1, options_.max_turns);
    std::vector<uint64_t> ids = prompt_ids;
    int64_t context = prompt_tokens;
    TimeNs t;
    TimeNs think_time;
    for (int64_t k = 0;; ++k) {
      WekaRequest request;
      request.t = t;
      request.think_time = think_time;
      request.input_tokens = context;
      Extend(ids, context);
      request.hash_ids = ids;
      // The prompt and its output fit the window (the prompt leaves room for one token).
      request.output_tokens =
          DrawTokens(options_.output_tokens,
                     std::max<int64_t>(1, options_.max_context_tokens - context), rng_);
      bool last = k + 1 >= turns;
      int64_t observation = 0;
      if (!last) {
        observation =
            DrawTokens(options_.observation_tokens, options_.max_observation_tokens, rng_);
        // The next turn's prompt and at least one output token must fit the window.
        last = context + request.output_tokens + observation + 1 > options_.max_context_tokens;
      }
      request.stop = std::string(last ? kEndTurn : kToolUse);
      conversation.requests.push_back(std::move(request));
      if (last) break;
      const double tool_s = std::min(options_.tool_s.Sample(rng_), options_.max_tool_s);
      think_time = TimeNs::Seconds(tool_s);
      t += think_time;
      context += conversation.requests.back().output_tokens + observation;
    }
    return conversation;
  }

 private:
  // Appends fresh ids until `ids` covers every full block of `tokens`.
  void Extend(std::vector<uint64_t>& ids, int64_t tokens) {
    while (static_cast<int64_t>(ids.size()) < tokens / kBlock) ids.push_back(next_id_++);
  }

  const RolloutWorkloadOptions& options_;
  Rng& rng_;
  uint64_t next_id_;
};

}  // namespace

std::string_view RolloutModeName(RolloutMode mode) {
  return mode == RolloutMode::kSynchronous ? "sync" : "async";
}

Status ValidateRolloutWorkloadOptions(const RolloutWorkloadOptions& o) {
  const OptionChecks check("RolloutWorkloadOptions");
  AGENTKV_RETURN_IF_ERROR(check.Int("prompts", o.prompts, 1, kMaxRolloutTrajectories));
  AGENTKV_RETURN_IF_ERROR(check.Int("group_size", o.group_size, 1, kMaxRolloutTrajectories));
  AGENTKV_RETURN_IF_ERROR(check.Int("steps", o.steps, 1, kMaxRolloutTrajectories));
  // Each factor is at most 1000, so the product cannot overflow.
  AGENTKV_RETURN_IF_ERROR(check.Int("prompts * group_size * steps",
                                    o.prompts * o.group_size * o.steps, 1,
                                    kMaxRolloutTrajectories));
  if (o.mode != RolloutMode::kSynchronous && o.mode != RolloutMode::kAsynchronous) {
    return check.OutOfRange("mode", "{sync, async}", std::to_string(static_cast<int>(o.mode)));
  }
  if (o.mode == RolloutMode::kAsynchronous) {
    AGENTKV_RETURN_IF_ERROR(check.Int("staleness", o.staleness, 1, kMaxRolloutTrajectories));
  }
  AGENTKV_RETURN_IF_ERROR(check.Int("system_prompt_tokens", o.system_prompt_tokens, 0, 1'000'000));
  AGENTKV_RETURN_IF_ERROR(check.Distribution("task_prompt_tokens", o.task_prompt_tokens));
  AGENTKV_RETURN_IF_ERROR(check.Distribution("turns", o.turns));
  AGENTKV_RETURN_IF_ERROR(check.Int("max_turns", o.max_turns, 1, 100'000));
  AGENTKV_RETURN_IF_ERROR(check.Distribution("output_tokens", o.output_tokens));
  AGENTKV_RETURN_IF_ERROR(check.Distribution("observation_tokens", o.observation_tokens));
  AGENTKV_RETURN_IF_ERROR(
      check.Int("max_observation_tokens", o.max_observation_tokens, 1, 1'000'000));
  AGENTKV_RETURN_IF_ERROR(check.Distribution("tool_s", o.tool_s));
  if (!(o.max_tool_s > 0.0 && o.max_tool_s <= 86400.0)) {
    return check.OutOfRange("max_tool_s", "(0, 86400]", OptionChecks::Num(o.max_tool_s));
  }
  AGENTKV_RETURN_IF_ERROR(check.Int("max_context_tokens", o.max_context_tokens, 1, 10'000'000));
  return Status();
}

StatusOr<RolloutWorkload> GenerateRolloutWorkload(const RolloutWorkloadOptions& options) {
  AGENTKV_RETURN_IF_ERROR(ValidateRolloutWorkloadOptions(options));
  Rng rng(options.seed);
  RolloutWorkload rollout;
  rollout.system_prompt_blocks = options.system_prompt_tokens / kBlock;
  // Every task prompt first: the prompt ids, with their group ranges, come before every
  // trajectory's own ids. A prompt is cut to leave room for one turn in the context window.
  const int64_t tasks = options.steps * options.prompts;
  std::vector<int64_t> prompt_tokens(static_cast<size_t>(tasks));
  std::vector<std::vector<uint64_t>> prompt_ids(static_cast<size_t>(tasks));
  uint64_t next_id = static_cast<uint64_t>(rollout.system_prompt_blocks);
  for (int64_t task = 0; task < tasks; ++task) {
    const int64_t room = std::max<int64_t>(1, options.max_context_tokens - 1);
    const int64_t tokens =
        std::min(room, options.system_prompt_tokens +
                           DrawTokens(options.task_prompt_tokens, options.max_context_tokens, rng));
    std::vector<uint64_t>& ids = prompt_ids[static_cast<size_t>(task)];
    for (int64_t b = 0; b < tokens / kBlock; ++b) {
      ids.push_back(b < rollout.system_prompt_blocks ? static_cast<uint64_t>(b) : next_id++);
    }
    prompt_tokens[static_cast<size_t>(task)] = tokens;
  }
  rollout.shared_prefix_ids = next_id;
  TrajectoryGenerator generator(options, rng, next_id);
  AgenticWorkload& workload = rollout.workload;
  for (int64_t step = 0; step < options.steps; ++step) {
    const int64_t lag = options.mode == RolloutMode::kSynchronous ? 1 : 1 + options.staleness;
    const int32_t gate = static_cast<int32_t>(std::max<int64_t>(-1, step - lag));
    for (int64_t p = 0; p < options.prompts; ++p) {
      const size_t task = static_cast<size_t>(step * options.prompts + p);
      for (int64_t g = 0; g < options.group_size; ++g) {
        workload.conversations.push_back(generator.Generate("rollout-s" + std::to_string(step) +
                                                                "-p" + std::to_string(p) + "-g" +
                                                                std::to_string(g),
                                                            prompt_ids[task], prompt_tokens[task]));
        workload.starts.push_back(TimeNs());
        workload.groups.push_back(static_cast<int32_t>(step));
        workload.start_after_group.push_back(gate);
      }
    }
  }
  if (options.retain_sessions) workload.retained.assign(workload.conversations.size(), true);
  return rollout;
}

}  // namespace agentkv::sim
