// Gateway: the `agentkv gateway` service, an HTTP front door between agent clients and an
// SGLang fleet behind sgl-router (or a fixed engine list) that implements seed 000's session
// KV lifecycle and program-aware admission.
//
// Data path: POST /generate, /v1/chat/completions and /v1/completions, streamed or not, are
// forwarded to the router (or round robin to the engines) with the client's body byte for
// byte, except for the members the gateway owns: a unique `rid` per backend attempt, the
// top-level `session_id` (lifecycle on) and an authenticated sub-agent parent hint. Before
// forwarding, an in-scope request takes an admission lease from the AdmissionBackend (or waits
// in its global FIFO) and returns it when the attempt ends, however it ends.
// Control plane: POST /v1/sessions/{id}/close ends a session (abort its in-flight attempts on
// every engine, wait for them, close it on every engine), as does the idle timeout unless a
// request marked the session retained (X-Agentkv-Session-Retain); a
// FleetPoller feeds the backend engine snapshots from /metrics.
// Observability: GET /metrics (Prometheus), GET /agentic_kv (the seed's series as JSON),
// GET /health. docs/GATEWAY.md is the operator's guide.
//
// Thread-safe. Handlers never block: admission waits, upstream calls and close fan-outs are
// asynchronous. Owns its server, clients and threads; the backend must outlive every pending
// Acquire (Shutdown cancels them and waits for their answers).
#ifndef AGENTKV_SERVICE_GATEWAY_GATEWAY_H_
#define AGENTKV_SERVICE_GATEWAY_GATEWAY_H_

#include <chrono>
#include <cstdint>
#include <memory>
#include <string>

#include "agentkv/base/status.h"
#include "agentkv/control/session_lifecycle.h"
#include "agentkv/service/admission/admission_backend.h"
#include "agentkv/service/gateway/gateway_options.h"

namespace agentkv::service {

// Counters for tests and the command line.
struct GatewayStats {
  // Data-path requests being served (admission wait included).
  int64_t in_flight = 0;
  // Requests waiting for an admission decision.
  int64_t awaiting_admission = 0;
  int64_t sessions_active = 0;
  // Active sessions marked retained (X-Agentkv-Session-Retain: 1).
  int64_t sessions_retained = 0;
  // Close fan-outs since start, and those that failed on some engine.
  int64_t session_close = 0;
  int64_t session_close_failure = 0;
  int64_t parent_hint_rejected = 0;
  // Parent returns delivered to every engine (--agentic-subagent-demotion).
  int64_t subagent_demotion_deliveries = 0;
  // Fleet polls completed.
  int64_t polls = 0;
  // Bytes of request bodies and queued answers held now (--max-inflight-bytes counts them),
  // requests refused with 503 for that bound since start, and the times freed memory was
  // returned to the system (malloc_trim after a peak).
  int64_t inflight_bytes = 0;
  int64_t inflight_refused = 0;
  int64_t memory_trims = 0;
};

class Gateway {
 public:
  // Validates `options`; checks engine prerequisites (unless options.check_prerequisites is
  // false); starts the server, the fleet poller and the session sweeper.
  // InvalidArgument: bad options, or admission on without a backend. FailedPrecondition: an
  // engine lacks a flag an enabled feature needs under --prerequisite-policy refuse (the
  // message names the engine and the flag). Unavailable: an engine's /server_info could not
  // be read under refuse, or the port cannot be bound.
  static StatusOr<std::unique_ptr<Gateway>> Start(GatewayOptions options,
                                                  std::shared_ptr<AdmissionBackend> backend);

  Gateway(const Gateway&) = delete;
  Gateway& operator=(const Gateway&) = delete;
  // Shutdown(0) if still running.
  ~Gateway();

  uint16_t port() const;
  // "http://127.0.0.1:PORT".
  std::string base_url() const;

  // The features in force after the startup checks (kDisable may have turned one off).
  bool lifecycle_enabled() const;
  bool admission_enabled() const;

  GatewayStats stats() const;

  // Graceful stop: /health turns 503 and new data-path requests get 503; requests waiting for
  // admission are cancelled (answered 503); in-flight requests finish until `deadline`, then
  // the rest are cut; the poller and sweeper stop and the clients close. Idempotent. Must not
  // be called from a handler thread.
  void Shutdown(std::chrono::milliseconds deadline);

 private:
  class Core;
  explicit Gateway(std::shared_ptr<Core> core);
  std::shared_ptr<Core> core_;
};

}  // namespace agentkv::service

#endif  // AGENTKV_SERVICE_GATEWAY_GATEWAY_H_
