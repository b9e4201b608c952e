#include "tools/agentkv/compare_command.h"

#include <fmt/core.h>

#include <fstream>
#include <sstream>
#include <string>

#include "agentkv/report/compare_report.h"
#include "tools/agentkv/cli_support.h"
#include "tools/agentkv/replay_flags.h"

namespace agentkv::tools {
namespace {

constexpr const char* kDescription =
    "Compare two replay results (JSON) arm by arm: A, B, B-A and (B-A)/A of the headline "
    "metrics";

constexpr const char* kFooter =
    "A and B are JSON results in the replay's schema (`agentkv replay --json FILE`): A is\n"
    "typically the prediction, B the measurement (or two seeds, or two versions). Arms are\n"
    "matched by name; arms in one file only are listed. Per arm: requests completed, token hit\n"
    "ratio device and host, uncached tokens, TTFT p50/p95/p99, server time mean/p50/p95 per\n"
    "session, session time p50, makespan and output tokens/s. A value missing in either file\n"
    "is shown as `-`, and so is (B-A)/A where A is 0.\n\n"
    "--json OUT writes the comparison: {\"a\", \"b\", \"arms\": [{\"arm\", \"metrics\": "
    "[{\"metric\",\n"
    "\"label\", \"a\", \"b\", \"difference\", \"relative\"}]}], \"only_in_a\", \"only_in_b\"}, "
    "null\n"
    "where unset.\n\n"
    "Exit codes: 0 success; 2 an unreadable file, not JSON, not a replay result (no `arms`\n"
    "array), or an --arms name in neither file (one `agentkv compare: error:` line).";

// The JSON document in `path`, or InvalidArgument naming the file.
StatusOr<boost::json::value> ReadJson(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return InvalidArgumentError(path + ": cannot read the file");
  std::ostringstream text;
  text << in.rdbuf();
  if (in.bad()) return InvalidArgumentError(path + ": cannot read the file");
  return report::ParseJsonDocument(text.str(), path);
}

}  // namespace

CompareCommand::CompareCommand(CLI::App& app) {
  command_ = app.add_subcommand(kName, kDescription);
  command_->footer(kFooter);
  CLI::App& c = *command_;
  c.add_option("A", a_path_, "The first result (e.g. predicted by `agentkv replay --json`)")
      ->required()
      ->type_name("A.json");
  c.add_option("B", b_path_, "The second result (e.g. measured), compared against A")
      ->required()
      ->type_name("B.json");
  c.add_option("--arms", arms_, "Compare only these arms (comma-separated), in this order")
      ->delimiter(',')
      ->type_name("LIST");
  c.add_option("--json", json_path_, "Also write the comparison as JSON to this file")
      ->type_name("OUT");
}

int CompareCommand::Run() const {
  StatusOr<boost::json::value> a = ReadJson(a_path_);
  if (!a.ok()) return ReportError(kName, a.status());
  StatusOr<boost::json::value> b = ReadJson(b_path_);
  if (!b.ok()) return ReportError(kName, b.status());
  StatusOr<report::Comparison> comparison =
      report::CompareReplayResults(*a, a_path_, *b, b_path_, arms_);
  if (!comparison.ok()) return ReportError(kName, comparison.status());
  fmt::print("{}", report::FormatComparison(*comparison));
  std::fflush(stdout);
  if (!json_path_.empty()) {
    if (Status s = WriteFileAtomically(json_path_, report::ComparisonJson(*comparison)); !s.ok()) {
      return ReportError(kName, s);
    }
  }
  return kExitOk;
}

}  // namespace agentkv::tools
