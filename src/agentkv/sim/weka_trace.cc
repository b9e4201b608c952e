// Invariants: every returned request has token counts in [0, kMaxTokens], times in
// [0, kMaxTimeNs], at most ceil(in / block_size) hash ids, and each agent's think times add up
// to at most kMaxTimeNs; requests and sub-agents keep file order; a file yields one
// conversation or the whole parse fails with the first error, which names the source, the
// line and the JSON path.
// No exception escapes: Boost.JSON is used only through its error_code and if_* interfaces,
// and the file system only through its error_code overloads.
#include "agentkv/sim/weka_trace.h"

#include <algorithm>
#include <boost/json/value.hpp>
#include <filesystem>
#include <fstream>
#include <optional>
#include <sstream>
#include <system_error>
#include <utility>

#include "agentkv/base/bounds.h"
#include "agentkv/sim/trace_input.h"

namespace agentkv::sim {
namespace {

constexpr std::string_view kCountExpectation = "expected a non-negative integer";
constexpr std::string_view kHashIdsExpectation = "expected an array of non-negative integers";
constexpr std::string_view kSecondsExpectation = "expected a number of seconds";
// Tighter than the token rule: a block is a unit of KV allocation, and no engine uses blocks
// of more than a few thousand tokens (WEKA uses 64).
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

// Every error of the walk below is InvalidArgument "<json path>: <what>" (ParseWekaTrace
// prefixes the source and the line it finds for the path); the path is "" for the top level
// and never holds ": ".
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

StatusOr<int64_t> ReadTokenField(const boost::json::object& obj, std::string_view path,
                                 std::string_view field) {
  const std::string where = Join(path, field);
  const boost::json::value* v = obj.if_contains(field);
  if (v == nullptr) return Missing(where, kCountExpectation);
  return ReadTokens(*v, where);
}

// A JSON number of seconds in [0, 365 days], rounded to the nanosecond. An absent field is an
// error when `required`, else zero.
StatusOr<TimeNs> ReadSecondsField(const boost::json::object& obj, std::string_view path,
                                  std::string_view field, bool required) {
  const std::string where = Join(path, field);
  const boost::json::value* v = obj.if_contains(field);
  if (v == nullptr) {
    if (required) return Missing(where, kSecondsExpectation);
    return TimeNs();
  }
  return ReadSeconds(*v, where);
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

StatusOr<std::vector<uint64_t>> ReadHashIdsField(const boost::json::object& obj,
                                                 std::string_view path) {
  const std::string where = Join(path, "hash_ids");
  const boost::json::value* v = obj.if_contains("hash_ids");
  if (v == nullptr) return Missing(where, kHashIdsExpectation);
  return ReadHashIds(*v, where);
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

StatusOr<WekaRequest> ReadRequest(const boost::json::object& obj, std::string_view path,
                                  int32_t block_size) {
  WekaRequest request;
  AGENTKV_ASSIGN_OR_RETURN(request.t, ReadSecondsField(obj, path, "t", /*required=*/true));
  AGENTKV_ASSIGN_OR_RETURN(request.input_tokens, ReadTokenField(obj, path, "in"));
  AGENTKV_ASSIGN_OR_RETURN(request.output_tokens, ReadTokenField(obj, path, "out"));
  AGENTKV_ASSIGN_OR_RETURN(request.hash_ids, ReadHashIdsField(obj, path));
  AGENTKV_RETURN_IF_ERROR(CheckHashIdCount(Join(path, "hash_ids"), request.hash_ids.size(), "in",
                                           request.input_tokens, block_size));
  AGENTKV_ASSIGN_OR_RETURN(request.stop, ReadString(obj, path, "stop", /*required=*/false));
  AGENTKV_ASSIGN_OR_RETURN(request.think_time,
                           ReadSecondsField(obj, path, "think_time", /*required=*/false));
  return request;
}

// Adds the think time of the request at `path` to `total`, the think times of one agent so
// far. An agent's timeline in the replay is at most its think times plus its last `t`, so the
// sum is held to the rule of one duration: [0, 365 days].
Status AddThinkTime(const WekaRequest& request, std::string_view path, TimeNs& total) {
  const std::optional<int64_t> sum = CheckedAdd(total.ns(), request.think_time.ns());
  if (!sum.has_value() || *sum > kMaxTimeNs) {
    return PathError(Join(path, "think_time"),
                     "the think times of this agent add up to more than " +
                         std::to_string(kMaxTimeNs / 1'000'000'000) + " s (365 days) here");
  }
  total = TimeNs(*sum);
  return Status::Ok();
}

StatusOr<const boost::json::object*> EntryObject(const boost::json::array& array, size_t i,
                                                 std::string_view path) {
  const boost::json::object* obj = array[i].if_object();
  if (obj == nullptr) return Mistyped(path, "expected a JSON object", array[i]);
  return obj;
}

StatusOr<WekaSubagent> ReadSubagent(const boost::json::object& obj, std::string_view path,
                                    int32_t block_size) {
  WekaSubagent subagent;
  AGENTKV_ASSIGN_OR_RETURN(subagent.agent_id, ReadString(obj, path, "agent_id", /*required=*/true));
  AGENTKV_ASSIGN_OR_RETURN(subagent.spawn, ReadSecondsField(obj, path, "t", /*required=*/true));
  AGENTKV_ASSIGN_OR_RETURN(const boost::json::array* requests, ReadRequestsArray(obj, path));
  const std::string requests_path = Join(path, "requests");
  subagent.requests.reserve(requests->size());
  TimeNs think_times;
  for (size_t i = 0; i < requests->size(); ++i) {
    const std::string entry_path = Index(requests_path, i);
    AGENTKV_ASSIGN_OR_RETURN(const boost::json::object* entry,
                             EntryObject(*requests, i, entry_path));
    AGENTKV_ASSIGN_OR_RETURN(const std::string type, ReadType(*entry, entry_path));
    if (type == kSubagentType) {
      return PathError(Join(entry_path, "type"), "nested sub-agents are not supported");
    }
    AGENTKV_ASSIGN_OR_RETURN(WekaRequest request, ReadRequest(*entry, entry_path, block_size));
    AGENTKV_RETURN_IF_ERROR(AddThinkTime(request, entry_path, think_times));
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
  TimeNs think_times;
  for (size_t i = 0; i < requests->size(); ++i) {
    const std::string entry_path = Index("requests", i);
    AGENTKV_ASSIGN_OR_RETURN(const boost::json::object* entry,
                             EntryObject(*requests, i, entry_path));
    AGENTKV_ASSIGN_OR_RETURN(const std::string type, ReadType(*entry, entry_path));
    if (type == kSubagentType) {
      AGENTKV_ASSIGN_OR_RETURN(WekaSubagent subagent,
                               ReadSubagent(*entry, entry_path, conversation.block_size));
      conversation.subagents.push_back(std::move(subagent));
    } else {
      AGENTKV_ASSIGN_OR_RETURN(WekaRequest request,
                               ReadRequest(*entry, entry_path, conversation.block_size));
      AGENTKV_RETURN_IF_ERROR(AddThinkTime(request, entry_path, think_times));
      conversation.requests.push_back(std::move(request));
    }
  }
  return conversation;
}

// `status`, an error about the value at JSON `path`, located in `in`: "<source>:<line>:
// <message>". The line is found by reading `in` again from `start`; without it (a stream that
// cannot seek) the error names the source only.
Status Locate(const Status& status, std::string_view path, std::istream& in, std::streampos start,
              std::string_view source) {
  std::optional<int64_t> line;
  if (start != std::streampos(-1)) {
    in.clear();
    in.seekg(start);
    if (in) line = FindJsonPathLine(in, path);
  }
  const std::string where =
      line.has_value() ? std::string(source) + ":" + std::to_string(*line) : std::string(source);
  return Status(status.code(), where + ": " + status.message());
}

}  // namespace

int64_t WekaConversation::TotalRequests() const {
  auto total = static_cast<int64_t>(requests.size());
  for (const WekaSubagent& s : subagents) total += static_cast<int64_t>(s.requests.size());
  return total;
}

StatusOr<WekaConversation> ParseWekaTrace(std::istream& in, std::string_view source) {
  const std::streampos start = in.tellg();
  AGENTKV_ASSIGN_OR_RETURN(const boost::json::value root, ReadJsonDocument(in, source));
  const boost::json::object* obj = root.if_object();
  if (obj == nullptr) {
    return Locate(
        InvalidArgumentError("expected a JSON object at the top level, got " + Quote(root)), "", in,
        start, source);
  }
  StatusOr<WekaConversation> conversation = ReadConversation(*obj);
  if (!conversation.ok()) {
    // The walk's errors start with the path of the value at fault.
    const std::string& message = conversation.status().message();
    return Locate(conversation.status(), std::string_view(message).substr(0, message.find(": ")),
                  in, start, source);
  }
  conversation->source = std::string(source);
  return conversation;
}

StatusOr<WekaConversation> ParseWekaTrace(std::string_view text, std::string_view source) {
  std::istringstream in{std::string(text)};
  return ParseWekaTrace(in, source);
}

StatusOr<WekaConversation> ReadWekaTrace(const std::string& path) {
  AGENTKV_ASSIGN_OR_RETURN(std::ifstream in, OpenTraceFile(path));
  return ParseWekaTrace(in, path);
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
