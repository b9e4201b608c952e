#include "agentkv/service/common/log_sink.h"

#include <iostream>

#include "agentkv/sync/mutex.h"

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
  static sync::Mutex mu;
  sync::MutexLock lock(&mu);
  std::cerr << "level=" << LogLevelName(level) << ' ' << line << '\n';
}

}  // namespace agentkv::service
