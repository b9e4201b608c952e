#include "agentkv/report/internal/json_text.h"

#include <algorithm>
#include <array>
#include <charconv>
#include <cmath>
#include <string>
#include <system_error>

namespace agentkv::report::internal {
namespace {

bool IsScalar(const boost::json::value& v) { return !v.is_object() && !v.is_array(); }

std::string JsonDouble(double value) {
  if (!std::isfinite(value)) return "null";
  std::array<char, 64> buffer{};
  const std::to_chars_result r = std::to_chars(buffer.data(), buffer.data() + buffer.size(), value);
  std::string text(buffer.data(), r.ptr);
  // Keep doubles recognisable as doubles to a reader that distinguishes integers ("1" -> "1.0").
  if (text.find_first_of(".e") == std::string::npos) text += ".0";
  return text;
}

void WriteJson(const boost::json::value& v, size_t indent, std::string& out) {
  switch (v.kind()) {
    case boost::json::kind::null:
      out += "null";
      return;
    case boost::json::kind::bool_:
      out += v.get_bool() ? "true" : "false";
      return;
    case boost::json::kind::int64:
      out += std::to_string(v.get_int64());
      return;
    case boost::json::kind::uint64:
      out += std::to_string(v.get_uint64());
      return;
    case boost::json::kind::double_:
      out += JsonDouble(v.get_double());
      return;
    case boost::json::kind::string:
      out += boost::json::serialize(v.get_string());
      return;
    case boost::json::kind::array: {
      const boost::json::array& array = v.get_array();
      if (array.empty()) {
        out += "[]";
        return;
      }
      const bool inline_array = std::all_of(array.begin(), array.end(), IsScalar);
      out += "[";
      for (size_t i = 0; i < array.size(); ++i) {
        if (i > 0) out += inline_array ? ", " : ",";
        if (!inline_array) out += "\n" + std::string(indent + 2, ' ');
        WriteJson(array[i], indent + 2, out);
      }
      if (!inline_array) out += "\n" + std::string(indent, ' ');
      out += "]";
      return;
    }
    case boost::json::kind::object: {
      const boost::json::object& object = v.get_object();
      if (object.empty()) {
        out += "{}";
        return;
      }
      out += "{";
      bool first = true;
      for (const boost::json::key_value_pair& member : object) {
        out += first ? "\n" : ",\n";
        first = false;
        out += std::string(indent + 2, ' ') + boost::json::serialize(member.key()) + ": ";
        WriteJson(member.value(), indent + 2, out);
      }
      out += "\n" + std::string(indent, ' ') + "}";
      return;
    }
  }
}

}  // namespace

std::string JsonText(const boost::json::value& document) {
  std::string out;
  WriteJson(document, 0, out);
  out += "\n";
  return out;
}

}  // namespace agentkv::report::internal
