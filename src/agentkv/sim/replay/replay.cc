// The replay's entry points: options validation, the arms run as tasks (RunArms), and the two
// workload shapes' doors into the one fleet arm runner (fleet_arm.h), each with its feed.
// Invariant: every arm gets the same options and a fresh fleet; the result holds the arms in
// options.arms order whatever order their tasks ran in.
#include "agentkv/sim/replay/replay.h"

#include <optional>
#include <string>
#include <utility>

#include "agentkv/base/check.h"
#include "agentkv/engine/cost_model.h"
#include "agentkv/engine/engine_config.h"
#include "agentkv/engine/kv_pool.h"
#include "agentkv/kv/kv_cache_manager.h"
#include "agentkv/sim/replay/agent_driver_feed.h"
#include "agentkv/sim/replay/fleet_arm.h"
#include "agentkv/sim/replay/open_loop_feed.h"

namespace agentkv::sim {
namespace {

constexpr int64_t kMaxTotalTokens = int64_t{1} << 40;

template <typename T>
std::string Str(T value) {
  return std::to_string(value);
}

Status OutOfRange(std::string_view field, const std::string& value, std::string_view range) {
  return InvalidArgumentError("ReplayOptions." + std::string(field) + " must be in " +
                              std::string(range) + ", got " + value);
}

ReplaySetup SetupFor(const ReplayOptions& options, int32_t tokens_per_block,
                     std::string_view description, uint64_t seed) {
  ReplaySetup setup;
  setup.workload = std::string(description);
  setup.seed = seed;
  setup.num_engines = options.num_engines;
  setup.router = std::string(routing::RouterPolicyName(options.router));
  setup.model = std::string(engine::PresetName(options.engine.model));
  setup.gpu = std::string(engine::PresetName(options.engine.gpu));
  setup.tp = options.engine.tp;
  setup.tokens_per_block = tokens_per_block;
  return setup;
}

// Runs every arm through `run_arm` as one task each (`runner`, or in order on this thread),
// reporting progress, and fills the capacities of `setup` from the first arm without an
// unbounded cache.
StatusOr<ReplayResult> RunArms(
    ReplaySetup setup, const ReplayOptions& options, const ReplayProgress& progress,
    const ArmTaskRunner& runner,
    const std::function<StatusOr<ArmRun>(const ArmSpec&, const std::function<void(double)>&)>&
        run_arm) {
  AGENTKV_RETURN_IF_ERROR(options.Validate());
  AGENTKV_ASSIGN_OR_RETURN(const engine::KvPool pool,
                           KvPoolPerEngine(options, setup.tokens_per_block));
  setup.device_tokens_per_engine = pool.device_tokens();
  setup.host_tokens_per_engine = pool.host_tokens();
  ReplayResult result;
  result.setup = std::move(setup);
  const size_t num_arms = options.arms.size();
  // Each task writes its own slot only.
  std::vector<std::optional<StatusOr<ArmResult>>> runs(num_arms);
  std::vector<std::function<void()>> tasks;
  tasks.reserve(num_arms);
  for (size_t i = 0; i < num_arms; ++i) {
    tasks.emplace_back([&, i] {
      const ArmSpec& arm = options.arms[i];
      std::function<void(double)> arm_progress;
      if (progress) {
        arm_progress = [&progress, i, num_arms, &arm](double fraction) {
          progress(i, num_arms, arm.name, fraction);
        };
      }
      if (arm_progress) arm_progress(0.0);
      StatusOr<ArmRun> run = run_arm(arm, arm_progress);
      runs[i] = run.ok() ? StatusOr<ArmResult>(std::move(run->result))
                         : StatusOr<ArmResult>(run.status());
    });
  }
  if (runner) {
    runner(tasks);
  } else {
    for (const std::function<void()>& task : tasks) task();
  }
  AGENTKV_ASSIGN_OR_RETURN(
      result.arms, ForEachArm<ArmResult>(options.arms, [&](size_t i, const ArmSpec&) {
        AGENTKV_CHECK(runs[i].has_value()) << "the arm runner skipped arm " << i;
        return *std::move(runs[i]);
      }));
  FillIdealShares(result);
  return result;
}

}  // namespace

Status ReplayOptions::Validate() const {
  if (arms.empty())
    return InvalidArgumentError("ReplayOptions.arms is empty: name at least one arm");
  AGENTKV_RETURN_IF_ERROR(ValidateArms(arms));
  if (num_engines < 1 || num_engines > 1024) {
    return OutOfRange("num_engines", Str(num_engines), "[1, 1024]");
  }
  if (engine.kv_pool.max_total_tokens < 0 || engine.kv_pool.max_total_tokens > kMaxTotalTokens) {
    return OutOfRange("engine.kv_pool.max_total_tokens", Str(engine.kv_pool.max_total_tokens),
                      "[0, 2^40]");
  }
  if (!(engine.kv_pool.hicache_ratio > 0.0 && engine.kv_pool.hicache_ratio <= 100.0)) {
    return OutOfRange("engine.kv_pool.hicache_ratio", Str(engine.kv_pool.hicache_ratio),
                      "(0, 100]");
  }
  if (engine.kv_pool.hicache_tokens != 0) {
    return OutOfRange("engine.kv_pool.hicache_tokens", Str(engine.kv_pool.hicache_tokens),
                      "[0, 0] (the host tier is hicache_ratio)");
  }
  if (finished_subagent_priority < 0 || finished_subagent_priority > 100) {
    return OutOfRange("finished_subagent_priority", Str(finished_subagent_priority), "[0, 100]");
  }
  if (finished_subagent_min_idle_steps < 0) {
    return OutOfRange("finished_subagent_min_idle_steps", Str(finished_subagent_min_idle_steps),
                      "[0, inf)");
  }
  if (finished_subagent_min_idle_s.has_value() &&
      !(*finished_subagent_min_idle_s >= 0.0 &&
        *finished_subagent_min_idle_s <= kv::kMaxFinishedSubagentMinIdleS)) {
    return OutOfRange("finished_subagent_min_idle_s", Str(*finished_subagent_min_idle_s),
                      "[0, 1e6]");
  }
  if (!(fixed_ttl_s > 0.0 && fixed_ttl_s <= 86400.0)) {
    return OutOfRange("fixed_ttl_s", Str(fixed_ttl_s), "(0, 86400]");
  }
  if (!(session_idle_timeout_s >= 0.0 && session_idle_timeout_s <= 31'536'000.0)) {
    return OutOfRange("session_idle_timeout_s", Str(session_idle_timeout_s), "[0, 31536000]");
  }
  AGENTKV_RETURN_IF_ERROR(continuum.Validate());
  AGENTKV_RETURN_IF_ERROR(stall_offload.Validate());
  AGENTKV_RETURN_IF_ERROR(working_set.Validate());
  control::AgenticOptions admission = agentic;
  admission.agentic_program_admission = true;
  AGENTKV_RETURN_IF_ERROR(admission.Validate());
  routing::RouterOptions router_options;
  router_options.policy = router;
  AGENTKV_RETURN_IF_ERROR(router_options.Validate());
  return engine.Validate();
}

engine::EngineConfig DefaultReplayEngine() {
  engine::EngineConfig config;
  config.kv_pool.hicache_ratio = 2.0;
  return config;
}

StatusOr<engine::KvPool> KvPoolPerEngine(const ReplayOptions& options, int32_t tokens_per_block) {
  engine::EngineConfig config = options.engine;
  config.kv_pool.tokens_per_block = tokens_per_block;
  return engine::SizeKvPool(config);
}

StatusOr<ArmRun> RunAgenticArm(const AgenticWorkload& workload, const ReplayOptions& options,
                               const ArmSpec& arm, const std::function<void(double)>& progress) {
  AgentDriverFeed feed(workload, options);
  return RunFleetArm(feed, options, arm, progress);
}

StatusOr<ArmRun> RunAgenticArm(const ConversationSource& source, const ReplayOptions& options,
                               const ArmSpec& arm, const std::function<void(double)>& progress) {
  AgentDriverFeed feed(source, options);
  return RunFleetArm(feed, options, arm, progress);
}

StatusOr<ArmRun> RunOpenLoopArm(const std::vector<OpenLoopRequest>& requests,
                                int32_t tokens_per_block, const ReplayOptions& options,
                                const ArmSpec& arm, const std::function<void(double)>& progress) {
  OpenLoopFeed feed(requests, tokens_per_block);
  return RunFleetArm(feed, options, arm, progress);
}

StatusOr<ReplayResult> RunReplay(const AgenticWorkload& workload, std::string_view description,
                                 uint64_t seed, const ReplayOptions& options,
                                 const ReplayProgress& progress, const ArmTaskRunner& runner) {
  if (workload.conversations.empty()) {
    return InvalidArgumentError("the workload has no conversations");
  }
  ReplaySetup setup =
      SetupFor(options, workload.conversations.front().block_size, description, seed);
  setup.workload_notes = TotalFallbacks(workload.conversations).Describe();
  return RunArms(std::move(setup), options, progress, runner,
                 [&](const ArmSpec& arm, const std::function<void(double)>& arm_progress) {
                   return RunAgenticArm(workload, options, arm, arm_progress);
                 });
}

StatusOr<ReplayResult> RunReplay(const ConversationSource& source, std::string_view description,
                                 uint64_t seed, const ReplayOptions& options,
                                 const ReplayProgress& progress, const ArmTaskRunner& runner) {
  if (source.size() == 0) return InvalidArgumentError("the workload has no conversations");
  ReplaySetup setup = SetupFor(options, source.Load(0)->block_size, description, seed);
  if (const AgenticWorkload* workload = source.in_memory(); workload != nullptr) {
    setup.workload_notes = TotalFallbacks(workload->conversations).Describe();
  }
  return RunArms(std::move(setup), options, progress, runner,
                 [&](const ArmSpec& arm, const std::function<void(double)>& arm_progress) {
                   return RunAgenticArm(source, options, arm, arm_progress);
                 });
}

StatusOr<ReplayResult> RunOpenLoopReplay(const std::vector<OpenLoopRequest>& requests,
                                         int32_t tokens_per_block, std::string_view description,
                                         uint64_t seed, const ReplayOptions& options,
                                         const ReplayProgress& progress,
                                         const ArmTaskRunner& runner) {
  return RunArms(SetupFor(options, tokens_per_block, description, seed), options, progress, runner,
                 [&](const ArmSpec& arm, const std::function<void(double)>& arm_progress) {
                   return RunOpenLoopArm(requests, tokens_per_block, options, arm, arm_progress);
                 });
}

}  // namespace agentkv::sim
