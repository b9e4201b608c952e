// Invariants: every returned request has a timestamp in [0, kMaxTimeNs], lengths in
// [0, kMaxTokens], turn in [1, kMaxCount], at most ceil(input_length / 16) hash ids, a chat_id
// unique in the file and a parent that is -1 or an earlier request; requests keep file order;
// a line yields exactly one request or the whole parse fails with the first error. No
// exception escapes: Boost.JSON is used only through its error_code and if_* interfaces.
#include "agentkv/sim/bailian_trace.h"

#include <boost/json/value.hpp>
#include <sstream>
#include <string>
#include <unordered_map>
#include <utility>

#include "agentkv/base/check.h"
#include "agentkv/sim/trace_input.h"

namespace agentkv::sim {
namespace {

constexpr std::string_view kIntegerExpectation = "expected a non-negative integer";

// How a field is named in messages: `field "chat_id"`.
std::string Field(std::string_view name) { return "field \"" + std::string(name) + "\""; }

Status FieldError(std::string_view name, std::string_view what) {
  return InvalidArgumentError(Field(name) + ": " + std::string(what));
}

// The value of required field `name` of `obj`; `expectation` describes it when it is missing.
StatusOr<const boost::json::value*> Required(const boost::json::object& obj, std::string_view name,
                                             std::string_view expectation) {
  const boost::json::value* v = obj.if_contains(name);
  if (v == nullptr) return FieldError(name, "missing (" + std::string(expectation) + ")");
  return v;
}

// A chat id: an integer in [min, 2^63). Ids are names, not quantities (nothing adds or
// multiplies them), so no bounds.h rule applies beyond fitting int64.
StatusOr<int64_t> ReadChatId(const boost::json::object& obj, std::string_view name, int64_t min,
                             std::string_view expectation) {
  AGENTKV_ASSIGN_OR_RETURN(const boost::json::value* v, Required(obj, name, expectation));
  if (const int64_t* i = v->if_int64(); i != nullptr && *i >= min) return *i;
  return FieldError(name, std::string(expectation) + ", got " + Quote(*v));
}

StatusOr<std::string> ReadType(const boost::json::object& obj) {
  constexpr std::string_view kName = "type";
  AGENTKV_ASSIGN_OR_RETURN(const boost::json::value* v, Required(obj, kName, "expected a string"));
  const boost::json::string* s = v->if_string();
  if (s == nullptr) return FieldError(kName, "expected a string, got " + Quote(*v));
  return std::string(s->data(), s->size());
}

// Parses one line's value; errors carry no location.
StatusOr<BailianRequest> ParseRequest(const boost::json::value& root) {
  const boost::json::object* obj = root.if_object();
  if (obj == nullptr) return InvalidArgumentError("expected a JSON object, got " + Quote(root));

  BailianRequest r;
  AGENTKV_ASSIGN_OR_RETURN(r.chat_id, ReadChatId(*obj, "chat_id", 0, kIntegerExpectation));
  AGENTKV_ASSIGN_OR_RETURN(r.parent_chat_id, ReadChatId(*obj, "parent_chat_id", -1,
                                                        "expected -1 or a non-negative integer"));
  AGENTKV_ASSIGN_OR_RETURN(const boost::json::value* timestamp,
                           Required(*obj, "timestamp", "expected a number of seconds"));
  AGENTKV_ASSIGN_OR_RETURN(r.timestamp, ReadSeconds(*timestamp, Field("timestamp")));
  AGENTKV_ASSIGN_OR_RETURN(const boost::json::value* input,
                           Required(*obj, "input_length", kIntegerExpectation));
  AGENTKV_ASSIGN_OR_RETURN(r.input_length, ReadTokens(*input, Field("input_length")));
  AGENTKV_ASSIGN_OR_RETURN(const boost::json::value* output,
                           Required(*obj, "output_length", kIntegerExpectation));
  AGENTKV_ASSIGN_OR_RETURN(r.output_length, ReadTokens(*output, Field("output_length")));
  AGENTKV_ASSIGN_OR_RETURN(r.type, ReadType(*obj));
  AGENTKV_ASSIGN_OR_RETURN(const boost::json::value* turn,
                           Required(*obj, "turn", "expected an integer >= 1"));
  AGENTKV_ASSIGN_OR_RETURN(r.turn, ReadCount(*turn, Field("turn"), /*min=*/1));
  AGENTKV_ASSIGN_OR_RETURN(
      const boost::json::value* hash_ids,
      Required(*obj, "hash_ids", "expected an array of non-negative integers"));
  AGENTKV_ASSIGN_OR_RETURN(r.hash_ids, ReadHashIds(*hash_ids, Field("hash_ids")));
  AGENTKV_RETURN_IF_ERROR(CheckHashIdCount(Field("hash_ids"), r.hash_ids.size(), "input_length",
                                           r.input_length, kBailianBlockSize));
  return r;
}

}  // namespace

StatusOr<std::vector<BailianRequest>> ParseBailianTrace(std::istream& in, std::string_view source) {
  std::vector<BailianRequest> requests;
  // chat_id -> 1-based line where it was defined.
  std::unordered_map<int64_t, int64_t> line_of_chat;
  AGENTKV_RETURN_IF_ERROR(ForEachJsonLine(
      in, source, [&](const boost::json::value& line, int64_t line_number) -> Status {
        StatusOr<BailianRequest> request = ParseRequest(line);
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
