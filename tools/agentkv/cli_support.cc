#include "tools/agentkv/cli_support.h"

#include <fmt/core.h>
#include <pthread.h>
#include <signal.h>
#include <spdlog/spdlog.h>
#include <sys/resource.h>

#include <cstdio>

namespace agentkv::tools {
namespace {

std::string OneLine(std::string_view message) {
  std::string line;
  line.reserve(message.size());
  for (const char c : message) {
    if (c == '\n') {
      line += "; ";
    } else if (c != '\r') {
      line += c;
    }
  }
  // A trailing newline would otherwise leave a dangling separator.
  while (line.ends_with("; ")) line.resize(line.size() - 2);
  return line;
}

std::string ErrorLine(std::string_view command, std::string_view message) {
  const std::string prefix = command.empty() ? "agentkv" : fmt::format("agentkv {}", command);
  return fmt::format("{}: error: {}\n", prefix, OneLine(message));
}

}  // namespace

Status CheckKvBlocks(std::string_view what, int64_t blocks) {
  if (blocks >= 0 && blocks <= kMaxKvBlocks) return Status::Ok();
  return InvalidArgumentError(
      fmt::format("{} = {} KV blocks, more than {}: about {:.1f} GB of memory", what, blocks,
                  kMaxKvBlocks, static_cast<double>(blocks) * kKvBlockBytes / 1e9));
}

int ExitCodeFor(const Status& status) {
  if (status.ok()) return kExitOk;
  return status.code() == StatusCode::kInternal ? kExitInternal : kExitBadInput;
}

int ReportError(std::string_view command, std::string_view message, int exit_code) {
  fmt::print(stderr, "{}", ErrorLine(command, message));
  std::fflush(stderr);
  return exit_code;
}

int ReportError(std::string_view command, const Status& status) {
  AGENTKV_CHECK(!status.ok());
  const std::string message =
      status.code() == StatusCode::kInternal ? "internal: " + status.message() : status.message();
  return ReportError(command, message, ExitCodeFor(status));
}

std::string ParseFailureMessage(const CLI::App* app, const CLI::Error& error) {
  // The command path the parse reached ("emulate router"): the deepest selected subcommand.
  std::string command;
  const CLI::App* at = app;
  for (std::vector<CLI::App*> parsed = at->get_subcommands(); !parsed.empty();
       parsed = at->get_subcommands()) {
    at = parsed.back();
    command += (command.empty() ? "" : " ") + at->get_name();
  }
  // CLI11 says only "A subcommand is required", also when the word given was a misspelt one:
  // name what was given and what the valid commands are.
  if (dynamic_cast<const CLI::RequiredError*>(&error) != nullptr &&
      std::string_view(error.what()).starts_with("A subcommand is required")) {
    std::string commands;
    for (const CLI::App* sub : at->get_subcommands([](const CLI::App*) { return true; })) {
      commands += (commands.empty() ? "" : ", ") + sub->get_name();
    }
    const std::vector<std::string> extra = app->remaining(true);
    const std::string help = command.empty() ? "agentkv --help" : "agentkv " + command + " --help";
    if (!extra.empty()) {
      return ErrorLine(command, fmt::format("unknown command \"{}\" (commands: {}; see {})",
                                            extra.front(), commands, help));
    }
    return ErrorLine(command,
                     fmt::format("a command is required (commands: {}; see {})", commands, help));
  }
  return ErrorLine(command, error.what());
}

int ExitForParseError(CLI::App& app, const CLI::ParseError& error) {
  const int cli_code = app.exit(error);
  return cli_code == static_cast<int>(CLI::ExitCodes::Success) ? kExitOk : kExitBadInput;
}

void BlockTerminationSignals() {
  sigset_t set;
  sigemptyset(&set);
  sigaddset(&set, SIGINT);
  sigaddset(&set, SIGTERM);
  pthread_sigmask(SIG_BLOCK, &set, nullptr);
}

int WaitForTerminationSignal() {
  sigset_t set;
  sigemptyset(&set);
  sigaddset(&set, SIGINT);
  sigaddset(&set, SIGTERM);
  int signal = 0;
  sigwait(&set, &signal);
  return signal;
}

std::string FlagEnvName(std::string_view flag) {
  std::string name = "AGENTKV_";
  for (char c : flag.substr(flag.rfind("--", 0) == 0 ? 2 : 0)) {
    name += c == '-' ? '_' : static_cast<char>(c >= 'a' && c <= 'z' ? c - 'a' + 'A' : c);
  }
  return name;
}

void SpdlogSink(service::LogLevel level, std::string_view line) {
  switch (level) {
    case service::LogLevel::kDebug:
      spdlog::debug("{}", line);
      break;
    case service::LogLevel::kInfo:
      spdlog::info("{}", line);
      break;
    case service::LogLevel::kWarn:
      spdlog::warn("{}", line);
      break;
    case service::LogLevel::kError:
      spdlog::error("{}", line);
      break;
  }
}

CLI::Option* AddLogLevelOption(CLI::App& app, std::string& level) {
  return AddEnvOption(app, "--log-level", level, "debug, info, warn or error")
      ->check(CLI::IsMember({"debug", "info", "warn", "error"}));
}

void WarnIfDescriptorsShort(int64_t upstream_connections) {
  rlimit limit{};
  if (getrlimit(RLIMIT_NOFILE, &limit) != 0) return;
  if (limit.rlim_cur < limit.rlim_max) {
    rlimit raised = limit;
    raised.rlim_cur = limit.rlim_max;
    if (setrlimit(RLIMIT_NOFILE, &raised) == 0) limit = raised;
  }
  const auto needed = static_cast<rlim_t>(2 * upstream_connections + 64);
  if (limit.rlim_cur != RLIM_INFINITY && limit.rlim_cur < needed) {
    spdlog::warn(
        "event=descriptor_limit_low limit={} needed={} upstream_connections={} hint=\"about {} "
        "requests can be in flight before upstream connects fail with EMFILE (502); raise the "
        "open-files limit (ulimit -n, systemd LimitNOFILE) or lower --upstream-connections\"",
        limit.rlim_cur, needed, upstream_connections,
        limit.rlim_cur > 64 ? (limit.rlim_cur - 64) / 2 : 0);
  }
}

void ApplyLogLevel(const std::string& level) { spdlog::set_level(spdlog::level::from_str(level)); }

service::LogSink SpdlogSinkAt(const std::string& level) {
  service::LogLevel min_level = service::LogLevel::kDebug;
  if (level == "info") min_level = service::LogLevel::kInfo;
  if (level == "warn") min_level = service::LogLevel::kWarn;
  if (level == "error") min_level = service::LogLevel::kError;
  return service::LogSink(SpdlogSink, min_level);
}

CLI::Option* AddRouterPolicyOption(CLI::App& app, const std::string& flag,
                                   routing::RouterPolicy& policy, const std::string& help) {
  // CLI11 reads an enum as its integer: the transform turns the name into that integer, or
  // fails with ParseRouterPolicy's message (which lists the valid names).
  const CLI::Validator by_name(
      [](std::string& value) -> std::string {
        StatusOr<routing::RouterPolicy> parsed = routing::ParseRouterPolicy(value);
        if (!parsed.ok()) return parsed.status().message();
        value = std::to_string(static_cast<int>(*parsed));
        return "";
      },
      "");
  return app.add_option(flag, policy, help)
      ->transform(by_name)
      ->type_name("POLICY")
      ->default_str(std::string(routing::RouterPolicyName(policy)));
}

}  // namespace agentkv::tools
