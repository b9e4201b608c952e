// What every `agentkv` subcommand shares: exit codes and the one-line error format.
//
// A failing command prints exactly one line, `agentkv <command>: error: <message>`, on stderr
// and exits with kExitBadInput for anything the user can fix (flags, files, trace contents)
// or kExitInternal for a bug (an Internal status or an unexpected exception). CLI11 parse
// errors take the same format through CLI::App::failure_message. Not thread-safe (writes to
// stderr); used from main's thread only.
#ifndef AGENTKV_TOOLS_AGENTKV_CLI_SUPPORT_H_
#define AGENTKV_TOOLS_AGENTKV_CLI_SUPPORT_H_

#include <CLI/CLI.hpp>
#include <string>
#include <string_view>

#include "agentkv/base/status.h"

namespace agentkv::tools {

inline constexpr int kExitOk = 0;
inline constexpr int kExitInternal = 1;
inline constexpr int kExitBadInput = 2;

// kExitInternal for an Internal status, kExitBadInput for any other failure, kExitOk for OK.
int ExitCodeFor(const Status& status);

// Prints `agentkv <command>: error: <message>` as one line on stderr (newlines in `message`
// become "; ") and returns `exit_code`. `command` may be empty for errors before a subcommand
// is known ("agentkv: error: ...").
int ReportError(std::string_view command, std::string_view message, int exit_code);

// ReportError with the status's message and ExitCodeFor(status). Precondition: !status.ok().
int ReportError(std::string_view command, const Status& status);

// The CLI::App::failure_message formatter of the top-level app: one error line naming the
// subcommand being parsed, if any.
std::string ParseFailureMessage(const CLI::App* app, const CLI::Error& error);

// Lets `app` report a parse error (help and version requests print to stdout and return 0)
// and returns the process exit code: kExitOk for those, kExitBadInput for real errors.
int ExitForParseError(CLI::App& app, const CLI::ParseError& error);

}  // namespace agentkv::tools

#endif  // AGENTKV_TOOLS_AGENTKV_CLI_SUPPORT_H_
