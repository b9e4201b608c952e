#include "agentkv/protocol/json_util.h"

#include <algorithm>
#include <boost/json/basic_parser_impl.hpp>
#include <boost/json/error.hpp>
#include <boost/json/stream_parser.hpp>
#include <charconv>
#include <cmath>
#include <cstdlib>
#include <exception>
#include <limits>
#include <system_error>
#include <utility>

// Invariants: no function here lets a Boost or standard exception escape; every parse is
// bounded by JsonLimits before Boost sees the bytes.

namespace agentkv::protocol {
namespace {

namespace json = boost::json;

// A Boost.JSON handler that accepts every event: ValidateJson only needs the grammar checks.
struct NullHandler {
  static constexpr size_t max_object_size = size_t(-1);
  static constexpr size_t max_array_size = size_t(-1);
  static constexpr size_t max_key_size = size_t(-1);
  static constexpr size_t max_string_size = size_t(-1);

  bool on_document_begin(boost::system::error_code&) { return true; }
  bool on_document_end(boost::system::error_code&) { return true; }
  bool on_array_begin(boost::system::error_code&) { return true; }
  bool on_array_end(size_t, boost::system::error_code&) { return true; }
  bool on_object_begin(boost::system::error_code&) { return true; }
  bool on_object_end(size_t, boost::system::error_code&) { return true; }
  bool on_string_part(json::string_view, size_t, boost::system::error_code&) { return true; }
  bool on_string(json::string_view, size_t, boost::system::error_code&) { return true; }
  bool on_key_part(json::string_view, size_t, boost::system::error_code&) { return true; }
  bool on_key(json::string_view, size_t, boost::system::error_code&) { return true; }
  bool on_number_part(json::string_view, boost::system::error_code&) { return true; }
  bool on_int64(int64_t, json::string_view, boost::system::error_code&) { return true; }
  bool on_uint64(uint64_t, json::string_view, boost::system::error_code&) { return true; }
  bool on_double(double, json::string_view, boost::system::error_code&) { return true; }
  bool on_bool(bool, boost::system::error_code&) { return true; }
  bool on_null(boost::system::error_code&) { return true; }
  bool on_comment_part(json::string_view, boost::system::error_code&) { return true; }
  bool on_comment(json::string_view, boost::system::error_code&) { return true; }
};

Status TypeError(std::string_view path, std::string_view expected) {
  return InvalidArgumentError(std::string(path) + ": expected " + std::string(expected));
}

}  // namespace

json::parse_options JsonParseOptionsFor(const JsonLimits& limits) {
  json::parse_options options;
  options.max_depth = static_cast<size_t>(std::clamp(limits.max_depth, 1, kMaxJsonDepth));
  return options;
}

Status CheckJsonSize(std::string_view text, const JsonLimits& limits, std::string_view what) {
  if (text.size() > limits.max_bytes) {
    return ResourceExhaustedError(std::string(what) + " is " + std::to_string(text.size()) +
                                  " bytes, over the limit of " + std::to_string(limits.max_bytes));
  }
  return Status::Ok();
}

Status JsonErrorAt(const boost::system::error_code& ec, size_t offset, std::string_view what) {
  std::string message =
      std::string(what) + ": invalid JSON at byte " + std::to_string(offset) + ": " + ec.message();
  if (ec == json::error::too_deep) return ResourceExhaustedError(std::move(message));
  return InvalidArgumentError(std::move(message));
}

StatusOr<json::value> ParseJson(std::string_view text, const JsonLimits& limits,
                                std::string_view what, json::storage_ptr storage) {
  AGENTKV_RETURN_IF_ERROR(CheckJsonSize(text, limits, what));
  try {
    json::stream_parser parser({}, JsonParseOptionsFor(limits));
    parser.reset(std::move(storage));
    boost::system::error_code ec;
    const size_t consumed = parser.write(text.data(), text.size(), ec);
    if (ec) return JsonErrorAt(ec, consumed, what);
    parser.finish(ec);
    if (ec) return JsonErrorAt(ec, text.size(), what);
    return parser.release();
  } catch (const std::bad_alloc&) {
    return ResourceExhaustedError(std::string(what) + ": out of memory while parsing");
  } catch (const std::exception& e) {
    return InvalidArgumentError(std::string(what) + ": invalid JSON: " + e.what());
  }
}

StatusOr<boost::json::value> ParseJsonObject(std::string_view text, const JsonLimits& limits,
                                             std::string_view what,
                                             boost::json::storage_ptr storage) {
  AGENTKV_ASSIGN_OR_RETURN(boost::json::value document,
                           ParseJson(text, limits, what, std::move(storage)));
  if (!document.is_object()) {
    return InvalidArgumentError(std::string(what) + ": expected a JSON object");
  }
  return document;
}

Status ValidateJson(std::string_view text, const JsonLimits& limits, std::string_view what) {
  AGENTKV_RETURN_IF_ERROR(CheckJsonSize(text, limits, what));
  try {
    json::basic_parser<NullHandler> parser(JsonParseOptionsFor(limits));
    boost::system::error_code ec;
    const size_t consumed = parser.write_some(false, text.data(), text.size(), ec);
    if (ec) return JsonErrorAt(ec, consumed, what);
    if (consumed != text.size()) {
      return JsonErrorAt(json::make_error_code(json::error::extra_data), consumed, what);
    }
    return Status::Ok();
  } catch (const std::bad_alloc&) {
    return ResourceExhaustedError(std::string(what) + ": out of memory while parsing");
  } catch (const std::exception& e) {
    return InvalidArgumentError(std::string(what) + ": invalid JSON: " + e.what());
  }
}

std::string JoinPath(std::string_view parent, std::string_view key) {
  if (parent.empty()) return std::string(key);
  std::string path(parent);
  path += '.';
  path += key;
  return path;
}

std::string IndexPath(std::string_view parent, size_t index) {
  std::string path(parent);
  path += '[';
  path += std::to_string(index);
  path += ']';
  return path;
}

const json::value* FindNonNull(const json::object& object, std::string_view key) {
  const json::value* value = object.if_contains(json::string_view(key.data(), key.size()));
  if (value == nullptr || value->is_null()) return nullptr;
  return value;
}

StatusOr<const json::object*> ExpectObject(const json::value& value, std::string_view path) {
  const json::object* object = value.if_object();
  if (object == nullptr) return InvalidArgumentError(std::string(path) + ": expected an object");
  return object;
}

StatusOr<const json::value*> FindRequired(const json::object& object, std::string_view key) {
  const json::value* value = FindNonNull(object, key);
  if (value == nullptr) return InvalidArgumentError(std::string(key) + ": required");
  return value;
}

std::optional<int64_t> AsInt64(const json::value& value) {
  if (const int64_t* i = value.if_int64()) return *i;
  if (const uint64_t* u = value.if_uint64()) {
    if (*u <= static_cast<uint64_t>(std::numeric_limits<int64_t>::max())) {
      return static_cast<int64_t>(*u);
    }
  }
  return std::nullopt;
}

std::optional<double> AsDouble(const json::value& value) {
  if (const double* d = value.if_double()) return *d;
  if (const int64_t* i = value.if_int64()) return static_cast<double>(*i);
  if (const uint64_t* u = value.if_uint64()) return static_cast<double>(*u);
  return std::nullopt;
}

namespace {

// The one typed member reader behind the Read* functions: an absent or null member leaves
// `*out` unchanged; a member that `convert` refuses (nullopt) is "<path>: expected <kind>";
// otherwise `*out` takes the converted value. `Out` is T or std::optional<T>.
template <typename Out, typename Convert>
Status ReadMember(const json::object& object, std::string_view key, std::string_view path,
                  std::string_view kind, Convert convert, Out* out) {
  const json::value* value = FindNonNull(object, key);
  if (value == nullptr) return Status::Ok();
  auto converted = convert(*value);
  if (!converted.has_value()) return TypeError(path, kind);
  *out = *std::move(converted);
  return Status::Ok();
}

std::optional<std::string> AsString(const json::value& value) {
  const json::string* s = value.if_string();
  if (s == nullptr) return std::nullopt;
  return std::string(s->data(), s->size());
}

std::optional<bool> AsBool(const json::value& value) {
  if (const bool* b = value.if_bool()) return *b;
  return std::nullopt;
}

std::optional<int64_t> AsNonNegativeInt64(const json::value& value) {
  const std::optional<int64_t> i = AsInt64(value);
  if (!i || *i < 0) return std::nullopt;
  return i;
}

}  // namespace

Status ReadString(const json::object& object, std::string_view key, std::string_view path,
                  std::string* out) {
  return ReadMember(object, key, path, "a string", AsString, out);
}

Status ReadOptionalString(const json::object& object, std::string_view key, std::string_view path,
                          std::optional<std::string>* out) {
  return ReadMember(object, key, path, "a string", AsString, out);
}

Status ReadBool(const json::object& object, std::string_view key, std::string_view path,
                bool* out) {
  return ReadMember(object, key, path, "a boolean", AsBool, out);
}

Status ReadOptionalBool(const json::object& object, std::string_view key, std::string_view path,
                        std::optional<bool>* out) {
  return ReadMember(object, key, path, "a boolean", AsBool, out);
}

Status ReadInt64(const json::object& object, std::string_view key, std::string_view path,
                 int64_t* out) {
  return ReadMember(object, key, path, "an integer", AsInt64, out);
}

Status ReadNonNegativeInt64(const json::object& object, std::string_view key, std::string_view path,
                            int64_t* out) {
  return ReadMember(object, key, path, "a non-negative integer", AsNonNegativeInt64, out);
}

Status ReadOptionalInt64(const json::object& object, std::string_view key, std::string_view path,
                         std::optional<int64_t>* out) {
  return ReadMember(object, key, path, "an integer", AsInt64, out);
}

Status ReadDouble(const json::object& object, std::string_view key, std::string_view path,
                  double* out) {
  return ReadMember(object, key, path, "a number", AsDouble, out);
}

Status ReadOptionalDouble(const json::object& object, std::string_view key, std::string_view path,
                          std::optional<double>* out) {
  return ReadMember(object, key, path, "a number", AsDouble, out);
}

void AppendJsonString(std::string& out, std::string_view value) {
  static constexpr char kHex[] = "0123456789abcdef";
  out += '"';
  for (const char c : value) {
    const auto byte = static_cast<unsigned char>(c);
    switch (c) {
      case '"':
        out += "\\\"";
        break;
      case '\\':
        out += "\\\\";
        break;
      case '\n':
        out += "\\n";
        break;
      case '\r':
        out += "\\r";
        break;
      case '\t':
        out += "\\t";
        break;
      case '\b':
        out += "\\b";
        break;
      case '\f':
        out += "\\f";
        break;
      default:
        if (byte < 0x20) {
          out += "\\u00";
          out += kHex[byte >> 4];
          out += kHex[byte & 0xF];
        } else {
          out += c;
        }
    }
  }
  out += '"';
}

void AppendShortestDouble(std::string& out, double value) {
  // The shortest digits come from to_chars in scientific form ("-1.2345e+20"); they are then
  // laid out as Python's repr does: fixed notation for 1e-4 <= |x| < 1e16, else d.ddde+XX.
  char buffer[64];
  const std::to_chars_result result =
      std::to_chars(buffer, buffer + sizeof(buffer), value, std::chars_format::scientific);
  const std::string_view text(buffer, static_cast<size_t>(result.ptr - buffer));
  size_t pos = 0;
  const bool negative = !text.empty() && text[0] == '-';
  if (negative) pos = 1;
  std::string digits;
  while (pos < text.size() && text[pos] != 'e') {
    if (text[pos] != '.') digits += text[pos];
    ++pos;
  }
  int exponent = 0;
  if (pos + 1 < text.size()) {
    const char* first = text.data() + pos + 1;
    if (*first == '+') ++first;
    std::from_chars(first, text.data() + text.size(), exponent);
  }
  while (digits.size() > 1 && digits.back() == '0') digits.pop_back();
  if (negative) out += '-';
  if (exponent >= -4 && exponent < 16) {
    if (exponent >= 0) {
      const auto int_digits = static_cast<size_t>(exponent) + 1;
      if (digits.size() <= int_digits) {
        out += digits;
        out.append(int_digits - digits.size(), '0');
        out += ".0";
      } else {
        out.append(digits, 0, int_digits);
        out += '.';
        out.append(digits, int_digits, std::string::npos);
      }
    } else {
      out += "0.";
      out.append(static_cast<size_t>(-exponent - 1), '0');
      out += digits;
    }
    return;
  }
  out += digits[0];
  if (digits.size() > 1) {
    out += '.';
    out.append(digits, 1, std::string::npos);
  }
  out += 'e';
  out += exponent < 0 ? '-' : '+';
  const int magnitude = std::abs(exponent);
  if (magnitude < 10) out += '0';
  out += std::to_string(magnitude);
}

void AppendJsonDouble(std::string& out, double value) {
  if (!std::isfinite(value)) {
    out += "null";
    return;
  }
  AppendShortestDouble(out, value);
}

void JsonWriter::BeforeValue() {
  if (need_comma_) out_ += ',';
  need_comma_ = true;
}

JsonWriter& JsonWriter::BeginObject() {
  BeforeValue();
  out_ += '{';
  need_comma_ = false;
  return *this;
}

JsonWriter& JsonWriter::EndObject() {
  out_ += '}';
  need_comma_ = true;
  return *this;
}

JsonWriter& JsonWriter::BeginArray() {
  BeforeValue();
  out_ += '[';
  need_comma_ = false;
  return *this;
}

JsonWriter& JsonWriter::EndArray() {
  out_ += ']';
  need_comma_ = true;
  return *this;
}

JsonWriter& JsonWriter::Key(std::string_view key) {
  if (need_comma_) out_ += ',';
  AppendJsonString(out_, key);
  out_ += ':';
  need_comma_ = false;
  return *this;
}

JsonWriter& JsonWriter::String(std::string_view value) {
  BeforeValue();
  AppendJsonString(out_, value);
  return *this;
}

JsonWriter& JsonWriter::Int(int64_t value) {
  BeforeValue();
  out_ += std::to_string(value);
  return *this;
}

JsonWriter& JsonWriter::Double(double value) {
  BeforeValue();
  AppendJsonDouble(out_, value);
  return *this;
}

JsonWriter& JsonWriter::Bool(bool value) {
  BeforeValue();
  out_ += value ? "true" : "false";
  return *this;
}

JsonWriter& JsonWriter::Null() {
  BeforeValue();
  out_ += "null";
  return *this;
}

JsonWriter& JsonWriter::Raw(std::string_view json_text) {
  BeforeValue();
  out_ += json_text;
  return *this;
}

JsonWriter& JsonWriter::Value(const json::value& value) {
  switch (value.kind()) {
    case json::kind::null:
      return Null();
    case json::kind::bool_:
      return Bool(value.get_bool());
    case json::kind::int64:
      return Int(value.get_int64());
    case json::kind::uint64:
      BeforeValue();
      out_ += std::to_string(value.get_uint64());
      return *this;
    case json::kind::double_:
      return Double(value.get_double());
    case json::kind::string: {
      const json::string& s = value.get_string();
      return String(std::string_view(s.data(), s.size()));
    }
    case json::kind::array:
      BeginArray();
      for (const json::value& element : value.get_array()) Value(element);
      return EndArray();
    case json::kind::object:
      BeginObject();
      for (const json::key_value_pair& member : value.get_object()) {
        Key(std::string_view(member.key().data(), member.key().size()));
        Value(member.value());
      }
      return EndObject();
  }
  return *this;
}

}  // namespace agentkv::protocol
