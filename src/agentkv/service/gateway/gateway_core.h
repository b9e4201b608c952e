// Internal to the gateway (gateway.cc: startup and the data path; gateway_control.cc: the
// control plane, observability and shutdown): the gateway's state, shared by both files.
// Not part of the service's interface; include gateway.h instead.
//
// Invariants:
// - Every data-path request that got a rid (an Exchange) is finished exactly once (Finish):
//   its attempt reported to the SessionManager (whose control::GatewayFlow holds the attempt's
//   phase and lease, and returns the lease through ReturnLease), its metrics recorded.
// - The Exchange holds only the I/O side of an attempt (the client's writer, the upstream
//   handle); what happens next is decided by the flow, and the gateway performs its actions.
// - pending_acquires_ counts Acquire calls whose callback has not completed; awaiting_ holds
//   the rids whose decision has not arrived. Shutdown cancels awaiting_ and waits for
//   pending_acquires_ to reach 0 before the clients close.
// - No lock is held while calling the backend, a client, the SessionManager or a writer.
// - Members are torn down in Teardown in dependency order: server, threads, data client,
//   control client (client callbacks use the rest).
#ifndef AGENTKV_SERVICE_GATEWAY_GATEWAY_CORE_H_
#define AGENTKV_SERVICE_GATEWAY_GATEWAY_CORE_H_

#include <atomic>
#include <chrono>
#include <memory>
#include <mutex>
#include <optional>
#include <set>
#include <string>
#include <string_view>
#include <thread>
#include <variant>
#include <vector>

#include "agentkv/net/http_client.h"
#include "agentkv/net/http_server.h"
#include "agentkv/net/io_loops.h"
#include "agentkv/net/router.h"
#include "agentkv/service/common/engine_directory.h"
#include "agentkv/service/common/fleet_poller.h"
#include "agentkv/service/gateway/gateway.h"
#include "agentkv/service/gateway/gateway_metrics.h"
#include "agentkv/service/gateway/gateway_request.h"
#include "agentkv/service/gateway/gateway_sessions.h"
#include "agentkv/service/gateway/gateway_working_set.h"
#include "agentkv/service/gateway/session_rate_limit.h"
#include "agentkv/service/gateway/tenant_keys.h"
#include "agentkv/sync/mutex.h"

namespace agentkv::service {
namespace gateway_internal {

namespace http = net::http;
using Clock = std::chrono::steady_clock;

// One data-path request from arrival to its last byte.
struct Exchange {
  GatewayRoute route = GatewayRoute::kGenerate;
  net::Request request;  // Headers and version (the body lives in `client`).
  ClientRequest client;
  std::optional<std::string> session_id;
  std::optional<std::string> parent;      // A verified parent hint.
  PauseKind pause = PauseKind::kUnknown;  // Expected after it (X-Agentkv-Pause or body).
  // --agentic-program-fcfs: the `priority` its program's arrival gives it (unset when off or
  // when a trusted caller's own priority stands).
  std::optional<int32_t> program_priority;
  std::string rid;
  Clock::time_point started;
  // Its place in the working set (--agentic-working-set), set before it waits there.
  std::optional<WorkingSetTicket> working_set;

  sync::Mutex mu;  // Guards the fields below; taken before the SessionManager's, never after.
  // Finish ran (the attempt is no longer this exchange's: a sessionless rid may be reused).
  bool done AGENTKV_GUARDED_BY(mu) = false;
  bool client_gone AGENTKV_GUARDED_BY(mu) = false;
  std::shared_ptr<net::ResponseWriter> writer
      AGENTKV_GUARDED_BY(mu);  // Reset to cut a broken stream.
  std::shared_ptr<net::HttpClient::StreamHandle> stream AGENTKV_GUARDED_BY(mu);
  int upstream_status AGENTKV_GUARDED_BY(mu) = 0;
  // The context its answer leaves (prompt + output), when the answer said (working set).
  std::optional<int64_t> answer_context_tokens AGENTKV_GUARDED_BY(mu);

  std::shared_ptr<net::ResponseWriter> Writer() {
    sync::MutexLock lock(&mu);
    return writer;
  }
};

// A data-path request refused before it began an attempt: the answer's error and message.
struct ForwardRefusal {
  GatewayError error = GatewayError::kBadRequest;
  std::string message;
};

// What a data-path request asks for, read from its body and headers (Core::ReadForward), with
// the gateway's trust applied: an untrusted caller's bypass headers are dropped and its prompt
// claim is bounded by its body.
struct ForwardAsk {
  Caller caller;
  ClientRequest client;
  // The session as the client named it, and as the gateway and the engines know it (a
  // tenant's namespaced by its name, so that no other tenant can name it).
  std::optional<std::string> named_session;
  std::optional<std::string> session;
  std::optional<std::string> parent;  // A verified parent hint, namespaced as the session.
  AdmissionTrust trust;
  bool is_protected = false;  // X-Agentkv-Protected.
  bool is_train = true;       // X-Agentkv-Scope.
  std::optional<int64_t> prompt_tokens;
  std::optional<SharedPrefix> shared_prefix;
  PauseKind pause = PauseKind::kUnknown;  // X-Agentkv-Pause.
  std::optional<bool> retain;
};

// Whether work may still be handed to the HTTP server's executor (a close fan-out's timer, its
// cancel). Asio's io_context may not take work while it shuts down, and close fan-outs
// complete on the control client's threads, so the gateway closes this gate before it stops
// the server.
struct ServerGate {
  sync::Mutex mu;
  bool open AGENTKV_GUARDED_BY(mu) = true;
};

// The gateway's own error answer (ErrorResponse): the body shape of the request's API family,
// the status of `error` and its x-should-retry advice.
net::Response JsonError(const net::Request& request, GatewayError error, std::string_view message);

}  // namespace gateway_internal

// The gateway's state and logic behind the Gateway handle. Owned by shared_ptr: admission
// callbacks hold a reference, so a decision that arrives late never touches freed memory;
// server handlers and client callbacks use `this`, valid because Teardown stops the server and
// destroys the clients (running their callbacks) before the other members go.
class Gateway::Core : public SessionEffects, public std::enable_shared_from_this<Gateway::Core> {
 public:
  Core(GatewayOptions options, std::shared_ptr<AdmissionBackend> backend)
      : options_(std::move(options)), backend_(std::move(backend)) {}
  ~Core() override { Teardown(); }

  Status Init();
  void Shutdown(std::chrono::milliseconds deadline);
  GatewayStats Stats() const;

  // SessionEffects.
  void CancelQueuedAttempt(const std::string& rid) override;
  void AbortOnEveryEngine(const std::string& rid) override;
  // --agentic-subagent-demotion: POSTs /demote_finished_subagents for `parent` to every engine
  // (the flow decides when: control::ParentReturnDelivery::kOncePerReturn).
  void DeliverParentReturn(const std::string& parent) override;
  void CloseOnEveryEngine(const std::string& session_id,
                          std::function<void(bool ok)> done) override;
  void ReturnLease(const std::string& lease_id) override;

  GatewayOptions options_;
  std::shared_ptr<AdmissionBackend> backend_;
  bool lifecycle_ = false;
  bool admission_ = false;

  GatewayMetrics metrics_;
  std::unique_ptr<SessionManager> sessions_;
  std::unique_ptr<EngineDirectory> directory_;
  // One single-threaded event loop per server thread (--threads), shared by the server and
  // the data client, so that a request and its upstream call stay on the thread that read it.
  // Declared before what runs on them; joined by Teardown after the server and the clients.
  std::shared_ptr<net::IoLoops> loops_;
  std::unique_ptr<net::HttpClient> control_client_;
  std::unique_ptr<net::HttpClient> data_client_;
  std::unique_ptr<FleetPoller> poller_;
  std::unique_ptr<net::HttpServer> server_;
  // --agentic-working-set; null when off.
  std::unique_ptr<GatewayWorkingSet> working_set_;

 private:
  void Log(LogLevel level, const LogLine& line) const { options_.log(level, line); }
  // Whether a line at `level` would be logged: the per-request debug lines are built only then.
  bool LogsAt(LogLevel level) const { return options_.log.Enabled(level); }
  // Init's steps, in order: the control client and the engines' directory (and their
  // prerequisites); the session manager and the new-session limiter; the working set and the
  // fleet poller (returns whether it scrapes the engines' metrics); the routes and the server.
  Status DiscoverEngines();
  void OpenSessions();
  StatusOr<bool> CreatePoller();
  Status Serve(bool scrape_metrics);
  Status CheckEnginePrerequisites();
  void Routes(net::Router& router);
  void HandleForward(GatewayRoute route, net::Request request,
                     std::shared_ptr<net::ResponseWriter> writer);
  // HandleForward's steps. ReadForward: what `request` asks (its body moved out), or why it is
  // refused (a malformed body or header, a prompt past the context, a parent outside the
  // tenant); counts untrusted bypass headers and rejected parent hints.
  std::variant<gateway_internal::ForwardAsk, gateway_internal::ForwardRefusal> ReadForward(
      GatewayRoute route, const Caller& caller, net::Request& request);
  std::optional<gateway_internal::ForwardRefusal> ReadForwardHeaders(
      const net::Request& request, gateway_internal::ForwardAsk& ask);
  std::optional<gateway_internal::ForwardRefusal> ReadParentHint(const net::Request& request,
                                                                 gateway_internal::ForwardAsk& ask);
  // Begins the attempt of `ask` in its session: its rid, or the refusal (too many new
  // sessions from its caller, --max-sessions busy, a retention mark past the bound).
  std::variant<std::string, gateway_internal::ForwardRefusal> BeginForwardAttempt(
      const gateway_internal::ForwardAsk& ask, bool awaits_admission,
      gateway_internal::Clock::time_point started);
  // The admission request of exchange `ex` (the policy's reservation estimate).
  control::AcquireRequest AcquireFor(const gateway_internal::Exchange& ex,
                                     const gateway_internal::ForwardAsk& ask,
                                     const control::SessionHistory& history) const;
  // The decode tokens an admission estimate expects at most.
  int64_t DecodeCap() const;
  // Asks the working set for `ex` (the program-level step), then the backend for `next`
  // when set.
  void StartWorkingSet(const std::shared_ptr<gateway_internal::Exchange>& ex,
                       const gateway_internal::ForwardAsk& ask,
                       std::optional<control::AcquireRequest> next);
  void HandleClose(net::Request request, std::shared_ptr<net::ResponseWriter> writer);
  // Where a client request goes: the router, or else the next engine of the directory;
  // nullopt when there is none.
  std::optional<std::string> UpstreamBase();
  // The read-only SGLang and OpenAI routes (kPassThroughRoutes in gateway.cc: /v1/models, model
  // and server info, tokenize): the request passed through unchanged to the router (or the next
  // engine), its answer relayed unchanged. No admission: they reserve no KV.
  void HandlePassThrough(net::Request request, std::shared_ptr<net::ResponseWriter> writer);
  void HandleMetrics(const net::Request& request, net::ResponseWriter& writer);
  void HandleAgenticKv(const net::Request& request, net::ResponseWriter& writer);
  // The admin check (GET /agentic_kv?reset=1, and the close route without tenant keys): the
  // bearer token when one is set; with none, open unless tenant keys are configured.
  bool Authorized(const net::Request& request) const;
  // Who sent `request` (its Authorization header; tenant_keys.h).
  Caller CallerOf(const net::Request& request) const;
  // The headers forwarded upstream for `request`: ForwardHeaders, less an Authorization that
  // carries a tenant's key (never forwarded, as the bearer token).
  net::HeaderList UpstreamHeaders(const net::Request& request) const;
  // Whether `caller` may open one more session now (--max-new-sessions-per-s); counts a
  // refusal.
  bool AllowNewSession(const Caller& caller, gateway_internal::Clock::time_point now);
  void OnAdmission(const std::shared_ptr<gateway_internal::Exchange>& ex,
                   const control::AdmissionDecision& decision);
  // Asks the admission backend for `acquire` (the request-level step).
  void StartAcquire(const std::shared_ptr<gateway_internal::Exchange>& ex,
                    control::AcquireRequest acquire);
  // The working set decided (gateway_working_set.h): on to the backend when `acquire` is set,
  // else to the flow as the final decision.
  void OnWorkingSet(const std::shared_ptr<gateway_internal::Exchange>& ex,
                    const control::WorkingSetDecision& decision,
                    std::optional<control::AcquireRequest> acquire);
  // Cancels the admission wait of attempt `rid`, in the working set or at the backend.
  void CancelAdmissionWait(const std::string& rid);
  void Dispatch(const std::shared_ptr<gateway_internal::Exchange>& ex);
  // Dispatch's steps: the edits of the forwarded body; the upstream call, buffered (its answer
  // relayed whole) or streamed (chunks relayed as they come, with backpressure), returning its
  // handle; the end of a streamed call.
  ForwardEdits EditsFor(const gateway_internal::Exchange& ex,
                        const control::GenerateIdentity& identity) const;
  std::shared_ptr<net::HttpClient::StreamHandle> CallBuffered(
      const std::shared_ptr<gateway_internal::Exchange>& ex, const std::string& base,
      const std::string& path, net::HeaderList headers, std::string body);
  std::shared_ptr<net::HttpClient::StreamHandle> CallStreamed(
      const std::shared_ptr<gateway_internal::Exchange>& ex, const std::string& base,
      const std::string& path, net::HeaderList headers, std::string body);
  void OnStreamEnd(const std::shared_ptr<gateway_internal::Exchange>& ex, const Status& status);
  void OnClientGone(const std::shared_ptr<gateway_internal::Exchange>& ex);
  void Fail(const std::shared_ptr<gateway_internal::Exchange>& ex, GatewayError error,
            std::string_view message);
  void Finish(const std::shared_ptr<gateway_internal::Exchange>& ex, int code);
  std::string NewRequestId();
  // The admission ticket of attempt `rid`: unique to this gateway instance, so that two
  // gateways sharing a coordinator never share a lease, whatever rids their clients choose.
  std::string TicketFor(std::string_view rid) const;
  void SweepLoop();
  // On the sweeper: malloc_trim once the in-flight bytes fell back after a peak (rate-limited).
  void ReturnFreedMemory(gateway_internal::Clock::time_point now);
  void Teardown();

  // "gw-" and 32 random hex digits, drawn at startup.
  std::string instance_id_;
  // instance_id_ + "-": the prefix of request ids the gateway makes up.
  std::string id_prefix_;
  // The model's context length (--context-length, else the largest context_length the
  // engines' /server_info reported at startup); unset: not checked here.
  std::optional<int64_t> context_length_;
  std::atomic<uint64_t> next_id_{0};
  std::atomic<bool> shutting_down_{false};
  std::atomic<bool> effects_enabled_{true};
  std::atomic<int64_t> in_flight_{0};
  // Whether server_'s executor still takes work; shared with the close fan-outs, which may
  // outlive the core.
  const std::shared_ptr<gateway_internal::ServerGate> server_gate_ =
      std::make_shared<gateway_internal::ServerGate>();

  // New sessions per client (--max-new-sessions-per-s): a tenant, "(admin)" or
  // "(anonymous)" (tenant names cannot hold parentheses).
  sync::Mutex new_sessions_mu_;
  std::unique_ptr<NewSessionLimiter> new_sessions_ AGENTKV_GUARDED_BY(new_sessions_mu_);

  mutable sync::Mutex admission_mu_;
  sync::CondVar admission_cv_;
  int64_t pending_acquires_ AGENTKV_GUARDED_BY(admission_mu_) = 0;
  std::set<std::string> awaiting_ AGENTKV_GUARDED_BY(admission_mu_);

  // Parent returns delivered (--agentic-subagent-demotion).
  std::atomic<int64_t> demotion_deliveries_{0};

  sync::Mutex sweep_mu_;
  sync::CondVar sweep_cv_;
  bool sweep_stop_ AGENTKV_GUARDED_BY(sweep_mu_) = false;
  std::thread sweeper_;
  // ReturnFreedMemory's state, on the sweeper thread only (trims_ is read by Stats).
  int64_t trim_peak_bytes_ = 0;
  gateway_internal::Clock::time_point last_trim_{};
  std::atomic<int64_t> trims_{0};
  std::once_flag shutdown_once_;
};

}  // namespace agentkv::service

#endif  // AGENTKV_SERVICE_GATEWAY_GATEWAY_CORE_H_
