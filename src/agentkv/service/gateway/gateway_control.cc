// The gateway's control plane (session close, the SessionEffects fan-outs, the idle sweeper),
// its observability endpoints, and shutdown; startup is in gateway_startup.cc, the data path in
// gateway.cc. Invariants: gateway_core.h.
#include <algorithm>
#include <boost/asio/post.hpp>
#include <boost/asio/steady_timer.hpp>
#include <cstdlib>
#include <optional>
#include <tuple>
#include <utility>
#if defined(__GLIBC__)
#include <malloc.h>  // malloc_trim
#endif

#include "agentkv/protocol/endpoints.h"
#include "agentkv/protocol/json_util.h"
#include "agentkv/protocol/prometheus.h"
#include "agentkv/protocol/sessions.h"
#include "agentkv/service/common/agentic_kv_prometheus.h"
#include "agentkv/service/common/bearer_token.h"
#include "agentkv/service/gateway/gateway_core.h"
#include "agentkv/sync/mutex.h"

namespace agentkv::service {

using gateway_internal::Clock;
using gateway_internal::JsonError;
namespace http = net::http;

namespace {

// One /close_session fan-out: per-engine results, completed by the last answer or by the
// close timeout, whichever comes first.
struct CloseFanOut {
  sync::Mutex mu;
  std::string session_id;
  std::vector<std::string> engines;
  std::vector<std::optional<Status>> results AGENTKV_GUARDED_BY(mu);
  size_t remaining AGENTKV_GUARDED_BY(mu) = 0;
  bool finished AGENTKV_GUARDED_BY(mu) = false;
  std::function<void(bool ok)> done;
  // On the server's executor; null when the server was stopping (no timeout then: the
  // engines' answers, or the control client's Unavailable at teardown, complete the fan-out).
  std::unique_ptr<boost::asio::steady_timer> timer;
  std::shared_ptr<gateway_internal::ServerGate> server_gate;
  LogSink log;
};

// Records engine `index`'s outcome (index < 0: the timeout fired) and completes the fan-out
// when it is the last one.
void CompleteClose(const std::shared_ptr<CloseFanOut>& fan, int64_t index, Status status) {
  std::vector<Status> statuses;
  std::function<void(bool)> done;
  {
    sync::MutexLock lock(&fan->mu);
    if (fan->finished) return;
    if (index >= 0) {
      fan->results[static_cast<size_t>(index)] = std::move(status);
      --fan->remaining;
    }
    if (index >= 0 && fan->remaining > 0) return;
    fan->finished = true;
    if (index >= 0 && fan->timer != nullptr) {
      // Every engine answered: stop the close timer now, so that the fan-out is freed at once
      // rather than held until --close-timeout-s (at thousands of closes a second, that
      // delay alone would hold thousands of them). Not while the server stops: its shutdown
      // destroys the timer's wait instead.
      sync::MutexLock gate(&fan->server_gate->mu);
      if (fan->server_gate->open) {
        boost::asio::post(fan->timer->get_executor(), [fan] { fan->timer->cancel(); });
      }
    }
    for (std::optional<Status>& result : fan->results) {
      statuses.push_back(result.has_value()
                             ? *result
                             : DeadlineExceededError("no answer within --close-timeout-s"));
    }
    done = std::move(fan->done);
  }
  for (size_t i = 0; i < statuses.size(); ++i) {
    if (!statuses[i].ok()) {
      fan->log(LogLevel::kWarn, LogLine("close_session_failed")
                                    .Add("session", fan->session_id)
                                    .Add("engine", fan->engines[i])
                                    .Quoted("error", statuses[i].message()));
    }
  }
  done(control::CloseSucceededOnEveryEngine(statuses));
}

}  // namespace

// ---- Control plane ----

bool Gateway::Core::Authorized(const net::Request& request) const {
  // With tenant keys and no admin token, nobody is the admin.
  if (options_.bearer_token.empty()) return options_.tenant_keys.empty();
  const auto value = request[http::field::authorization];
  return BearerMatches(std::string_view(value.data(), value.size()), options_.bearer_token);
}

Caller Gateway::Core::CallerOf(const net::Request& request) const {
  const auto value = request[http::field::authorization];
  return IdentifyCaller(std::string_view(value.data(), value.size()), options_.bearer_token,
                        options_.tenant_keys);
}

net::HeaderList Gateway::Core::UpstreamHeaders(const net::Request& request) const {
  net::HeaderList headers = ForwardHeaders(request, options_.bearer_token);
  if (!options_.tenant_keys.empty() && CallerOf(request).kind == Caller::Kind::kTenant) {
    std::erase_if(headers, [](const auto& entry) {
      return boost::beast::iequals(entry.first, "Authorization");
    });
  }
  return headers;
}

bool Gateway::Core::AllowNewSession(const Caller& caller, Clock::time_point now) {
  // Every branch a view: a std::string branch would make the whole expression a temporary.
  const std::string_view client =
      caller.kind == Caller::Kind::kTenant  ? std::string_view(caller.tenant)
      : caller.kind == Caller::Kind::kAdmin ? std::string_view("(admin)")
                                            : std::string_view("(anonymous)");
  bool allowed = false;
  {
    sync::MutexLock lock(&new_sessions_mu_);
    allowed = new_sessions_->Allow(
        client,
        TimeNs(
            std::chrono::duration_cast<std::chrono::nanoseconds>(now.time_since_epoch()).count()));
  }
  if (!allowed) metrics_.CountSessionRateLimited();
  return allowed;
}

namespace {

net::Response Unauthorized(const net::Request& request, std::string_view message) {
  net::Response response = JsonError(request, GatewayError::kUnauthorized, message);
  response.set(http::field::www_authenticate, "Bearer");
  return response;
}

}  // namespace

void Gateway::Core::HandleClose(net::Request request, std::shared_ptr<net::ResponseWriter> writer) {
  const StatusOr<std::string> path = net::TargetPath(request.target());
  const std::optional<std::string> session_id =
      path.ok() ? ParseSessionClosePath(*path) : std::nullopt;
  if (!session_id.has_value()) {
    return writer->Reply(JsonError(request, GatewayError::kNotFound,
                                   "no route for " + std::string(request.method_string()) + " " +
                                       std::string(request.target())));
  }
  if (request.method() != http::verb::post) {
    net::Response response = JsonError(request, GatewayError::kMethodNotAllowed, "use POST");
    response.set(http::field::allow, "POST");
    return writer->Reply(std::move(response));
  }
  // The session as the gateway knows it: a tenant's ids are namespaced by its name (the
  // admin's are raw), so that a tenant can close only its own sessions.
  std::string target = *session_id;
  if (!options_.tenant_keys.empty()) {
    const Caller caller = CallerOf(request);
    if (caller.kind == Caller::Kind::kAnonymous) {
      return writer->Reply(
          Unauthorized(request,
                       "missing or unknown key: send Authorization: Bearer <key> of a "
                       "tenant (--tenant-keys-file) or the --bearer-token"));
    }
    if (caller.kind == Caller::Kind::kTenant) {
      StatusOr<std::string> scoped =
          TenantSessionId(caller.tenant, *session_id, kMaxSessionIdBytes);
      if (!scoped.ok()) {
        return writer->Reply(
            JsonError(request, GatewayError::kBadRequest, scoped.status().message()));
      }
      target = *std::move(scoped);
    }
  } else if (!Authorized(request)) {
    return writer->Reply(Unauthorized(request, "missing or wrong bearer token"));
  }
  auto header = std::make_shared<net::Request>(std::move(request));
  header->body().clear();
  // The session's agent ends now: its held context is released and its waiters cancelled.
  if (working_set_ != nullptr) working_set_->EndSession(target);
  sessions_->Close(target, control::TerminalReason::kFinished, Clock::now(),
                   [this, writer, header, named = *session_id](const SessionCloseResult& result) {
                     protocol::JsonWriter json;
                     json.BeginObject()
                         .Key("session_id")
                         .String(named)
                         .Key("closed")
                         .Bool(result.closed)
                         .Key("aborted")
                         .Int(result.aborted)
                         .EndObject();
                     Log(LogLevel::kInfo, LogLine("session_close_request")
                                              .Add("session", result.session_id)
                                              .Add("closed", result.closed)
                                              .Add("aborted", result.aborted));
                     writer->Reply(net::MakeResponse(*header, http::status::ok, json.Take()));
                   });
}

void Gateway::Core::CancelQueuedAttempt(const std::string& rid) {
  // Only a ticket the backend is deciding on is cancelled there: a cancel of a ticket it never
  // saw would leave a tombstone that turns a later request with the same rid away. An attempt
  // between registration and dispatch is stopped by SessionManager::Dispatch instead.
  {
    sync::MutexLock lock(&admission_mu_);
    if (!awaiting_.contains(rid)) return;
  }
  CancelAdmissionWait(rid);
}

void Gateway::Core::ReturnLease(const std::string& lease_id) {
  if (backend_ != nullptr) backend_->Release(lease_id);
}

void Gateway::Core::AbortOnEveryEngine(const std::string& rid) {
  if (!effects_enabled_.load()) return;
  // Exactly Relax's {"rid": rid}: abort_all keeps SGLang's default.
  protocol::JsonWriter json;
  const std::string body = json.BeginObject().Key("rid").String(rid).EndObject().Take();
  for (const std::string& engine : directory_->urls()) {
    control_client_->AsyncRequest(
        http::verb::post, engine, std::string(protocol::kAbortRequestPath),
        {{"Content-Type", "application/json"}}, body,
        [this, engine, rid](StatusOr<net::ClientResponse> r) {
          if (r.ok() && r->status / 100 == 2) return;
          Log(LogLevel::kWarn, LogLine("abort_failed")
                                   .Add("engine", engine)
                                   .Add("rid", rid)
                                   .Quoted("error", r.ok() ? "HTTP " + std::to_string(r->status)
                                                           : r.status().message()));
        });
  }
}

void Gateway::Core::DeliverParentReturn(const std::string& parent) {
  if (!effects_enabled_.load()) return;
  demotion_deliveries_.fetch_add(1);
  const std::string body = protocol::SerializeDemoteFinishedSubagentsRequest(
      protocol::DemoteFinishedSubagentsRequest{parent});
  for (const std::string& engine : directory_->urls()) {
    control_client_->AsyncRequest(
        http::verb::post, engine, std::string(protocol::kDemoteFinishedSubagentsPath),
        {{"Content-Type", "application/json"}}, body,
        [this, engine, parent](StatusOr<net::ClientResponse> r) {
          if (r.ok() && r->status / 100 == 2) return;
          Log(LogLevel::kWarn, LogLine("demote_finished_subagents_failed")
                                   .Add("engine", engine)
                                   .Add("parent", parent)
                                   .Quoted("error", r.ok() ? "HTTP " + std::to_string(r->status)
                                                           : r.status().message()));
        });
  }
}

void Gateway::Core::CloseOnEveryEngine(const std::string& session_id,
                                       std::function<void(bool ok)> done) {
  const std::vector<std::string> engines = directory_->urls();
  if (!effects_enabled_.load() || engines.empty()) {
    Log(LogLevel::kWarn,
        LogLine("close_session_failed")
            .Add("session", session_id)
            .Quoted("error", engines.empty() ? "no engine known" : "shutting down"));
    return done(false);
  }
  auto fan = std::make_shared<CloseFanOut>();
  fan->session_id = session_id;
  fan->engines = engines;
  {
    sync::MutexLock lock(&fan->mu);  // Not shared yet; taken for the lock annotations.
    fan->results.resize(engines.size());
    fan->remaining = engines.size();
  }
  fan->done = std::move(done);
  fan->log = options_.log;
  fan->server_gate = server_gate_;
  {
    sync::MutexLock gate(&server_gate_->mu);
    if (server_gate_->open) {
      fan->timer = std::make_unique<boost::asio::steady_timer>(server_->executor(),
                                                               options_.close_timeout());
      fan->timer->async_wait([fan](const boost::system::error_code& error) {
        if (!error) CompleteClose(fan, -1, Status::Ok());
      });
    }
  }
  const std::string body =
      protocol::SerializeCloseSessionRequest(protocol::CloseSessionRequest{session_id});
  for (size_t i = 0; i < engines.size(); ++i) {
    control_client_->AsyncRequest(
        http::verb::post, engines[i], std::string(protocol::kCloseSessionPath),
        {{"Content-Type", "application/json"}}, body, [fan, i](StatusOr<net::ClientResponse> r) {
          Status status = !r.ok() ? r.status()
                          : r->status / 100 == 2
                              ? Status::Ok()
                              : UnavailableError("HTTP " + std::to_string(r->status));
          CompleteClose(fan, static_cast<int64_t>(i), std::move(status));
        });
  }
}

void Gateway::Core::SweepLoop() {
  Clock::duration interval = std::chrono::duration_cast<Clock::duration>(
      std::chrono::duration<double>(options_.session_drain_timeout_s));
  if (options_.session_idle_timeout_s > 0) {
    interval =
        std::min(interval, std::chrono::duration_cast<Clock::duration>(
                               std::chrono::duration<double>(options_.session_idle_timeout_s)));
  }
  interval = std::clamp<Clock::duration>(interval / 4, std::chrono::milliseconds(10),
                                         std::chrono::seconds(1));
  sync::ReleasableMutexLock lock(&sweep_mu_);
  while (!sweep_stop_) {
    const auto deadline = std::chrono::steady_clock::now() + interval;
    while (!sweep_stop_) {
      if (sweep_cv_.WaitWithDeadline(&sweep_mu_, deadline)) break;
    }
    if (sweep_stop_) break;
    lock.Unlock();
    sessions_->Sweep(Clock::now());
    if (working_set_ != nullptr) {
      // Sessions ended by the idle timeout or eviction end their agents too.
      working_set_->EndInactive(
          [this](const std::string& session) { return !sessions_->WouldOpen(session); });
    }
    ReturnFreedMemory(Clock::now());
    lock.Lock();
  }
}

void Gateway::Core::ReturnFreedMemory(Clock::time_point now) {
  // glibc keeps what its per-thread arenas freed, so after a burst of large bodies or stream
  // queues the resident set would stay at the burst's peak. Once the bytes held are back near
  // zero after a peak worth returning, malloc_trim gives the free pages back to the kernel;
  // at most once per kMinTrimInterval (it walks every arena).
  constexpr int64_t kTrimAfterPeakBytes = int64_t{16} << 20;
  constexpr int64_t kTrimLowWaterBytes = int64_t{1} << 20;
  constexpr auto kMinTrimInterval = std::chrono::seconds(1);
  trim_peak_bytes_ = std::max(trim_peak_bytes_, server_->TakeInflightPeak());
  if (trim_peak_bytes_ < kTrimAfterPeakBytes || server_->inflight_bytes() > kTrimLowWaterBytes ||
      now - last_trim_ < kMinTrimInterval) {
    return;
  }
  last_trim_ = now;
  const int64_t peak = std::exchange(trim_peak_bytes_, 0);
#if defined(__GLIBC__)
  malloc_trim(0);
#endif
  trims_.fetch_add(1);
  Log(LogLevel::kDebug, LogLine("memory_trimmed").Add("inflight_peak_bytes", peak));
}

// ---- Observability ----

void Gateway::Core::HandleMetrics(const net::Request& request, net::ResponseWriter& writer) {
  const auto [close, close_failure] = metrics_.StepCloses(false);
  const std::vector<std::pair<std::string, double>> series = MergeAgenticKvSeries(
      lifecycle_, close, close_failure,
      admission_ ? backend_->StepMetrics(false) : std::vector<std::pair<std::string, double>>{});
  // Admission totals only when admission is decided in this process (a remote coordinator
  // exports its own); the session closes are the gateway's, as in MergeAgenticKvSeries.
  AgenticKvTotals totals;
  if (admission_) {
    if (std::optional<control::AdmissionCounters> counts = backend_->TotalCounters()) {
      totals.admission = true;
      totals.counts = *counts;
    }
  }
  totals.session = true;
  std::tie(totals.counts.session_close, totals.counts.session_close_failure) =
      metrics_.close_totals();
  std::vector<protocol::MetricFamily> families = AgenticKvFamilies(series, totals);
  GatewayReadings readings;
  readings.in_flight = in_flight_.load();
  readings.active_sessions = sessions_->active_sessions();
  readings.retained_sessions = sessions_->retained_sessions();
  readings.sessions_evicted = sessions_->evicted();
  readings.sessions_refused = sessions_->refused();
  readings.retain_refused = sessions_->retain_refused();
  if (backend_ != nullptr) {
    readings.coordinator_failures = backend_->failures();
    readings.coordinator_breaker = backend_->breaker();
  }
  readings.inflight_bytes = server_->inflight_bytes();
  readings.inflight_refused = server_->inflight_refused();
  for (protocol::MetricFamily& family : metrics_.Families(readings)) {
    families.push_back(std::move(family));
  }
  if (working_set_ != nullptr) {
    for (protocol::MetricFamily& family : working_set_->Families()) {
      families.push_back(std::move(family));
    }
  }
  writer.Reply(net::MakeResponse(request, http::status::ok, protocol::WritePrometheusText(families),
                                 protocol::kPrometheusContentType));
}

void Gateway::Core::HandleAgenticKv(const net::Request& request, net::ResponseWriter& writer) {
  const bool reset = net::QueryFlag(request.target(), "reset");
  if (reset && !Authorized(request)) {
    return writer.Reply(Unauthorized(request, "missing or wrong bearer token"));
  }
  const auto [close, close_failure] = metrics_.StepCloses(reset);
  const std::vector<std::pair<std::string, double>> series = MergeAgenticKvSeries(
      lifecycle_, close, close_failure,
      admission_ ? backend_->StepMetrics(reset) : std::vector<std::pair<std::string, double>>{});
  writer.Reply(net::MakeResponse(request, http::status::ok, AgenticKvJson(series)));
}

GatewayStats Gateway::Core::Stats() const {
  GatewayStats stats;
  stats.in_flight = in_flight_.load();
  {
    sync::MutexLock lock(&admission_mu_);
    stats.awaiting_admission = static_cast<int64_t>(awaiting_.size());
  }
  stats.sessions_active = sessions_ != nullptr ? sessions_->active_sessions() : 0;
  stats.sessions_retained = sessions_ != nullptr ? sessions_->retained_sessions() : 0;
  std::tie(stats.session_close, stats.session_close_failure) = metrics_.close_totals();
  stats.parent_hint_rejected = metrics_.parent_hint_rejected();
  stats.subagent_demotion_deliveries = demotion_deliveries_.load();
  stats.polls = poller_ != nullptr ? poller_->polls() : 0;
  stats.inflight_bytes = server_ != nullptr ? server_->inflight_bytes() : 0;
  stats.inflight_refused = server_ != nullptr ? server_->inflight_refused() : 0;
  stats.memory_trims = trims_.load();
  return stats;
}

// ---- Shutdown ----

void Gateway::Core::Shutdown(std::chrono::milliseconds deadline) {
  std::call_once(shutdown_once_, [this, deadline] {
    const Clock::time_point until = Clock::now() + deadline;
    shutting_down_.store(true);
    Log(LogLevel::kInfo, LogLine("gateway_shutting_down"));
    // The working set's waiters first, so that none moves on to the backend after its sweep.
    if (working_set_ != nullptr) working_set_->Shutdown();
    std::vector<std::string> waiting;
    {
      sync::MutexLock lock(&admission_mu_);
      waiting.assign(awaiting_.begin(), awaiting_.end());
    }
    for (const std::string& rid : waiting) {
      if (admission_ && backend_ != nullptr) backend_->Cancel(TicketFor(rid));
    }
    bool acquires_resolved = false;
    {
      sync::MutexLock lock(&admission_mu_);
      while (pending_acquires_ != 0) {
        if (admission_cv_.WaitWithDeadline(&admission_mu_, until)) break;
      }
      acquires_resolved = pending_acquires_ == 0;
    }
    {
      sync::MutexLock gate(&server_gate_->mu);
      server_gate_->open = false;
    }
    if (server_ != nullptr) {
      server_->Shutdown(
          std::max(std::chrono::milliseconds(0),
                   std::chrono::duration_cast<std::chrono::milliseconds>(until - Clock::now())));
    }
    if (!acquires_resolved) {
      // A backend that never answered a cancel: keep the clients for its late callbacks (the
      // destructor closes them).
      Log(LogLevel::kError, LogLine("shutdown_acquires_unresolved"));
      return;
    }
    Teardown();
    Log(LogLevel::kInfo, LogLine("gateway_stopped"));
  });
}

void Gateway::Core::Teardown() {
  {
    sync::MutexLock lock(&sweep_mu_);
    sweep_stop_ = true;
  }
  sweep_cv_.SignalAll();
  if (sweeper_.joinable()) sweeper_.join();
  if (poller_ != nullptr) poller_->Stop();
  // The server object stays; it stops serving. Its executor takes no more work (the gate).
  {
    sync::MutexLock gate(&server_gate_->mu);
    server_gate_->open = false;
  }
  if (server_ != nullptr) server_->Shutdown(std::chrono::milliseconds(0));
  // Client callbacks still in flight run now (Unavailable) and finish their exchanges; the
  // close effects they trigger answer at once.
  effects_enabled_.store(false);
  data_client_.reset();
  control_client_.reset();
  // Last: the server and the data client ran on them; timers still queued are dropped.
  if (loops_ != nullptr) {
    loops_->Join(net::IoLoops::JoinMode::kStopNow);
    loops_->DestroyPendingWork();
  }
}

// ---- Gateway ----

StatusOr<std::unique_ptr<Gateway>> Gateway::Start(GatewayOptions options,
                                                  std::shared_ptr<AdmissionBackend> backend) {
  auto core = std::make_shared<Core>(std::move(options), std::move(backend));
  AGENTKV_RETURN_IF_ERROR(core->Init());
  return std::unique_ptr<Gateway>(new Gateway(std::move(core)));
}

Gateway::Gateway(std::shared_ptr<Core> core) : core_(std::move(core)) {}

Gateway::~Gateway() { Shutdown(std::chrono::milliseconds(0)); }

uint16_t Gateway::port() const { return core_->server_->port(); }
std::string Gateway::base_url() const { return core_->server_->base_url(); }
bool Gateway::lifecycle_enabled() const { return core_->lifecycle_; }
bool Gateway::admission_enabled() const { return core_->admission_; }
GatewayStats Gateway::stats() const { return core_->Stats(); }
void Gateway::Shutdown(std::chrono::milliseconds deadline) { core_->Shutdown(deadline); }

}  // namespace agentkv::service
