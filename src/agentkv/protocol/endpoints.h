// HTTP paths and fixed response texts of SGLang engines and sgl-router.
//
// The reference (docs/PROTOCOL.md) is the source of every
// string here; the gateway, coordinator and emulators use these constants rather than
// spelling paths themselves. Header-only constants.
#ifndef AGENTKV_PROTOCOL_ENDPOINTS_H_
#define AGENTKV_PROTOCOL_ENDPOINTS_H_

#include <string_view>

namespace agentkv::protocol {

// Engine endpoints (docs/PROTOCOL.md sections 2-9).
inline constexpr std::string_view kGeneratePath = "/generate";  // POST (PUT also accepted).
inline constexpr std::string_view kAbortRequestPath = "/abort_request";
inline constexpr std::string_view kOpenSessionPath = "/open_session";    // GET or POST.
inline constexpr std::string_view kCloseSessionPath = "/close_session";  // GET or POST.
inline constexpr std::string_view kFlushCachePath = "/flush_cache";      // GET or POST.
// agentkv's engines only (not in SGLang): a parent session's return, delivered by the gateway to
// every engine so that each demotes the finished sub-agents of that parent it holds. POST.
inline constexpr std::string_view kDemoteFinishedSubagentsPath = "/demote_finished_subagents";
inline constexpr std::string_view kServerInfoPath = "/server_info";
inline constexpr std::string_view kGetServerInfoPath = "/get_server_info";  // Deprecated alias.
inline constexpr std::string_view kMetricsPath = "/metrics";
inline constexpr std::string_view kHealthPath = "/health";
inline constexpr std::string_view kHealthGeneratePath = "/health_generate";
inline constexpr std::string_view kReadyPath = "/ready";

// Router endpoints (docs/PROTOCOL.md section 10).
inline constexpr std::string_view kWorkersPath = "/workers";
inline constexpr std::string_view kListWorkersPath = "/list_workers";
inline constexpr std::string_view kGetLoadsPath = "/get_loads";
inline constexpr std::string_view kAddWorkerPath = "/add_worker";        // POST ?url=
inline constexpr std::string_view kRemoveWorkerPath = "/remove_worker";  // POST ?url=
inline constexpr std::string_view kLivenessPath = "/liveness";
inline constexpr std::string_view kReadinessPath = "/readiness";

// Headers (docs/PROTOCOL.md section 10.7).
inline constexpr std::string_view kRoutingKeyHeader = "X-SMG-Routing-Key";
inline constexpr std::string_view kTargetWorkerHeader = "X-SMG-Target-Worker";

// Health endpoints answer with an empty body: 200 when healthy, 503 while starting, shutting
// down or failing (docs/PROTOCOL.md section 8).
inline constexpr int kHealthyStatus = 200;
inline constexpr int kUnhealthyStatus = 503;
// The rid prefix of /health_generate's probe request.
inline constexpr std::string_view kHealthCheckRidPrefix = "HEALTH_CHECK_";

// /abort_request and /close_session answer 200 with an empty body (docs/PROTOCOL.md sections 4, 5).
inline constexpr int kEmptyOkStatus = 200;

// The engine's /flush_cache reply: plain text, HTTP 200 even when the flush was refused
// because requests were running (docs/PROTOCOL.md section 6).
inline constexpr std::string_view kFlushCacheResponse =
    "Cache flushed.\nPlease check backend logs for more details. (When there are running or "
    "waiting requests, the operation will not be performed.)\n";
inline constexpr int kFlushCacheStatus = 200;

// The Content-Type of /metrics (Prometheus text exposition 0.0.4).
inline constexpr std::string_view kPrometheusContentType =
    "text/plain; version=0.0.4; charset=utf-8";
// The Content-Type of a streamed /generate response.
inline constexpr std::string_view kSseContentType = "text/event-stream";

}  // namespace agentkv::protocol

#endif  // AGENTKV_PROTOCOL_ENDPOINTS_H_
