// Invariants: every returned request has non-negative token counts and times within the
// documented ranges; requests and sub-agents keep file order; a file yields one conversation
// or the whole parse fails with the first error, which names the source and the JSON path.
// No exception escapes: Boost.JSON is used only through its error_code and if_* interfaces,
// and the file system only through its error_code overloads.
#include "agentkv/sim/weka_trace.h"

#include <algorithm>
#include <boost/json/stream_parser.hpp>
#include <boost/json/value.hpp>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <system_error>
#include <utility>

#include "agentkv/sim/trace_input.h"

namespace agentkv::sim {
namespace {

constexpr std::string_view kCountExpectation = "expected a non-negative integer";
constexpr std::string_view kHashIdsExpectation = "expected an array of non-negative integers";
constexpr std::string_view kSecondsExpectation = "expected a number of seconds in [0, 1e8]";
// No WEKA time is near this (the longest conversations last hours); it keeps every sum of
// times the replay forms far from int64 nanoseconds' limit.
constexpr double kMaxSeconds = 1e8;
constexpr int64_t kMaxBlockSize = int64_t{1} << 20;
constexpr std::string_view kSubagentType = "subagent";

// The JSON path of `field` inside the object at `path` ("" is the top level).
std::string Join(std::string_view path, std::string_view field) {
  std::string joined(path);
  if (!joined.empty()) joined += '.';
  joined += field;
  return joined;
}

std::string Index(std::string_view path, size_t i) {
  return std::string(path) + "[" + std::to_string(i) + "]";
}

// Errors below carry the JSON path only; ParseWekaTrace prefixes the source once.
Status PathError(std::string_view path, std::string_view what) {
  return InvalidArgumentError(std::string(path) + ": " + std::string(what));
}

Status Missing(std::string_view path, std::string_view expectation) {
  return PathError(path, "missing (" + std::string(expectation) + ")");
}

Status Mistyped(std::string_view path, std::string_view expectation,
                const boost::json::value& got) {
  return PathError(path, std::string(expectation) + ", got " + Quote(got));
}

StatusOr<int64_t> ReadCount(const boost::json::object& obj, std::string_view path,
                            std::string_view field) {
  const std::string where = Join(path, field);
  const boost::json::value* v = obj.if_contains(field);
  if (v == nullptr) return Missing(where, kCountExpectation);
  if (const int64_t* i = v->if_int64(); i != nullptr && *i >= 0) return *i;
  // Boost.JSON stores integers of 2^63 and above as uint64; no token count is that large.
  return Mistyped(where, std::string(kCountExpectation) + (v->is_uint64() ? " below 2^63" : ""),
                  *v);
}

// A JSON number of seconds in [0, kMaxSeconds], rounded to the nanosecond. An absent field is
// an error when `required`, else zero.
StatusOr<TimeNs> ReadSeconds(const boost::json::object& obj, std::string_view path,
                             std::string_view field, bool required) {
  const std::string where = Join(path, field);
  const boost::json::value* v = obj.if_contains(field);
  if (v == nullptr) {
    if (required) return Missing(where, kSecondsExpectation);
    return TimeNs();
  }
  double seconds = -1;
  if (const double* d = v->if_double()) {
    seconds = *d;
  } else if (const int64_t* i = v->if_int64()) {
    seconds = static_cast<double>(*i);
  } else if (const uint64_t* u = v->if_uint64()) {
    seconds = static_cast<double>(*u);
  } else {
    return Mistyped(where, kSecondsExpectation, *v);
  }
  // Written so that NaN fails too (Boost.JSON does not produce it, but stay safe).
  if (!(seconds >= 0.0 && seconds <= kMaxSeconds)) {
    return Mistyped(where, kSecondsExpectation, *v);
  }
  return TimeNs(std::llround(seconds * 1e9));
}

StatusOr<std::string> ReadString(const boost::json::object& obj, std::string_view path,
                                 std::string_view field, bool required) {
  const std::string where = Join(path, field);
  const boost::json::value* v = obj.if_contains(field);
  if (v == nullptr) {
    if (required) return Missing(where, "expected a string");
    return std::string();
  }
  const boost::json::string* s = v->if_string();
  if (s == nullptr) return Mistyped(where, "expected a string", *v);
  return std::string(s->data(), s->size());
}

StatusOr<std::vector<uint64_t>> ReadHashIds(const boost::json::object& obj, std::string_view path) {
  const std::string where = Join(path, "hash_ids");
  const boost::json::value* v = obj.if_contains("hash_ids");
  if (v == nullptr) return Missing(where, kHashIdsExpectation);
  const boost::json::array* array = v->if_array();
  if (array == nullptr) return Mistyped(where, kHashIdsExpectation, *v);
  std::vector<uint64_t> ids;
  ids.reserve(array->size());
  for (size_t i = 0; i < array->size(); ++i) {
    const boost::json::value& e = (*array)[i];
    if (const int64_t* s = e.if_int64(); s != nullptr && *s >= 0) {
      ids.push_back(static_cast<uint64_t>(*s));
    } else if (const uint64_t* u = e.if_uint64()) {
      ids.push_back(*u);
    } else {
      return PathError(where, std::string(kHashIdsExpectation) + ", element " + std::to_string(i) +
                                  " is " + Quote(e));
    }
  }
  return ids;
}

StatusOr<const boost::json::array*> ReadRequestsArray(const boost::json::object& obj,
                                                      std::string_view path) {
  const std::string where = Join(path, "requests");
  const boost::json::value* v = obj.if_contains("requests");
  if (v == nullptr) return Missing(where, "expected an array");
  const boost::json::array* array = v->if_array();
  if (array == nullptr) return Mistyped(where, "expected an array", *v);
  return array;
}

// The entry's `type`, "" when absent.
StatusOr<std::string> ReadType(const boost::json::object& obj, std::string_view path) {
  return ReadString(obj, path, "type", /*required=*/false);
}

StatusOr<WekaRequest> ReadRequest(const boost::json::object& obj, std::string_view path) {
  WekaRequest request;
  AGENTKV_ASSIGN_OR_RETURN(request.t, ReadSeconds(obj, path, "t", /*required=*/true));
  AGENTKV_ASSIGN_OR_RETURN(request.input_tokens, ReadCount(obj, path, "in"));
  AGENTKV_ASSIGN_OR_RETURN(request.output_tokens, ReadCount(obj, path, "out"));
  AGENTKV_ASSIGN_OR_RETURN(request.hash_ids, ReadHashIds(obj, path));
  AGENTKV_ASSIGN_OR_RETURN(request.stop, ReadString(obj, path, "stop", /*required=*/false));
  AGENTKV_ASSIGN_OR_RETURN(request.think_time,
                           ReadSeconds(obj, path, "think_time", /*required=*/false));
  return request;
}

StatusOr<const boost::json::object*> EntryObject(const boost::json::array& array, size_t i,
                                                 std::string_view path) {
  const boost::json::object* obj = array[i].if_object();
  if (obj == nullptr) return Mistyped(path, "expected a JSON object", array[i]);
  return obj;
}

StatusOr<WekaSubagent> ReadSubagent(const boost::json::object& obj, std::string_view path) {
  WekaSubagent subagent;
  AGENTKV_ASSIGN_OR_RETURN(subagent.agent_id, ReadString(obj, path, "agent_id", /*required=*/true));
  AGENTKV_ASSIGN_OR_RETURN(subagent.spawn, ReadSeconds(obj, path, "t", /*required=*/true));
  AGENTKV_ASSIGN_OR_RETURN(const boost::json::array* requests, ReadRequestsArray(obj, path));
  const std::string requests_path = Join(path, "requests");
  subagent.requests.reserve(requests->size());
  for (size_t i = 0; i < requests->size(); ++i) {
    const std::string entry_path = Index(requests_path, i);
    AGENTKV_ASSIGN_OR_RETURN(const boost::json::object* entry,
                             EntryObject(*requests, i, entry_path));
    AGENTKV_ASSIGN_OR_RETURN(const std::string type, ReadType(*entry, entry_path));
    if (type == kSubagentType) {
      return PathError(Join(entry_path, "type"), "nested sub-agents are not supported");
    }
    AGENTKV_ASSIGN_OR_RETURN(WekaRequest request, ReadRequest(*entry, entry_path));
    subagent.requests.push_back(std::move(request));
  }
  return subagent;
}

StatusOr<WekaConversation> ReadConversation(const boost::json::object& obj) {
  WekaConversation conversation;
  AGENTKV_ASSIGN_OR_RETURN(conversation.id, ReadString(obj, "", "id", /*required=*/false));
  if (const boost::json::value* v = obj.if_contains("block_size")) {
    const int64_t* size = v->if_int64();
    if (size == nullptr || *size < 1 || *size > kMaxBlockSize) {
      return Mistyped("block_size", "expected an integer in [1, 2^20]", *v);
    }
    conversation.block_size = static_cast<int32_t>(*size);
  }
  AGENTKV_ASSIGN_OR_RETURN(const boost::json::array* requests, ReadRequestsArray(obj, ""));
  conversation.requests.reserve(requests->size());
  for (size_t i = 0; i < requests->size(); ++i) {
    const std::string entry_path = Index("requests", i);
    AGENTKV_ASSIGN_OR_RETURN(const boost::json::object* entry,
                             EntryObject(*requests, i, entry_path));
    AGENTKV_ASSIGN_OR_RETURN(const std::string type, ReadType(*entry, entry_path));
    if (type == kSubagentType) {
      AGENTKV_ASSIGN_OR_RETURN(WekaSubagent subagent, ReadSubagent(*entry, entry_path));
      conversation.subagents.push_back(std::move(subagent));
    } else {
      AGENTKV_ASSIGN_OR_RETURN(WekaRequest request, ReadRequest(*entry, entry_path));
      conversation.requests.push_back(std::move(request));
    }
  }
  return conversation;
}

// "line L, column C" (1-based) of byte `offset` of `text`.
std::string Position(std::string_view text, size_t offset) {
  offset = std::min(offset, text.size());
  const std::string_view before = text.substr(0, offset);
  const auto line = 1 + std::count(before.begin(), before.end(), '\n');
  const size_t line_start = before.rfind('\n');
  const size_t column = offset - (line_start == std::string_view::npos ? 0 : line_start + 1) + 1;
  return "line " + std::to_string(line) + ", column " + std::to_string(column);
}

}  // namespace

int64_t WekaConversation::TotalRequests() const {
  auto total = static_cast<int64_t>(requests.size());
  for (const WekaSubagent& s : subagents) total += static_cast<int64_t>(s.requests.size());
  return total;
}

StatusOr<WekaConversation> ParseWekaTrace(std::string_view text, std::string_view source) {
  const std::string prefix = std::string(source) + ": ";
  boost::json::stream_parser parser;
  std::error_code ec;
  const size_t consumed = parser.write_some(text.data(), text.size(), ec);
  if (!ec && consumed < text.size()) {
    // write_some stops after a complete value; anything but whitespace after it is an error.
    const size_t rest = text.find_first_not_of(" \t\r\n", consumed);
    if (rest != std::string_view::npos) {
      return InvalidArgumentError(prefix + "malformed JSON at " + Position(text, rest) +
                                  ": extra data after the top-level value");
    }
  }
  if (!ec) parser.finish(ec);
  if (ec) {
    return InvalidArgumentError(prefix + "malformed JSON at " + Position(text, consumed) + ": " +
                                ec.message());
  }
  const boost::json::value root = parser.release();
  const boost::json::object* obj = root.if_object();
  if (obj == nullptr) {
    return InvalidArgumentError(prefix + "expected a JSON object at the top level, got " +
                                Quote(root));
  }
  StatusOr<WekaConversation> conversation = ReadConversation(*obj);
  if (!conversation.ok()) return InvalidArgumentError(prefix + conversation.status().message());
  conversation->source = std::string(source);
  return conversation;
}

StatusOr<WekaConversation> ReadWekaTrace(const std::string& path) {
  AGENTKV_ASSIGN_OR_RETURN(std::ifstream in, OpenTraceFile(path, std::ios::binary));
  std::ostringstream text;
  text << in.rdbuf();
  if (in.bad()) return UnavailableError("error reading trace file \"" + path + "\"");
  return ParseWekaTrace(text.view(), path);
}

StatusOr<std::vector<std::string>> ExpandWekaTracePaths(const std::vector<std::string>& paths) {
  if (paths.empty()) return InvalidArgumentError("no trace paths given");
  std::vector<std::string> files;
  for (const std::string& path : paths) {
    std::error_code ec;
    if (!std::filesystem::is_directory(path, ec)) {
      files.push_back(path);
      continue;
    }
    std::vector<std::filesystem::path> found;
    std::filesystem::directory_iterator it(path, ec);
    for (; !ec && it != std::filesystem::directory_iterator(); it.increment(ec)) {
      std::error_code type_error;
      if (it->path().extension() == ".json" && it->is_regular_file(type_error)) {
        found.push_back(it->path());
      }
    }
    if (ec) {
      return UnavailableError("cannot list trace directory \"" + path + "\": " + ec.message());
    }
    if (found.empty()) {
      return InvalidArgumentError("trace directory \"" + path + "\" holds no *.json files");
    }
    std::sort(found.begin(), found.end(),
              [](const std::filesystem::path& a, const std::filesystem::path& b) {
                return a.filename() < b.filename();
              });
    for (const std::filesystem::path& p : found) files.push_back(p.string());
  }
  return files;
}

StatusOr<std::vector<WekaConversation>> ReadWekaTraces(const std::vector<std::string>& paths) {
  AGENTKV_ASSIGN_OR_RETURN(const std::vector<std::string> files, ExpandWekaTracePaths(paths));
  std::vector<WekaConversation> conversations;
  conversations.reserve(files.size());
  for (const std::string& file : files) {
    AGENTKV_ASSIGN_OR_RETURN(WekaConversation conversation, ReadWekaTrace(file));
    conversations.push_back(std::move(conversation));
  }
  return conversations;
}

}  // namespace agentkv::sim
