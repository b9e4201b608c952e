// Invariants: every returned request has non-negative lengths and timestamp, turn >= 1, a
// chat_id unique in the file and a parent that is -1 or an earlier request; requests keep file
// order; a line yields exactly one request or the whole parse fails with the first error.
// No exception escapes: Boost.JSON is used only through its error_code and if_* interfaces.
#include "agentkv/sim/bailian_trace.h"

#include <boost/json/parse.hpp>
#include <boost/json/value.hpp>
#include <cmath>
#include <fstream>
#include <sstream>
#include <string>
#include <system_error>
#include <unordered_map>
#include <utility>

#include "agentkv/base/check.h"
#include "agentkv/sim/trace_input.h"

namespace agentkv::sim {
namespace {

constexpr double kMaxSeconds = 1e8;
constexpr std::string_view kCountExpectation = "expected a non-negative integer";
constexpr std::string_view kHashIdsExpectation = "expected an array of non-negative integers";

Status FieldError(std::string_view field, std::string_view what) {
  return InvalidArgumentError("field \"" + std::string(field) + "\": " + std::string(what));
}

Status Missing(std::string_view field, std::string_view expectation) {
  return FieldError(field, "missing (" + std::string(expectation) + ")");
}

// An integer field in [min, 2^63); the expectation text is the caller's.
StatusOr<int64_t> ReadInteger(const boost::json::object& obj, std::string_view field, int64_t min,
                              std::string_view expectation) {
  const boost::json::value* v = obj.if_contains(field);
  if (v == nullptr) return Missing(field, expectation);
  if (const int64_t* i = v->if_int64(); i != nullptr && *i >= min) return *i;
  return FieldError(field, std::string(expectation) + ", got " + Quote(*v));
}

StatusOr<TimeNs> ReadTimestamp(const boost::json::object& obj) {
  constexpr std::string_view kField = "timestamp";
  constexpr std::string_view kExpectation = "expected a number of seconds in [0, 1e8]";
  const boost::json::value* v = obj.if_contains(kField);
  if (v == nullptr) return Missing(kField, kExpectation);
  double seconds = -1;
  if (const double* d = v->if_double()) {
    seconds = *d;
  } else if (const int64_t* i = v->if_int64()) {
    seconds = static_cast<double>(*i);
  } else if (const uint64_t* u = v->if_uint64()) {
    seconds = static_cast<double>(*u);
  }
  // Written so that NaN fails too.
  if (!(seconds >= 0.0 && seconds <= kMaxSeconds)) {
    return FieldError(kField, std::string(kExpectation) + ", got " + Quote(*v));
  }
  return TimeNs(std::llround(seconds * 1e9));
}

StatusOr<std::string> ReadType(const boost::json::object& obj) {
  constexpr std::string_view kField = "type";
  const boost::json::value* v = obj.if_contains(kField);
  if (v == nullptr) return Missing(kField, "expected a string");
  const boost::json::string* s = v->if_string();
  if (s == nullptr) return FieldError(kField, "expected a string, got " + Quote(*v));
  return std::string(s->data(), s->size());
}

StatusOr<std::vector<uint64_t>> ReadHashIds(const boost::json::object& obj) {
  constexpr std::string_view kField = "hash_ids";
  const boost::json::value* v = obj.if_contains(kField);
  if (v == nullptr) return Missing(kField, kHashIdsExpectation);
  const boost::json::array* array = v->if_array();
  if (array == nullptr) {
    return FieldError(kField, std::string(kHashIdsExpectation) + ", got " + Quote(*v));
  }
  std::vector<uint64_t> ids;
  ids.reserve(array->size());
  for (size_t i = 0; i < array->size(); ++i) {
    const boost::json::value& e = (*array)[i];
    if (const int64_t* x = e.if_int64(); x != nullptr && *x >= 0) {
      ids.push_back(static_cast<uint64_t>(*x));
    } else if (const uint64_t* u = e.if_uint64()) {
      ids.push_back(*u);
    } else {
      return FieldError(kField, std::string(kHashIdsExpectation) + ", element " +
                                    std::to_string(i) + " is " + Quote(e));
    }
  }
  return ids;
}

// Parses one non-blank line; errors carry no location.
StatusOr<BailianRequest> ParseLine(std::string_view line) {
  std::error_code ec;
  const boost::json::value root =
      boost::json::parse(boost::json::string_view(line.data(), line.size()), ec);
  if (ec) return InvalidArgumentError("malformed JSON: " + ec.message());
  const boost::json::object* obj = root.if_object();
  if (obj == nullptr) return InvalidArgumentError("expected a JSON object, got " + Quote(root));

  BailianRequest r;
  AGENTKV_ASSIGN_OR_RETURN(r.chat_id, ReadInteger(*obj, "chat_id", 0, kCountExpectation));
  AGENTKV_ASSIGN_OR_RETURN(r.parent_chat_id, ReadInteger(*obj, "parent_chat_id", -1,
                                                         "expected -1 or a non-negative integer"));
  AGENTKV_ASSIGN_OR_RETURN(r.timestamp, ReadTimestamp(*obj));
  AGENTKV_ASSIGN_OR_RETURN(r.input_length, ReadInteger(*obj, "input_length", 0, kCountExpectation));
  AGENTKV_ASSIGN_OR_RETURN(r.output_length,
                           ReadInteger(*obj, "output_length", 0, kCountExpectation));
  AGENTKV_ASSIGN_OR_RETURN(r.type, ReadType(*obj));
  AGENTKV_ASSIGN_OR_RETURN(r.turn, ReadInteger(*obj, "turn", 1, "expected an integer >= 1"));
  AGENTKV_ASSIGN_OR_RETURN(r.hash_ids, ReadHashIds(*obj));
  return r;
}

}  // namespace

StatusOr<std::vector<BailianRequest>> ParseBailianTrace(std::istream& in, std::string_view source) {
  std::vector<BailianRequest> requests;
  // chat_id -> 1-based line where it was defined.
  std::unordered_map<int64_t, int64_t> line_of_chat;
  AGENTKV_RETURN_IF_ERROR(
      ForEachJsonLine(in, source, [&](std::string_view line, int64_t line_number) -> Status {
        StatusOr<BailianRequest> request = ParseLine(line);
        if (!request.ok()) return request.status();
        const int64_t chat_id = request->chat_id;
        const int64_t parent = request->parent_chat_id;
        if (auto it = line_of_chat.find(chat_id); it != line_of_chat.end()) {
          return FieldError("chat_id", "duplicate id " + std::to_string(chat_id) +
                                           ", first on line " + std::to_string(it->second));
        }
        if (parent != -1 && !line_of_chat.contains(parent)) {
          return FieldError("parent_chat_id",
                            "no earlier request has chat_id " + std::to_string(parent));
        }
        line_of_chat.emplace(chat_id, line_number);
        requests.push_back(std::move(request).value());
        return Status::Ok();
      }));
  return requests;
}

StatusOr<std::vector<BailianRequest>> ParseBailianTraceText(std::string_view text,
                                                            std::string_view source) {
  std::istringstream in{std::string(text)};
  return ParseBailianTrace(in, source);
}

StatusOr<std::vector<BailianRequest>> ReadBailianTrace(const std::string& path) {
  AGENTKV_ASSIGN_OR_RETURN(std::ifstream in, OpenTraceFile(path));
  return ParseBailianTrace(in, path);
}

AgenticWorkload GroupBailianConversations(const std::vector<BailianRequest>& requests) {
  AgenticWorkload workload;
  // chat_id -> index of its conversation in `workload`.
  std::unordered_map<int64_t, size_t> conversation_of_chat;
  for (const BailianRequest& r : requests) {
    size_t index = 0;
    if (r.parent_chat_id == -1) {
      index = workload.conversations.size();
      WekaConversation conversation;
      conversation.source = "bailian";
      conversation.id = std::to_string(r.chat_id);
      conversation.block_size = kBailianBlockSize;
      workload.conversations.push_back(std::move(conversation));
      workload.starts.push_back(r.timestamp);
    } else {
      auto it = conversation_of_chat.find(r.parent_chat_id);
      AGENTKV_CHECK(it != conversation_of_chat.end()) << "parent after child: " << r.chat_id;
      index = it->second;
    }
    conversation_of_chat[r.chat_id] = index;
    WekaConversation& conversation = workload.conversations[index];
    const TimeNs start = workload.starts[index];
    WekaRequest request;
    // Timestamps in a file need not be monotone along a chain; clamp so times stay >= 0.
    request.t = r.timestamp > start ? r.timestamp - start : TimeNs();
    const TimeNs previous =
        conversation.requests.empty() ? TimeNs() : conversation.requests.back().t;
    request.think_time = request.t > previous ? request.t - previous : TimeNs();
    request.input_tokens = r.input_length;
    request.output_tokens = r.output_length;
    request.hash_ids = r.hash_ids;
    conversation.requests.push_back(std::move(request));
  }
  return workload;
}

}  // namespace agentkv::sim
