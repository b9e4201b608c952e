#include "agentkv/protocol/sessions.h"

#include <boost/json/monotonic_resource.hpp>

#include "agentkv/protocol/json_util.h"

// Invariants: Serialize* output parses back with the matching Parse* to an equal value.

namespace agentkv::protocol {
namespace {

namespace json = boost::json;

// Control bodies are tiny; a small cap keeps a hostile peer from making the parser work.
constexpr JsonLimits kControlLimits{.max_bytes = size_t{1} << 20, .max_depth = 64};

}  // namespace

StatusOr<AbortRequest> ParseAbortRequest(std::string_view body) {
  json::monotonic_resource arena;
  AGENTKV_ASSIGN_OR_RETURN(
      const json::value document,
      ParseJsonObject(body, kControlLimits, "abort request", json::storage_ptr(&arena)));
  const json::object* object = &document.as_object();
  AbortRequest request;
  AGENTKV_RETURN_IF_ERROR(ReadString(*object, "rid", "rid", &request.rid));
  AGENTKV_RETURN_IF_ERROR(ReadBool(*object, "abort_all", "abort_all", &request.abort_all));
  return request;
}

StatusOr<OpenSessionRequest> ParseOpenSessionRequest(std::string_view body) {
  json::monotonic_resource arena;
  AGENTKV_ASSIGN_OR_RETURN(
      const json::value document,
      ParseJsonObject(body, kControlLimits, "open_session request", json::storage_ptr(&arena)));
  const json::object* object = &document.as_object();
  OpenSessionRequest request;
  AGENTKV_RETURN_IF_ERROR(FindRequired(*object, "capacity_of_str_len").status());
  AGENTKV_RETURN_IF_ERROR(ReadNonNegativeInt64(
      *object, "capacity_of_str_len", "capacity_of_str_len", &request.capacity_of_str_len));
  AGENTKV_RETURN_IF_ERROR(
      ReadOptionalString(*object, "session_id", "session_id", &request.session_id));
  AGENTKV_RETURN_IF_ERROR(ReadOptionalBool(*object, "streaming", "streaming", &request.streaming));
  AGENTKV_RETURN_IF_ERROR(ReadOptionalDouble(*object, "timeout", "timeout", &request.timeout));
  return request;
}

StatusOr<CloseSessionRequest> ParseCloseSessionRequest(std::string_view body) {
  json::monotonic_resource arena;
  AGENTKV_ASSIGN_OR_RETURN(
      const json::value document,
      ParseJsonObject(body, kControlLimits, "close_session request", json::storage_ptr(&arena)));
  const json::object* object = &document.as_object();
  AGENTKV_RETURN_IF_ERROR(FindRequired(*object, "session_id").status());
  CloseSessionRequest request;
  AGENTKV_RETURN_IF_ERROR(ReadString(*object, "session_id", "session_id", &request.session_id));
  return request;
}

StatusOr<DemoteFinishedSubagentsRequest> ParseDemoteFinishedSubagentsRequest(
    std::string_view body) {
  json::monotonic_resource arena;
  AGENTKV_ASSIGN_OR_RETURN(
      const json::value document,
      ParseJsonObject(body, kControlLimits, "demote_finished_subagents request",
                      json::storage_ptr(&arena)));
  const json::object* object = &document.as_object();
  AGENTKV_RETURN_IF_ERROR(FindRequired(*object, "parent_session_id").status());
  DemoteFinishedSubagentsRequest request;
  AGENTKV_RETURN_IF_ERROR(
      ReadString(*object, "parent_session_id", "parent_session_id", &request.parent_session_id));
  return request;
}

std::string SerializeAbortRequest(const AbortRequest& request) {
  JsonWriter w;
  w.BeginObject().Key("rid").String(request.rid).Key("abort_all").Bool(request.abort_all);
  w.EndObject();
  return w.Take();
}

std::string SerializeOpenSessionRequest(const OpenSessionRequest& request) {
  JsonWriter w;
  w.BeginObject().Key("capacity_of_str_len").Int(request.capacity_of_str_len);
  if (request.session_id) w.Key("session_id").String(*request.session_id);
  if (request.streaming) w.Key("streaming").Bool(*request.streaming);
  if (request.timeout) w.Key("timeout").Double(*request.timeout);
  w.EndObject();
  return w.Take();
}

std::string SerializeCloseSessionRequest(const CloseSessionRequest& request) {
  JsonWriter w;
  w.BeginObject().Key("session_id").String(request.session_id).EndObject();
  return w.Take();
}

std::string SerializeDemoteFinishedSubagentsRequest(const DemoteFinishedSubagentsRequest& request) {
  JsonWriter w;
  w.BeginObject().Key("parent_session_id").String(request.parent_session_id).EndObject();
  return w.Take();
}

std::string SerializeOpenSessionResponse(std::string_view session_id) {
  std::string body;
  AppendJsonString(body, session_id);
  return body;
}

StatusOr<std::string> ParseOpenSessionResponse(std::string_view body) {
  json::monotonic_resource arena;
  AGENTKV_ASSIGN_OR_RETURN(
      const json::value document,
      ParseJson(body, kControlLimits, "open_session response", json::storage_ptr(&arena)));
  const json::string* id = document.if_string();
  if (id == nullptr) return InvalidArgumentError("open_session response: expected a JSON string");
  return std::string(id->data(), id->size());
}

}  // namespace agentkv::protocol
