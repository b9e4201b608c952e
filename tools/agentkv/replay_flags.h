// The flags of `agentkv replay` and what they build: the workload, the replay options and the
// report paths, checked the one way the command line and the Python package (agentkv.replay)
// both use, so that their defaults and error messages are the same.
//
// ReplayFlags registers every flag of the command on a CLI::App; after parsing, Plan() checks
// the values and builds a ReplayPlan (reading traces and generating the synthetic or rollout
// workload); RunReplayPlan runs its arms on --jobs threads. Writing the reports and showing
// progress are the caller's. Owned by its command; not copyable (CLI11 holds pointers into
// it). Plan() is const and may run on any thread once parsing is done.
#ifndef AGENTKV_TOOLS_AGENTKV_REPLAY_FLAGS_H_
#define AGENTKV_TOOLS_AGENTKV_REPLAY_FLAGS_H_

#include <CLI/CLI.hpp>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "agentkv/base/status.h"
#include "agentkv/sim/replay/replay.h"
#include "agentkv/sim/workload/agentic_workload.h"
#include "agentkv/sim/workload/conversation_source.h"
#include "agentkv/sim/workload/open_loop_trace.h"
#include "tools/agentkv/agentic_flags.h"
#include "tools/agentkv/working_set_flags.h"

namespace agentkv::tools {

// Device KV tokens per engine of the synthetic workload without --max-total-tokens: small
// enough that KV, not compute, is the constraint, so the arms differ.
inline constexpr int64_t kDefaultSyntheticMaxTotalTokens = 262144;

// A replay ready to run: the workload (agentic or open loop), the options with their arms,
// and where the reports go.
struct ReplayPlan {
  // Names the workload in the report ("synthetic: 48 sessions, context scale 0.5, seed 1").
  std::string description;
  uint64_t seed = 1;
  sim::ReplayOptions options;
  // The --workload value ("synthetic", "weka", "mooncake", "bailian", "rollout").
  std::string workload;
  // The closed-loop workload; unset for an open-loop trace (mooncake), and for a synthetic
  // workload planned as a stream (`streamed` instead).
  std::optional<sim::AgenticWorkload> agentic;
  // The synthetic workload as a streamed source (sim::StreamSyntheticAgentic), when the flags
  // were told to stream it (ReplayFlags::set_streamed): each session built as it starts and
  // dropped as it ends. RunReplayPlan runs it.
  std::shared_ptr<const sim::ConversationSource> streamed;
  // The mean seconds between session starts `agentic` was built with (--session-interarrival-s
  // or its default) for the workloads whose session starts follow it (synthetic, weka); 0 for
  // the others (rollout: its steps start trajectories; bailian: the recorded times; mooncake:
  // open loop).
  double session_interarrival_s = 0;
  // Where session_interarrival_s is set: `base` (this plan's `agentic`) with sessions starting
  // `interarrival_s` apart on average, generated from `seed`: the workload Plan() builds with
  // --session-interarrival-s interarrival_s --seed seed (the other flags as given). The status
  // of the generator on failure. Empty where session_interarrival_s is 0. Thread-safe.
  std::function<StatusOr<sim::AgenticWorkload>(const sim::AgenticWorkload& base,
                                               double interarrival_s, uint64_t seed)>
      workload_at_interarrival;
  std::vector<sim::OpenLoopRequest> open_loop;
  int32_t open_loop_block = 512;
  // Arms run at once (ArmJobs of --jobs and the number of arms), at least 1.
  size_t jobs = 1;
  // --json and --html; "" = not written.
  std::string json_path;
  std::string html_path;
  bool quiet = false;
};

// Which flags Add() registers: every one (`agentkv replay`), or those that name the workload and
// the reports (`agentkv load`, which replays the same workloads against a live fleet: the
// fleet, arm and policy flags keep their defaults there).
enum class ReplayFlagSet : uint8_t { kAll, kWorkloadAndOutput };

class ReplayFlags {
 public:
  // `json_path` and `html_path` are the defaults of --json and --html.
  explicit ReplayFlags(std::string json_path = "agentkv-replay.json",
                       std::string html_path = "agentkv-replay.html",
                       ReplayFlagSet set = ReplayFlagSet::kAll)
      : json_path_(std::move(json_path)), html_path_(std::move(html_path)), set_(set) {}
  ReplayFlags(const ReplayFlags&) = delete;
  ReplayFlags& operator=(const ReplayFlags&) = delete;

  // Adds every flag of `agentkv replay` (or of the flag set) to `command`, which must outlive
  // this object. Call once, before parsing.
  void Add(CLI::App& command);

  // Plan() builds a synthetic workload as a stream (ReplayPlan::streamed) instead of in memory,
  // and --sessions goes up to sim::kMaxStreamedConversations: for the callers that only run the
  // plan through RunReplayPlan (`agentkv replay`, the Python package), not those that need the
  // workload whole (capacity, load). Call before Add().
  void set_streamed() { streamed_ = true; }

  // The replay the parsed flags describe. InvalidArgument naming the flag for a bad value or
  // combination (one `agentkv replay: error:` line on the command line), or the status of an
  // unreadable or malformed trace or cost-model file. Checks that the report paths can be
  // written; writes nothing.
  [[nodiscard]] StatusOr<ReplayPlan> Plan() const;

  // --jobs as given (0 = one per hardware thread), for a command that runs other tasks than
  // arms on the threads (ArmJobs).
  int64_t jobs() const { return jobs_; }

 private:
  // Add()'s sections, in its order: each registers one group of `--help`.
  void AddWorkloadFlags(CLI::App& command);
  void AddRolloutFlags(CLI::App& command);
  void AddFleetFlags(CLI::App& command);
  void AddArmFlags(CLI::App& command);
  void AddPolicyFlags(CLI::App& command);
  void AddOutputFlags(CLI::App& command);

  // Plan()'s steps, in its order. Each returns the first InvalidArgument of its checks (the
  // message Plan() returns), or the status of what it reads or generates.
  // The flags' ReplayOptions with the policy choices parsed; nothing else checked yet.
  [[nodiscard]] StatusOr<sim::ReplayOptions> PolicyOptions() const;
  // The flags --workload rules out or needs (--trace, the rollout and synthetic flags).
  [[nodiscard]] Status CheckWorkloadFlags() const;
  // The rollout flags' ranges and their product (--workload rollout).
  [[nodiscard]] Status CheckRolloutNumbers() const;
  // --session-interarrival-s (as `interarrival_s`, its value or default), --context-scale and
  // --sessions.
  [[nodiscard]] Status CheckWorkloadNumbers(double interarrival_s) const;
  // The engine's and fleet's numeric flags in `options`, and --shared-prefix-blocks.
  [[nodiscard]] Status CheckFleetNumbers(const sim::ReplayOptions& options) const;
  // The policies' numeric flags in `options` (sub-agent demotion, fixed-ttl, the gateway's idle
  // timeout, continuum, stall-offload).
  [[nodiscard]] Status CheckPolicyNumbers(const sim::ReplayOptions& options) const;
  // Sets the arms (--arms), the model and GPU presets, the cost model (--cost-model) and the
  // synthetic workload's default KV size in `options`; the status of a bad name or file.
  [[nodiscard]] Status ResolveFleet(sim::ReplayOptions& options) const;
  // Sets `plan`'s workload (description, agentic or open_loop, the interarrival and its
  // generator where they apply, options.shared_prefix_ids) from --workload's builder below,
  // `plan.options` resolved; the status of a trace or generator on failure.
  [[nodiscard]] Status BuildWorkload(double interarrival_s, ReplayPlan& plan) const;
  [[nodiscard]] Status BuildRollout(ReplayPlan& plan) const;
  [[nodiscard]] Status BuildSynthetic(double interarrival_s, ReplayPlan& plan) const;
  [[nodiscard]] Status BuildWeka(double interarrival_s, ReplayPlan& plan) const;
  [[nodiscard]] Status BuildBailian(ReplayPlan& plan) const;
  [[nodiscard]] Status BuildMooncake(ReplayPlan& plan) const;

  // OK for --sessions in [1, kMaxReplayConversations]; else InvalidArgument naming the bound
  // and, past it, the memory the sessions would take (sampled, never built).
  [[nodiscard]] Status CheckSessions(double interarrival_s) const;
  // The bound of --sessions: kMaxStreamedConversations when streamed, else
  // kMaxReplayConversations.
  int64_t MaxSessions() const;

  CLI::Option* max_total_tokens_option_ = nullptr;
  CLI::Option* sessions_option_ = nullptr;
  CLI::Option* context_scale_option_ = nullptr;

  // Workload.
  std::string workload_ = "synthetic";
  std::vector<std::string> trace_paths_;
  uint64_t seed_ = 1;
  int64_t sessions_ = 0;
  double context_scale_ = 0;
  double session_interarrival_s_ = 0;
  int64_t shared_prefix_blocks_ = -1;
  std::string subagent_models_ = "share";
  // The rollout workload (--workload rollout): B, G, steps, mode and staleness.
  int64_t rollout_prompts_ = 8;
  int64_t rollout_group_size_ = 8;
  int64_t rollout_steps_ = 2;
  std::string rollout_mode_ = "sync";
  int64_t rollout_staleness_ = 1;
  int64_t rollout_max_context_tokens_ = 65'536;
  bool rollout_retain_sessions_ = false;
  // The rollout flags, to refuse them with another workload.
  std::vector<CLI::Option*> rollout_options_;
  // Fleet and arms.
  sim::ReplayOptions options_;
  // Preset names, parsed once by Plan().
  std::string model_ = "llama-3.1-8b";
  std::string gpu_ = "h100";
  std::string session_close_mode_ = "release";
  double finished_subagent_min_idle_s_ = 0;
  CLI::Option* finished_subagent_min_idle_s_option_ = nullptr;
  std::string subagent_demotion_delivery_ = "every-engine";
  std::string subagent_routing_ = "own";
  // +stall-offload's least stall, seconds (options_.stall_offload.min_stall once checked).
  double stall_offload_min_stall_s_ = 2.0;
  // Measured cost-model constants (cost_model_file.h); "" = the built-in calibrated ones.
  std::string cost_model_path_;
  std::vector<std::string> arms_;
  AgenticFlags agentic_;
  // +working-set's options (--agentic-working-set-*).
  WorkingSetFlags working_set_flags_;
  // Output.
  std::string json_path_;
  std::string html_path_;
  bool quiet_ = false;
  bool streamed_ = false;
  // --jobs: arms run at once; 0 = one per hardware thread (at most one per arm).
  int64_t jobs_ = 0;
  ReplayFlagSet set_;
};

// Runs every arm of `plan` (sim::RunReplay or sim::RunOpenLoopReplay), plan.jobs at a time
// (RunOnThreads), reporting through `progress` from the threads that run them. `runner`, when
// given, replaces RunOnThreads (the Python package wraps each arm's task). The replay's status
// on failure.
[[nodiscard]] StatusOr<sim::ReplayResult> RunReplayPlan(const ReplayPlan& plan,
                                                        const sim::ReplayProgress& progress,
                                                        const sim::ArmTaskRunner& runner = {});

// Writes `text` to `path` through a temporary file renamed over it, so a failed write never
// leaves a truncated report. Unavailable naming the file on failure.
[[nodiscard]] Status WriteFileAtomically(const std::string& path, const std::string& text);

}  // namespace agentkv::tools

#endif  // AGENTKV_TOOLS_AGENTKV_REPLAY_FLAGS_H_
