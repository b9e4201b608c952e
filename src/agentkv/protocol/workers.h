// sgl-router discovery and admin messages: `/workers`, `/list_workers`, `/flush_cache`,
// `/get_loads` (docs/PROTOCOL.md section 10), and the engine base URL rule (section 10.5).
//
// The coordinator finds engines with ParseWorkers (falling back to ParseListWorkers) and
// EngineBaseUrls; the router emulator serves both /workers shapes with SerializeWorkers.
// Parsing reads only what agentkv needs strictly (`url` and `is_healthy`) and everything else
// leniently, so that router version drift in other fields never breaks discovery. Pure
// functions; value types are thread-compatible.
#ifndef AGENTKV_PROTOCOL_WORKERS_H_
#define AGENTKV_PROTOCOL_WORKERS_H_

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "agentkv/base/status.h"

namespace agentkv::protocol {

// One router worker. In DP-aware mode `url` is `http://host:port@<rank>`.
struct WorkerInfo {
  std::string url;
  std::string id;  // Newer WorkerListResponse only.
  std::string model_id = "unknown";
  std::string worker_type = "regular";  // "regular", "prefill" or "decode".
  bool is_healthy = true;
  int64_t load = 0;
  std::string connection_mode = "Http";
  int64_t priority = 50;
  double cost = 1.0;
  std::optional<int64_t> bootstrap_port;  // Prefill workers in the inline shape.

  friend bool operator==(const WorkerInfo&, const WorkerInfo&) = default;
};

// The two JSON shapes of `GET /workers` (docs/PROTOCOL.md section 10.3).
enum class WorkersShape {
  // Older: workers without `id`; stats {prefill_count, decode_count, regular_count}.
  kInline,
  // Newer WorkerListResponse: workers with `id`; stats {total_workers, healthy_workers,
  // total_models, total_load, by_type {regular, prefill, decode}}.
  kWorkerList,
};

// `{"workers":[...],"total":n,"stats":{...}}` in `shape`.
std::string SerializeWorkers(const std::vector<WorkerInfo>& workers, WorkersShape shape);

// Reads `workers` from either shape. Entries missing `url` get ""; missing `is_healthy` means
// healthy. InvalidArgument when `body` is not an object with a `workers` list, an entry is
// not an object, or `url`/`is_healthy` has the wrong type; other fields of the wrong type keep
// their defaults. ResourceExhausted over 16 MiB or 64 nesting levels.
StatusOr<std::vector<WorkerInfo>> ParseWorkers(std::string_view body);

// `GET /list_workers`: `{"urls":[...]}`.
std::string SerializeListWorkers(const std::vector<std::string>& urls);
// InvalidArgument unless `body` is an object whose `urls` is a list of strings.
StatusOr<std::vector<std::string>> ParseListWorkers(std::string_view body);

// `url` without a trailing `@<digits>` (the DP rank); any other `@` is kept.
std::string StripRankSuffix(std::string_view url);

// Engine base URLs: healthy workers with a non-empty url, rank suffix stripped,
// de-duplicated keeping the first-seen order (Relax's router_worker_base_urls).
std::vector<std::string> EngineBaseUrls(const std::vector<WorkerInfo>& workers);
// The same for a /list_workers url list (no health flag): non-empty, stripped, de-duplicated.
std::vector<std::string> EngineBaseUrls(const std::vector<std::string>& urls);

// The router's `POST /flush_cache` outcome (docs/PROTOCOL.md section 10.6).
struct FlushFailure {
  std::string worker;
  std::string error;

  friend bool operator==(const FlushFailure&, const FlushFailure&) = default;
};
struct RouterFlushCacheResult {
  std::vector<std::string> successful;  // Worker URLs flushed.
  std::vector<FlushFailure> failed;
  int64_t total_http_workers = 0;
  int64_t total_workers = 0;
  // Empty: SerializeRouterFlushCache writes the router's own wording.
  std::string message;

  friend bool operator==(const RouterFlushCacheResult&, const RouterFlushCacheResult&) = default;
};

// 200 when nothing failed, 206 (Partial Content) otherwise.
int RouterFlushCacheStatus(const RouterFlushCacheResult& result);

// `{"status":"success"|"partial_success","message","workers_flushed","total_http_workers",
// "total_workers"}`, plus `"successful":[urls]` and `"failed":[{"worker","error"}]` when
// something failed.
std::string SerializeRouterFlushCache(const RouterFlushCacheResult& result);

// Reads a router /flush_cache body (either status). Same failure statuses as ParseWorkers.
StatusOr<RouterFlushCacheResult> ParseRouterFlushCache(std::string_view body);

// One entry of the router's `GET /get_loads`; load -1 means the worker did not answer.
struct WorkerLoad {
  std::string worker;
  int64_t load = 0;

  friend bool operator==(const WorkerLoad&, const WorkerLoad&) = default;
};

// `{"workers":[{"worker":url,"load":n},...]}`.
std::string SerializeLoads(const std::vector<WorkerLoad>& loads);
// InvalidArgument unless `body` has that shape.
StatusOr<std::vector<WorkerLoad>> ParseLoads(std::string_view body);

}  // namespace agentkv::protocol

#endif  // AGENTKV_PROTOCOL_WORKERS_H_
