// What every `agentkv` subcommand shares: exit codes and the one-line error format.
//
// A failing command prints exactly one line, `agentkv <command>: error: <message>`, on stderr
// and exits with kExitBadInput for anything the user can fix (flags, files, trace contents)
// or kExitInternal for a bug (an Internal status or an unexpected exception). CLI11 parse
// errors take the same format through CLI::App::failure_message. Not thread-safe (writes to
// stderr); used from main's thread only.
#ifndef AGENTKV_TOOLS_AGENTKV_CLI_SUPPORT_H_
#define AGENTKV_TOOLS_AGENTKV_CLI_SUPPORT_H_

#include <fmt/core.h>

#include <CLI/CLI.hpp>
#include <cstdint>
#include <string>
#include <string_view>
#include <type_traits>

#include "agentkv/base/status.h"
#include "agentkv/routing/router.h"
#include "agentkv/service/common/log_sink.h"

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

// Long-running commands (servers): BlockTerminationSignals() blocks SIGINT and SIGTERM in the
// calling thread and every thread started after it (threads inherit the mask), so that
// WaitForTerminationSignal() receives them with sigwait and returns the signal number. Call
// the first before starting any server thread.
void BlockTerminationSignals();
int WaitForTerminationSignal();

// Whether the lower end of a range is part of it: [lo, hi] or (lo, hi].
enum class LowerBound : uint8_t { kClosed, kOpen };

// The one range check of a flag's value for every command: OK when `value` lies in [lo, hi]
// (or (lo, hi] with LowerBound::kOpen), else InvalidArgument "<flag> must be in [<lo>, <hi>],
// got <value>", e.g. "--port must be in [0, 65535], got 70000". NaN lies in no range. CLI11's
// own CLI::Range would word the error its way and without the value's flag in front; this
// keeps every command's range errors in one format. Precondition: lo <= hi.
template <typename T>
requires std::is_arithmetic_v<T>
[[nodiscard]] Status CheckFlagRange(std::string_view flag, T value, std::type_identity_t<T> lo,
                                    std::type_identity_t<T> hi,
                                    LowerBound lower = LowerBound::kClosed) {
  const bool above = lower == LowerBound::kClosed ? value >= lo : value > lo;
  if (above && value <= hi) return Status::Ok();  // NaN fails both comparisons.
  return InvalidArgumentError(fmt::format("{} must be in {}{}, {}], got {}", flag,
                                          lower == LowerBound::kClosed ? '[' : '(', lo, hi, value));
}

// The most KV blocks a command allocates at once (one replay arm's simulated fleet, one
// agentic-curve or cache-curve cache, an emulated engine or fleet): a cache allocates its block
// arrays up front, about kKvBlockBytes a block, so the bound is about 17 GB. Flags whose
// product passes it are refused before anything is built.
inline constexpr int64_t kMaxKvBlocks = int64_t{1} << 28;
inline constexpr int64_t kKvBlockBytes = 64;

// OK when 0 <= `blocks` <= kMaxKvBlocks, else InvalidArgument "<what> = <blocks> KV blocks,
// more than <kMaxKvBlocks>: about <n> GB of memory", where `what` names the flags and values
// that make up `blocks`, e.g. "--capacity-blocks 1073741824 + --host-blocks 0".
[[nodiscard]] Status CheckKvBlocks(std::string_view what, int64_t blocks);

// `result`, or its failure with the message led by the flag the value came from:
// "--model: unknown model preset ...". The code is kept.
template <typename T>
StatusOr<T> NameFlag(std::string_view flag, StatusOr<T> result) {
  if (result.ok()) return result;
  return Status(result.status().code(), fmt::format("{}: {}", flag, result.status().message()));
}

// The environment variable a flag can also be given in: "--agentic-admission-headroom" ->
// "AGENTKV_AGENTIC_ADMISSION_HEADROOM".
std::string FlagEnvName(std::string_view flag);

// Adds option `flag` that also reads FlagEnvName(flag) from the environment and shows its
// default in --help.
template <typename T>
CLI::Option* AddEnvOption(CLI::App& app, std::string_view flag, T& value, const std::string& help) {
  return app.add_option(std::string(flag), value, help)
      ->envname(FlagEnvName(flag))
      ->capture_default_str();
}

// Where a flag's value comes from besides the command line and a --config file.
enum class FlagSource : uint8_t {
  kCommandLine,
  // Also AGENTKV_<FLAG> from the environment (FlagEnvName): the services' flags.
  kCommandLineAndEnvironment,
};

// Adds option `flag`, showing its default in --help, that also reads FlagEnvName(flag) when
// `source` says so.
template <typename T>
CLI::Option* AddFlagOption(CLI::App& app, std::string_view flag, T& value, const std::string& help,
                           FlagSource source) {
  if (source == FlagSource::kCommandLineAndEnvironment) {
    return AddEnvOption(app, flag, value, help);
  }
  return app.add_option(std::string(flag), value, help)->capture_default_str();
}

// Proxies hold two descriptors per request in flight (the client's connection and the upstream
// one). Raises the soft RLIMIT_NOFILE to the hard limit and logs a warning through spdlog when
// it is still below 2 x `upstream_connections` + 64, naming both numbers and the fix.
void WarnIfDescriptorsShort(int64_t upstream_connections);

// The services' log sink on the command line: each line to spdlog at its level.
void SpdlogSink(service::LogLevel level, std::string_view line);
// SpdlogSink, dropping (and telling the service not to build) lines below `level` (debug,
// info, warn or error, as --log-level takes it).
service::LogSink SpdlogSinkAt(const std::string& level);

// Adds --log-level (debug, info, warn or error; also AGENTKV_LOG_LEVEL) into `level`; apply it
// with ApplyLogLevel before the service starts.
CLI::Option* AddLogLevelOption(CLI::App& app, std::string& level);
void ApplyLogLevel(const std::string& level);

// Adds `flag` taking one of sgl-router's policy names (routing::kRouterPolicyNames) into
// `policy`; --help shows the names and `policy`'s value as the default.
CLI::Option* AddRouterPolicyOption(CLI::App& app, const std::string& flag,
                                   routing::RouterPolicy& policy, const std::string& help);

}  // namespace agentkv::tools

#endif  // AGENTKV_TOOLS_AGENTKV_CLI_SUPPORT_H_
