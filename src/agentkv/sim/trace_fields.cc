// The field readers of trace_input.h: one JSON number (or array of ids) by the bounds.h rule
// of its kind. Invariant: a value is either returned within its kind's range or refused with
// an InvalidArgument naming `field`; nothing here throws or allocates beyond the result.
#include <boost/json/serialize.hpp>
#include <optional>
#include <string>

#include "agentkv/sim/trace_input.h"

namespace agentkv::sim {
namespace {

Status Mistyped(std::string_view field, std::string_view expectation,
                const boost::json::value& got) {
  return InvalidArgumentError(std::string(field) + ": " + std::string(expectation) + ", got " +
                              Quote(got));
}

// A JSON number as a double; nullopt for any other kind of value.
std::optional<double> NumberOf(const boost::json::value& value) {
  if (const double* d = value.if_double()) return *d;
  if (const int64_t* i = value.if_int64()) return static_cast<double>(*i);
  if (const uint64_t* u = value.if_uint64()) return static_cast<double>(*u);
  return std::nullopt;
}

}  // namespace

std::string Quote(const boost::json::value& value) {
  std::string text = boost::json::serialize(value);
  if (text.size() > kMaxQuotedChars) text = text.substr(0, kMaxQuotedChars) + "...";
  return text;
}

StatusOr<int64_t> ReadTokens(const boost::json::value& value, std::string_view field) {
  if (const int64_t* i = value.if_int64()) {
    AGENTKV_RETURN_IF_ERROR(CheckTokens(field, *i));
    return *i;
  }
  if (const uint64_t* u = value.if_uint64()) {
    return OutOfRangeError(field, std::to_string(*u), kMaxTokens, "tokens");
  }
  return Mistyped(field, "expected a non-negative integer", value);
}

StatusOr<int64_t> ReadCount(const boost::json::value& value, std::string_view field, int64_t min) {
  AGENTKV_CHECK(min == 0 || min == 1) << min;
  const std::string expectation =
      min == 0 ? "expected a non-negative integer" : "expected an integer >= 1";
  if (const int64_t* i = value.if_int64()) {
    if (min > 0 && *i < min) return Mistyped(field, expectation, value);
    AGENTKV_RETURN_IF_ERROR(CheckCount(field, *i));
    return *i;
  }
  if (const uint64_t* u = value.if_uint64()) {
    return OutOfRangeError(field, std::to_string(*u), kMaxCount, "");
  }
  return Mistyped(field, expectation, value);
}

StatusOr<TimeNs> ReadSeconds(const boost::json::value& value, std::string_view field) {
  const std::optional<double> seconds = NumberOf(value);
  if (!seconds.has_value()) return Mistyped(field, "expected a number of seconds", value);
  return TimeFromSeconds(field, *seconds);
}

StatusOr<TimeNs> ReadMillis(const boost::json::value& value, std::string_view field) {
  const std::optional<double> millis = NumberOf(value);
  if (!millis.has_value()) return Mistyped(field, "expected a number of milliseconds", value);
  return TimeFromMillis(field, *millis);
}

StatusOr<std::vector<uint64_t>> ReadHashIds(const boost::json::value& value,
                                            std::string_view field) {
  constexpr std::string_view kExpectation = "expected an array of non-negative integers";
  const boost::json::array* array = value.if_array();
  if (array == nullptr) return Mistyped(field, kExpectation, value);
  std::vector<uint64_t> ids;
  ids.reserve(array->size());
  for (size_t i = 0; i < array->size(); ++i) {
    const boost::json::value& e = (*array)[i];
    if (const int64_t* s = e.if_int64(); s != nullptr && *s >= 0) {
      ids.push_back(static_cast<uint64_t>(*s));
    } else if (const uint64_t* u = e.if_uint64()) {
      ids.push_back(*u);
    } else {
      return InvalidArgumentError(std::string(field) + ": " + std::string(kExpectation) +
                                  ", element " + std::to_string(i) + " is " + Quote(e));
    }
  }
  return ids;
}

Status CheckHashIdCount(std::string_view field, size_t count, std::string_view input_field,
                        int64_t input_tokens, int64_t block_size) {
  AGENTKV_CHECK(input_tokens >= 0 && input_tokens <= kMaxTokens && block_size >= 1);
  const int64_t most = input_tokens / block_size + (input_tokens % block_size != 0 ? 1 : 0);
  if (count <= static_cast<uint64_t>(most)) return Status::Ok();
  return InvalidArgumentError(std::string(field) + ": " + std::to_string(count) + " ids for " +
                              std::string(input_field) + " " + std::to_string(input_tokens) +
                              ", more than ceil(" + std::to_string(input_tokens) + " / " +
                              std::to_string(block_size) + ") = " + std::to_string(most));
}

}  // namespace agentkv::sim
