// SGLang session and abort control messages: `/abort_request`, `/open_session`,
// `/close_session` (docs/PROTOCOL.md sections 4 and 5).
//
// Session lifecycle code fans these bodies out to every engine base URL (the router does not
// proxy them); the engine emulator parses them. Parsers ignore unknown fields, including the
// BaseReq fields `rid` (on session requests) and `http_worker_ipc`, and treat JSON null as
// absent. Endpoint paths and the fixed replies live in endpoints.h. Pure functions.
#ifndef AGENTKV_PROTOCOL_SESSIONS_H_
#define AGENTKV_PROTOCOL_SESSIONS_H_

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

#include "agentkv/base/status.h"
#include "agentkv/protocol/endpoints.h"

namespace agentkv::protocol {

// AbortReq: `{"rid": str, "abort_all": bool}`. Answered with 200 and an empty body; an
// unknown or finished rid is ignored by the engine.
struct AbortRequest {
  std::string rid;  // "" when absent (SGLang's default).
  bool abort_all = false;

  friend bool operator==(const AbortRequest&, const AbortRequest&) = default;
};

// OpenSessionReqInput. `capacity_of_str_len` is required; the others are written only when
// set. Answered with the session id as a JSON string, or 400 with an error body.
struct OpenSessionRequest {
  int64_t capacity_of_str_len = 0;
  std::optional<std::string> session_id;
  std::optional<bool> streaming;
  std::optional<double> timeout;  // Seconds.

  friend bool operator==(const OpenSessionRequest&, const OpenSessionRequest&) = default;
};

// CloseSessionReqInput: `{"session_id": str}`. Answered with 200 and an empty body; closing
// an unknown or closed id is a no-op.
struct CloseSessionRequest {
  std::string session_id;

  friend bool operator==(const CloseSessionRequest&, const CloseSessionRequest&) = default;
};

// agentkv's /demote_finished_subagents (not in SGLang, whose engines answer 404):
// `{"parent_session_id": str}`. Answered with 200 and `{"demoted_children": n}`; a parent
// the engine knows no finished child of demotes nothing.
struct DemoteFinishedSubagentsRequest {
  std::string parent_session_id;

  friend bool operator==(const DemoteFinishedSubagentsRequest&,
                         const DemoteFinishedSubagentsRequest&) = default;
};

// Each parser: InvalidArgument when `body` is not a JSON object or a known field has the
// wrong type (message names the field); ResourceExhausted over 1 MiB or 64 nesting levels.
StatusOr<AbortRequest> ParseAbortRequest(std::string_view body);
// Also InvalidArgument when `capacity_of_str_len` is missing or negative.
StatusOr<OpenSessionRequest> ParseOpenSessionRequest(std::string_view body);
// Also InvalidArgument when `session_id` is missing.
StatusOr<CloseSessionRequest> ParseCloseSessionRequest(std::string_view body);
// Also InvalidArgument when `parent_session_id` is missing.
StatusOr<DemoteFinishedSubagentsRequest> ParseDemoteFinishedSubagentsRequest(std::string_view body);

std::string SerializeAbortRequest(const AbortRequest& request);
std::string SerializeOpenSessionRequest(const OpenSessionRequest& request);
std::string SerializeCloseSessionRequest(const CloseSessionRequest& request);
std::string SerializeDemoteFinishedSubagentsRequest(const DemoteFinishedSubagentsRequest& request);

// /open_session's success body: the session id as a JSON string, e.g. "\"sess-abc\"".
std::string SerializeOpenSessionResponse(std::string_view session_id);
// InvalidArgument unless `body` is one JSON string.
StatusOr<std::string> ParseOpenSessionResponse(std::string_view body);

}  // namespace agentkv::protocol

#endif  // AGENTKV_PROTOCOL_SESSIONS_H_
