#include "agentkv/base/bounds.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <string>

namespace agentkv {
Status OutOfRangeError(std::string_view field, std::string_view value, int64_t hi,
                       std::string_view unit) {
  std::string message(field);
  message += ": ";
  message += value;
  message += " is out of range [0, " + std::to_string(hi) + "]";
  if (!unit.empty()) {
    message += ' ';
    message += unit;
  }
  return InvalidArgumentError(std::move(message));
}

namespace {

Status CheckInt(std::string_view field, int64_t value, int64_t hi, std::string_view unit) {
  if (value >= 0 && value <= hi) return Status::Ok();
  return OutOfRangeError(field, std::to_string(value), hi, unit);
}

// Shortest readable text of a double for an error message ("9.3e+12", "nan", "-1").
std::string DoubleText(double value) {
  char buffer[32];
  std::snprintf(buffer, sizeof(buffer), "%.17g", value);
  return buffer;
}

StatusOr<TimeNs> TimeFrom(std::string_view field, double value, int64_t ns_per_unit,
                          std::string_view unit) {
  const int64_t hi = kMaxTimeNs / ns_per_unit;
  // A relative slack of 1e-12 (31 ns at a year) accepts the bound itself after a round trip
  // through a double of another unit (TimeNs::seconds() multiplies by an inexact 1e-9); the
  // result is clamped to the bound. The negated comparison also refuses NaN.
  if (!(value >= 0 && value <= static_cast<double>(hi) * (1 + 1e-12))) {
    return OutOfRangeError(field, DoubleText(value), hi, unit);
  }
  const int64_t ns = std::llround(value * static_cast<double>(ns_per_unit));
  return TimeNs(std::min(ns, kMaxTimeNs));
}

}  // namespace

Status CheckTokens(std::string_view field, int64_t tokens) {
  return CheckInt(field, tokens, kMaxTokens, "tokens");
}

Status CheckCount(std::string_view field, int64_t count) {
  return CheckInt(field, count, kMaxCount, "");
}

Status CheckTimeNs(std::string_view field, int64_t ns) {
  return CheckInt(field, ns, kMaxTimeNs, "ns");
}

StatusOr<TimeNs> TimeFromSeconds(std::string_view field, double seconds) {
  return TimeFrom(field, seconds, 1'000'000'000, "s");
}

StatusOr<TimeNs> TimeFromMillis(std::string_view field, double millis) {
  return TimeFrom(field, millis, 1'000'000, "ms");
}

}  // namespace agentkv
