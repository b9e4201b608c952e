// RouterEmulator: an sgl-router compatible HTTP router (`agentkv emulate router`) in front of
// SGLang engines or EngineEmulators, per docs/PROTOCOL.md section 10.
//
// Data plane: POST /generate, /v1/chat/completions and /v1/completions are forwarded to one
// worker chosen by the policy (routing::Router: round_robin, cache_aware over the prompt's
// page keys, consistent_hashing on the X-SMG-Routing-Key header). Streaming responses are
// passed through chunk by chunk; only sgl-router's header allowlist is forwarded
// (authorization, x-request-id, x-request-id-*, x-correlation-id, traceparent, tracestate,
// x-smg-routing-key). A dp-aware worker entry `url@rank` is sent to `url` with
// `routed_dp_rank: rank` set in the body. Like the real router, it has no route for
// /abort_request, /open_session or /close_session: they get the fallback 404 and never reach
// an engine.
//
// Control plane: GET /workers (the older inline or the newer WorkerListResponse shape, per
// options), POST /workers {"url"}, DELETE /workers/{url}, POST /add_worker?url=,
// POST /remove_worker?url=, GET /list_workers, GET /get_loads, POST /flush_cache (fan-out, 200
// or 206), GET /health, /health_generate, /liveness, /readiness, /v1/models and
// /v1/models/{model} (the first healthy worker's answer, passed through), /metrics (also on the
// Prometheus listener, when options name one). A health checker
// polls each worker's /health every `health_check_interval`; unhealthy workers get no traffic.
// GET /agentkv/requests lists what the router received ({"path", "routing_key", "worker"}), for
// tests: the newest `max_received_requests`, with the count of older ones dropped in the
// X-Agentkv-Requests-Dropped header.
//
// A stream the worker breaks off (killed, reset, truncated) ends the way sgl-router ends it:
// the chunks received are passed on, then the client's body is broken off too (no terminating
// chunk), never a clean end.
//
// Thread-safe; owns its server, client and health-check thread. Not copyable.
#ifndef AGENTKV_SERVICE_EMULATOR_ROUTER_EMULATOR_H_
#define AGENTKV_SERVICE_EMULATOR_ROUTER_EMULATOR_H_

#include <atomic>
#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <thread>
#include <utility>
#include <vector>

#include "agentkv/base/status.h"
#include "agentkv/net/http_client.h"
#include "agentkv/net/http_server.h"
#include "agentkv/net/router.h"
#include "agentkv/protocol/workers.h"
#include "agentkv/routing/router.h"
#include "agentkv/service/emulator/bounded_log.h"
#include "agentkv/service/emulator/router_metrics.h"
#include "agentkv/sync/mutex.h"

namespace agentkv::service {

struct RouterEmulatorOptions {
  net::HttpServerOptions http;
  // The client of the control calls (health checks, /get_model_info, /flush_cache fan-out).
  // Forwarded requests use a copy whose waits are request_timeout.
  net::HttpClientOptions client;
  // sgl-router --request-timeout-secs: how long a forwarded request (/generate, the OpenAI
  // routes, the proxied GETs) may wait for the worker before the router answers 504: for its
  // response (a non-streamed request) or its first byte, for a free connection, and between
  // two pieces of a stream's body. Default: 1800 s (sgl-router's). Range: [1 ms, 1 year].
  std::chrono::milliseconds request_timeout{std::chrono::seconds(1800)};
  // sgl-router --policy. Default: cache_aware.
  routing::RouterPolicy policy = routing::RouterPolicy::kCacheAware;
  // Worker URLs ("http://host:port", or "http://host:port@rank" for dp-aware entries).
  std::vector<std::string> worker_urls;
  // Shape of GET /workers. Default: the newer WorkerListResponse.
  protocol::WorkersShape workers_shape = protocol::WorkersShape::kWorkerList;
  // Between health checks; 0 disables them (every worker stays healthy). Default: 1 s.
  std::chrono::milliseconds health_check_interval{1000};
  // cache_aware parameters (sgl-router's flags).
  double cache_threshold = 0.5;
  int64_t balance_abs_threshold = 32;
  double balance_rel_threshold = 1.5;
  // sgl-router --max-tree-size: cache_aware prefix keys remembered per worker (LRU).
  // Default: 2^20. Range: [1, 2^31).
  int64_t max_tree_size = int64_t{1} << 20;
  // Routed requests kept for GET /agentkv/requests (the newest ones). Default: 4096.
  // Range: [0, 2^24].
  int64_t max_received_requests = 4096;
  // sgl-router --prometheus-host/--prometheus-port: also serve GET /metrics (the same text as
  // the main port's) on this address and port. Default: unset, /metrics on the main port only.
  std::optional<net::HttpServerOptions> prometheus;

  Status Validate() const;
};

class RouterEmulator {
 public:
  static StatusOr<std::unique_ptr<RouterEmulator>> Start(const RouterEmulatorOptions& options);

  RouterEmulator(const RouterEmulator&) = delete;
  RouterEmulator& operator=(const RouterEmulator&) = delete;
  ~RouterEmulator();

  uint16_t port() const;
  std::string base_url() const;
  // The Prometheus listener's port (options.prometheus); 0 without one.
  uint16_t prometheus_port() const;
  // The workers now, in registration order.
  std::vector<protocol::WorkerInfo> workers() const;
  // Requests kept for GET /agentkv/requests, and those dropped to stay within
  // max_received_requests.
  int64_t received_requests() const;
  int64_t received_requests_dropped() const;

  void Shutdown(std::chrono::milliseconds deadline);

 private:
  struct Worker {
    protocol::WorkerInfo info;
    // Where requests go (the url without @rank) and the injected rank, if any.
    std::string base_url;
    std::optional<int64_t> dp_rank;
    EngineId engine;
  };
  struct Received {
    std::string path;
    std::string routing_key;
    std::string worker;
  };

  explicit RouterEmulator(const RouterEmulatorOptions& options);

  Status AddWorker(const std::string& url);
  bool RemoveWorker(const std::string& url);
  // Start's routes: the data path; the worker registry (/workers, /add_worker,
  // /remove_worker, /list_workers, /get_loads); flush, health, the first worker's information
  // and the metrics.
  void AddForwardRoutes(net::Router& routes);
  void AddWorkerRoutes(net::Router& routes);
  void AddInfoRoutes(net::Router& routes);
  // Registers worker `url` and answers as sgl-router does (400 with the reason when it cannot).
  void AddWorkerAndReply(net::Request request, std::shared_ptr<net::ResponseWriter> writer,
                         const std::string& url);
  // GET /agentkv/requests: the recorded requests (X-Agentkv-Requests-Dropped: how many the
  // bound dropped).
  void HandleRecordedRequests(net::Request request, std::shared_ptr<net::ResponseWriter> writer);
  // The fallback: DELETE /workers/{url}, else 404 (recorded).
  void HandleUnrouted(net::Request request, std::shared_ptr<net::ResponseWriter> writer);
  void HandleForward(net::Request request, std::shared_ptr<net::ResponseWriter> writer);
  // HandleForward's steps. Reads whether `body` streams and, for /generate, its prompt's page
  // keys; false when it is not a JSON object.
  static bool ReadForwardBody(const std::string& path, const std::string& body, bool& stream,
                              std::vector<uint64_t>& keys);
  // The worker the policy routes to, its load counted and the request recorded; nullopt (also
  // recorded, and counted as `no_workers`) when no worker is healthy.
  std::optional<Worker> ChooseWorker(const std::string& path, const std::string& routing_key,
                                     const std::string& body, const std::vector<uint64_t>& keys);
  // The call to the chosen worker, its answer relayed whole or as a byte stream; `release`
  // runs once when the answer (or the failure) is known.
  void ForwardBuffered(std::shared_ptr<net::ResponseWriter> writer,
                       std::shared_ptr<net::Request> request, const std::string& base_url,
                       const std::string& path,
                       std::vector<std::pair<std::string, std::string>> headers, std::string body,
                       std::function<void(std::string_view)> release);
  void ForwardStreamed(std::shared_ptr<net::ResponseWriter> writer,
                       std::shared_ptr<net::Request> request, const std::string& base_url,
                       const std::string& path,
                       std::vector<std::pair<std::string, std::string>> headers, std::string body,
                       std::function<void(std::string_view)> release);
  void HandleFlush(net::Request request, std::shared_ptr<net::ResponseWriter> writer);
  // GET /v1/models, /get_model_info, /get_server_info (and their aliases), POST /tokenize and
  // /detokenize: the request passed to the first healthy worker unchanged (method, target,
  // body, sgl-router's forwarded headers), its answer relayed, as sgl-router's
  // proxy_get_request does.
  void HandleProxyToFirstWorker(net::Request request, std::shared_ptr<net::ResponseWriter> writer);
  // Asks the worker at `base_url` for its model (GET /get_model_info's model_path) and records
  // it as the worker's model_id; a worker that does not answer keeps "unknown".
  void LearnModelId(const std::string& url, const std::string& base_url);
  void HealthLoop();

  RouterEmulatorOptions options_;
  std::unique_ptr<net::HttpClient> client_;
  // Forwards the data plane with options_.request_timeout (client_ keeps the short control
  // timeouts, so a hung worker fails its health check in seconds, not in half an hour).
  std::unique_ptr<net::HttpClient> forward_client_;
  std::unique_ptr<net::HttpServer> server_;
  std::unique_ptr<net::HttpServer> prometheus_server_;
  std::atomic<bool> stopping_{false};
  RouterMetrics metrics_;

  mutable sync::Mutex mu_;
  sync::CondVar health_wake_;
  std::unique_ptr<routing::Router> router_ AGENTKV_GUARDED_BY(mu_);
  std::vector<Worker> workers_ AGENTKV_GUARDED_BY(mu_);
  int32_t next_engine_ AGENTKV_GUARDED_BY(mu_) = 0;
  BoundedLog<Received> received_ AGENTKV_GUARDED_BY(mu_);
  std::thread health_thread_;
};

}  // namespace agentkv::service

#endif  // AGENTKV_SERVICE_EMULATOR_ROUTER_EMULATOR_H_
