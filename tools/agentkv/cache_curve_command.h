// `agentkv cache-curve`: the block hit ratio of a Mooncake trace at several device capacities.
//
// The command is a thin shell over sim::ReadMooncakeTrace and sim::RunCacheCurve: it owns the
// flags, checks them (errors name the flag and its value), prints the table on stdout and
// one progress line per capacity on stderr. Owned by main; the CLI::App it registers on holds
// pointers into it, so it is neither copyable nor movable.
#ifndef AGENTKV_TOOLS_AGENTKV_CACHE_CURVE_COMMAND_H_
#define AGENTKV_TOOLS_AGENTKV_CACHE_CURVE_COMMAND_H_

#include <CLI/CLI.hpp>
#include <cstdint>
#include <string>
#include <vector>

namespace agentkv::tools {

class CacheCurveCommand {
 public:
  static constexpr const char* kName = "cache-curve";

  // Adds the `cache-curve` subcommand and its flags to `app`, which must outlive this object.
  explicit CacheCurveCommand(CLI::App& app);

  CacheCurveCommand(const CacheCurveCommand&) = delete;
  CacheCurveCommand& operator=(const CacheCurveCommand&) = delete;

  // Whether the command line selected this subcommand (valid after app.parse).
  bool selected() const { return command_->parsed(); }

  // Runs the command with the parsed flags and returns the process exit code: 0 on success,
  // 2 for bad flags or an unreadable or malformed trace, 1 for an internal failure. Errors
  // are reported as one line on stderr.
  int Run() const;

 private:
  CLI::App* command_ = nullptr;
  CLI::Option* fractions_option_ = nullptr;
  CLI::Option* capacity_option_ = nullptr;

  std::string trace_path_;
  int64_t block_tokens_ = 512;
  std::vector<double> fractions_ = {0.01, 0.05, 0.10, 0.25, 0.50, 1.0};
  int64_t capacity_blocks_ = 0;
  bool quiet_ = false;
};

}  // namespace agentkv::tools

#endif  // AGENTKV_TOOLS_AGENTKV_CACHE_CURVE_COMMAND_H_
