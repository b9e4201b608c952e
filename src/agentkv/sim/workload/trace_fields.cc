// The field readers of trace_input.h: one JSON number (or array of ids) by the bounds.h rule
// of its kind, and TraceFields, which finds a named field of an object and reads it by the same
// rules. Invariant: a value is either returned within its kind's range or refused with an
// InvalidArgument naming the field; the phrase that describes a kind ("expected ...") is
// written once, below, and used both for a value of the wrong kind and for a missing field.
// Nothing here throws or allocates beyond the result.
#include <boost/json/serialize.hpp>
#include <optional>
#include <string>
#include <string_view>
#include <utility>

#include "agentkv/sim/workload/trace_input.h"

namespace agentkv::sim {
namespace {

constexpr std::string_view kNonNegativeInteger = "expected a non-negative integer";
constexpr std::string_view kIntegerAtLeastOne = "expected an integer >= 1";
constexpr std::string_view kSecondsNumber = "expected a number of seconds";
constexpr std::string_view kMillisNumber = "expected a number of milliseconds";
constexpr std::string_view kHashIdArray = "expected an array of non-negative integers";
constexpr std::string_view kString = "expected a string";
constexpr std::string_view kStringArray = "expected an array of strings";
constexpr std::string_view kArray = "expected an array";

std::string_view CountExpectation(int64_t min) {
  return min == 0 ? kNonNegativeInteger : kIntegerAtLeastOne;
}

// A JSON number as a double; nullopt for any other kind of value.
std::optional<double> NumberOf(const boost::json::value& value) {
  if (const double* d = value.if_double()) return *d;
  if (const int64_t* i = value.if_int64()) return static_cast<double>(*i);
  if (const uint64_t* u = value.if_uint64()) return static_cast<double>(*u);
  return std::nullopt;
}

}  // namespace

Status MistypedError(std::string_view name, std::string_view expectation,
                     const boost::json::value& got) {
  return InvalidArgumentError(std::string(name) + ": " + std::string(expectation) + ", got " +
                              Quote(got));
}

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
  return MistypedError(field, kNonNegativeInteger, value);
}

StatusOr<int64_t> ReadCount(const boost::json::value& value, std::string_view field, int64_t min) {
  AGENTKV_CHECK(min == 0 || min == 1) << min;
  const std::string_view expectation = CountExpectation(min);
  if (const int64_t* i = value.if_int64()) {
    if (min > 0 && *i < min) return MistypedError(field, expectation, value);
    AGENTKV_RETURN_IF_ERROR(CheckCount(field, *i));
    return *i;
  }
  if (const uint64_t* u = value.if_uint64()) {
    return OutOfRangeError(field, std::to_string(*u), kMaxCount, "");
  }
  return MistypedError(field, expectation, value);
}

StatusOr<TimeNs> ReadSeconds(const boost::json::value& value, std::string_view field) {
  const std::optional<double> seconds = NumberOf(value);
  if (!seconds.has_value()) return MistypedError(field, kSecondsNumber, value);
  return TimeFromSeconds(field, *seconds);
}

StatusOr<TimeNs> ReadMillis(const boost::json::value& value, std::string_view field) {
  const std::optional<double> millis = NumberOf(value);
  if (!millis.has_value()) return MistypedError(field, kMillisNumber, value);
  return TimeFromMillis(field, *millis);
}

StatusOr<std::vector<uint64_t>> ReadHashIds(const boost::json::value& value,
                                            std::string_view field) {
  const boost::json::array* array = value.if_array();
  if (array == nullptr) return MistypedError(field, kHashIdArray, value);
  std::vector<uint64_t> ids;
  ids.reserve(array->size());
  for (size_t i = 0; i < array->size(); ++i) {
    const boost::json::value& e = (*array)[i];
    if (const int64_t* s = e.if_int64(); s != nullptr && *s >= 0) {
      ids.push_back(static_cast<uint64_t>(*s));
    } else if (const uint64_t* u = e.if_uint64()) {
      ids.push_back(*u);
    } else {
      return InvalidArgumentError(std::string(field) + ": " + std::string(kHashIdArray) +
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

TraceFields TraceFields::OfRecord(const boost::json::object& object) {
  return TraceFields(object, std::string(), /*record=*/true);
}

TraceFields TraceFields::AtPath(const boost::json::object& object, std::string path) {
  return TraceFields(object, std::move(path), /*record=*/false);
}

std::string TraceFields::Name(std::string_view key) const {
  if (record_) return "field \"" + std::string(key) + "\"";
  std::string name = path_;
  if (!name.empty()) name += '.';
  name += key;
  return name;
}

Status TraceFields::Error(std::string_view key, std::string_view what) const {
  return InvalidArgumentError(Name(key) + ": " + std::string(what));
}

const boost::json::value* TraceFields::Find(std::string_view key) const {
  return object_->if_contains(key);
}

bool TraceFields::Has(std::string_view key) const {
  const boost::json::value* value = Find(key);
  return value != nullptr && !value->is_null();
}

StatusOr<const boost::json::value*> TraceFields::Required(std::string_view key,
                                                          std::string_view expectation) const {
  const boost::json::value* value = Find(key);
  if (value == nullptr) return Error(key, "missing (" + std::string(expectation) + ")");
  return value;
}

StatusOr<int64_t> TraceFields::Tokens(std::string_view key) const {
  AGENTKV_ASSIGN_OR_RETURN(const boost::json::value* value, Required(key, kNonNegativeInteger));
  return ReadTokens(*value, Name(key));
}

StatusOr<int64_t> TraceFields::Count(std::string_view key, int64_t min) const {
  AGENTKV_ASSIGN_OR_RETURN(const boost::json::value* value, Required(key, CountExpectation(min)));
  return ReadCount(*value, Name(key), min);
}

StatusOr<TimeNs> TraceFields::Seconds(std::string_view key) const {
  AGENTKV_ASSIGN_OR_RETURN(const boost::json::value* value, Required(key, kSecondsNumber));
  return ReadSeconds(*value, Name(key));
}

StatusOr<TimeNs> TraceFields::Millis(std::string_view key) const {
  AGENTKV_ASSIGN_OR_RETURN(const boost::json::value* value, Required(key, kMillisNumber));
  return ReadMillis(*value, Name(key));
}

StatusOr<std::vector<uint64_t>> TraceFields::HashIds(std::string_view key) const {
  AGENTKV_ASSIGN_OR_RETURN(const boost::json::value* value, Required(key, kHashIdArray));
  return ReadHashIds(*value, Name(key));
}

StatusOr<std::string> TraceFields::String(std::string_view key) const {
  AGENTKV_ASSIGN_OR_RETURN(const boost::json::value* value, Required(key, kString));
  const boost::json::string* s = value->if_string();
  if (s == nullptr) return MistypedError(Name(key), kString, *value);
  return std::string(s->data(), s->size());
}

StatusOr<const boost::json::array*> TraceFields::Array(std::string_view key) const {
  AGENTKV_ASSIGN_OR_RETURN(const boost::json::value* value, Required(key, kArray));
  const boost::json::array* array = value->if_array();
  if (array == nullptr) return MistypedError(Name(key), kArray, *value);
  return array;
}

StatusOr<int64_t> TraceFields::Id(std::string_view key, int64_t min,
                                  std::string_view expectation) const {
  AGENTKV_ASSIGN_OR_RETURN(const boost::json::value* value, Required(key, expectation));
  if (const int64_t* i = value->if_int64(); i != nullptr && *i >= min) return *i;
  return MistypedError(Name(key), expectation, *value);
}

StatusOr<TimeNs> TraceFields::OptionalSeconds(std::string_view key) const {
  if (!Has(key)) return TimeNs();
  return Seconds(key);
}

StatusOr<TimeNs> TraceFields::OptionalMillis(std::string_view key) const {
  if (!Has(key)) return TimeNs();
  return Millis(key);
}

StatusOr<std::string> TraceFields::OptionalString(std::string_view key) const {
  if (!Has(key)) return std::string();
  return String(key);
}

StatusOr<std::vector<std::string>> TraceFields::OptionalStrings(std::string_view key) const {
  if (!Has(key)) return std::vector<std::string>();
  const boost::json::value* value = Find(key);
  const boost::json::array* array = value->if_array();
  if (array == nullptr) return MistypedError(Name(key), kStringArray, *value);
  std::vector<std::string> strings;
  strings.reserve(array->size());
  for (size_t i = 0; i < array->size(); ++i) {
    const boost::json::string* s = (*array)[i].if_string();
    if (s == nullptr) {
      return InvalidArgumentError(Name(key) + ": " + std::string(kStringArray) + ", element " +
                                  std::to_string(i) + " is " + Quote((*array)[i]));
    }
    strings.emplace_back(s->data(), s->size());
  }
  return strings;
}

}  // namespace agentkv::sim
