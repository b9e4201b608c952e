// `agentkv agentic-curve`: what the agentic KV policies buy on WEKA Claude Code traces.
//
// The command is a thin shell over sim::ReadWekaTraces and sim::RunAgenticReplay: it owns the
// flags, checks them (errors name the flag and its value), prints one table row per arm on
// stdout and one progress line per arm on stderr. Owned by main; the CLI::App it registers on
// holds pointers into it, so it is neither copyable nor movable.
#ifndef AGENTKV_TOOLS_AGENTKV_AGENTIC_CURVE_COMMAND_H_
#define AGENTKV_TOOLS_AGENTKV_AGENTIC_CURVE_COMMAND_H_

#include <CLI/CLI.hpp>
#include <cstdint>
#include <string>
#include <vector>

namespace agentkv::tools {

class AgenticCurveCommand {
 public:
  static constexpr const char* kName = "agentic-curve";

  // Adds the `agentic-curve` subcommand and its flags to `app`, which must outlive this object.
  explicit AgenticCurveCommand(CLI::App& app);

  AgenticCurveCommand(const AgenticCurveCommand&) = delete;
  AgenticCurveCommand& operator=(const AgenticCurveCommand&) = delete;

  // Whether the command line selected this subcommand (valid after app.parse).
  bool selected() const { return command_->parsed(); }

  // Runs the command with the parsed flags and returns the process exit code: 0 on success,
  // 2 for bad flags or an unreadable or malformed trace, 1 for an internal failure. Errors
  // are reported as one line on stderr.
  int Run() const;

 private:
  CLI::App* command_ = nullptr;
  CLI::Option* capacity_option_ = nullptr;

  std::vector<std::string> trace_paths_;
  double capacity_fraction_ = 0.25;
  int64_t capacity_blocks_ = 0;
  int64_t host_blocks_ = 0;
  double stagger_s_ = 60.0;
  double step_ms_ = 25.0;
  int64_t max_num_turns_ = 1;
  int64_t min_idle_steps_ = 32;
  std::vector<std::string> arms_;
  std::string subagent_models_ = "share";
  bool quiet_ = false;
};

}  // namespace agentkv::tools

#endif  // AGENTKV_TOOLS_AGENTKV_AGENTIC_CURVE_COMMAND_H_
