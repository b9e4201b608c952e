#include "agentkv/protocol/workers.h"

#include <boost/json/monotonic_resource.hpp>
#include <set>
#include <unordered_set>
#include <utility>

#include "agentkv/protocol/json_util.h"

// Invariants: EngineBaseUrls returns non-empty, pairwise distinct URLs (each with one trailing
// @<digits> removed) in the order of their first appearance; SerializeWorkers output parses back
// with ParseWorkers to the same workers (up to the fields the chosen shape omits).

namespace agentkv::protocol {
namespace {

namespace json = boost::json;

constexpr JsonLimits kRouterLimits{.max_bytes = size_t{16} << 20, .max_depth = 64};

// Lenient readers: a member of another type than expected keeps the default.
void LenientString(const json::object& object, std::string_view key, std::string* out) {
  if (const json::value* value = FindNonNull(object, key)) {
    if (const json::string* s = value->if_string()) out->assign(s->data(), s->size());
  }
}

void LenientInt(const json::object& object, std::string_view key, int64_t* out) {
  if (const json::value* value = FindNonNull(object, key)) {
    if (const std::optional<int64_t> i = AsInt64(*value)) *out = *i;
  }
}

void LenientDouble(const json::object& object, std::string_view key, double* out) {
  if (const json::value* value = FindNonNull(object, key)) {
    if (const std::optional<double> d = AsDouble(*value)) *out = *d;
  }
}

StatusOr<json::value> ParseRouterBody(std::string_view body, std::string_view what,
                                      json::monotonic_resource& arena) {
  return ParseJson(body, kRouterLimits, what, json::storage_ptr(&arena));
}

// The list under `key` of a JSON object body.
StatusOr<const json::array*> RequireList(const json::value& document, std::string_view key,
                                         std::string_view what) {
  const json::object* object = document.if_object();
  if (object == nullptr)
    return InvalidArgumentError(std::string(what) + ": expected a JSON object");
  AGENTKV_ASSIGN_OR_RETURN(const json::value* list, FindRequired(*object, key));
  const json::array* array = list->if_array();
  if (array == nullptr) return InvalidArgumentError(std::string(key) + ": expected a list");
  return array;
}

void AppendUnique(std::string url, std::unordered_set<std::string>& seen,
                  std::vector<std::string>& out) {
  if (url.empty()) return;
  if (seen.insert(url).second) out.push_back(std::move(url));
}

}  // namespace

std::string SerializeWorkers(const std::vector<WorkerInfo>& workers, WorkersShape shape) {
  JsonWriter w;
  w.BeginObject().Key("workers").BeginArray();
  int64_t prefill = 0;
  int64_t decode = 0;
  int64_t regular = 0;
  int64_t healthy = 0;
  int64_t total_load = 0;
  std::set<std::string_view> models;
  for (const WorkerInfo& worker : workers) {
    if (worker.worker_type == "prefill") {
      ++prefill;
    } else if (worker.worker_type == "decode") {
      ++decode;
    } else {
      ++regular;
    }
    healthy += worker.is_healthy ? 1 : 0;
    total_load += worker.load;
    models.insert(worker.model_id);
    w.BeginObject();
    if (shape == WorkersShape::kInline) {
      w.Key("url").String(worker.url);
      w.Key("model_id").String(worker.model_id);
      w.Key("worker_type").String(worker.worker_type);
      w.Key("is_healthy").Bool(worker.is_healthy);
      w.Key("load").Int(worker.load);
      w.Key("connection_mode").String(worker.connection_mode);
      w.Key("priority").Int(worker.priority);
      w.Key("cost").Double(worker.cost);
      if (worker.bootstrap_port) w.Key("bootstrap_port").Int(*worker.bootstrap_port);
    } else {
      w.Key("id").String(worker.id);
      w.Key("url").String(worker.url);
      w.Key("model_id").String(worker.model_id);
      w.Key("priority").Int(worker.priority);
      w.Key("cost").Double(worker.cost);
      w.Key("worker_type").String(worker.worker_type);
      w.Key("is_healthy").Bool(worker.is_healthy);
      w.Key("load").Int(worker.load);
      w.Key("connection_mode").String(worker.connection_mode);
    }
    w.EndObject();
  }
  w.EndArray();
  w.Key("total").Int(static_cast<int64_t>(workers.size()));
  w.Key("stats").BeginObject();
  if (shape == WorkersShape::kInline) {
    w.Key("prefill_count").Int(prefill);
    w.Key("decode_count").Int(decode);
    w.Key("regular_count").Int(regular);
  } else {
    w.Key("total_workers").Int(static_cast<int64_t>(workers.size()));
    w.Key("healthy_workers").Int(healthy);
    w.Key("total_models").Int(static_cast<int64_t>(models.size()));
    w.Key("total_load").Int(total_load);
    w.Key("by_type").BeginObject();
    w.Key("regular").Int(regular).Key("prefill").Int(prefill).Key("decode").Int(decode);
    w.EndObject();
  }
  w.EndObject().EndObject();
  return w.Take();
}

StatusOr<std::vector<WorkerInfo>> ParseWorkers(std::string_view body) {
  json::monotonic_resource arena;
  AGENTKV_ASSIGN_OR_RETURN(const json::value document, ParseRouterBody(body, "workers", arena));
  AGENTKV_ASSIGN_OR_RETURN(const json::array* list, RequireList(document, "workers", "workers"));
  std::vector<WorkerInfo> workers;
  workers.reserve(list->size());
  for (size_t i = 0; i < list->size(); ++i) {
    const std::string path = IndexPath("workers", i);
    AGENTKV_ASSIGN_OR_RETURN(const json::object* entry, ExpectObject((*list)[i], path));
    WorkerInfo worker;
    AGENTKV_RETURN_IF_ERROR(ReadString(*entry, "url", JoinPath(path, "url"), &worker.url));
    AGENTKV_RETURN_IF_ERROR(
        ReadBool(*entry, "is_healthy", JoinPath(path, "is_healthy"), &worker.is_healthy));
    LenientString(*entry, "id", &worker.id);
    LenientString(*entry, "model_id", &worker.model_id);
    LenientString(*entry, "worker_type", &worker.worker_type);
    LenientInt(*entry, "load", &worker.load);
    LenientString(*entry, "connection_mode", &worker.connection_mode);
    LenientInt(*entry, "priority", &worker.priority);
    LenientDouble(*entry, "cost", &worker.cost);
    if (const json::value* port = FindNonNull(*entry, "bootstrap_port")) {
      if (const std::optional<int64_t> p = AsInt64(*port)) worker.bootstrap_port = *p;
    }
    workers.push_back(std::move(worker));
  }
  return workers;
}

std::string SerializeListWorkers(const std::vector<std::string>& urls) {
  JsonWriter w;
  w.BeginObject().Key("urls").BeginArray();
  for (const std::string& url : urls) w.String(url);
  w.EndArray().EndObject();
  return w.Take();
}

StatusOr<std::vector<std::string>> ParseListWorkers(std::string_view body) {
  json::monotonic_resource arena;
  AGENTKV_ASSIGN_OR_RETURN(const json::value document,
                           ParseRouterBody(body, "list_workers", arena));
  AGENTKV_ASSIGN_OR_RETURN(const json::array* list, RequireList(document, "urls", "list_workers"));
  std::vector<std::string> urls;
  urls.reserve(list->size());
  for (size_t i = 0; i < list->size(); ++i) {
    const json::string* url = (*list)[i].if_string();
    if (url == nullptr) return InvalidArgumentError(IndexPath("urls", i) + ": expected a string");
    urls.emplace_back(url->data(), url->size());
  }
  return urls;
}

std::string StripRankSuffix(std::string_view url) {
  const size_t at = url.rfind('@');
  if (at == std::string_view::npos || at + 1 == url.size()) return std::string(url);
  for (size_t i = at + 1; i < url.size(); ++i) {
    if (url[i] < '0' || url[i] > '9') return std::string(url);
  }
  return std::string(url.substr(0, at));
}

std::vector<std::string> EngineBaseUrls(const std::vector<WorkerInfo>& workers) {
  std::vector<std::string> urls;
  std::unordered_set<std::string> seen;
  for (const WorkerInfo& worker : workers) {
    if (!worker.is_healthy) continue;
    AppendUnique(StripRankSuffix(worker.url), seen, urls);
  }
  return urls;
}

std::vector<std::string> EngineBaseUrls(const std::vector<std::string>& urls) {
  std::vector<std::string> base_urls;
  std::unordered_set<std::string> seen;
  for (const std::string& url : urls) AppendUnique(StripRankSuffix(url), seen, base_urls);
  return base_urls;
}

int RouterFlushCacheStatus(const RouterFlushCacheResult& result) {
  return result.failed.empty() ? 200 : 206;
}

std::string SerializeRouterFlushCache(const RouterFlushCacheResult& result) {
  std::string message = result.message;
  if (message.empty()) {
    message = result.failed.empty()
                  ? "Successfully flushed cache on all " +
                        std::to_string(result.successful.size()) + " HTTP workers"
                  : "Cache flush completed: " + std::to_string(result.successful.size()) +
                        " succeeded, " + std::to_string(result.failed.size()) + " failed (out of " +
                        std::to_string(result.total_http_workers) + " HTTP workers)";
  }
  JsonWriter w;
  w.BeginObject();
  w.Key("status").String(result.failed.empty() ? "success" : "partial_success");
  w.Key("message").String(message);
  w.Key("workers_flushed").Int(static_cast<int64_t>(result.successful.size()));
  w.Key("total_http_workers").Int(result.total_http_workers);
  w.Key("total_workers").Int(result.total_workers);
  if (!result.failed.empty()) {
    w.Key("successful").BeginArray();
    for (const std::string& url : result.successful) w.String(url);
    w.EndArray();
    w.Key("failed").BeginArray();
    for (const FlushFailure& failure : result.failed) {
      w.BeginObject().Key("worker").String(failure.worker).Key("error").String(failure.error);
      w.EndObject();
    }
    w.EndArray();
  }
  w.EndObject();
  return w.Take();
}

StatusOr<RouterFlushCacheResult> ParseRouterFlushCache(std::string_view body) {
  json::monotonic_resource arena;
  AGENTKV_ASSIGN_OR_RETURN(const json::value document, ParseRouterBody(body, "flush_cache", arena));
  const json::object* object = document.if_object();
  if (object == nullptr) return InvalidArgumentError("flush_cache: expected a JSON object");
  RouterFlushCacheResult result;
  AGENTKV_RETURN_IF_ERROR(ReadString(*object, "message", "message", &result.message));
  AGENTKV_RETURN_IF_ERROR(ReadNonNegativeInt64(*object, "total_http_workers", "total_http_workers",
                                               &result.total_http_workers));
  AGENTKV_RETURN_IF_ERROR(
      ReadNonNegativeInt64(*object, "total_workers", "total_workers", &result.total_workers));
  if (const json::value* successful = FindNonNull(*object, "successful")) {
    const json::array* list = successful->if_array();
    if (list == nullptr) return InvalidArgumentError("successful: expected a list");
    for (size_t i = 0; i < list->size(); ++i) {
      const json::string* url = (*list)[i].if_string();
      if (url == nullptr) {
        return InvalidArgumentError(IndexPath("successful", i) + ": expected a string");
      }
      result.successful.emplace_back(url->data(), url->size());
    }
  }
  if (const json::value* failed = FindNonNull(*object, "failed")) {
    const json::array* list = failed->if_array();
    if (list == nullptr) return InvalidArgumentError("failed: expected a list");
    for (size_t i = 0; i < list->size(); ++i) {
      const std::string path = IndexPath("failed", i);
      const json::object* entry = (*list)[i].if_object();
      if (entry == nullptr) return InvalidArgumentError(path + ": expected an object");
      FlushFailure failure;
      AGENTKV_RETURN_IF_ERROR(
          ReadString(*entry, "worker", JoinPath(path, "worker"), &failure.worker));
      AGENTKV_RETURN_IF_ERROR(ReadString(*entry, "error", JoinPath(path, "error"), &failure.error));
      result.failed.push_back(std::move(failure));
    }
  }
  return result;
}

std::string SerializeLoads(const std::vector<WorkerLoad>& loads) {
  JsonWriter w;
  w.BeginObject().Key("workers").BeginArray();
  for (const WorkerLoad& load : loads) {
    w.BeginObject().Key("worker").String(load.worker).Key("load").Int(load.load).EndObject();
  }
  w.EndArray().EndObject();
  return w.Take();
}

StatusOr<std::vector<WorkerLoad>> ParseLoads(std::string_view body) {
  json::monotonic_resource arena;
  AGENTKV_ASSIGN_OR_RETURN(const json::value document, ParseRouterBody(body, "get_loads", arena));
  AGENTKV_ASSIGN_OR_RETURN(const json::array* list, RequireList(document, "workers", "get_loads"));
  std::vector<WorkerLoad> loads;
  loads.reserve(list->size());
  for (size_t i = 0; i < list->size(); ++i) {
    const std::string path = IndexPath("workers", i);
    AGENTKV_ASSIGN_OR_RETURN(const json::object* entry, ExpectObject((*list)[i], path));
    WorkerLoad load;
    AGENTKV_RETURN_IF_ERROR(ReadString(*entry, "worker", JoinPath(path, "worker"), &load.worker));
    AGENTKV_RETURN_IF_ERROR(ReadInt64(*entry, "load", JoinPath(path, "load"), &load.load));
    loads.push_back(std::move(load));
  }
  return loads;
}

}  // namespace agentkv::protocol
