// `agentkv compare A.json B.json`: two replay results side by side, arm by arm.
//
// A thin shell over report/compare_report.h: it reads both files (the replay's `--json` output,
// docs/REPLAY.md), compares the arms they share on the headline metrics (A, B, B - A and
// (B - A) / A), prints the table and, with --json OUT, writes the comparison as JSON. A is
// typically the prediction and B the measurement. Owned by main; the CLI::App it registers on
// holds pointers into it, so it is neither copyable nor movable.
#ifndef AGENTKV_TOOLS_AGENTKV_COMPARE_COMMAND_H_
#define AGENTKV_TOOLS_AGENTKV_COMPARE_COMMAND_H_

#include <CLI/CLI.hpp>
#include <string>
#include <vector>

namespace agentkv::tools {

class CompareCommand {
 public:
  static constexpr const char* kName = "compare";

  // Adds the `compare` subcommand and its arguments to `app`, which must outlive this object.
  explicit CompareCommand(CLI::App& app);

  CompareCommand(const CompareCommand&) = delete;
  CompareCommand& operator=(const CompareCommand&) = delete;

  // Whether the command line selected this subcommand (valid after app.parse).
  bool selected() const { return command_->parsed(); }

  // Prints the comparison on stdout and returns the process exit code: 0 on success, 2 for an
  // unreadable file, one that is not JSON or not a replay result, an --arms name in neither
  // file, or a failed --json write (one `agentkv compare: error:` line on stderr).
  int Run() const;

 private:
  CLI::App* command_ = nullptr;
  std::string a_path_;
  std::string b_path_;
  std::vector<std::string> arms_;
  std::string json_path_;
};

}  // namespace agentkv::tools

#endif  // AGENTKV_TOOLS_AGENTKV_COMPARE_COMMAND_H_
