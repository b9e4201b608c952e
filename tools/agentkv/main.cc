// The `agentkv` command line: one subcommand per file, selected by CLI11.
//
// main owns the CLI::App and the commands, parses once, and runs the selected command. Every
// failure leaves as one `agentkv <command>: error:` line and an exit code (cli_support.h):
// parse errors through app.exit(), command errors as Status values, and anything thrown past
// them (a bug or an allocation failure) through the catch-all below, never as a crash.
#include <CLI/CLI.hpp>
#include <exception>
#include <string>

#include "tools/agentkv/agentic_curve_command.h"
#include "tools/agentkv/cache_curve_command.h"
#include "tools/agentkv/capacity_command.h"
#include "tools/agentkv/cli_support.h"
#include "tools/agentkv/compare_command.h"
#include "tools/agentkv/config_file.h"
#include "tools/agentkv/coordinator_command.h"
#include "tools/agentkv/cost_model_command.h"
#include "tools/agentkv/emulate_command.h"
#include "tools/agentkv/gateway_command.h"
#include "tools/agentkv/load_command.h"
#include "tools/agentkv/replay_command.h"

namespace agentkv::tools {
namespace {

constexpr const char* kDescription =
    "agentkv: keeps the KV cache of an LLM serving fleet working for agentic traffic.\n"
    "Run `agentkv <command> --help` for a command's flags and output.";

int Main(int argc, char** argv) {
  CLI::App app(kDescription, "agentkv");
  app.require_subcommand(1);
  app.set_version_flag("--version", std::string("agentkv ") + AGENTKV_VERSION,
                       "Print the version of this build and exit");
  app.failure_message(ParseFailureMessage);
  // Flags may also come from a TOML or INI file: a command's flags go under its section
  // ([replay] sessions = 8). Flags on the command line win. Subcommands fall through to this
  // option, so `agentkv replay --config FILE` works as well as `agentkv --config FILE replay`.
  // An unknown section or key is an error naming the file and line (config_file.h).
  app.set_config("--config", "",
                 "Read flags from a TOML or INI file; a command's flags go in its section, e.g. "
                 "[replay]; unknown sections and keys are errors");
  UseLocatedConfig(app);
  app.fallthrough();
  CacheCurveCommand cache_curve(app);
  AgenticCurveCommand agentic_curve(app);
  ReplayCommand replay(app);
  CapacityCommand capacity(app);
  CostModelCommand cost_model(app);
  CompareCommand compare(app);
  LoadCommand load(app);
  EmulateCommand emulate(app);
  CoordinatorCommand coordinator(app);
  GatewayCommand gateway(app);

  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& error) {
    return ExitForParseError(app, error);
  }
  if (cache_curve.selected()) return cache_curve.Run();
  if (agentic_curve.selected()) return agentic_curve.Run();
  if (replay.selected()) return replay.Run();
  if (capacity.selected()) return capacity.Run();
  if (cost_model.selected()) return cost_model.Run();
  if (compare.selected()) return compare.Run();
  if (load.selected()) return load.Run();
  if (emulate.selected()) return emulate.Run();
  if (coordinator.selected()) return coordinator.Run();
  if (gateway.selected()) return gateway.Run();
  // require_subcommand(1) makes this unreachable unless a command is registered but not run.
  return ReportError("", "no command was run", kExitInternal);
}

}  // namespace
}  // namespace agentkv::tools

int main(int argc, char** argv) {
  try {
    return agentkv::tools::Main(argc, argv);
  } catch (const std::exception& e) {
    return agentkv::tools::ReportError("",
                                       std::string("internal: unexpected exception: ") + e.what(),
                                       agentkv::tools::kExitInternal);
  } catch (...) {
    return agentkv::tools::ReportError("", "internal: unexpected non-standard exception",
                                       agentkv::tools::kExitInternal);
  }
}
