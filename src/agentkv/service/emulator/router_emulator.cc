#include "agentkv/service/emulator/router_emulator.h"

#include <algorithm>
#include <boost/beast/core/string.hpp>
#include <boost/json.hpp>
#include <boost/url.hpp>
#include <cctype>
#include <charconv>

#include "agentkv/base/bounds.h"
#include "agentkv/base/hash.h"
#include "agentkv/net/error_body.h"
#include "agentkv/net/http_types.h"
#include "agentkv/net/router.h"
#include "agentkv/protocol/generate.h"
#include "agentkv/protocol/json_splice.h"
#include "agentkv/routing/routing_key.h"
#include "agentkv/service/emulator/engine_emulator.h"
#include "agentkv/sync/mutex.h"

// Invariants (under mu_): every worker has a distinct url and a distinct EngineId present in
// router_ exactly when the worker is healthy; in-flight loads are never negative.

namespace agentkv::service {
namespace {

namespace http = net::http;
constexpr int32_t kRoutePageSize = 16;
constexpr uint64_t kRoutePageSeed = 0x726f757465ULL;  // "route"

bool ForwardedHeader(std::string_view name) {
  std::string lower(name);
  std::transform(lower.begin(), lower.end(), lower.begin(),
                 [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
  return lower == "authorization" || lower == "x-request-id" || lower == "x-correlation-id" ||
         lower == "traceparent" || lower == "tracestate" || lower == "x-smg-routing-key" ||
         lower.rfind("x-request-id-", 0) == 0 || lower == "content-type";
}

// Chained page keys of the prompt, for cache_aware (input_ids, or text as pseudo tokens).
std::vector<uint64_t> PromptKeys(const protocol::GenerateRequest& request) {
  const std::vector<int64_t> tokens = request.input_ids.has_value()
                                          ? *request.input_ids
                                          : PseudoTokenize(request.text.value_or(std::string()));
  std::vector<uint64_t> keys;
  uint64_t parent = kRoutePageSeed;
  for (size_t p = 0; p + kRoutePageSize <= tokens.size(); p += kRoutePageSize) {
    const auto page = std::span<const int64_t>(tokens).subspan(p, kRoutePageSize);
    parent = HashCombine(parent, Hash64(std::as_bytes(page), kRoutePageSeed));
    keys.push_back(parent);
  }
  return keys;
}

// "http://h:p@3" -> ("http://h:p", 3); no suffix -> (url, nullopt). InvalidArgument for a rank
// out of range (base/bounds.h counts).
StatusOr<std::pair<std::string, std::optional<int64_t>>> SplitRank(const std::string& url) {
  const std::string base = protocol::StripRankSuffix(url);
  if (base.size() == url.size()) return std::pair{url, std::optional<int64_t>()};
  const std::string_view digits = std::string_view(url).substr(base.size() + 1);
  int64_t rank = -1;
  const auto [end, error] = std::from_chars(digits.data(), digits.data() + digits.size(), rank);
  if (error != std::errc() || end != digits.data() + digits.size()) rank = -1;
  if (Status s = CheckCount("--worker-urls rank", rank); !s.ok()) {
    return InvalidArgumentError("\"" + url + "\": the dp rank " + std::string(digits) +
                                " is out of range [0, " + std::to_string(kMaxCount) + "]");
  }
  return std::pair{base, std::optional<int64_t>(rank)};
}

// The `url` query parameter of `q`'s target; empty when absent.
std::string QueryUrl(const net::Request& q) {
  boost::system::result<boost::urls::url_view> target = boost::urls::parse_origin_form(q.target());
  if (!target) return "";
  auto it = target->params().find("url");
  return it == target->params().end() ? "" : std::string((*it).value);
}

}  // namespace

Status RouterEmulatorOptions::Validate() const {
  AGENTKV_RETURN_IF_ERROR(http.Validate());
  routing::RouterOptions router;
  router.policy = policy;
  router.cache_threshold = cache_threshold;
  router.balance_abs_threshold = balance_abs_threshold;
  router.balance_rel_threshold = balance_rel_threshold;
  router.max_tree_size = max_tree_size;
  if (Status s = router.Validate(); !s.ok()) {
    return InvalidArgumentError("--policy / cache-aware options: " + s.message());
  }
  if (health_check_interval.count() < 0) {
    return InvalidArgumentError("--health-check-interval-secs must be >= 0");
  }
  if (request_timeout < std::chrono::milliseconds(1) ||
      request_timeout > std::chrono::hours(24 * 365)) {
    return InvalidArgumentError("--request-timeout-secs must be in [0.001, 31536000] s, got " +
                                std::to_string(request_timeout.count()) + " ms");
  }
  if (max_received_requests < 0 || max_received_requests > (int64_t{1} << 24)) {
    return InvalidArgumentError("--max-received-requests must be in [0, 2^24], got " +
                                std::to_string(max_received_requests));
  }
  for (const std::string& url : worker_urls) {
    // The client's own parser (net::ParseBaseUrl), so a URL accepted here is one it can use.
    if (StatusOr<net::HttpEndpoint> parsed = net::ParseBaseUrl(protocol::StripRankSuffix(url));
        !parsed.ok()) {
      return InvalidArgumentError("--worker-urls: " + parsed.status().message() +
                                  " (http://host:port with an optional @rank)");
    }
    AGENTKV_RETURN_IF_ERROR(SplitRank(url).status());
  }
  return Status::Ok();
}

RouterEmulator::RouterEmulator(const RouterEmulatorOptions& options)
    : options_(options), received_(static_cast<size_t>(options.max_received_requests)) {}

StatusOr<std::unique_ptr<RouterEmulator>> RouterEmulator::Start(
    const RouterEmulatorOptions& options) {
  AGENTKV_RETURN_IF_ERROR(options.Validate());
  std::unique_ptr<RouterEmulator> r(new RouterEmulator(options));
  routing::RouterOptions router_options;
  router_options.policy = options.policy;
  router_options.cache_threshold = options.cache_threshold;
  router_options.balance_abs_threshold = options.balance_abs_threshold;
  router_options.balance_rel_threshold = options.balance_rel_threshold;
  router_options.max_tree_size = options.max_tree_size;
  router_options.num_engines = 1;
  {
    sync::MutexLock lock(&r->mu_);  // Not shared yet; taken for the lock annotations.
    AGENTKV_ASSIGN_OR_RETURN(r->router_, routing::Router::Create(router_options));
    // The router starts with engine 0; workers bring their own ids.
    r->router_->RemoveEngine(EngineId(0));
  }
  for (const std::string& url : options.worker_urls) AGENTKV_RETURN_IF_ERROR(r->AddWorker(url));
  r->client_ = std::make_unique<net::HttpClient>(options.client);
  net::HttpClientOptions forward = options.client;
  forward.header_timeout = options.request_timeout;
  forward.body_timeout = options.request_timeout;
  forward.queue_timeout = options.request_timeout;
  r->forward_client_ = std::make_unique<net::HttpClient>(forward);
  for (const protocol::WorkerInfo& worker : r->workers()) {
    AGENTKV_ASSIGN_OR_RETURN(auto split, SplitRank(worker.url));
    r->LearnModelId(worker.url, split.first);
  }

  RouterEmulator* self = r.get();
  net::Router routes;
  self->AddForwardRoutes(routes);
  self->AddWorkerRoutes(routes);
  self->AddInfoRoutes(routes);
  routes.Add(http::verb::get, "/agentkv/requests",
             [self](net::Request q, std::shared_ptr<net::ResponseWriter> w) {
               self->HandleRecordedRequests(std::move(q), std::move(w));
             });
  // DELETE /workers/{url} and everything the router has no route for (including
  // /abort_request, /open_session, /close_session) land in the fallback.
  routes.SetFallback([self](net::Request q, std::shared_ptr<net::ResponseWriter> w) {
    self->HandleUnrouted(std::move(q), std::move(w));
  });
  AGENTKV_ASSIGN_OR_RETURN(r->server_, net::HttpServer::Start(options.http, routes.AsHandler()));
  if (options.prometheus.has_value()) {
    net::Router metrics;
    metrics.Add(
        http::verb::get, "/metrics",
        [self](net::Request q, std::shared_ptr<net::ResponseWriter> w) {
          w->Reply(net::MakeResponse(q, http::status::ok, self->metrics_.Text(self->workers()),
                                     "text/plain; version=0.0.4"));
        });
    AGENTKV_ASSIGN_OR_RETURN(r->prometheus_server_,
                             net::HttpServer::Start(*options.prometheus, metrics.AsHandler()));
  }
  if (options.health_check_interval.count() > 0) {
    r->health_thread_ = std::thread([self] { self->HealthLoop(); });
  }
  return r;
}

void RouterEmulator::AddForwardRoutes(net::Router& routes) {
  RouterEmulator* self = this;
  for (const char* path : {"/generate", "/v1/chat/completions", "/v1/completions"}) {
    routes.Add(http::verb::post, path,
               [self](net::Request q, std::shared_ptr<net::ResponseWriter> w) {
                 self->HandleForward(std::move(q), std::move(w));
               });
  }
}

void RouterEmulator::AddWorkerRoutes(net::Router& routes) {
  RouterEmulator* self = this;
  routes.Add(http::verb::get, "/workers",
             [self](net::Request q, std::shared_ptr<net::ResponseWriter> w) {
               w->Reply(net::MakeResponse(
                   q, http::status::ok,
                   protocol::SerializeWorkers(self->workers(), self->options_.workers_shape)));
             });
  routes.Add(http::verb::post, "/workers",
             [self](net::Request q, std::shared_ptr<net::ResponseWriter> w) {
               boost::system::error_code error;
               const boost::json::value body = boost::json::parse(q.body(), error);
               const boost::json::value* url =
                   !error && body.is_object() ? body.as_object().if_contains("url") : nullptr;
               if (url == nullptr || !url->is_string()) {
                 return w->Reply(net::MakeErrorResponse(
                     q, http::status::bad_request, "body must be {\"url\": \"http://host:port\"}"));
               }
               self->AddWorkerAndReply(std::move(q), std::move(w), std::string(url->as_string()));
             });
  routes.Add(http::verb::post, "/add_worker",
             [self](net::Request q, std::shared_ptr<net::ResponseWriter> w) {
               std::string url = QueryUrl(q);
               self->AddWorkerAndReply(std::move(q), std::move(w), std::move(url));
             });
  routes.Add(http::verb::post, "/remove_worker",
             [self](net::Request q, std::shared_ptr<net::ResponseWriter> w) {
               const std::string url = QueryUrl(q);
               const bool removed = self->RemoveWorker(url);
               w->Reply(net::MakeResponse(
                   q, removed ? http::status::ok : http::status::not_found,
                   removed ? boost::json::serialize(boost::json::object{{"status", "success"}})
                           : net::SglangErrorBody("no worker " + url, 404)));
             });
  routes.Add(
      http::verb::get, "/list_workers",
      [self](net::Request q, std::shared_ptr<net::ResponseWriter> w) {
        std::vector<std::string> urls;
        for (const protocol::WorkerInfo& worker : self->workers()) urls.push_back(worker.url);
        w->Reply(net::MakeResponse(q, http::status::ok, protocol::SerializeListWorkers(urls)));
      });
  routes.Add(
      http::verb::get, "/get_loads",
      [self](net::Request q, std::shared_ptr<net::ResponseWriter> w) {
        boost::json::array loads;
        for (const protocol::WorkerInfo& worker : self->workers()) {
          loads.push_back(boost::json::object{{"worker", worker.url}, {"load", worker.load}});
        }
        w->Reply(net::MakeResponse(
            q, http::status::ok, boost::json::serialize(boost::json::object{{"workers", loads}})));
      });
}

void RouterEmulator::AddInfoRoutes(net::Router& routes) {
  RouterEmulator* self = this;
  routes.Add(http::verb::post, "/flush_cache",
             [self](net::Request q, std::shared_ptr<net::ResponseWriter> w) {
               self->HandleFlush(std::move(q), std::move(w));
             });
  for (const char* path : {"/health", "/liveness", "/readiness", "/health_generate"}) {
    routes.Add(
        http::verb::get, path, [self](net::Request q, std::shared_ptr<net::ResponseWriter> w) {
          bool any_healthy = false;
          for (const protocol::WorkerInfo& worker : self->workers())
            any_healthy |= worker.is_healthy;
          const bool liveness = q.target() == "/liveness";
          w->Reply(net::MakeResponse(
              q, liveness || any_healthy ? http::status::ok : http::status::service_unavailable, "",
              "text/plain"));
        });
  }
  // sgl-router's proxy_get_request routes, plus tokenize (agentkv's addition, so that a
  // gateway in front passes it through): the first healthy worker answers.
  for (const auto& [verb, path] : {std::pair{http::verb::get, "/v1/models"},
                                   {http::verb::get, "/get_model_info"},
                                   {http::verb::get, "/model_info"},
                                   {http::verb::get, "/get_server_info"},
                                   {http::verb::get, "/server_info"},
                                   {http::verb::post, "/tokenize"},
                                   {http::verb::post, "/detokenize"},
                                   {http::verb::post, "/v1/tokenize"},
                                   {http::verb::post, "/v1/detokenize"}}) {
    routes.Add(verb, path, [self](net::Request q, std::shared_ptr<net::ResponseWriter> w) {
      self->HandleProxyToFirstWorker(std::move(q), std::move(w));
    });
  }
  // GET /v1/models/{model}: the SDK's models.retrieve, passed on as the model list is.
  routes.AddPrefix(http::verb::get, "/v1/models/",
                   [self](net::Request q, std::shared_ptr<net::ResponseWriter> w) {
                     self->HandleProxyToFirstWorker(std::move(q), std::move(w));
                   });
  routes.Add(http::verb::get, "/metrics",
             [self](net::Request q, std::shared_ptr<net::ResponseWriter> w) {
               w->Reply(net::MakeResponse(q, http::status::ok, self->metrics_.Text(self->workers()),
                                          "text/plain; version=0.0.4"));
             });
}

void RouterEmulator::AddWorkerAndReply(net::Request q, std::shared_ptr<net::ResponseWriter> w,
                                       const std::string& url) {
  if (Status s = AddWorker(url); !s.ok()) {
    return w->Reply(net::MakeErrorResponse(q, http::status::bad_request, s.message()));
  }
  if (StatusOr<std::pair<std::string, std::optional<int64_t>>> split = SplitRank(url); split.ok()) {
    LearnModelId(url, split->first);
  }
  w->Reply(net::MakeResponse(q, http::status::ok,
                             boost::json::serialize(boost::json::object{
                                 {"status", "success"}, {"message", "Worker " + url + " added"}})));
}

void RouterEmulator::HandleRecordedRequests(net::Request q,
                                            std::shared_ptr<net::ResponseWriter> w) {
  boost::json::array list;
  int64_t dropped = 0;
  {
    sync::MutexLock lock(&mu_);
    for (const Received& received : received_.entries()) {
      list.push_back(boost::json::object{{"path", received.path},
                                         {"routing_key", received.routing_key},
                                         {"worker", received.worker}});
    }
    dropped = received_.dropped();
  }
  net::Response response = net::MakeResponse(q, http::status::ok, boost::json::serialize(list));
  response.set("X-Agentkv-Requests-Dropped", std::to_string(dropped));
  w->Reply(std::move(response));
}

void RouterEmulator::HandleUnrouted(net::Request q, std::shared_ptr<net::ResponseWriter> w) {
  const std::string target(q.target());
  if (q.method() == http::verb::delete_ && target.rfind("/workers/", 0) == 0) {
    const std::string url = boost::urls::pct_string_view(target.substr(9)).decode();
    const bool removed = RemoveWorker(url);
    return w->Reply(net::MakeResponse(
        q, removed ? http::status::ok : http::status::not_found,
        removed ? R"({"status":"success"})" : net::SglangErrorBody("no worker " + url, 404)));
  }
  {
    sync::MutexLock lock(&mu_);
    received_.Append(Received{target, "", ""});
  }
  w->Reply(net::MakeErrorResponse(q, http::status::not_found, "no route for " + target));
}

RouterEmulator::~RouterEmulator() { Shutdown(std::chrono::milliseconds(0)); }

uint16_t RouterEmulator::port() const { return server_->port(); }
uint16_t RouterEmulator::prometheus_port() const {
  return prometheus_server_ != nullptr ? prometheus_server_->port() : 0;
}
std::string RouterEmulator::base_url() const { return server_->base_url(); }

int64_t RouterEmulator::received_requests() const {
  sync::MutexLock lock(&mu_);
  return static_cast<int64_t>(received_.size());
}

int64_t RouterEmulator::received_requests_dropped() const {
  sync::MutexLock lock(&mu_);
  return received_.dropped();
}

std::vector<protocol::WorkerInfo> RouterEmulator::workers() const {
  sync::MutexLock lock(&mu_);
  std::vector<protocol::WorkerInfo> infos;
  for (const Worker& w : workers_) infos.push_back(w.info);
  return infos;
}

void RouterEmulator::Shutdown(std::chrono::milliseconds deadline) {
  if (stopping_.exchange(true)) return;
  health_wake_.SignalAll();
  if (health_thread_.joinable()) health_thread_.join();
  if (server_ != nullptr) server_->Shutdown(deadline);
  if (prometheus_server_ != nullptr) prometheus_server_->Shutdown(deadline);
  forward_client_.reset();
  client_.reset();
}

Status RouterEmulator::AddWorker(const std::string& url) {
  RouterEmulatorOptions probe;
  probe.worker_urls = {url};
  AGENTKV_RETURN_IF_ERROR(probe.Validate());
  sync::MutexLock lock(&mu_);
  for (const Worker& w : workers_) {
    if (w.info.url == url) return AlreadyExistsError("worker " + url + " is already registered");
  }
  Worker worker;
  worker.info.url = url;
  worker.info.id = "worker-" + std::to_string(next_engine_);
  AGENTKV_ASSIGN_OR_RETURN(auto split, SplitRank(url));
  auto [base, rank] = std::move(split);
  worker.base_url = base;
  worker.dp_rank = rank;
  worker.engine = EngineId(next_engine_++);
  router_->AddEngine(worker.engine);
  workers_.push_back(std::move(worker));
  return Status::Ok();
}

bool RouterEmulator::RemoveWorker(const std::string& url) {
  sync::MutexLock lock(&mu_);
  auto it = std::find_if(workers_.begin(), workers_.end(),
                         [&](const Worker& w) { return w.info.url == url; });
  if (it == workers_.end()) return false;
  if (it->info.is_healthy) router_->RemoveEngine(it->engine);
  workers_.erase(it);
  return true;
}

void RouterEmulator::HandleForward(net::Request request,
                                   std::shared_ptr<net::ResponseWriter> writer) {
  const std::string path(request.target());
  const std::string routing_key(request["X-SMG-Routing-Key"]);
  std::string body = request.body();
  bool stream = false;
  std::vector<uint64_t> keys;
  const auto started_at = std::chrono::steady_clock::now();
  metrics_.CountRequest(path);
  if (!ReadForwardBody(path, body, stream, keys)) {
    metrics_.CountError(path, "invalid_request");
    return writer->Reply(net::MakeErrorResponse(request, http::status::bad_request,
                                                "the body is not a JSON object"));
  }
  std::optional<Worker> chosen = ChooseWorker(path, routing_key, body, keys);
  if (!chosen.has_value()) {
    return writer->Reply(
        net::MakeErrorResponse(request, http::status::service_unavailable, "no healthy worker"));
  }
  if (chosen->dp_rank.has_value() && path == "/generate") {
    if (StatusOr<std::string> with_rank =
            protocol::SetTopLevelField(body, "routed_dp_rank", std::to_string(*chosen->dp_rank));
        with_rank.ok()) {
      body = *std::move(with_rank);
    }
  }
  std::vector<std::pair<std::string, std::string>> headers;
  for (const auto& field : request) {
    if (ForwardedHeader(field.name_string())) {
      headers.emplace_back(std::string(field.name_string()), std::string(field.value()));
    }
  }
  metrics_.CountProcessed(chosen->info.url);
  const EngineId engine = chosen->engine;
  // Once per request, when its answer (or its failure) is known.
  std::function<void(std::string_view)> release = [this, engine, path,
                                                   started_at](std::string_view error_type) {
    if (!error_type.empty()) metrics_.CountError(path, std::string(error_type));
    metrics_.ObserveDuration(
        path, std::chrono::duration<double>(std::chrono::steady_clock::now() - started_at).count());
    sync::MutexLock lock(&mu_);
    for (Worker& w : workers_) {
      if (w.engine == engine && w.info.load > 0) --w.info.load;
    }
  };
  auto shared_request = std::make_shared<net::Request>(std::move(request));
  if (!stream) {
    return ForwardBuffered(writer, shared_request, chosen->base_url, path, std::move(headers),
                           std::move(body), std::move(release));
  }
  ForwardStreamed(writer, shared_request, chosen->base_url, path, std::move(headers),
                  std::move(body), std::move(release));
}

bool RouterEmulator::ReadForwardBody(const std::string& path, const std::string& body, bool& stream,
                                     std::vector<uint64_t>& keys) {
  boost::system::error_code error;
  const boost::json::value parsed = boost::json::parse(body, error);
  if (error || !parsed.is_object()) return false;
  const boost::json::value* s = parsed.as_object().if_contains("stream");
  stream = s != nullptr && s->is_bool() && s->as_bool();
  if (path == "/generate") {
    if (StatusOr<protocol::GenerateRequest> g = protocol::ParseGenerateRequest(body); g.ok()) {
      keys = PromptKeys(*g);
    }
  }
  return true;
}

std::optional<RouterEmulator::Worker> RouterEmulator::ChooseWorker(
    const std::string& path, const std::string& routing_key, const std::string& body,
    const std::vector<uint64_t>& keys) {
  sync::MutexLock lock(&mu_);
  if (router_->engines().empty()) {
    received_.Append(Received{path, routing_key, ""});
    metrics_.CountError(path, "no_workers");
    return std::nullopt;
  }
  for (const Worker& w : workers_) {
    if (w.info.is_healthy) router_->SetLoad(w.engine, w.info.load);
  }
  routing::RouteRequest route;
  route.routing_key =
      routing_key.empty() ? Hash64(body, 0) : routing::SessionRoutingKey(routing_key);
  route.block_keys = keys;
  const EngineId engine = router_->Route(route);
  auto it = std::find_if(workers_.begin(), workers_.end(),
                         [&](const Worker& w) { return w.engine == engine; });
  ++it->info.load;
  received_.Append(Received{path, routing_key, it->info.url});
  return *it;
}

void RouterEmulator::ForwardBuffered(std::shared_ptr<net::ResponseWriter> writer,
                                     std::shared_ptr<net::Request> request,
                                     const std::string& base_url, const std::string& path,
                                     std::vector<std::pair<std::string, std::string>> headers,
                                     std::string body,
                                     std::function<void(std::string_view)> release) {
  forward_client_->AsyncRequest(
      http::verb::post, base_url, path, std::move(headers), std::move(body),
      [writer, request, release](StatusOr<net::ClientResponse> response) {
        const bool timeout =
            !response.ok() && response.status().code() == StatusCode::kDeadlineExceeded;
        release(response.ok() ? "" : timeout ? "upstream_timeout" : "upstream_error");
        if (!response.ok()) {
          return writer->Reply(net::MakeErrorResponse(
              *request, timeout ? http::status::gateway_timeout : http::status::bad_gateway,
              "upstream: " + response.status().message()));
        }
        std::string content_type = "application/json";
        for (const auto& [name, value] : response->headers) {
          if (name == "Content-Type" || name == "content-type") content_type = value;
        }
        writer->Reply(net::MakeResponse(*request, static_cast<http::status>(response->status),
                                        std::move(response->body), content_type));
      });
}

void RouterEmulator::ForwardStreamed(std::shared_ptr<net::ResponseWriter> writer,
                                     std::shared_ptr<net::Request> request,
                                     const std::string& base_url, const std::string& path,
                                     std::vector<std::pair<std::string, std::string>> headers,
                                     std::string body,
                                     std::function<void(std::string_view)> release) {
  auto started = std::make_shared<std::atomic<bool>>(false);
  std::shared_ptr<net::HttpClient::StreamHandle> handle = forward_client_->AsyncStream(
      http::verb::post, base_url, path, std::move(headers), std::move(body),
      [writer, started](int status, const std::vector<std::pair<std::string, std::string>>& h) {
        std::vector<std::pair<std::string, std::string>> out;
        for (const auto& [name, value] : h) {
          if (name == "Content-Type" || name == "content-type")
            out.emplace_back("Content-Type", value);
        }
        started->store(true);
        writer->StartStream(static_cast<http::status>(status), std::move(out));
      },
      [writer](std::string_view chunk) { writer->WriteChunk(std::string(chunk)); },
      [writer, started, request, release](Status status) {
        release(status.ok()                                      ? ""
                : status.code() == StatusCode::kDeadlineExceeded ? "upstream_timeout"
                                                                 : "upstream_error");
        if (!started->load()) {
          return writer->Reply(net::MakeErrorResponse(*request, http::status::bad_gateway,
                                                      "upstream: " + status.message()));
        }
        // sgl-router forwards the worker's byte stream; a worker stream that fails ends the
        // client's body with an error (hyper aborts it), never with a clean last chunk.
        if (status.ok()) {
          writer->EndStream();
        } else {
          writer->AbortStream();
        }
      });
  writer->OnClientGone([handle] { handle->Cancel(); });
}

void RouterEmulator::HandleProxyToFirstWorker(net::Request request,
                                              std::shared_ptr<net::ResponseWriter> writer) {
  std::optional<std::string> base;
  {
    sync::MutexLock lock(&mu_);
    for (const Worker& w : workers_) {
      if (w.info.is_healthy) {
        base = w.base_url;
        break;
      }
    }
  }
  if (!base.has_value()) {
    return writer->Reply(
        net::MakeErrorResponse(request, http::status::service_unavailable, "no healthy worker"));
  }
  std::vector<std::pair<std::string, std::string>> headers;
  for (const auto& field : request) {
    if (ForwardedHeader(field.name_string())) {
      headers.emplace_back(std::string(field.name_string()), std::string(field.value()));
    }
  }
  const http::verb verb = request.method();
  const std::string target(request.target());
  std::string body = std::move(request.body());
  request.body().clear();
  auto shared_request = std::make_shared<net::Request>(std::move(request));
  forward_client_->AsyncRequest(
      verb, *base, target, std::move(headers), std::move(body),
      [writer, shared_request](StatusOr<net::ClientResponse> response) {
        if (!response.ok()) {
          return writer->Reply(net::MakeErrorResponse(*shared_request, http::status::bad_gateway,
                                                      "upstream: " + response.status().message()));
        }
        std::string content_type = "application/json";
        for (const auto& [name, value] : response->headers) {
          if (boost::beast::iequals(name, "Content-Type")) content_type = value;
        }
        writer->Reply(net::MakeResponse(*shared_request,
                                        static_cast<http::status>(response->status),
                                        std::move(response->body), content_type));
      });
}

void RouterEmulator::HandleFlush(net::Request request,
                                 std::shared_ptr<net::ResponseWriter> writer) {
  std::vector<std::string> urls;
  for (const protocol::WorkerInfo& w : workers()) urls.push_back(protocol::StripRankSuffix(w.url));
  urls = protocol::EngineBaseUrls(urls);
  boost::json::array failed;
  int64_t flushed = 0;
  for (const std::string& url : urls) {
    StatusOr<net::ClientResponse> r = client_->Request(http::verb::post, url, "/flush_cache");
    if (r.ok() && r->status == 200) {
      ++flushed;
    } else {
      failed.push_back(boost::json::object{
          {"worker", url},
          {"error", r.ok() ? "HTTP " + std::to_string(r->status) : r.status().message()}});
    }
  }
  const bool partial = !failed.empty();
  boost::json::object body{{"status", partial ? "partial_success" : "success"},
                           {"workers_flushed", flushed},
                           {"total_http_workers", static_cast<int64_t>(urls.size())}};
  if (partial) body["failed"] = failed;
  writer->Reply(net::MakeResponse(request,
                                  partial ? http::status::partial_content : http::status::ok,
                                  boost::json::serialize(body)));
}

void RouterEmulator::LearnModelId(const std::string& url, const std::string& base_url) {
  StatusOr<net::ClientResponse> r = client_->Request(http::verb::get, base_url, "/get_model_info");
  if (!r.ok() || r->status != 200) return;
  boost::system::error_code error;
  const boost::json::value info = boost::json::parse(r->body, error);
  const boost::json::value* path =
      !error && info.is_object() ? info.as_object().if_contains("model_path") : nullptr;
  if (path == nullptr || !path->is_string() || path->as_string().empty()) return;
  sync::MutexLock lock(&mu_);
  for (Worker& w : workers_) {
    if (w.info.url == url) w.info.model_id = std::string(path->as_string());
  }
}

void RouterEmulator::HealthLoop() {
  while (!stopping_.load()) {
    struct Target {
      std::string url;
      std::string base;
      bool model_known;
    };
    std::vector<Target> targets;
    {
      sync::MutexLock lock(&mu_);
      for (const Worker& w : workers_) {
        targets.push_back(Target{w.info.url, w.base_url, w.info.model_id != "unknown"});
      }
    }
    for (const auto& [url, base, model_known] : targets) {
      if (stopping_.load()) return;
      StatusOr<net::ClientResponse> r = client_->Request(http::verb::get, base, "/health");
      const bool healthy = r.ok() && r->status == 200;
      if (healthy && !model_known) LearnModelId(url, base);
      sync::MutexLock lock(&mu_);
      for (Worker& w : workers_) {
        if (w.info.url != url || w.info.is_healthy == healthy) continue;
        w.info.is_healthy = healthy;
        if (healthy) {
          router_->AddEngine(w.engine);
        } else {
          router_->RemoveEngine(w.engine);
        }
      }
    }
    sync::MutexLock lock(&mu_);
    const auto deadline = std::chrono::steady_clock::now() + options_.health_check_interval;
    while (!stopping_.load()) {
      if (health_wake_.WaitWithDeadline(&mu_, deadline)) break;
    }
  }
}

}  // namespace agentkv::service
