#include "tools/agentkv/replay_command.h"

#include <fmt/core.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <functional>
#include <mutex>
#include <optional>
#include <system_error>
#include <vector>

#include "agentkv/engine/cost_model.h"
#include "agentkv/engine/kv_pool.h"
#include "agentkv/report/replay_report.h"
#include "agentkv/sim/agentic_workload.h"
#include "agentkv/sim/bailian_trace.h"
#include "agentkv/sim/mooncake_trace.h"
#include "agentkv/sim/open_loop_trace.h"
#include "agentkv/sim/replay_arms.h"
#include "agentkv/sim/rollout_workload.h"
#include "agentkv/sim/synthetic_agentic.h"
#include "agentkv/sim/weka_trace.h"
#include "tools/agentkv/agentic_flags.h"
#include "tools/agentkv/arm_threads.h"
#include "tools/agentkv/cli_support.h"
#include "tools/agentkv/cost_model_file.h"
#include "tools/agentkv/progress_line.h"

namespace agentkv::tools {
namespace {

// The embedded default workload: synthetic Claude-Code-like sessions (docs/WORKLOADS.md) on a
// fleet small enough that KV, not compute, is the constraint, so the arms differ.
constexpr int64_t kDefaultSessions = 48;
constexpr double kDefaultContextScale = 0.5;
constexpr double kDefaultSessionInterarrivalS = 15.0;
constexpr int64_t kDefaultSyntheticMaxTotalTokens = 262144;
constexpr double kDefaultWekaInterarrivalS = 60.0;

constexpr const char* kDescription =
    "Replay an agentic workload through a simulated SGLang fleet under several policy arms "
    "and report, side by side, what each agentkv feature buys";

constexpr const char* kFooter = R"(What it does:
  Builds a simulated fleet (--num-engines engines behind an sgl-router model; each engine is
  agentkv's step scheduler over its KV cache manager, priced by an analytic cost model) with
  the agentkv gateway in front (program-aware admission fed by engine gauges polled every
  2 s, and the session lifecycle planner), then replays the workload through it once per arm,
  in simulated time. Agents are closed loop: a session sends its next request only after its
  previous response plus the recorded tool or human gap; sub-agents spawn and are joined as
  the trace says. Same inputs, same output (the JSON is byte-identical).

Workloads (--workload):
  synthetic  the embedded default: seeded sessions fitted to the public Claude Code traces
             (--sessions, --context-scale, --session-interarrival-s, --seed); the tools and
             system prompt is shared by every session. Without --max-total-tokens each engine
             gets 262144 tokens of KV, a KV-constrained point.
  weka       WEKA Claude Code JSON traces (--trace files or directories); conversations start
             as a Poisson process of mean --session-interarrival-s (default 60) seeded by
             --seed; --shared-prefix-blocks N shares block ids below N across files. A
             sub-agent spawns at its entry's t (its completion) minus duration_ms; the
             parent's next request waits for it unless its status is async_launched.
             --subagent-models exclude leaves out sub-agents on another model than their
             main agent (e.g. Haiku helpers of an Opus session); default share.
  mooncake   Mooncake JSONL (--trace), open loop by timestamp, 512-token blocks.
  bailian    Bailian JSONL (--trace), conversations grouped by chat_id/parent_chat_id.
  rollout    an RL rollout step as Relax-style frameworks run it: --rollout-prompts tasks x
             --rollout-group-size samples (a GRPO group shares its task prompt), each a
             multi-turn tool-using trajectory; --rollout-steps steps, synchronous (a step
             starts when the previous one ended) or --rollout-mode async with at most
             --rollout-staleness steps of lag; each engine keeps its cost-model KV size.
             The table opens with the rollout group (step makespan, GPU busy fraction,
             KV token usage, queueing).

Arms (--arms, comma-separated; default: all eight):
  baseline            SGLang default: prefix reuse, LRU, no lifecycle, no admission
  +lifecycle          close each session on every engine when it ends (--session-close-mode)
  +admission          program-aware admission: token ledger and global FIFO
  +subagent-demotion  demote a finished sub-agent's KV when its parent returns, on every
                      engine (--agentic-subagent-demotion-delivery; parent-engine: only
                      the engine the parent's request lands on, as the seed)
  +host-tier          a host KV tier of --hicache-ratio x the device tier
  all                 the four features above together
  continuum           Continuum: cost-aware TTL pins after tool-call turns, learned per
                      pause class (--continuum-memory-price), program-level FCFS
  +stall-offload      with +host-tier: a paused session's KV moves to the host tier under
                      memory pressure and is prefetched before its predicted return
                      (--stall-offload-pressure, -quantile, -min-stall-s); not a default arm
  infinite-cache      enough device KV for the whole workload (the upper bound)
  oracle              clairvoyant eviction: evicts the block whose next use (each agent's future
                      requests in recorded order, timed by the recorded gaps) is farthest away;
                      no host tier; not a default arm (docs/REPLAY.md, the oracle arm)
  Also fixed-ttl: pin a session's KV for --fixed-ttl-s after every tool-call turn (the
  former continuum-ttl, a name now refused).
  Features combine: "baseline+host-tier", "+lifecycle+admission", "all+continuum".
  Also +per-conversation (retention alone), +subagent-demotion=P (priority P) and
  +gap-retention (evict within a priority by finish time less the pause each session is
  expected to take, learned online per pause kind; an ended session's blocks first); the
  agentic-curve names (lru, per_conversation, demote_p1, ...) are aliases.
  Also +admission-v2: admission v2 (uncached reservations, per-engine budget and waiting,
  continuing sessions first; --agentic-admission-program-window-s), instead of +admission.

Output:
  stdout   the arm table, with each arm's change against baseline in parentheses
  --json   the full result (default agentkv-replay.json; "" to skip)
  --html   a self-contained report with SVG charts (default agentkv-replay.html; "" to skip)
  stderr   progress once the run has taken 2 s: a line redrawn in place on a terminal;
           otherwise plain lines when an arm starts or finishes and at most every 5 s

Config files: --config FILE reads the same flags from a TOML or INI file, under a [replay]
section, one `flag-name = value` line each (lists as ["a", "b"]), e.g.
  [replay]
  workload = "weka"
  trace = ["traces/weka"]
  arms = ["baseline", "+host-tier", "all"]
  num-engines = 4
Flags on the command line win over the file. An unknown section or key is an error naming
the file and line; a value is checked as the flag's would be.

Exit codes: 0 success; 2 bad flags or trace (one `agentkv replay: error:` line on stderr);
1 internal error.)";

// Writes `text` to `path` through a temporary file renamed over it, so a failed write never
// leaves a truncated report.
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

}  // namespace

ReplayCommand::ReplayCommand(CLI::App& app) {
  command_ = app.add_subcommand(kName, kDescription);
  command_->footer(kFooter);
  CLI::App& c = *command_;
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
  c.add_option("--sessions", sessions_,
               fmt::format("Synthetic sessions (default {})", kDefaultSessions))
      ->type_name("N")
      ->group(workload_group);
  c.add_option(
       "--context-scale", context_scale_,
       fmt::format("Synthetic token counts scale, in (0, 1] (default {})", kDefaultContextScale))
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
  };

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
      c.add_option(
           "--max-total-tokens", options_.engine.kv_pool.max_total_tokens,
           "Device KV tokens per engine; 0 = from the cost model (synthetic default: 262144)")
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

  const std::string arms_group = "Arms";
  c.add_option("--arms", arms_, "Comma-separated arms (default: all eight, see below)")
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
  agentic_.Add(c, AgenticFlags::Set::kBudget, FlagSource::kCommandLine, arms_group);

  const std::string output_group = "Output";
  c.add_option("--json", json_path_, "JSON report path (\"\" to skip)")
      ->capture_default_str()
      ->group(output_group);
  c.add_option("--html", html_path_, "HTML report path (\"\" to skip)")
      ->capture_default_str()
      ->group(output_group);
  c.add_flag("--quiet", quiet_, "No progress line and no summary lines on stderr")
      ->group(output_group);
  c.add_option("--jobs", jobs_,
               "Arms run at once, each on its own thread, in [0, 256]; 0 = one per hardware "
               "thread. The output does not depend on it")
      ->type_name("N")
      ->capture_default_str()
      ->group(output_group);
}

int ReplayCommand::Run() const {
  if (Status s = CheckFlagRange("--jobs", jobs_, 0, kMaxArmJobs); !s.ok()) {
    return ReportError(kName, s);
  }
  sim::ReplayOptions options = options_;
  options.session_close_mode = session_close_mode_ == "release"
                                   ? kv::SessionCloseMode::kRelease
                                   : kv::SessionCloseMode::kDereference;
  StatusOr<control::AgenticOptions> agentic_options = agentic_.Options();
  if (!agentic_options.ok()) return ReportError(kName, agentic_options.status());
  options.agentic = *std::move(agentic_options);
  options.subagent_models = sim::ParseSubagentModels(subagent_models_).value();
  options.subagent_demotion_delivery =
      sim::ParseDemotionDelivery(subagent_demotion_delivery_).value();
  options.subagent_routing = sim::ParseSubagentRouting(subagent_routing_).value();
  if (finished_subagent_min_idle_s_option_->count() > 0) {
    options.finished_subagent_min_idle_s = finished_subagent_min_idle_s_;
  }
  const bool synthetic = workload_ == "synthetic";
  const bool rollout = workload_ == "rollout";
  if ((synthetic || rollout) && !trace_paths_.empty()) {
    return ReportError(kName, InvalidArgumentError(fmt::format(
                                  "--trace needs --workload weka, mooncake or bailian (the {} "
                                  "workload has none)",
                                  workload_)));
  }
  if (!rollout) {
    for (const CLI::Option* option : rollout_options_) {
      if (option->count() > 0) {
        return ReportError(
            kName, InvalidArgumentError(
                       fmt::format("{} applies to --workload rollout only", option->get_name())));
      }
    }
  } else if (sessions_ != 0 || context_scale_ != 0 || session_interarrival_s_ != 0 ||
             shared_prefix_blocks_ != -1) {
    return ReportError(kName, InvalidArgumentError(
                                  "--sessions, --context-scale, --session-interarrival-s and "
                                  "--shared-prefix-blocks do not apply to --workload rollout (its "
                                  "steps start trajectories; its prompts set the shared prefix)"));
  }
  if (rollout) {
    Status s =
        CheckFlagRange("--rollout-prompts", rollout_prompts_, 1, sim::kMaxRolloutTrajectories);
    if (s.ok()) {
      s = CheckFlagRange("--rollout-group-size", rollout_group_size_, 1,
                         sim::kMaxRolloutTrajectories);
    }
    if (s.ok()) {
      s = CheckFlagRange("--rollout-steps", rollout_steps_, 1, sim::kMaxRolloutTrajectories);
    }
    if (s.ok()) {
      s = CheckFlagRange("--rollout-staleness", rollout_staleness_, 1,
                         sim::kMaxRolloutTrajectories);
    }
    if (s.ok()) {
      s = CheckFlagRange("--rollout-max-context-tokens", rollout_max_context_tokens_, 1,
                         10'000'000);
    }
    if (s.ok() &&
        rollout_prompts_ * rollout_group_size_ * rollout_steps_ > sim::kMaxRolloutTrajectories) {
      s = InvalidArgumentError(fmt::format(
          "--rollout-prompts x --rollout-group-size x --rollout-steps must be at most {}, got "
          "{} x {} x {} = {}",
          sim::kMaxRolloutTrajectories, rollout_prompts_, rollout_group_size_, rollout_steps_,
          rollout_prompts_ * rollout_group_size_ * rollout_steps_));
    }
    if (!s.ok()) return ReportError(kName, s);
  }
  if (!synthetic && !rollout && trace_paths_.empty()) {
    return ReportError(
        kName, InvalidArgumentError(fmt::format("--workload {} needs --trace PATH", workload_)));
  }
  if (!synthetic && (sessions_ != 0 || context_scale_ != 0)) {
    return ReportError(kName, InvalidArgumentError("--sessions and --context-scale apply to "
                                                   "--workload synthetic only"));
  }
  const double interarrival_s =
      session_interarrival_s_ != 0
          ? session_interarrival_s_
          : (synthetic ? kDefaultSessionInterarrivalS : kDefaultWekaInterarrivalS);
  {
    // The flags ReplayOptions::Validate would otherwise report by their field names.
    Status s = CheckFlagRange("--session-interarrival-s", interarrival_s, 0.0, 1e6);
    if (s.ok() && shared_prefix_blocks_ != -1) {
      s = CheckFlagRange("--shared-prefix-blocks", shared_prefix_blocks_, 0, int64_t{1} << 40);
    }
    if (s.ok()) s = CheckFlagRange("--num-engines", int64_t{options.num_engines}, 1, 1024);
    if (s.ok()) {
      s = CheckFlagRange("--max-total-tokens", options.engine.kv_pool.max_total_tokens, 0,
                         int64_t{1} << 40);
    }
    if (s.ok()) {
      s = CheckFlagRange("--hicache-ratio", options.engine.kv_pool.hicache_ratio, 0.0, 100.0,
                         LowerBound::kOpen);
    }
    if (s.ok()) {
      s = CheckFlagRange("--finished-subagent-priority",
                         int64_t{options.finished_subagent_priority}, 0, 100);
    }
    if (s.ok()) {
      s = CheckFlagRange("--finished-subagent-min-idle-steps",
                         options.finished_subagent_min_idle_steps, 0, int64_t{1} << 40);
    }
    if (s.ok() && options.finished_subagent_min_idle_s.has_value()) {
      s = CheckFlagRange("--finished-subagent-min-idle-s", *options.finished_subagent_min_idle_s,
                         0.0, kv::kMaxFinishedSubagentMinIdleS);
    }
    if (s.ok()) {
      s = CheckFlagRange("--fixed-ttl-s", options.fixed_ttl_s, 0.0, 86400.0, LowerBound::kOpen);
    }
    if (s.ok()) {
      s = CheckFlagRange("--continuum-memory-price", options.continuum.memory_price, 0.0, 1.0);
    }
    if (s.ok()) {
      s = CheckFlagRange("--stall-offload-pressure", options.stall_offload.pressure_threshold, 0.0,
                         1.0, LowerBound::kOpen);
    }
    if (s.ok() && !(options.stall_offload.return_quantile > 0.0 &&
                    options.stall_offload.return_quantile < 1.0)) {
      s = InvalidArgumentError(fmt::format("--stall-offload-quantile must be in (0, 1), got {}",
                                           options.stall_offload.return_quantile));
    }
    if (s.ok()) {
      s = CheckFlagRange("--stall-offload-min-stall-s", stall_offload_min_stall_s_, 0.0, 86400.0);
    }
    if (s.ok()) {
      options.stall_offload.min_stall =
          TimeNs(static_cast<int64_t>(stall_offload_min_stall_s_ * 1e9));
    }
    if (s.ok()) s = CheckOutputPath("--json", json_path_);
    if (s.ok()) s = CheckOutputPath("--html", html_path_);
    if (!s.ok()) return ReportError(kName, s);
  }
  if (!arms_.empty()) {
    // --arms (or a config file's arms) names the arms; the default is DefaultArms().
    StatusOr<std::vector<sim::ArmSpec>> arms = sim::ParseArms(arms_);
    if (!arms.ok()) return ReportError(kName, arms.status());
    options.arms = *std::move(arms);
  }
  {
    StatusOr<engine::ModelPresetId> model = engine::ParseModelPreset(model_);
    if (!model.ok()) return ReportError(kName, model.status());
    options.engine.model = *model;
    StatusOr<engine::GpuPresetId> gpu = engine::ParseGpuPreset(gpu_);
    if (!gpu.ok()) return ReportError(kName, gpu.status());
    options.engine.gpu = *gpu;
  }
  if (!cost_model_path_.empty()) {
    StatusOr<engine::CostModelOptions> cost =
        ReadCostModelFile(cost_model_path_, options.engine.cost);
    if (!cost.ok()) return ReportError(kName, cost.status());
    options.engine.cost = *cost;
  }

  const auto start = std::chrono::steady_clock::now();
  std::string description;
  std::optional<sim::AgenticWorkload> agentic;
  std::vector<sim::OpenLoopRequest> open_loop;
  int32_t open_loop_block = 512;
  if (rollout) {
    sim::RolloutWorkloadOptions generator;
    generator.seed = seed_;
    generator.prompts = rollout_prompts_;
    generator.group_size = rollout_group_size_;
    generator.steps = rollout_steps_;
    generator.mode =
        rollout_mode_ == "async" ? sim::RolloutMode::kAsynchronous : sim::RolloutMode::kSynchronous;
    generator.staleness = rollout_staleness_;
    generator.max_context_tokens = rollout_max_context_tokens_;
    StatusOr<sim::RolloutWorkload> generated = sim::GenerateRolloutWorkload(generator);
    if (!generated.ok()) return ReportError(kName, generated.status());
    options.shared_prefix_ids = generated->shared_prefix_ids;
    agentic = std::move(generated->workload);
    description =
        fmt::format("rollout: {} steps x {} prompts x {} samples, {}{}, seed {}", generator.steps,
                    generator.prompts, generator.group_size, sim::RolloutModeName(generator.mode),
                    generator.mode == sim::RolloutMode::kAsynchronous
                        ? fmt::format(" (staleness {})", generator.staleness)
                        : std::string(),
                    seed_);
  } else if (synthetic) {
    sim::SyntheticAgenticOptions generator;
    generator.seed = seed_;
    generator.sessions = sessions_ != 0 ? sessions_ : kDefaultSessions;
    generator.context_scale = context_scale_ != 0 ? context_scale_ : kDefaultContextScale;
    generator.mean_session_interarrival = TimeNs::Seconds(interarrival_s);
    if (max_total_tokens_option_->count() == 0) {
      options.engine.kv_pool.max_total_tokens = kDefaultSyntheticMaxTotalTokens;
    }
    // A session ends before its context outgrows one engine's KV (its context window): at most
    // 90 % of the device tier, so that the prompt and its output always fit.
    StatusOr<engine::KvPool> pool = sim::KvPoolPerEngine(options, sim::kSyntheticBlockSize);
    if (!pool.ok()) return ReportError(kName, pool.status());
    generator.max_context_blocks =
        std::clamp<int64_t>(static_cast<int64_t>(0.9 * static_cast<double>(pool->device_blocks) /
                                                 generator.context_scale),
                            1, generator.max_context_blocks);
    StatusOr<sim::AgenticWorkload> generated = sim::GenerateSyntheticAgentic(generator);
    if (!generated.ok()) return ReportError(kName, generated.status());
    agentic = *std::move(generated);
    const int64_t prefix_blocks =
        static_cast<int64_t>(std::floor(static_cast<double>(generator.shared_prefix_tokens) *
                                        generator.context_scale)) /
        sim::kSyntheticBlockSize;
    options.shared_prefix_ids =
        static_cast<uint64_t>(shared_prefix_blocks_ != -1 ? shared_prefix_blocks_ : prefix_blocks);
    description = fmt::format("synthetic: {} sessions, context scale {:g}, seed {}",
                              generator.sessions, generator.context_scale, seed_);
  } else if (workload_ == "weka") {
    StatusOr<std::vector<sim::WekaConversation>> conversations = sim::ReadWekaTraces(trace_paths_);
    if (!conversations.ok()) return ReportError(kName, conversations.status());
    const size_t files = conversations->size();
    agentic = sim::WekaWorkload(*std::move(conversations), TimeNs::Seconds(interarrival_s), seed_);
    options.shared_prefix_ids =
        static_cast<uint64_t>(shared_prefix_blocks_ == -1 ? 0 : shared_prefix_blocks_);
    description = fmt::format("weka: {} files, mean session interarrival {:g} s, seed {}", files,
                              interarrival_s, seed_);
  } else if (workload_ == "bailian") {
    std::vector<sim::BailianRequest> all;
    for (const std::string& path : trace_paths_) {
      StatusOr<std::vector<sim::BailianRequest>> part = sim::ReadBailianTrace(path);
      if (!part.ok()) return ReportError(kName, part.status());
      all.insert(all.end(), part->begin(), part->end());
    }
    agentic = sim::GroupBailianConversations(all);
    description = fmt::format("bailian: {} requests in {} conversations", all.size(),
                              agentic->conversations.size());
  } else {
    std::vector<sim::MooncakeRequest> all;
    for (const std::string& path : trace_paths_) {
      StatusOr<std::vector<sim::MooncakeRequest>> part = sim::ReadMooncakeTrace(path);
      if (!part.ok()) return ReportError(kName, part.status());
      all.insert(all.end(), part->begin(), part->end());
    }
    open_loop = sim::OpenLoopFromMooncake(all);
    description = fmt::format("mooncake: {} requests, open loop", all.size());
  }

  ProgressLine progress_line(ProgressLine::ModeForStderr(!quiet_));
  // Arms may run on several threads; the line keeps track of which are running.
  std::mutex progress_mutex;
  const sim::ReplayProgress progress = [&](size_t arm_index, size_t num_arms, std::string_view arm,
                                           double fraction) {
    const std::lock_guard<std::mutex> lock(progress_mutex);
    progress_line.Update(arm_index, num_arms, arm, fraction);
  };
  const size_t jobs = ArmJobs(jobs_, options.arms.size());
  const sim::ArmTaskRunner runner = [jobs](const std::vector<std::function<void()>>& tasks) {
    RunOnThreads(tasks, jobs);
  };
  StatusOr<sim::ReplayResult> result =
      agentic.has_value() ? sim::RunReplay(*agentic, description, seed_, options, progress, runner)
                          : sim::RunOpenLoopReplay(open_loop, open_loop_block, description, seed_,
                                                   options, progress, runner);
  progress_line.Clear();
  if (!result.ok()) return ReportError(kName, result.status());
  fmt::print("{}", report::FormatReplayTable(*result));
  std::fflush(stdout);
  for (const auto& [path, render] : {std::pair{json_path_, &report::ReplayResultJson},
                                     std::pair{html_path_, &report::ReplayResultHtml}}) {
    if (path.empty()) continue;
    if (Status s = WriteFileAtomically(path, render(*result)); !s.ok()) {
      return ReportError(kName, s);
    }
    if (!quiet_) fmt::print(stderr, "agentkv {}: wrote {}\n", kName, path);
  }
  if (!quiet_) {
    const double seconds =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    fmt::print(stderr, "agentkv {}: {} arm{} in {:.1f} s\n", kName, result->arms.size(),
               result->arms.size() == 1 ? "" : "s", seconds);
  }
  return kExitOk;
}

}  // namespace agentkv::tools
