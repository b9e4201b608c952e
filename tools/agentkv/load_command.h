// `agentkv load`: drives a live fleet (the agentkv gateway, an sgl-router, an SGLang engine or
// their emulators) with the agentic workloads `agentkv replay` simulates, measures what it
// does, and writes the replay's JSON and HTML with one arm, the measurement, so that `agentkv
// compare` holds a replay's prediction against it.
//
// A thin shell over load::RunLoad (load/load_run.h): the workload flags and their checks are
// ReplayFlags' (the same workloads, seeds and session starts), the rest are the client's
// (endpoint, API, agent behaviour, time scale). Ctrl-C stops the run and reports what was
// measured. Owned by main; the CLI::App it registers on holds pointers into it, so it is
// neither copyable nor movable.
#ifndef AGENTKV_TOOLS_AGENTKV_LOAD_COMMAND_H_
#define AGENTKV_TOOLS_AGENTKV_LOAD_COMMAND_H_

#include <CLI/CLI.hpp>
#include <cstdint>
#include <string>

#include "agentkv/load/load_run.h"
#include "tools/agentkv/replay_flags.h"

namespace agentkv::tools {

class LoadCommand {
 public:
  static constexpr const char* kName = "load";

  // Adds the `load` subcommand and its flags to `app`, which must outlive this object.
  explicit LoadCommand(CLI::App& app);

  LoadCommand(const LoadCommand&) = delete;
  LoadCommand& operator=(const LoadCommand&) = delete;

  // Whether the command line selected this subcommand (valid after app.parse).
  bool selected() const { return command_->parsed(); }

  // Runs the load and returns the process exit code: 0 when it ran (failed requests are
  // measured, not errors), 2 for bad flags or a trace, 1 for an internal failure.
  int Run() const;

 private:
  // InvalidArgument naming the first of the client's flags out of range (the workload's are
  // ReplayFlags::Plan's).
  Status CheckFlags() const;
  // The run the flags describe on `plan`'s agentic workload (not yet validated).
  load::LoadOptions Options(const ReplayPlan& plan) const;

  CLI::App* command_ = nullptr;
  ReplayFlags workload_;
  std::string url_;
  std::string api_ = "generate";
  std::string model_ = "default";
  double time_scale_ = 1;
  std::string label_ = "measured";
  std::string run_id_;
  bool plain_client_ = false;
  bool session_ids_ = true;
  bool routing_keys_ = true;
  bool pause_hints_ = true;
  bool parent_hints_ = true;
  bool close_sessions_ = true;
  std::string parent_hint_key_;
  std::string subagent_routing_ = "own";
  int32_t retries_ = 0;
  int64_t connections_ = 256;
  double timeout_s_ = 600;
  int64_t vocab_size_ = 32'000;
  int64_t output_tokens_ = 0;
  bool ramp_ = false;
  int64_t ramp_start_users_ = 1;
  int64_t ramp_step_users_ = 1;
  double ramp_period_s_ = 60;
  double slo_s_ = 2;
};

}  // namespace agentkv::tools

#endif  // AGENTKV_TOOLS_AGENTKV_LOAD_COMMAND_H_
