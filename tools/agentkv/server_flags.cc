#include "tools/agentkv/server_flags.h"

#include <spdlog/logger.h>
#include <spdlog/sinks/stdout_sinks.h>
#include <spdlog/spdlog.h>

#include <cstdint>
#include <memory>

namespace agentkv::tools {

void ServerFlags::Add(CLI::App& app, FlagSource source) {
  AddFlagOption(app, "--host", host_, "Address to bind (loopback by default)", source);
  AddFlagOption(app, "--port", port_, "Port to listen on (0 = any free port)", source);
  AddFlagOption(app, "--threads", threads_, "HTTP I/O threads (per server)", source);
  AddFlagOption(app, "--shutdown-grace-s", shutdown_grace_s_,
                "Seconds answers in flight get to finish at shutdown", source);
  CLI::Option* access_log =
      app.add_flag("--access-log", access_log_,
                   "Write one JSON line per answered request to stderr: method, target, status, "
                   "response bytes, streamed bytes, duration, client address");
  if (source == FlagSource::kCommandLineAndEnvironment) {
    access_log->envname(FlagEnvName("--access-log"));
  }
}

Status ServerFlags::Check() const {
  AGENTKV_RETURN_IF_ERROR(CheckFlagRange("--port", port_, 0, 65535));
  AGENTKV_RETURN_IF_ERROR(CheckFlagRange("--threads", threads_, 1, 256));
  return CheckFlagRange("--shutdown-grace-s", shutdown_grace_s_, 0.0, 3600.0);
}

void ServerFlags::ApplyTo(net::HttpServerOptions& http) const {
  http.address = host_;
  http.port = static_cast<uint16_t>(port_);
  http.threads = threads_;
  if (access_log_) http.access_log = AccessLogToStderr();
}

net::AccessLogHook AccessLogToStderr() {
  // A logger of its own, not registered with spdlog: --log-level (spdlog::set_level) does not
  // silence it, and its pattern is the bare line, so stderr carries JSON lines.
  auto logger =
      std::make_shared<spdlog::logger>("access", std::make_shared<spdlog::sinks::stderr_sink_mt>());
  logger->set_pattern("%v");
  logger->set_level(spdlog::level::info);
  return
      [logger](const net::AccessLogEntry& entry) { logger->info("{}", net::AccessLogJson(entry)); };
}

std::chrono::milliseconds ServerFlags::shutdown_grace() const {
  return std::chrono::milliseconds(static_cast<int64_t>(shutdown_grace_s_ * 1000.0));
}

}  // namespace agentkv::tools
