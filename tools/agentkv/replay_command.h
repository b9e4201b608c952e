// `agentkv replay`: what each agentkv feature buys, side by side, on an agentic workload.
//
// The command is a thin shell over sim::RunReplay: its flags (also read from a config file) and
// the workload they build (the embedded synthetic default, WEKA, Mooncake, Bailian traces or
// the rollout generator) are ReplayFlags, shared with the Python package; it runs every arm,
// prints the arm table on stdout, writes the JSON and HTML reports and shows a progress line
// on stderr when the run takes more than 2 s and stderr is a terminal. Owned by main; the CLI::App
// it registers on holds pointers into it, so it is neither copyable nor movable.
#ifndef AGENTKV_TOOLS_AGENTKV_REPLAY_COMMAND_H_
#define AGENTKV_TOOLS_AGENTKV_REPLAY_COMMAND_H_

#include <CLI/CLI.hpp>

#include "tools/agentkv/replay_flags.h"

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
  // Every flag, and the checks that turn them into a replay (shared with the Python package).
  ReplayFlags flags_;
};

}  // namespace agentkv::tools

#endif  // AGENTKV_TOOLS_AGENTKV_REPLAY_COMMAND_H_
