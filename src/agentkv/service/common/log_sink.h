// Structured logging of the services (gateway, coordinator, fleet poller): one line per event,
// `event=<name> key=value ...`, handed to a sink the command line points at spdlog and tests
// capture. Values with spaces are quoted; request bodies, tokens and signatures are never
// logged.
#ifndef AGENTKV_SERVICE_COMMON_LOG_SINK_H_
#define AGENTKV_SERVICE_COMMON_LOG_SINK_H_

#include <cstdint>
#include <functional>
#include <string_view>

namespace agentkv::service {

enum class LogLevel : uint8_t { kDebug, kInfo, kWarn, kError };
// "debug", "info", "warn", "error".
std::string_view LogLevelName(LogLevel level);

// Receives one structured log line. Called from any thread, concurrently.
using LogSink = std::function<void(LogLevel level, std::string_view line)>;

// Writes "level=<level> <line>" to stderr, one whole line at a time.
void StderrLogSink(LogLevel level, std::string_view line);

}  // namespace agentkv::service

#endif  // AGENTKV_SERVICE_COMMON_LOG_SINK_H_
