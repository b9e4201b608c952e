#include "agentkv/net/access_log.h"

#include <cmath>
#include <cstdint>

namespace agentkv::net {
namespace {

void AppendJsonString(std::string& out, std::string_view text) {
  static constexpr char kHex[] = "0123456789abcdef";
  out.push_back('"');
  for (const char c : text) {
    const auto byte = static_cast<unsigned char>(c);
    if (c == '"' || c == '\\') {
      out.push_back('\\');
      out.push_back(c);
    } else if (byte < 0x20 || byte >= 0x7f) {
      out += "\\u00";
      out.push_back(kHex[byte >> 4]);
      out.push_back(kHex[byte & 0xf]);
    } else {
      out.push_back(c);
    }
  }
  out.push_back('"');
}

}  // namespace

std::string AccessLogJson(const AccessLogEntry& entry) {
  std::string out;
  out.reserve(160 + entry.target.size());
  out += R"({"event":"access","method":)";
  AppendJsonString(out, entry.method);
  out += R"(,"target":)";
  AppendJsonString(out, entry.target);
  out += R"(,"status":)";
  out += std::to_string(entry.status);
  out += R"(,"response_bytes":)";
  out += std::to_string(entry.response_bytes);
  if (entry.stream_bytes.has_value()) {
    out += R"(,"stream_bytes":)";
    out += std::to_string(*entry.stream_bytes);
  }
  // Whole microseconds, written by hand: no locale can turn the point into a comma. A duration
  // that is negative or not finite would be a bug upstream; it is written as 0 so that the
  // line stays valid.
  const double ms = entry.duration_ms >= 0 && entry.duration_ms < 1e12 ? entry.duration_ms : 0.0;
  const auto micros = static_cast<int64_t>(std::llround(ms * 1000.0));
  const auto fraction = static_cast<int>(micros % 1000);
  out += R"(,"duration_ms":)";
  out += std::to_string(micros / 1000);
  out.push_back('.');
  out.push_back(static_cast<char>('0' + fraction / 100));
  out.push_back(static_cast<char>('0' + fraction / 10 % 10));
  out.push_back(static_cast<char>('0' + fraction % 10));
  out += R"(,"remote":)";
  AppendJsonString(out, entry.remote);
  out += R"(,"completed":)";
  out += entry.completed ? "true" : "false";
  out.push_back('}');
  return out;
}

}  // namespace agentkv::net
