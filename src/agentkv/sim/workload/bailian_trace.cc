// Invariants: every returned request has a timestamp in [0, kMaxTimeNs], lengths in
// [0, kMaxTokens], turn in [1, kMaxCount], at most ceil(input_length / 16) hash ids, a chat_id
// unique in the file and a parent that is -1 or an earlier request; requests keep file order;
// a line yields exactly one request or the whole parse fails with the first error. No
// exception escapes: Boost.JSON is used only through its error_code and if_* interfaces.
#include "agentkv/sim/workload/bailian_trace.h"

#include <boost/json/value.hpp>
#include <sstream>
#include <string>
#include <unordered_map>
#include <utility>

#include "agentkv/base/check.h"
#include "agentkv/sim/workload/trace_input.h"

namespace agentkv::sim {
namespace {

// Parses one line's value; errors carry no location.
StatusOr<BailianRequest> ParseRequest(const boost::json::value& root) {
  const boost::json::object* obj = root.if_object();
  if (obj == nullptr) return InvalidArgumentError("expected a JSON object, got " + Quote(root));
  const TraceFields fields = TraceFields::OfRecord(*obj);
  BailianRequest r;
  AGENTKV_ASSIGN_OR_RETURN(r.chat_id, fields.Id("chat_id", 0, "expected a non-negative integer"));
  AGENTKV_ASSIGN_OR_RETURN(
      r.parent_chat_id, fields.Id("parent_chat_id", -1, "expected -1 or a non-negative integer"));
  AGENTKV_ASSIGN_OR_RETURN(r.timestamp, fields.Seconds("timestamp"));
  AGENTKV_ASSIGN_OR_RETURN(r.input_length, fields.Tokens("input_length"));
  AGENTKV_ASSIGN_OR_RETURN(r.output_length, fields.Tokens("output_length"));
  AGENTKV_ASSIGN_OR_RETURN(r.type, fields.String("type"));
  AGENTKV_ASSIGN_OR_RETURN(r.turn, fields.Count("turn", /*min=*/1));
  AGENTKV_ASSIGN_OR_RETURN(r.hash_ids, fields.HashIds("hash_ids"));
  AGENTKV_RETURN_IF_ERROR(CheckHashIdCount(fields.Name("hash_ids"), r.hash_ids.size(),
                                           "input_length", r.input_length, kBailianBlockSize));
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
        // ParseRequest accepted the line, so it is an object.
        const TraceFields fields = TraceFields::OfRecord(*line.if_object());
        if (auto it = line_of_chat.find(chat_id); it != line_of_chat.end()) {
          return fields.Error("chat_id", "duplicate id " + std::to_string(chat_id) +
                                             ", first on line " + std::to_string(it->second));
        }
        if (parent != -1 && !line_of_chat.contains(parent)) {
          return fields.Error("parent_chat_id",
                              "no earlier request has chat_id " + std::to_string(parent));
        }
        line_of_chat.emplace(chat_id, line_number);
        requests.push_back(std::move(request).value());
        return Status::Ok();
      }));
  if (requests.empty()) return EmptyTraceError(source);
  return requests;
}

StatusOr<std::vector<BailianRequest>> ParseBailianTraceText(std::string_view text,
                                                            std::string_view source) {
  std::istringstream in{std::string(text)};
  return ParseBailianTrace(in, source);
}

StatusOr<std::vector<BailianRequest>> ReadBailianTrace(const std::string& path) {
  AGENTKV_ASSIGN_OR_RETURN(TraceFile file, TraceFile::Open(path));
  return ParseBailianTrace(file.stream(), path);
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
