#include "tools/agentkv/replay_flags.h"

#include <fmt/core.h>
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <functional>
#include <system_error>
#include <utility>
#include <vector>

#include "agentkv/engine/cost_model.h"
#include "agentkv/engine/kv_pool.h"
#include "agentkv/sim/replay/replay_arms.h"
#include "agentkv/sim/workload/bailian_trace.h"
#include "agentkv/sim/workload/mooncake_trace.h"
#include "agentkv/sim/workload/rollout_workload.h"
#include "agentkv/sim/workload/synthetic_agentic.h"
#include "agentkv/sim/workload/weka_trace.h"
#include "tools/agentkv/arm_threads.h"
#include "tools/agentkv/cli_support.h"
#include "tools/agentkv/cost_model_file.h"

namespace agentkv::tools {
namespace {

// The embedded default workload: synthetic Claude-Code-like sessions (docs/WORKLOADS.md) on a
// fleet small enough that KV, not compute, is the constraint, so the arms differ.
constexpr int64_t kDefaultSessions = 48;
constexpr double kDefaultContextScale = 0.5;
constexpr double kDefaultSessionInterarrivalS = 15.0;
constexpr double kDefaultWekaInterarrivalS = 60.0;

// Checks before the run that `path` (named by `flag`) can be written: not a directory, and its
// directory exists. The run can take minutes; a typo should not cost them.
Status CheckOutputPath(const char* flag, const std::string& path) {
  if (path.empty()) return Status::Ok();
  std::error_code error;
  const std::filesystem::path target(path);
  if (std::filesystem::is_directory(target, error)) {
    return InvalidArgumentError(fmt::format("{} \"{}\" is a directory", flag, path));
  }
  const std::filesystem::path parent =
      target.has_parent_path() ? target.parent_path() : std::filesystem::path(".");
  if (!std::filesystem::is_directory(parent, error)) {
    return InvalidArgumentError(
        fmt::format("{} \"{}\": directory \"{}\" does not exist", flag, path, parent.string()));
  }
  return Status::Ok();
}

std::string Gigabytes(int64_t bytes) {
  return fmt::format("{:.1f} GB", static_cast<double>(bytes) / 1e9);
}

// OK, or InvalidArgument naming the flags when one arm's fleet (every engine's device blocks,
// and host blocks with a host-tier arm) on blocks of `tokens_per_block` tokens would pass
// kMaxKvBlocks.
Status CheckFleetSize(const sim::ReplayOptions& options, int32_t tokens_per_block) {
  StatusOr<engine::KvPool> pool = sim::KvPoolPerEngine(options, tokens_per_block);
  if (!pool.ok()) return pool.status();
  const bool host = std::any_of(options.arms.begin(), options.arms.end(),
                                [](const sim::ArmSpec& arm) { return arm.host_tier; });
  const int64_t per_engine = pool->device_blocks + (host ? pool->host_blocks : 0);
  // per_engine <= 2^40 x 101 and num_engines <= 1024: the product fits.
  return CheckKvBlocks(
      fmt::format("--num-engines {} x {} blocks of {} tokens per engine (--max-total-tokens{})",
                  options.num_engines, per_engine, tokens_per_block,
                  host ? ", --hicache-ratio for the host-tier arms" : ""),
      per_engine * options.num_engines);
}

}  // namespace

// The flags register section by section, in the order of `--help` and of CLI11's checks of
// their values.
void ReplayFlags::Add(CLI::App& c) {
  AddWorkloadFlags(c);
  AddRolloutFlags(c);
  if (set_ == ReplayFlagSet::kAll) {
    AddFleetFlags(c);
    AddArmFlags(c);
    AddPolicyFlags(c);
  }
  AddOutputFlags(c);
}

void ReplayFlags::AddWorkloadFlags(CLI::App& c) {
  const std::string workload_group = "Workload";
  c.add_option("--workload", workload_, "synthetic (default), weka, mooncake, bailian or rollout")
      ->check(CLI::IsMember({"synthetic", "weka", "mooncake", "bailian", "rollout"}))
      ->capture_default_str()
      ->group(workload_group);
  c.add_option("--trace", trace_paths_, "Trace files or directories (weka, mooncake, bailian)")
      ->type_name("PATH")
      ->group(workload_group);
  c.add_option("--seed", seed_,
               "Seed of the synthetic and rollout generators and of WEKA start times")
      ->capture_default_str()
      ->group(workload_group);
  sessions_option_ = c.add_option("--sessions", sessions_,
                                  fmt::format("Synthetic sessions, in [1, {}] (default {}){}",
                                              MaxSessions(), kDefaultSessions,
                                              streamed_ ? "; each is generated when it starts "
                                                          "and dropped when it ends"
                                                        : ""))
                         ->type_name("N")
                         ->group(workload_group);
  context_scale_option_ =
      c.add_option("--context-scale", context_scale_,
                   fmt::format("Synthetic token counts scale, in (0, 1] (default {})",
                               kDefaultContextScale))
          ->type_name("F")
          ->group(workload_group);
  c.add_option("--session-interarrival-s", session_interarrival_s_,
               fmt::format("Mean seconds between session starts (default {} synthetic, {} weka)",
                           kDefaultSessionInterarrivalS, kDefaultWekaInterarrivalS))
      ->type_name("S")
      ->group(workload_group);
  c.add_option("--shared-prefix-blocks", shared_prefix_blocks_,
               "Block ids below N are shared by every conversation (default: the synthetic "
               "prefix; 0 for traces)")
      ->type_name("N")
      ->group(workload_group);
  c.add_option("--subagent-models", subagent_models_,
               "Sub-agents on another model than their main agent: share (replayed on the same "
               "fleet) or exclude (left out)")
      ->check(CLI::IsMember({"share", "exclude"}))
      ->capture_default_str()
      ->group(workload_group);
}

void ReplayFlags::AddRolloutFlags(CLI::App& c) {
  const std::string rollout_group = "Rollout workload";
  rollout_options_ = {
      c.add_option("--rollout-prompts", rollout_prompts_, "Tasks per rollout step (B)")
          ->capture_default_str()
          ->group(rollout_group),
      c.add_option("--rollout-group-size", rollout_group_size_,
                   "Trajectories per task, sharing its prompt (G, the GRPO group)")
          ->capture_default_str()
          ->group(rollout_group),
      c.add_option(
           "--rollout-steps", rollout_steps_,
           fmt::format("Rollout steps; B x G x steps at most {}", sim::kMaxRolloutTrajectories))
          ->capture_default_str()
          ->group(rollout_group),
      c.add_option("--rollout-mode", rollout_mode_,
                   "sync: a step starts when the previous one ended; async: bounded staleness")
          ->check(CLI::IsMember({"sync", "async"}))
          ->capture_default_str()
          ->group(rollout_group),
      c.add_option("--rollout-staleness", rollout_staleness_,
                   "async: step s starts once every step <= s - 1 - N ended (N + 1 steps in "
                   "flight)")
          ->capture_default_str()
          ->group(rollout_group),
      c.add_option("--rollout-max-context-tokens", rollout_max_context_tokens_,
                   "Context window: a trajectory ends before its prompt outgrows it")
          ->capture_default_str()
          ->group(rollout_group),
      c.add_flag("--rollout-retain-sessions", rollout_retain_sessions_,
                 "Mark every trajectory's session retained (partial rollout, fully async "
                 "retention): the gateway never ends one for idleness "
                 "(--session-idle-timeout-s), only its end closes it")
          ->group(rollout_group),
  };
}

void ReplayFlags::AddFleetFlags(CLI::App& c) {
  const std::string fleet_group = "Fleet";
  c.add_option("--num-engines", options_.num_engines, "Engines behind the router")
      ->capture_default_str()
      ->group(fleet_group);
  AddRouterPolicyOption(c, "--router", options_.router,
                        "round_robin, cache_aware or consistent_hashing")
      ->group(fleet_group);
  c.add_option("--model", model_, "Model preset: llama-3.1-8b, qwen2.5-32b, llama-3.1-70b")
      ->capture_default_str()
      ->group(fleet_group);
  c.add_option("--gpu", gpu_, "GPU preset: h100, h200")->capture_default_str()->group(fleet_group);
  c.add_option("--tp", options_.engine.tp, "Tensor parallelism per engine")
      ->capture_default_str()
      ->group(fleet_group);
  max_total_tokens_option_ =
      c.add_option("--max-total-tokens", options_.engine.kv_pool.max_total_tokens,
                   fmt::format("Device KV tokens per engine; 0 = from the cost model (synthetic "
                               "default: {})",
                               kDefaultSyntheticMaxTotalTokens))
          ->type_name("N")
          ->group(fleet_group);
  c.add_option("--hicache-ratio", options_.engine.kv_pool.hicache_ratio,
               "Host tier size as a multiple of the device tier (+host-tier arms)")
      ->capture_default_str()
      ->group(fleet_group);
  c.add_option("--cost-model", cost_model_path_,
               "Measured cost-model constants (TOML/INI, see `agentkv cost-model --help`) "
               "instead of the built-in calibrated ones")
      ->type_name("FILE")
      ->group(fleet_group);
  c.add_option("--max-running-requests", options_.engine.scheduler.max_running_requests,
               "Requests in an engine's running batch")
      ->capture_default_str()
      ->group(fleet_group);
  c.add_option("--max-prefill-tokens", options_.engine.scheduler.max_prefill_tokens,
               "Prefill tokens per engine step")
      ->capture_default_str()
      ->group(fleet_group);
  c.add_option("--chunked-prefill-size", options_.engine.scheduler.chunked_prefill_size,
               "Most prefill tokens of one request per step; 0 = no chunking")
      ->capture_default_str()
      ->group(fleet_group);
}

// Two fleet flags register among the arms' (--help lists them with the fleet's): CLI11 checks
// the values in registration order, which decides the error of a command line with two bad ones.
void ReplayFlags::AddArmFlags(CLI::App& c) {
  const std::string arms_group = "Arms";
  const std::string fleet_group = "Fleet";
  c.add_option("--arms", arms_,
               fmt::format("Comma-separated arms (default: the {} listed below)",
                           sim::DefaultArmNames().size()))
      ->delimiter(',')
      ->type_name("LIST")
      ->group(arms_group);
  c.add_option("--session-close-mode", session_close_mode_,
               "+lifecycle close mode: release (free the session's blocks) or dereference")
      ->check(CLI::IsMember({"release", "dereference"}))
      ->capture_default_str()
      ->group(arms_group);
  c.add_option("--finished-subagent-priority", options_.finished_subagent_priority,
               "Priority of a finished sub-agent's blocks (+subagent-demotion)")
      ->capture_default_str()
      ->group(arms_group);
  c.add_option("--finished-subagent-min-idle-steps", options_.finished_subagent_min_idle_steps,
               "Scheduler steps a sub-agent must be idle before demotion, in [0, 2^40]")
      ->capture_default_str()
      ->group(arms_group);
  finished_subagent_min_idle_s_option_ =
      c.add_option("--finished-subagent-min-idle-s", finished_subagent_min_idle_s_,
                   "Seconds a sub-agent must be idle before demotion, in [0, 1e6]; when given it "
                   "replaces --finished-subagent-min-idle-steps (default: unset, steps)")
          ->type_name("S")
          ->group(arms_group);
  c.add_option("--finished-subagent-offloadable", options_.finished_subagent_offloadable,
               "+subagent-demotion with a host tier: demoted blocks get max(priority, offload "
               "threshold 30), offloaded instead of dropped")
      ->capture_default_str()
      ->group(arms_group);
  c.add_option("--agentic-subagent-demotion-delivery", subagent_demotion_delivery_,
               "+subagent-demotion: parent-engine (only the engine the parent's request lands "
               "on demotes) or every-engine (the gateway delivers the parent's return to every "
               "engine, reaching children routed elsewhere)")
      ->check(CLI::IsMember({"parent-engine", "every-engine"}))
      ->capture_default_str()
      ->group(arms_group);
  c.add_option("--agentic-subagent-routing", subagent_routing_,
               "Routing key of sub-agents' requests, every arm: own (their own session) or "
               "parent (their parent's session: same engine under consistent_hashing)")
      ->check(CLI::IsMember({"own", "parent"}))
      ->capture_default_str()
      ->group(fleet_group);
  c.add_option("--session-idle-timeout-s", options_.session_idle_timeout_s,
               "The gateway's idle timeout in every arm: a session with nothing in flight this "
               "long is ended (closed on every engine with +lifecycle) unless retained; 0 = "
               "never (the replayed agents close their sessions at their end; the served "
               "gateway's default is 900)")
      ->type_name("S")
      ->capture_default_str()
      ->group(fleet_group);
}

void ReplayFlags::AddPolicyFlags(CLI::App& c) {
  const std::string arms_group = "Arms";
  c.add_option("--fixed-ttl-s,--continuum-ttl-s", options_.fixed_ttl_s,
               "TTL of the fixed-ttl pin after a tool-call turn, seconds (--continuum-ttl-s: "
               "its former name)")
      ->capture_default_str()
      ->group(arms_group);
  c.add_option("--continuum-memory-price", options_.continuum.memory_price,
               "continuum: server seconds one KV token held one second costs at KV pressure 0.5")
      ->capture_default_str()
      ->group(arms_group);
  c.add_option("--continuum-program-fcfs", options_.continuum_program_fcfs,
               "continuum: order each engine's waiting queue by program (false: pins alone)")
      ->capture_default_str()
      ->group(arms_group);
  c.add_option("--stall-offload-pressure", options_.stall_offload.pressure_threshold,
               "+stall-offload: device KV usage (held or cached blocks over capacity) above "
               "which paused sessions' KV moves to the host tier, in (0, 1]")
      ->capture_default_str()
      ->group(arms_group);
  c.add_option("--stall-offload-quantile", options_.stall_offload.return_quantile,
               "+stall-offload: a paused session's predicted return is the time by which this "
               "share of its pause class's pauses of its length have ended, in (0, 1)")
      ->capture_default_str()
      ->group(arms_group);
  c.add_option("--stall-offload-min-stall-s", stall_offload_min_stall_s_,
               "+stall-offload: least time to the predicted return for an offload, seconds, in "
               "[0, 86400]")
      ->capture_default_str()
      ->group(arms_group);
  working_set_flags_.Add(c, arms_group);
  agentic_.Add(c, AgenticFlags::Set::kBudget, FlagSource::kCommandLine, arms_group);
}

void ReplayFlags::AddOutputFlags(CLI::App& c) {
  const std::string output_group = "Output";
  c.add_option("--json", json_path_, "JSON report path (\"\" to skip)")
      ->capture_default_str()
      ->group(output_group);
  c.add_option("--html", html_path_, "HTML report path (\"\" to skip)")
      ->capture_default_str()
      ->group(output_group);
  c.add_flag("--quiet", quiet_, "No progress line and no summary lines on stderr")
      ->group(output_group);
  if (set_ != ReplayFlagSet::kAll) return;
  c.add_option("--jobs", jobs_,
               "Arms run at once, each on its own thread, in [0, 256]; 0 = one per hardware "
               "thread. The output does not depend on it")
      ->type_name("N")
      ->capture_default_str()
      ->group(output_group);
}

int64_t ReplayFlags::MaxSessions() const {
  return streamed_ ? sim::kMaxStreamedConversations : sim::kMaxReplayConversations;
}

Status ReplayFlags::CheckSessions(double interarrival_s) const {
  if (sessions_ >= 1 && sessions_ <= MaxSessions()) return Status::Ok();
  std::string why;
  if (sessions_ > MaxSessions() && !streamed_) {
    sim::SyntheticAgenticOptions generator;
    generator.seed = seed_;
    generator.sessions = sessions_;
    generator.context_scale =
        context_scale_option_->count() > 0 ? context_scale_ : kDefaultContextScale;
    generator.mean_session_interarrival = TimeNs::Seconds(interarrival_s);
    why = fmt::format(
        ": a replay drives at most {} conversations, and {} sessions would take about {} of "
        "memory to build",
        sim::kMaxReplayConversations, sessions_,
        Gigabytes(sim::EstimateSyntheticAgenticBytes(generator)));
  }
  return InvalidArgumentError(
      fmt::format("--sessions must be in [1, {}], got {}{}", MaxSessions(), sessions_, why));
}

// Decides in steps, each returning the first failure of its own: the flags alone (the
// combinations, then every numeric flag, then the report paths), before anything is read or
// built, so that a bad value never costs the time to read a trace or generate a workload; then
// the names that need parsing (arms, presets, cost model); then the workload; then the fleet's
// size on the workload's blocks.
StatusOr<ReplayPlan> ReplayFlags::Plan() const {
  AGENTKV_RETURN_IF_ERROR(CheckFlagRange("--jobs", jobs_, 0, kMaxArmJobs));
  ReplayPlan plan;
  AGENTKV_ASSIGN_OR_RETURN(plan.options, PolicyOptions());
  AGENTKV_RETURN_IF_ERROR(CheckWorkloadFlags());
  const double interarrival_s = session_interarrival_s_ != 0 ? session_interarrival_s_
                                : workload_ == "synthetic"   ? kDefaultSessionInterarrivalS
                                                             : kDefaultWekaInterarrivalS;
  // Every numeric flag, before anything is read or built: the flags ReplayOptions::Validate and
  // the workload builders would otherwise report by their field names, after the work.
  AGENTKV_RETURN_IF_ERROR(CheckWorkloadNumbers(interarrival_s));
  AGENTKV_RETURN_IF_ERROR(CheckFleetNumbers(plan.options));
  AGENTKV_RETURN_IF_ERROR(CheckPolicyNumbers(plan.options));
  plan.options.stall_offload.min_stall =
      TimeNs(static_cast<int64_t>(stall_offload_min_stall_s_ * 1e9));
  AGENTKV_ASSIGN_OR_RETURN(plan.options.working_set, working_set_flags_.Options());
  AGENTKV_RETURN_IF_ERROR(CheckOutputPath("--json", json_path_));
  AGENTKV_RETURN_IF_ERROR(CheckOutputPath("--html", html_path_));

  AGENTKV_RETURN_IF_ERROR(ResolveFleet(plan.options));
  AGENTKV_RETURN_IF_ERROR(BuildWorkload(interarrival_s, plan));
  // The fleet each arm builds, before any arm runs.
  int32_t block = plan.open_loop_block;
  if (plan.agentic.has_value()) {
    block = plan.agentic->conversations.empty() ? sim::kSyntheticBlockSize
                                                : plan.agentic->conversations.front().block_size;
  }
  AGENTKV_RETURN_IF_ERROR(CheckFleetSize(plan.options, block));

  plan.seed = seed_;
  plan.workload = workload_;
  plan.jobs = ArmJobs(jobs_, plan.options.arms.size());
  plan.json_path = json_path_;
  plan.html_path = html_path_;
  plan.quiet = quiet_;
  return plan;
}

StatusOr<sim::ReplayOptions> ReplayFlags::PolicyOptions() const {
  sim::ReplayOptions options = options_;
  options.session_close_mode = session_close_mode_ == "release"
                                   ? kv::SessionCloseMode::kRelease
                                   : kv::SessionCloseMode::kDereference;
  AGENTKV_ASSIGN_OR_RETURN(options.agentic, agentic_.Options());
  options.subagent_models = sim::ParseSubagentModels(subagent_models_).value();
  options.subagent_demotion_delivery =
      sim::ParseDemotionDelivery(subagent_demotion_delivery_).value();
  options.subagent_routing = sim::ParseSubagentRouting(subagent_routing_).value();
  if (finished_subagent_min_idle_s_option_ != nullptr &&
      finished_subagent_min_idle_s_option_->count() > 0) {
    options.finished_subagent_min_idle_s = finished_subagent_min_idle_s_;
  }
  return options;
}

Status ReplayFlags::CheckWorkloadFlags() const {
  const bool synthetic = workload_ == "synthetic";
  const bool rollout = workload_ == "rollout";
  if ((synthetic || rollout) && !trace_paths_.empty()) {
    return InvalidArgumentError(
        fmt::format("--trace needs --workload weka, mooncake or bailian (the {} "
                    "workload has none)",
                    workload_));
  }
  if (!rollout) {
    for (const CLI::Option* option : rollout_options_) {
      if (option->count() > 0) {
        return InvalidArgumentError(
            fmt::format("{} applies to --workload rollout only", option->get_name()));
      }
    }
  } else if (sessions_ != 0 || context_scale_ != 0 || session_interarrival_s_ != 0 ||
             shared_prefix_blocks_ != -1) {
    return InvalidArgumentError(
        "--sessions, --context-scale, --session-interarrival-s and "
        "--shared-prefix-blocks do not apply to --workload rollout (its "
        "steps start trajectories; its prompts set the shared prefix)");
  }
  if (rollout) AGENTKV_RETURN_IF_ERROR(CheckRolloutNumbers());
  if (!synthetic && !rollout && trace_paths_.empty()) {
    return InvalidArgumentError(fmt::format("--workload {} needs --trace PATH", workload_));
  }
  if (!synthetic && (sessions_ != 0 || context_scale_ != 0)) {
    return InvalidArgumentError(
        "--sessions and --context-scale apply to "
        "--workload synthetic only");
  }
  return Status::Ok();
}

Status ReplayFlags::CheckRolloutNumbers() const {
  AGENTKV_RETURN_IF_ERROR(
      CheckFlagRange("--rollout-prompts", rollout_prompts_, 1, sim::kMaxRolloutTrajectories));
  AGENTKV_RETURN_IF_ERROR(
      CheckFlagRange("--rollout-group-size", rollout_group_size_, 1, sim::kMaxRolloutTrajectories));
  AGENTKV_RETURN_IF_ERROR(
      CheckFlagRange("--rollout-steps", rollout_steps_, 1, sim::kMaxRolloutTrajectories));
  AGENTKV_RETURN_IF_ERROR(
      CheckFlagRange("--rollout-staleness", rollout_staleness_, 1, sim::kMaxRolloutTrajectories));
  AGENTKV_RETURN_IF_ERROR(
      CheckFlagRange("--rollout-max-context-tokens", rollout_max_context_tokens_, 1, 10'000'000));
  const int64_t trajectories = rollout_prompts_ * rollout_group_size_ * rollout_steps_;
  if (trajectories > sim::kMaxRolloutTrajectories) {
    return InvalidArgumentError(fmt::format(
        "--rollout-prompts x --rollout-group-size x --rollout-steps must be at most {}, got "
        "{} x {} x {} = {}",
        sim::kMaxRolloutTrajectories, rollout_prompts_, rollout_group_size_, rollout_steps_,
        trajectories));
  }
  return Status::Ok();
}

Status ReplayFlags::CheckWorkloadNumbers(double interarrival_s) const {
  AGENTKV_RETURN_IF_ERROR(CheckFlagRange("--session-interarrival-s", interarrival_s, 0.0, 1e6));
  if (context_scale_option_->count() > 0) {
    AGENTKV_RETURN_IF_ERROR(
        CheckFlagRange("--context-scale", context_scale_, 0.0, 1.0, LowerBound::kOpen));
  }
  if (sessions_option_->count() > 0) AGENTKV_RETURN_IF_ERROR(CheckSessions(interarrival_s));
  return Status::Ok();
}

// --shared-prefix-blocks, a workload flag, is checked among the engine's flags: the order of
// the checks decides the error of a command line with two bad values.
Status ReplayFlags::CheckFleetNumbers(const sim::ReplayOptions& options) const {
  AGENTKV_RETURN_IF_ERROR(CheckFlagRange("--tp", int64_t{options.engine.tp}, 1, 8));
  AGENTKV_RETURN_IF_ERROR(CheckFlagRange("--max-running-requests",
                                         options.engine.scheduler.max_running_requests, 1,
                                         int64_t{1} << 20));
  AGENTKV_RETURN_IF_ERROR(CheckFlagRange(
      "--max-prefill-tokens", options.engine.scheduler.max_prefill_tokens, 1, int64_t{1} << 30));
  AGENTKV_RETURN_IF_ERROR(CheckFlagRange("--chunked-prefill-size",
                                         options.engine.scheduler.chunked_prefill_size, 0,
                                         int64_t{1} << 30));
  if (shared_prefix_blocks_ != -1) {
    AGENTKV_RETURN_IF_ERROR(
        CheckFlagRange("--shared-prefix-blocks", shared_prefix_blocks_, 0, int64_t{1} << 40));
  }
  AGENTKV_RETURN_IF_ERROR(CheckFlagRange("--num-engines", int64_t{options.num_engines}, 1, 1024));
  AGENTKV_RETURN_IF_ERROR(CheckFlagRange(
      "--max-total-tokens", options.engine.kv_pool.max_total_tokens, 0, int64_t{1} << 40));
  return CheckFlagRange("--hicache-ratio", options.engine.kv_pool.hicache_ratio, 0.0, 100.0,
                        LowerBound::kOpen);
}

Status ReplayFlags::CheckPolicyNumbers(const sim::ReplayOptions& options) const {
  AGENTKV_RETURN_IF_ERROR(CheckFlagRange("--finished-subagent-priority",
                                         int64_t{options.finished_subagent_priority}, 0, 100));
  AGENTKV_RETURN_IF_ERROR(CheckFlagRange("--finished-subagent-min-idle-steps",
                                         options.finished_subagent_min_idle_steps, 0,
                                         int64_t{1} << 40));
  if (options.finished_subagent_min_idle_s.has_value()) {
    AGENTKV_RETURN_IF_ERROR(CheckFlagRange("--finished-subagent-min-idle-s",
                                           *options.finished_subagent_min_idle_s, 0.0,
                                           kv::kMaxFinishedSubagentMinIdleS));
  }
  AGENTKV_RETURN_IF_ERROR(
      CheckFlagRange("--fixed-ttl-s", options.fixed_ttl_s, 0.0, 86400.0, LowerBound::kOpen));
  AGENTKV_RETURN_IF_ERROR(CheckFlagRange("--session-idle-timeout-s", options.session_idle_timeout_s,
                                         0.0, 31'536'000.0));
  AGENTKV_RETURN_IF_ERROR(
      CheckFlagRange("--continuum-memory-price", options.continuum.memory_price, 0.0, 1.0));
  AGENTKV_RETURN_IF_ERROR(CheckFlagRange("--stall-offload-pressure",
                                         options.stall_offload.pressure_threshold, 0.0, 1.0,
                                         LowerBound::kOpen));
  if (!(options.stall_offload.return_quantile > 0.0 &&
        options.stall_offload.return_quantile < 1.0)) {
    return InvalidArgumentError(fmt::format("--stall-offload-quantile must be in (0, 1), got {}",
                                            options.stall_offload.return_quantile));
  }
  return CheckFlagRange("--stall-offload-min-stall-s", stall_offload_min_stall_s_, 0.0, 86400.0);
}

Status ReplayFlags::ResolveFleet(sim::ReplayOptions& options) const {
  if (!arms_.empty()) {
    // --arms (or a config file's arms) names the arms; the default is DefaultArms().
    AGENTKV_ASSIGN_OR_RETURN(options.arms, sim::ParseArms(arms_));
  }
  AGENTKV_ASSIGN_OR_RETURN(options.engine.model, engine::ParseModelPreset(model_));
  AGENTKV_ASSIGN_OR_RETURN(options.engine.gpu, engine::ParseGpuPreset(gpu_));
  if (!cost_model_path_.empty()) {
    AGENTKV_ASSIGN_OR_RETURN(options.engine.cost,
                             ReadCostModelFile(cost_model_path_, options.engine.cost));
  }
  if (workload_ == "synthetic" &&
      (max_total_tokens_option_ == nullptr || max_total_tokens_option_->count() == 0)) {
    options.engine.kv_pool.max_total_tokens = kDefaultSyntheticMaxTotalTokens;
  }
  return Status::Ok();
}

Status ReplayFlags::BuildWorkload(double interarrival_s, ReplayPlan& plan) const {
  if (workload_ == "rollout") return BuildRollout(plan);
  if (workload_ == "synthetic") return BuildSynthetic(interarrival_s, plan);
  if (workload_ == "weka") return BuildWeka(interarrival_s, plan);
  if (workload_ == "bailian") return BuildBailian(plan);
  return BuildMooncake(plan);
}

Status ReplayFlags::BuildRollout(ReplayPlan& plan) const {
  sim::RolloutWorkloadOptions generator;
  generator.seed = seed_;
  generator.prompts = rollout_prompts_;
  generator.group_size = rollout_group_size_;
  generator.steps = rollout_steps_;
  generator.mode =
      rollout_mode_ == "async" ? sim::RolloutMode::kAsynchronous : sim::RolloutMode::kSynchronous;
  generator.staleness = rollout_staleness_;
  generator.max_context_tokens = rollout_max_context_tokens_;
  generator.retain_sessions = rollout_retain_sessions_;
  AGENTKV_ASSIGN_OR_RETURN(sim::RolloutWorkload generated, sim::GenerateRolloutWorkload(generator));
  plan.options.shared_prefix_ids = generated.shared_prefix_ids;
  plan.agentic = std::move(generated.workload);
  plan.description =
      fmt::format("rollout: {} steps x {} prompts x {} samples, {}{}, seed {}", generator.steps,
                  generator.prompts, generator.group_size, sim::RolloutModeName(generator.mode),
                  generator.mode == sim::RolloutMode::kAsynchronous
                      ? fmt::format(" (staleness {})", generator.staleness)
                      : std::string(),
                  seed_);
  return Status::Ok();
}

Status ReplayFlags::BuildSynthetic(double interarrival_s, ReplayPlan& plan) const {
  sim::SyntheticAgenticOptions generator;
  generator.seed = seed_;
  generator.sessions = sessions_ != 0 ? sessions_ : kDefaultSessions;
  generator.context_scale = context_scale_ != 0 ? context_scale_ : kDefaultContextScale;
  generator.mean_session_interarrival = TimeNs::Seconds(interarrival_s);
  // A session ends before its context outgrows one engine's KV (its context window): at most
  // 90 % of the device tier, so that the prompt and its output always fit.
  AGENTKV_ASSIGN_OR_RETURN(const engine::KvPool pool,
                           sim::KvPoolPerEngine(plan.options, sim::kSyntheticBlockSize));
  generator.max_context_blocks = std::clamp<int64_t>(
      static_cast<int64_t>(0.9 * static_cast<double>(pool.device_blocks) / generator.context_scale),
      1, generator.max_context_blocks);
  if (streamed_) {
    AGENTKV_ASSIGN_OR_RETURN(plan.streamed, sim::StreamSyntheticAgentic(generator));
  } else {
    AGENTKV_ASSIGN_OR_RETURN(plan.agentic, sim::GenerateSyntheticAgentic(generator));
  }
  plan.session_interarrival_s = interarrival_s;
  plan.workload_at_interarrival = [generator](const sim::AgenticWorkload& /*base*/,
                                              double interarrival, uint64_t seed) {
    sim::SyntheticAgenticOptions at = generator;
    at.seed = seed;
    at.mean_session_interarrival = TimeNs::Seconds(interarrival);
    return sim::GenerateSyntheticAgentic(at);
  };
  const int64_t prefix_blocks =
      static_cast<int64_t>(std::floor(static_cast<double>(generator.shared_prefix_tokens) *
                                      generator.context_scale)) /
      sim::kSyntheticBlockSize;
  plan.options.shared_prefix_ids =
      static_cast<uint64_t>(shared_prefix_blocks_ != -1 ? shared_prefix_blocks_ : prefix_blocks);
  plan.description = fmt::format("synthetic: {} sessions, context scale {:g}, seed {}",
                                 generator.sessions, generator.context_scale, seed_);
  return Status::Ok();
}

Status ReplayFlags::BuildWeka(double interarrival_s, ReplayPlan& plan) const {
  // One conversation per file: more files than a replay drives are refused before any is read.
  AGENTKV_ASSIGN_OR_RETURN(const std::vector<std::string> paths,
                           sim::ExpandWekaTracePaths(trace_paths_));
  if (static_cast<int64_t>(paths.size()) > sim::kMaxReplayConversations) {
    return InvalidArgumentError(
        fmt::format("--trace names {} WEKA files, more than the {} conversations a replay "
                    "drives (one per file)",
                    paths.size(), sim::kMaxReplayConversations));
  }
  AGENTKV_ASSIGN_OR_RETURN(std::vector<sim::WekaConversation> conversations,
                           sim::ReadWekaTraces(paths));
  const size_t files = conversations.size();
  plan.agentic =
      sim::WekaWorkload(std::move(conversations), TimeNs::Seconds(interarrival_s), seed_);
  plan.session_interarrival_s = interarrival_s;
  // WekaWorkload's starts (PoissonStarts) on a copy of the conversations already read.
  plan.workload_at_interarrival = [](const sim::AgenticWorkload& base, double interarrival,
                                     uint64_t seed) -> StatusOr<sim::AgenticWorkload> {
    sim::AgenticWorkload at = base;
    at.starts = sim::PoissonStarts(static_cast<int64_t>(at.conversations.size()),
                                   TimeNs::Seconds(interarrival), seed);
    return at;
  };
  plan.options.shared_prefix_ids =
      static_cast<uint64_t>(shared_prefix_blocks_ == -1 ? 0 : shared_prefix_blocks_);
  plan.description = fmt::format("weka: {} files, mean session interarrival {:g} s, seed {}", files,
                                 interarrival_s, seed_);
  return Status::Ok();
}

Status ReplayFlags::BuildBailian(ReplayPlan& plan) const {
  std::vector<sim::BailianRequest> all;
  for (const std::string& path : trace_paths_) {
    AGENTKV_ASSIGN_OR_RETURN(const std::vector<sim::BailianRequest> part,
                             sim::ReadBailianTrace(path));
    all.insert(all.end(), part.begin(), part.end());
  }
  plan.agentic = sim::GroupBailianConversations(all);
  plan.description = fmt::format("bailian: {} requests in {} conversations", all.size(),
                                 plan.agentic->conversations.size());
  return Status::Ok();
}

Status ReplayFlags::BuildMooncake(ReplayPlan& plan) const {
  std::vector<sim::MooncakeRequest> all;
  for (const std::string& path : trace_paths_) {
    AGENTKV_ASSIGN_OR_RETURN(const std::vector<sim::MooncakeRequest> part,
                             sim::ReadMooncakeTrace(path));
    all.insert(all.end(), part.begin(), part.end());
  }
  plan.open_loop = sim::OpenLoopFromMooncake(all);
  plan.description = fmt::format("mooncake: {} requests, open loop", all.size());
  return Status::Ok();
}

StatusOr<sim::ReplayResult> RunReplayPlan(const ReplayPlan& plan,
                                          const sim::ReplayProgress& progress,
                                          const sim::ArmTaskRunner& runner) {
  const size_t jobs = plan.jobs;
  const sim::ArmTaskRunner threads = [jobs](const std::vector<std::function<void()>>& tasks) {
    RunOnThreads(tasks, jobs);
  };
  const sim::ArmTaskRunner& run = runner ? runner : threads;
  if (plan.streamed != nullptr) {
    return sim::RunReplay(*plan.streamed, plan.description, plan.seed, plan.options, progress, run);
  }
  return plan.agentic.has_value()
             ? sim::RunReplay(*plan.agentic, plan.description, plan.seed, plan.options, progress,
                              run)
             : sim::RunOpenLoopReplay(plan.open_loop, plan.open_loop_block, plan.description,
                                      plan.seed, plan.options, progress, run);
}

Status WriteFileAtomically(const std::string& path, const std::string& text) {
  const std::string temporary = fmt::format("{}.tmp-{}", path, getpid());
  std::error_code ignored;
  {
    std::ofstream out(temporary, std::ios::binary | std::ios::trunc);
    if (!out) return UnavailableError(fmt::format("cannot write \"{}\"", temporary));
    out << text;
    out.flush();
    if (!out) {
      std::filesystem::remove(temporary, ignored);
      return UnavailableError(fmt::format("writing \"{}\" failed", temporary));
    }
  }
  std::error_code error;
  std::filesystem::rename(temporary, path, error);
  if (error) {
    std::filesystem::remove(temporary, ignored);
    return UnavailableError(fmt::format("cannot write \"{}\": {}", path, error.message()));
  }
  return Status::Ok();
}

}  // namespace agentkv::tools
