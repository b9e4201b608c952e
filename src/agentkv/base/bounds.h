// Bounds: the one range rule per kind of quantity that agentkv accepts from outside (a client
// body, a header, a flag, a config file, a trace), and arithmetic on such quantities that
// cannot overflow.
//
// Every number that crosses a trust boundary is checked here where it enters, by kind: tokens
// (prompt, completion budget, reservation, KV capacity), times and durations, counts (requests,
// sessions, turns, engines, blocks) and byte lengths. The bounds are far above any real value
// and far below int64's limit, so that sums of a few thousand checked values of one kind cannot
// overflow; code that adds values of unknown provenance still uses the saturating helpers.
// Out of range is InvalidArgument "<field>: <value> is out of range [lo, hi] <unit>", which the
// services answer as 400 and the command line as an `error:` line with exit code 2.
// Pure functions; thread-safe.
#ifndef AGENTKV_BASE_BOUNDS_H_
#define AGENTKV_BASE_BOUNDS_H_

#include <cstdint>
#include <limits>
#include <optional>
#include <string_view>

#include "agentkv/base/status.h"
#include "agentkv/base/time.h"

namespace agentkv {

// Tokens: [0, 2^40] (about 1.1e12). The largest context windows are about 1e7 tokens and a
// fleet of 10,000 engines of 1e7 KV tokens each holds 1e11; 2^23 sums of bounded values fit
// in int64.
inline constexpr int64_t kMaxTokens = int64_t{1} << 40;
// Times and durations: [0, 365 days] in nanoseconds. Trace times are relative to the start of
// the trace; a year is beyond any trace or timeout, and 292 sums of bounded values fit.
inline constexpr int64_t kMaxTimeNs = int64_t{365} * 24 * 3600 * 1'000'000'000;
// Counts of things: [0, 2^32].
inline constexpr int64_t kMaxCount = int64_t{1} << 32;
// Byte lengths of one input unit (a trace line, a header value): [0, 64 MiB].
inline constexpr int64_t kMaxInputBytes = int64_t{64} << 20;

// OK when `tokens` is in [0, kMaxTokens]; else InvalidArgument naming `field`.
[[nodiscard]] Status CheckTokens(std::string_view field, int64_t tokens);
// OK when `count` is in [0, kMaxCount]; else InvalidArgument naming `field`.
[[nodiscard]] Status CheckCount(std::string_view field, int64_t count);
// OK when `ns` is in [0, kMaxTimeNs]; else InvalidArgument naming `field`.
[[nodiscard]] Status CheckTimeNs(std::string_view field, int64_t ns);

// A time or duration given in seconds or milliseconds (integral or not), checked against
// [0, kMaxTimeNs] before it is converted: NaN, infinities, negatives and values past a year
// are InvalidArgument naming `field` and the unit, e.g.
// "timestamp: 9.3e+12 ms is out of range [0, 31536000000] ms".
[[nodiscard]] StatusOr<TimeNs> TimeFromSeconds(std::string_view field, double seconds);
[[nodiscard]] StatusOr<TimeNs> TimeFromMillis(std::string_view field, double millis);

// The InvalidArgument the checks above return, "<field>: <value> is out of range [0, <hi>]"
// followed by " <unit>" when `unit` is not empty, for a value they cannot take as an int64 or
// a double (e.g. a JSON integer of 2^63 or more, given as its text). Use it with the bound and
// unit of the value's kind: (kMaxTokens, "tokens"), (kMaxCount, ""), (kMaxTimeNs, "ns").
[[nodiscard]] Status OutOfRangeError(std::string_view field, std::string_view value, int64_t hi,
                                     std::string_view unit);

// Overflow-safe int64 arithmetic. Checked* return nullopt on overflow; Saturating* clamp to
// the int64 range.
[[nodiscard]] constexpr std::optional<int64_t> CheckedAdd(int64_t a, int64_t b) {
  int64_t out = 0;
  if (__builtin_add_overflow(a, b, &out)) return std::nullopt;
  return out;
}
[[nodiscard]] constexpr std::optional<int64_t> CheckedSub(int64_t a, int64_t b) {
  int64_t out = 0;
  if (__builtin_sub_overflow(a, b, &out)) return std::nullopt;
  return out;
}
[[nodiscard]] constexpr std::optional<int64_t> CheckedMul(int64_t a, int64_t b) {
  int64_t out = 0;
  if (__builtin_mul_overflow(a, b, &out)) return std::nullopt;
  return out;
}
[[nodiscard]] constexpr int64_t SaturatingAdd(int64_t a, int64_t b) {
  int64_t out = 0;
  if (!__builtin_add_overflow(a, b, &out)) return out;
  return b > 0 ? std::numeric_limits<int64_t>::max() : std::numeric_limits<int64_t>::min();
}
[[nodiscard]] constexpr int64_t SaturatingSub(int64_t a, int64_t b) {
  int64_t out = 0;
  if (!__builtin_sub_overflow(a, b, &out)) return out;
  return b < 0 ? std::numeric_limits<int64_t>::max() : std::numeric_limits<int64_t>::min();
}
[[nodiscard]] constexpr int64_t SaturatingMul(int64_t a, int64_t b) {
  int64_t out = 0;
  if (!__builtin_mul_overflow(a, b, &out)) return out;
  return (a < 0) != (b < 0) ? std::numeric_limits<int64_t>::min()
                            : std::numeric_limits<int64_t>::max();
}

// The same for times and durations: a sum past either end of int64 nanoseconds stays there
// instead of wrapping around (so that an event is never scheduled in the past).
[[nodiscard]] constexpr TimeNs SaturatingAdd(TimeNs a, TimeNs b) {
  return TimeNs(SaturatingAdd(a.ns(), b.ns()));
}

}  // namespace agentkv

#endif  // AGENTKV_BASE_BOUNDS_H_
