#include "agentkv/service/common/log_sink.h"

#include <iostream>
#include <mutex>

namespace agentkv::service {

std::string_view LogLevelName(LogLevel level) {
  switch (level) {
    case LogLevel::kDebug:
      return "debug";
    case LogLevel::kInfo:
      return "info";
    case LogLevel::kWarn:
      return "warn";
    case LogLevel::kError:
      return "error";
  }
  return "info";
}

void StderrLogSink(LogLevel level, std::string_view line) {
  static std::mutex mu;
  std::lock_guard<std::mutex> lock(mu);
  std::cerr << "level=" << LogLevelName(level) << ' ' << line << '\n';
}

}  // namespace agentkv::service
