// EngineEmulator: an SGLang-compatible HTTP engine over EngineRuntime (`agentkv emulate
// engine`). It speaks the endpoints, JSON shapes, status codes and metric names of
// docs/PROTOCOL.md so that an agent framework, a router or the agentkv
// gateway can be tested against it on a machine with no GPU: /generate (streaming or not,
// rid, session_id, sampling_params.max_new_tokens, priority, return_logprob), the OpenAI
// routes /v1/chat/completions, /v1/completions, /v1/models and /v1/models/{model}, /abort_request,
// /open_session, /close_session, /flush_cache, /server_info (/get_server_info), /model_info
// (/get_model_info), /health, /health_generate, /metrics.
//
// As an agentkv engine (not SGLang: an unmodified SGLang engine has no such call and answers
// 404) it serves POST /demote_finished_subagents {"parent_session_id": "P"}: the gateway's
// fan-out when a parent session sends its next request; the engine demotes the finished
// sub-agents of P it holds and answers {"demoted_children": n} (EngineRuntime::
// DemoteFinishedSubagents; demotion needs the runtime's per_conversation policy and
// finished_subagent_priority). A /generate body's agentkv_parent_session registers its session
// as P's child.
//
// For tests it also serves two agentkv endpoints outside SGLang's surface:
//   POST /agentkv/faults  {"metrics_status": 503, "health_status": 503,
//                          "close_session_status": 500, "metrics_delay_ms": 1000}
//       makes those endpoints answer with the given status (0 = normal) or stall, to exercise
//       degraded paths; GET returns the current faults.
//   GET /agentkv/requests  the control requests received ({"path", "body"} in arrival order:
//       /abort_request, /open_session, /close_session, /flush_cache,
//       /demote_finished_subagents), so tests can assert on a
//       fan-out: the newest `max_recorded_requests`, with the count of older ones dropped in
//       the X-Agentkv-Requests-Dropped header.
//
// Limits: request lengths as SGLang (EngineRuntime, context_limits.h); every numeric field of
// a request is range-checked (base/bounds.h); /open_session ids are remembered up to the
// runtime's max_sessions (the oldest is forgotten past it). Nothing kept grows with traffic.
//
// Text prompts: the emulator has no tokenizer; `text` becomes one pseudo token per 4 bytes.
// Output text is the output tokens spelled " t<id>". Streaming chunks carry the cumulative
// text and output_ids (SGLang's default, without --stream-output), `finish_reason` null until
// the last chunk, then `data: [DONE]`. A client that disconnects aborts its request.
//
// Thread-safe; owns its HTTP server and runtime. Not copyable.
#ifndef AGENTKV_SERVICE_EMULATOR_ENGINE_EMULATOR_H_
#define AGENTKV_SERVICE_EMULATOR_ENGINE_EMULATOR_H_

#include <atomic>
#include <boost/json/object.hpp>
#include <cstdint>
#include <memory>
#include <optional>
#include <set>
#include <span>
#include <string>
#include <utility>
#include <vector>

#include "agentkv/base/status.h"
#include "agentkv/net/http_server.h"
#include "agentkv/net/router.h"
#include "agentkv/protocol/server_info.h"
#include "agentkv/service/emulator/bounded_log.h"
#include "agentkv/service/emulator/engine_runtime.h"
#include "agentkv/service/emulator/lru_map.h"
#include "agentkv/service/emulator/unique_ids.h"
#include "agentkv/sync/mutex.h"

namespace agentkv::service {

struct EngineEmulatorOptions {
  EngineRuntimeOptions runtime;
  net::HttpServerOptions http;
  // SGLang --enable-metrics: serve /metrics. Default: true.
  bool enable_metrics = true;
  // Each scheduler gauge is written once per TP rank with the same value, as SGLang does;
  // 0 means runtime.engine.tp ranks. Default: 0. Range: [0, 64].
  int32_t metrics_tp_ranks = 0;
  // The model_name label and /model_info's model_path. Default: the runtime's model preset.
  std::string served_model_name;
  // SGLang --api-key: when set, every request but OPTIONS, /health* and /metrics* must carry
  // `Authorization: Bearer <api_key>`, else it is answered 401 {"error": "Unauthorized"}, as
  // SGLang's API key middleware answers. Never written anywhere (not in /server_info). Default:
  // empty, no check.
  std::string api_key;
  // /server_info's version. Default: "agentkv-emulator".
  std::string version = std::string(protocol::kEmulatorVersion);
  // Control requests kept for GET /agentkv/requests (the newest ones). Default: 4096.
  // Range: [0, 2^24].
  int64_t max_recorded_requests = 4096;

  Status Validate() const;
};

class EngineEmulator {
 public:
  // Validates, starts the runtime and the HTTP server. Unavailable when the port is taken.
  static StatusOr<std::unique_ptr<EngineEmulator>> Start(const EngineEmulatorOptions& options);

  EngineEmulator(const EngineEmulator&) = delete;
  EngineEmulator& operator=(const EngineEmulator&) = delete;
  ~EngineEmulator();

  uint16_t port() const;
  // "http://127.0.0.1:PORT".
  std::string base_url() const;
  EngineRuntime& runtime() { return *runtime_; }

  // The /metrics text now (also what GET /metrics serves).
  std::string MetricsText() const;

  // Control requests kept and dropped by the bounded record (GET /agentkv/requests), and
  // /open_session ids remembered now and forgotten past max_sessions.
  int64_t recorded_requests() const;
  int64_t recorded_requests_dropped() const;
  int64_t open_sessions() const;
  int64_t open_sessions_evicted() const;

  // Stops accepting, aborts running requests (their clients get the abort finish reason),
  // and lets responses drain until `deadline`. Idempotent.
  void Shutdown(std::chrono::milliseconds deadline);

 private:
  struct Faults {
    int metrics_status = 0;
    int health_status = 0;
    int close_session_status = 0;
    int64_t metrics_delay_ms = 0;
  };

  explicit EngineEmulator(const EngineEmulatorOptions& options);

  // Start's routes: generation, aborts, sessions, cache and fault injection; the server, model
  // and health information and the metrics.
  void AddServingRoutes(net::Router& router);
  void AddInfoRoutes(net::Router& router);
  // GET /agentkv/requests: the recorded request bodies (X-Agentkv-Requests-Dropped: how many
  // the bound dropped).
  void HandleRecordedRequests(net::Request request, std::shared_ptr<net::ResponseWriter> writer);
  void HandleGenerate(net::Request request, std::shared_ptr<net::ResponseWriter> writer);
  // /v1/chat/completions (chat) and /v1/completions, in engine_emulator_openai.cc.
  void HandleOpenAi(net::Request request, std::shared_ptr<net::ResponseWriter> writer, bool chat);
  void HandleAbort(net::Request request, std::shared_ptr<net::ResponseWriter> writer);
  void HandleOpenSession(net::Request request, std::shared_ptr<net::ResponseWriter> writer);
  void HandleCloseSession(net::Request request, std::shared_ptr<net::ResponseWriter> writer);
  void HandleFlushCache(net::Request request, std::shared_ptr<net::ResponseWriter> writer);
  void HandleDemoteFinishedSubagents(net::Request request,
                                     std::shared_ptr<net::ResponseWriter> writer);
  void HandleHealth(net::Request request, std::shared_ptr<net::ResponseWriter> writer,
                    bool generate);
  void HandleMetrics(net::Request request, std::shared_ptr<net::ResponseWriter> writer);
  void HandleFaults(net::Request request, std::shared_ptr<net::ResponseWriter> writer);

  // The routes RL frameworks call (engine_emulator_rl.cc).
  struct WeightUpdate {
    bool flush_cache = true;
    bool abort_all_requests = false;
    std::optional<std::string> weight_version;
    std::string success_message;
    // Members added to the answer (update_weights_from_disk's num_paused_requests).
    boost::json::object extra;
  };
  static constexpr size_t kMaxWeightUpdateGroups = 64;
  void AddRlRoutes(net::Router& router);
  void HandlePauseGeneration(net::Request request, std::shared_ptr<net::ResponseWriter> writer);
  void HandleContinueGeneration(net::Request request, std::shared_ptr<net::ResponseWriter> writer);
  void HandleReleaseMemoryOccupation(net::Request request,
                                     std::shared_ptr<net::ResponseWriter> writer);
  void HandleResumeMemoryOccupation(net::Request request,
                                    std::shared_ptr<net::ResponseWriter> writer);
  void HandleUpdateWeightsFromDisk(net::Request request,
                                   std::shared_ptr<net::ResponseWriter> writer);
  void HandleUpdateWeightsFromDistributed(net::Request request,
                                          std::shared_ptr<net::ResponseWriter> writer);
  void HandleInitWeightsUpdateGroup(net::Request request,
                                    std::shared_ptr<net::ResponseWriter> writer);
  void HandleDestroyWeightsUpdateGroup(net::Request request,
                                       std::shared_ptr<net::ResponseWriter> writer);
  void HandleUpdateWeightVersion(net::Request request, std::shared_ptr<net::ResponseWriter> writer);
  void HandleTokenize(net::Request request, std::shared_ptr<net::ResponseWriter> writer);
  void HandleDetokenize(net::Request request, std::shared_ptr<net::ResponseWriter> writer);
  // Applies `update` (EngineRuntime::ApplyWeightUpdate) and answers {"success", "message"}.
  void ApplyWeightUpdate(const net::Request& request, net::ResponseWriter& writer,
                         const WeightUpdate& update);
  std::string weight_version() const;
  void Record(const net::Request& request);
  std::string ServerInfoJson() const;
  std::string ModelInfoJson() const;
  // GET /v1/models: the OpenAI model list SGLang serves.
  std::string ModelListJson() const;
  // GET /v1/models/{model} (the SDK's models.retrieve): the served model's card, or SGLang's
  // 404 model_not_found error for any other name.
  void HandleRetrieveModel(net::Request request, std::shared_ptr<net::ResponseWriter> writer);
  Faults faults() const;

  EngineEmulatorOptions options_;
  std::unique_ptr<EngineRuntime> runtime_;
  std::unique_ptr<net::HttpServer> server_;
  // Request, response and session ids no other engine or earlier run repeats.
  UniqueIds ids_;
  std::atomic<bool> shutting_down_{false};

  mutable sync::Mutex mu_;
  Faults faults_ AGENTKV_GUARDED_BY(mu_);
  BoundedLog<std::pair<std::string, std::string>> recorded_ AGENTKV_GUARDED_BY(mu_);
  // Legacy /open_session ids (the value is unused), least recently opened first.
  LruMap<std::string, bool> open_sessions_ AGENTKV_GUARDED_BY(mu_);
  int64_t open_sessions_evicted_ AGENTKV_GUARDED_BY(mu_) = 0;
  // SGLang's weight_version ("default" until an update names one), and the weights update
  // groups initialized and not destroyed.
  std::string weight_version_ AGENTKV_GUARDED_BY(mu_) = "default";
  std::set<std::string> weight_update_groups_ AGENTKV_GUARDED_BY(mu_);
};

// One pseudo token per 4 bytes of `text` (the emulator's stand-in for a tokenizer).
std::vector<int64_t> PseudoTokenize(std::string_view text);

// The text of output tokens: each spelled " t<id>".
std::string PseudoText(std::span<const int64_t> tokens);

}  // namespace agentkv::service

#endif  // AGENTKV_SERVICE_EMULATOR_ENGINE_EMULATOR_H_
