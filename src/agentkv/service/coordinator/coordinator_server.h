// CoordinatorServer: `agentkv coordinator`, program-aware admission for a whole fleet behind
// HTTP (seed 000's single-writer AdmissionCoordinator actor; docs/COORDINATOR.md).
//
// It is an HttpServer in front of one LocalAdmission, plus the gateway's FleetPoller over an
// EngineDirectory. Every poll_interval_s the poller discovers the engines (the router's GET
// /workers, falling back to GET /list_workers, or a fixed list), scrapes every engine's
// /metrics concurrently, turns the TP-replicated gauges into one snapshot per engine (max over
// ranks; an engine whose scrape fails, times out or does not parse is unhealthy) and reconciles
// the ledger. Discovery that fails reconciles an empty fleet: the ledger goes degraded and
// admission fails open.
//
// Endpoints: POST /admission/acquire (answers when the decision is final: at once, when a
// release admits it, or at max_wait as `aged`; a client that disconnects while waiting has
// its ticket cancelled), POST /admission/release, POST /admission/cancel, POST
// /admission/heartbeat, GET /agentic_kv (`?reset=1` drains the step), GET /metrics
// (Prometheus), GET /health. Program-level (working-set) admission for frameworks that call
// engines themselves: POST /admission/program/{acquire, finish, cancel, end_agent}
// (working_set_wire.h; acquire answers when its decision is final, like /admission/acquire). With
// an auth token, /admission/* and /agentic_kv require `Authorization: Bearer <token>`; /health and
// /metrics stay open.
//
// Instance liveness: a caller that names its instance (an acquire's `instance`, or a
// heartbeat; RemoteAdmission does both) has every lease and waiter of that instance ended once
// it stays silent for instance_timeout_s, logged as `event=instance_expired` and counted in
// agentkv_coordinator_instance_expired_total (docs/COORDINATOR.md). Callers that never name one
// keep the lease TTL as their only backstop.
//
// Thread-safe. Owns its server, admission, client and poller thread; not copyable. Shutdown
// (also run by the destructor) stops the poller, answers every waiter kBypass `degraded` and
// then stops the server.
#ifndef AGENTKV_SERVICE_COORDINATOR_COORDINATOR_SERVER_H_
#define AGENTKV_SERVICE_COORDINATOR_COORDINATOR_SERVER_H_

#include <atomic>
#include <chrono>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "agentkv/base/status.h"
#include "agentkv/control/agentic_options.h"
#include "agentkv/control/engine_gauges.h"
#include "agentkv/net/http_client.h"
#include "agentkv/net/http_server.h"
#include "agentkv/net/router.h"
#include "agentkv/service/admission/admission_local.h"
#include "agentkv/service/admission/working_set_local.h"
#include "agentkv/service/common/engine_directory.h"
#include "agentkv/service/common/fleet_poller.h"
#include "agentkv/service/common/log_sink.h"
#include "agentkv/sync/mutex.h"

namespace agentkv::service {

struct CoordinatorOptions {
  // Address, port (0 = ephemeral) and I/O threads of the API server.
  net::HttpServerOptions http;
  // The seed's options (agentic_program_admission is implied); poll_interval_s, staleness_s,
  // lease_ttl_s, max_wait_s, headroom and pressure threshold are what the coordinator uses.
  control::AgenticOptions agentic;
  // sgl-router base URL for engine discovery ("http://host:port"). Default: empty.
  std::string router_url;
  // A fixed list of engine base URLs, used instead of the router when non-empty. With neither
  // this nor router_url there is no capacity signal and every request bypasses `degraded`.
  std::vector<std::string> engine_urls;
  // Bearer token required on /admission/* and /agentic_kv; empty: no authentication.
  std::string auth_token;
  // --metrics-timeout-s: how long each poll waits for discovery, and then for the scrapes
  // (a hard deadline whatever a peer does). poll interval + 2 x this must stay below the
  // staleness (control::CheckPollTiming). Default: 1.5. Range: (0, 1 year].
  double metrics_timeout_s = 1.5;
  // --instance-timeout-s: how long an instance may stay silent (no heartbeat, no acquire)
  // before its leases are released and its waiters cancelled. Default: 10. Range: (0, 86400].
  double instance_timeout_s = 10.0;
  // LocalAdmission's aging tick (and instance expiry). Default: 100 ms. Must be > 0.
  std::chrono::milliseconds tick_interval{100};
  // The working set behind /admission/program/* (--agentic-working-set-*), fed by the same
  // polls. Default: control::WorkingSetOptions's defaults.
  control::WorkingSetOptions working_set;
  // Where log lines go (failed discovery, failed scrapes). Default: StderrLogSink.
  LogSink log = StderrLogSink;

  // InvalidArgument naming the first bad field (the agentic options in their flag form).
  Status Validate() const;
};

class CoordinatorServer {
 public:
  // Validates, starts the admission, the server and the poller (whose first poll starts at
  // once). InvalidArgument for bad options; Unavailable when the port cannot be bound.
  static StatusOr<std::unique_ptr<CoordinatorServer>> Start(const CoordinatorOptions& options);

  CoordinatorServer(const CoordinatorServer&) = delete;
  CoordinatorServer& operator=(const CoordinatorServer&) = delete;
  ~CoordinatorServer();

  uint16_t port() const;
  // "http://ADDRESS:PORT".
  std::string base_url() const;
  LocalAdmission& admission() { return *admission_; }
  LocalWorkingSet& working_set() { return *working_set_; }

  // One poll now, on the calling thread (blocking up to twice metrics_timeout_s):
  // discovery, concurrent scrapes, Reconcile. Returns the snapshots reconciled (empty when
  // discovery failed). The poller thread calls it every poll interval.
  std::vector<control::EngineSnapshot> PollOnce();
  // Polls completed since start.
  int64_t polls() const;

  // GET /metrics's body: every agentic_kv series now (gauges named by
  // control::PrometheusName), agentkv_coordinator_requests_total{endpoint}, the live
  // instances and what instance expiry released.
  std::string MetricsText();

  // Stops the poller, resolves every waiter kBypass `degraded` (their clients get that
  // answer), then shuts the server down, letting answers drain until `deadline`. Idempotent;
  // not from a server I/O thread.
  void Shutdown(std::chrono::milliseconds deadline);

 private:
  // The endpoints counted in agentkv_coordinator_requests_total, in output order.
  enum Endpoint {
    kAcquire,
    kRelease,
    kCancel,
    kAgenticKv,
    kMetrics,
    kHealth,
    kHeartbeat,
    kProgramAcquire,
    kProgramFinish,
    kProgramCancel,
    kProgramEndAgent,
    kEndpointCount
  };

  explicit CoordinatorServer(const CoordinatorOptions& options);

  // Start's steps: the admission and working-set cores; the client, the engines' directory and
  // the fleet poller (not started); the routes.
  Status CreateAdmission();
  void CreatePoller();
  void AddRoutes(net::Router& router);
  void HandleAcquire(net::Request request, std::shared_ptr<net::ResponseWriter> writer);
  void HandleRelease(net::Request request, std::shared_ptr<net::ResponseWriter> writer);
  void HandleCancel(net::Request request, std::shared_ptr<net::ResponseWriter> writer);
  void HandleHeartbeat(net::Request request, std::shared_ptr<net::ResponseWriter> writer);
  void HandleAgenticKv(net::Request request, std::shared_ptr<net::ResponseWriter> writer);
  void HandleProgramAcquire(net::Request request, std::shared_ptr<net::ResponseWriter> writer);
  void HandleProgramFinish(net::Request request, std::shared_ptr<net::ResponseWriter> writer);
  void HandleProgramCancel(net::Request request, std::shared_ptr<net::ResponseWriter> writer);
  void HandleProgramEndAgent(net::Request request, std::shared_ptr<net::ResponseWriter> writer);
  // True when the request may proceed; otherwise it was answered 401.
  bool Authorize(const net::Request& request, net::ResponseWriter& writer) const;
  CoordinatorOptions options_;
  std::unique_ptr<LocalAdmission> admission_;
  std::unique_ptr<LocalWorkingSet> working_set_;
  std::unique_ptr<net::HttpClient> client_;
  std::unique_ptr<EngineDirectory> directory_;
  std::unique_ptr<FleetPoller> poller_;
  std::unique_ptr<net::HttpServer> server_;
  std::atomic<int64_t> requests_[kEndpointCount] = {};

  sync::Mutex shutdown_mu_;
  bool shut_down_ AGENTKV_GUARDED_BY(shutdown_mu_) = false;
};

}  // namespace agentkv::service

#endif  // AGENTKV_SERVICE_COORDINATOR_COORDINATOR_SERVER_H_
