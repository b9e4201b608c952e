// `agentkv replay`: what each agentkv feature buys, side by side, on an agentic workload.
//
// The command is a thin shell over sim::RunReplay: it owns the flags (also read from a config
// file), builds the workload (the embedded synthetic default, WEKA, Mooncake or Bailian
// traces), runs every arm, prints the arm table on stdout, writes the JSON and HTML reports
// and shows a progress line on stderr when the run takes more than 2 s and stderr is a
// terminal. Owned by main; the CLI::App it registers on holds pointers into it, so it is
// neither copyable nor movable.
#ifndef AGENTKV_TOOLS_AGENTKV_REPLAY_COMMAND_H_
#define AGENTKV_TOOLS_AGENTKV_REPLAY_COMMAND_H_

#include <CLI/CLI.hpp>
#include <cstdint>
#include <string>
#include <vector>

#include "agentkv/sim/replay.h"
#include "tools/agentkv/agentic_flags.h"

namespace agentkv::tools {

class ReplayCommand {
 public:
  static constexpr const char* kName = "replay";

  // Adds the `replay` subcommand and its flags to `app`, which must outlive this object.
  explicit ReplayCommand(CLI::App& app);

  ReplayCommand(const ReplayCommand&) = delete;
  ReplayCommand& operator=(const ReplayCommand&) = delete;

  // Whether the command line selected this subcommand (valid after app.parse).
  bool selected() const { return command_->parsed(); }

  // Runs the command with the parsed flags and returns the process exit code: 0 on success,
  // 2 for bad flags or an unreadable or malformed trace, 1 for an internal failure. Errors are
  // reported as one line on stderr.
  int Run() const;

 private:
  CLI::App* command_ = nullptr;
  CLI::Option* max_total_tokens_option_ = nullptr;

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
  // The rollout flags, to refuse them with another workload.
  std::vector<CLI::Option*> rollout_options_;
  // Fleet and arms.
  sim::ReplayOptions options_;
  // Preset names, parsed once by Run().
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
  // Output.
  std::string json_path_ = "agentkv-replay.json";
  std::string html_path_ = "agentkv-replay.html";
  bool quiet_ = false;
  // --jobs: arms run at once; 0 = one per hardware thread (at most one per arm).
  int64_t jobs_ = 0;
};

}  // namespace agentkv::tools

#endif  // AGENTKV_TOOLS_AGENTKV_REPLAY_COMMAND_H_
