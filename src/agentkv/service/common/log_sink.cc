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

std::string LogEscape(std::string_view value) {
  static constexpr char kHex[] = "0123456789ABCDEF";
  std::string out;
  out.reserve(value.size());
  for (const char c : value) {
    const auto byte = static_cast<unsigned char>(c);
    if (byte < 0x20 || byte >= 0x7f || c == '"' || c == '\\') {
      out += "\\x";
      out += kHex[byte >> 4];
      out += kHex[byte & 0xf];
    } else {
      out += c;
    }
  }
  return out;
}

std::string LogValue(std::string_view value, bool always_quote) {
  std::string escaped = LogEscape(value);
  if (!always_quote && escaped.find(' ') == std::string::npos) return escaped;
  return "\"" + escaped + "\"";
}

LogLine::LogLine(std::string_view event) : text_("event=") { text_ += event; }

LogLine& LogLine::Add(std::string_view key, std::string_view value) {
  return AddRaw(key, LogValue(value));
}

LogLine& LogLine::Add(std::string_view key, bool value) {
  return AddRaw(key, value ? "true" : "false");
}

LogLine& LogLine::Quoted(std::string_view key, std::string_view value) {
  return AddRaw(key, LogValue(value, /*always_quote=*/true));
}

LogLine& LogLine::AddRaw(std::string_view key, std::string_view escaped) {
  text_ += ' ';
  text_ += key;
  text_ += '=';
  text_ += escaped;
  return *this;
}

void StderrLogSink(LogLevel level, std::string_view line) {
  static sync::Mutex mu;
  sync::MutexLock lock(&mu);
  std::cerr << "level=" << LogLevelName(level) << ' ' << line << '\n';
}

}  // namespace agentkv::service
