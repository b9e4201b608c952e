// Structured logging of the services (gateway, coordinator, fleet poller): one line per event,
// `event=<name> key=value ...`, handed to a sink the command line points at spdlog and tests
// capture. Request bodies, tokens and signatures are never logged.
//
// Values come from clients (a rid, a session id), from engines and routers (a version, a
// worker URL) and from error messages that quote them, so a value is never written raw: a
// line can only be built as a LogLine, whose every value goes through LogValue (nginx's
// escaping), and a LogSink only takes a LogLine. A rid of "x\nevent=forged" therefore stays
// on its line as rid=x\x0Aevent=forged; a value with a space is quoted, so it cannot add a
// key either.
#ifndef AGENTKV_SERVICE_COMMON_LOG_SINK_H_
#define AGENTKV_SERVICE_COMMON_LOG_SINK_H_

#include <concepts>
#include <cstdint>
#include <functional>
#include <string>
#include <string_view>
#include <type_traits>
#include <utility>

namespace agentkv::service {

enum class LogLevel : uint8_t { kDebug, kInfo, kWarn, kError };
// "debug", "info", "warn", "error".
std::string_view LogLevelName(LogLevel level);

// `value` as it may appear in a text log line, escaped as nginx's access log does
// (escape=default): every byte below 0x20, 0x7f and above, '"' and '\' is written as \xHH,
// upper-case hex as nginx writes it ("\x0A"). Nothing else changes, so an ordinary value reads
// as itself.
std::string LogEscape(std::string_view value);

// LogEscape(value), in double quotes when it holds a space (the separator of key=value
// fields) or when `always_quote`; e.g. `abc`, `"two words"`, `a\x22b`, `x\x0Aevent=forged`.
std::string LogValue(std::string_view value, bool always_quote = false);

// One log line: "event=<event>", then " key=value" per Add, in call order. Events and keys are
// the program's own names (letters, digits, '_'); values are escaped with LogValue.
class LogLine {
 public:
  explicit LogLine(std::string_view event);

  // key=LogValue(value).
  LogLine& Add(std::string_view key, std::string_view value);
  LogLine& Add(std::string_view key, const char* value) {
    return Add(key, std::string_view(value));
  }
  LogLine& Add(std::string_view key, const std::string& value) {
    return Add(key, std::string_view(value));
  }
  // key=true or key=false.
  LogLine& Add(std::string_view key, bool value);
  // A number, as std::to_string writes it.
  template <typename Number>
  requires(std::is_arithmetic_v<Number> && !std::same_as<Number, bool> &&
           !std::same_as<Number, char>) LogLine& Add(std::string_view key, Number value) {
    return AddRaw(key, std::to_string(value));
  }
  // key="LogValue(value)": quoted even without a space (messages, versions).
  LogLine& Quoted(std::string_view key, std::string_view value);

  const std::string& text() const { return text_; }

 private:
  LogLine& AddRaw(std::string_view key, std::string_view escaped);
  std::string text_;
};

// Receives one structured log line. Called from any thread, concurrently. Built from any
// function of (LogLevel, std::string_view), which then sees the line's text; called with a
// LogLine only, so that no caller can hand it a string with unescaped values. Lines below the
// sink's minimum level (default: kDebug, every line) are dropped, and a caller on a hot path
// asks Enabled first so as not to build them at all.
class LogSink {
 public:
  using Function = std::function<void(LogLevel level, std::string_view line)>;

  LogSink() = default;
  template <typename F>
  requires(!std::same_as<std::decay_t<F>, LogSink> && std::constructible_from<Function, F>)
      LogSink(F&& function)  // NOLINT(google-explicit-constructor): a sink is assigned a lambda.
      : function_(std::forward<F>(function)) {}
  template <typename F>
  requires(std::constructible_from<Function, F>) LogSink(F&& function, LogLevel min_level)
      : function_(std::forward<F>(function)), min_level_(min_level) {}

  void operator()(LogLevel level, const LogLine& line) const {
    if (Enabled(level)) function_(level, line.text());
  }
  // Whether a line at `level` reaches the function.
  bool Enabled(LogLevel level) const { return function_ && level >= min_level_; }
  explicit operator bool() const { return static_cast<bool>(function_); }

 private:
  Function function_;
  LogLevel min_level_ = LogLevel::kDebug;
};

// Writes "level=<level> <line>" to stderr, one whole line at a time.
void StderrLogSink(LogLevel level, std::string_view line);

}  // namespace agentkv::service

#endif  // AGENTKV_SERVICE_COMMON_LOG_SINK_H_
