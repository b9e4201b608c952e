#include "agentkv/service/gateway/gateway.h"

#include <cstdio>
#include <random>
#include <variant>

#include "agentkv/protocol/endpoints.h"
#include "agentkv/protocol/generate_response.h"
#include "agentkv/protocol/server_info.h"
#include "agentkv/service/common/context_limits.h"
#include "agentkv/service/gateway/gateway_core.h"
#include "agentkv/service/gateway/gateway_prerequisites.h"
#include "agentkv/sync/mutex.h"

// The data path of the gateway; startup is in gateway_startup.cc, the control plane,
// observability and shutdown in gateway_control.cc. Invariants: gateway_core.h.

namespace agentkv::service {

namespace gateway_internal {

net::Response JsonError(const net::Request& request, GatewayError error, std::string_view message) {
  return ErrorResponse(request, error, message);
}

// An upstream's buffered answer as the gateway's reply to `request`: status, body and
// Content-Type (JSON when the upstream names none) unchanged.
net::Response Relay(const net::Request& request, net::ClientResponse response) {
  std::string content_type = "application/json";
  for (const auto& [name, value] : response.headers) {
    if (boost::beast::iequals(name, "Content-Type")) content_type = value;
  }
  return net::MakeResponse(request, static_cast<http::status>(response.status),
                           std::move(response.body), content_type);
}

}  // namespace gateway_internal

using gateway_internal::Clock;
using gateway_internal::Exchange;
using gateway_internal::ForwardAsk;
using gateway_internal::ForwardRefusal;
using gateway_internal::JsonError;
using gateway_internal::Relay;
namespace http = net::http;

namespace {

// A stream's bytes queued for a slow client above which the gateway stops reading its upstream,
// and the level the queue must drain to before reading resumes.
constexpr size_t kStreamHighWaterBytes = size_t{1} << 20;
constexpr size_t kStreamLowWaterBytes = size_t{256} << 10;

// The value of `request`'s header `name`; empty when absent.
std::string_view HeaderOf(const net::Request& request, std::string_view name) {
  const auto value = request[boost::beast::string_view(name.data(), name.size())];
  return std::string_view(value.data(), value.size());
}

// A rate as a person writes it: "100", "0.5".
std::string FormatRate(double per_s) {
  char text[32];
  std::snprintf(text, sizeof(text), "%g", per_s);
  return text;
}

}  // namespace

// ---- Data path ----

std::string Gateway::Core::NewRequestId() {
  return id_prefix_ + std::to_string(next_id_.fetch_add(1));
}

std::string Gateway::Core::TicketFor(std::string_view rid) const {
  std::string ticket = instance_id_;
  ticket.push_back('/');
  ticket.append(rid);
  return ticket;
}

void Gateway::Core::HandlePassThrough(net::Request request,
                                      std::shared_ptr<net::ResponseWriter> writer) {
  if (shutting_down_.load()) {
    return writer->Reply(
        JsonError(request, GatewayError::kShuttingDown, "the gateway is shutting down"));
  }
  std::optional<std::string> base = UpstreamBase();
  if (!base.has_value()) {
    return writer->Reply(
        JsonError(request, GatewayError::kUpstreamFailed, "no engine to forward to"));
  }
  net::HeaderList headers = UpstreamHeaders(request);
  if (const auto type = request[http::field::content_type]; !type.empty()) {
    SetHeader(headers, "Content-Type", std::string(type));
  }
  std::string body = std::move(request.body());
  request.body().clear();
  const http::verb verb = request.method();
  const std::string target(request.target());
  // The answer needs only the request and its writer: nothing of the gateway is captured.
  auto held = std::make_shared<net::Request>(std::move(request));
  data_client_->AsyncRequest(
      verb, *base, target, std::move(headers), std::move(body),
      [held, writer](StatusOr<net::ClientResponse> response) {
        if (!response.ok()) {
          return writer->Reply(JsonError(*held, ErrorFor(response.status()),
                                         "upstream: " + response.status().message()));
        }
        writer->Reply(Relay(*held, *std::move(response)));
      });
}

std::optional<std::string> Gateway::Core::UpstreamBase() {
  if (!options_.router_url.empty()) return options_.router_url;
  return directory_->NextEngine();
}

void Gateway::Core::HandleForward(GatewayRoute route, net::Request request,
                                  std::shared_ptr<net::ResponseWriter> writer) {
  const Clock::time_point started = Clock::now();
  const std::string_view path = RoutePath(route);
  auto refuse = [&](GatewayError error, std::string_view message) {
    writer->Reply(JsonError(request, error, message));
    metrics_.ObserveRequest(path, HttpStatusFor(error),
                            std::chrono::duration<double>(Clock::now() - started).count());
  };
  if (shutting_down_.load())
    return refuse(GatewayError::kShuttingDown, "the gateway is shutting down");
  // With tenant keys, every data-path request names its tenant (or is the admin's).
  const Caller caller = CallerOf(request);
  if (!options_.tenant_keys.empty() && caller.kind == Caller::Kind::kAnonymous) {
    net::Response response =
        JsonError(request, GatewayError::kUnauthorized,
                  "missing or unknown key: send Authorization: Bearer <key> of a tenant "
                  "(--tenant-keys-file) or the --bearer-token");
    response.set(http::field::www_authenticate, "Bearer");
    writer->Reply(std::move(response));
    metrics_.ObserveRequest(path, HttpStatusFor(GatewayError::kUnauthorized),
                            std::chrono::duration<double>(Clock::now() - started).count());
    return;
  }
  std::variant<ForwardAsk, ForwardRefusal> read = ReadForward(route, caller, request);
  if (const auto* no = std::get_if<ForwardRefusal>(&read)) return refuse(no->error, no->message);
  ForwardAsk& ask = std::get<ForwardAsk>(read);
  const bool in_scope = control::InScope(options_.agentic.agentic_admission_scope, ask.is_train);
  const bool needs_admission = admission_ && in_scope;
  const bool needs_working_set = working_set_ != nullptr && in_scope;
  // Read before the attempt begins: what the session dispatched before this request.
  const control::SessionHistory history =
      options_.agentic.agentic_admission_policy == control::AdmissionPolicy::kV2
          ? sessions_->History(ask.session)
          : control::SessionHistory{};
  std::variant<std::string, ForwardRefusal> rid =
      BeginForwardAttempt(ask, needs_admission || needs_working_set, started);
  if (const auto* no = std::get_if<ForwardRefusal>(&rid)) return refuse(no->error, no->message);

  auto ex = std::make_shared<Exchange>();
  ex->route = route;
  ex->client = std::move(ask.client);
  ex->session_id = ask.session;
  ex->parent = std::move(ask.parent);
  ex->pause = ask.pause != PauseKind::kUnknown ? ask.pause : ex->client.pause;
  ex->rid = std::get<std::string>(std::move(rid));
  if (options_.program_fcfs) {
    // The program's place is fixed when the attempt begins (a parent that ends later does not
    // move it); a trusted caller's own priority stands.
    const std::optional<uint64_t> arrival = sessions_->ProgramArrival(ex->rid, ex->parent);
    if (arrival.has_value() && !(ex->client.has_priority && ask.trust.honour_bypass_headers)) {
      ex->program_priority = ProgramFcfsPriority(*arrival);
    }
  }
  ex->started = started;
  ex->request = std::move(request);
  {
    sync::MutexLock lock(&ex->mu);  // Not shared yet; taken for the lock annotations.
    ex->writer = writer;
  }
  in_flight_.fetch_add(1);
  std::weak_ptr<Exchange> weak = ex;
  writer->OnClientGone([this, weak] {
    if (std::shared_ptr<Exchange> locked = weak.lock()) OnClientGone(locked);
  });

  if (!needs_admission && !needs_working_set) return Dispatch(ex);
  control::AcquireRequest acquire = AcquireFor(*ex, ask, history);
  if (!needs_working_set) return StartAcquire(ex, std::move(acquire));
  std::optional<control::AcquireRequest> next;
  if (needs_admission) next = std::move(acquire);
  StartWorkingSet(ex, ask, std::move(next));
}

std::variant<ForwardAsk, ForwardRefusal> Gateway::Core::ReadForward(GatewayRoute route,
                                                                    const Caller& caller,
                                                                    net::Request& request) {
  // As SGLang's OpenAI routes: refused before anything is reserved.
  if (route != GatewayRoute::kGenerate) {
    if (Status s = net::CheckJsonContentType(request); !s.ok()) {
      return ForwardRefusal{ErrorFor(s), s.message()};
    }
  }
  StatusOr<ClientRequest> client = ParseClientRequest(route, std::move(request.body()));
  if (!client.ok()) return ForwardRefusal{ErrorFor(client.status()), client.status().message()};
  ForwardAsk ask;
  ask.caller = caller;
  StatusOr<std::optional<std::string>> session = ResolveSessionId(
      client->session_id, HeaderOf(request, options_.session_header), options_.session_header);
  if (!session.ok()) return ForwardRefusal{GatewayError::kBadRequest, session.status().message()};
  // The session as the client named it; a tenant's is namespaced by its name from here on, in
  // the gateway and towards the engines, so that no other tenant can name it.
  ask.named_session = *session;
  ask.session = *std::move(session);
  if (caller.kind == Caller::Kind::kTenant && ask.session.has_value()) {
    StatusOr<std::string> scoped = TenantSessionId(caller.tenant, *ask.session, kMaxSessionIdBytes);
    if (!scoped.ok()) return ForwardRefusal{GatewayError::kBadRequest, scoped.status().message()};
    ask.session = *std::move(scoped);
  }
  ask.client = *std::move(client);
  if (std::optional<ForwardRefusal> no = ReadForwardHeaders(request, ask)) return *std::move(no);
  // What every engine would refuse is refused here, before it reserves or queues anything.
  if (const std::optional<int64_t> prompt = ExactPromptTokens(ask.client, ask.prompt_tokens);
      context_length_.has_value() && prompt.has_value()) {
    if (Status s = CheckContextLength(*context_length_, *prompt, ask.client.max_new_tokens);
        !s.ok()) {
      return ForwardRefusal{GatewayError::kBadRequest, s.message()};
    }
  }
  if (std::optional<ForwardRefusal> no = ReadParentHint(request, ask)) return *std::move(no);
  return ask;
}

std::optional<ForwardRefusal> Gateway::Core::ReadForwardHeaders(const net::Request& request,
                                                                ForwardAsk& ask) {
  const auto header = [&request](std::string_view name) { return HeaderOf(request, name); };
  StatusOr<bool> is_protected = ParseProtectedHeader(header(kProtectedHeader));
  StatusOr<bool> is_train = ParseScopeHeader(header(kScopeHeader));
  StatusOr<std::optional<int64_t>> prompt_tokens =
      ParsePromptTokensHeader(header(kPromptTokensHeader));
  StatusOr<std::optional<SharedPrefix>> shared_prefix =
      ParseSharedPrefixHeaders(header(kPrefixKeyHeader), header(kPrefixTokensHeader));
  StatusOr<PauseKind> pause = protocol::ParsePauseHint(kPauseHeader, header(kPauseHeader));
  StatusOr<std::optional<bool>> retain = ParseRetainHeader(header(kRetainHeader));
  for (const Status& s : {is_protected.status(), is_train.status(), prompt_tokens.status(),
                          shared_prefix.status(), pause.status(), retain.status()}) {
    if (!s.ok()) return ForwardRefusal{GatewayError::kBadRequest, s.message()};
  }
  if (retain->value_or(false) && !ask.session.has_value()) {
    return ForwardRefusal{GatewayError::kBadRequest,
                          std::string(kRetainHeader) +
                              ": 1 needs a session (the body's session_id or " +
                              options_.session_header + ")"};
  }
  // A client may skip admission only with the gateway's token, and may not claim a prompt its
  // body cannot hold.
  ask.trust = TrustOf(header("Authorization"), options_.bearer_token);
  ask.is_protected = *is_protected;
  ask.is_train = *is_train;
  if (!ask.trust.honour_bypass_headers && (ask.is_protected || !ask.is_train)) {
    metrics_.CountUntrustedBypass();
    ask.is_protected = false;
    ask.is_train = true;
  }
  ask.prompt_tokens = BoundPromptTokens(*prompt_tokens, ask.client.body.size());
  ask.shared_prefix = *std::move(shared_prefix);
  ask.pause = *pause;
  ask.retain = *retain;
  return std::nullopt;
}

std::optional<ForwardRefusal> Gateway::Core::ReadParentHint(const net::Request& request,
                                                            ForwardAsk& ask) {
  const ParentHintVerdict hint = VerifyParentHint(options_.parent_hint_key, ask.named_session,
                                                  HeaderOf(request, kParentSessionHeader),
                                                  HeaderOf(request, kParentSignatureHeader));
  // A tenant's parent is one of its own sessions.
  if (hint == ParentHintVerdict::kAccepted) {
    ask.parent = std::string(HeaderOf(request, kParentSessionHeader));
    if (ask.caller.kind == Caller::Kind::kTenant) {
      StatusOr<std::string> scoped =
          TenantSessionId(ask.caller.tenant, *ask.parent, kMaxSessionIdBytes);
      if (!scoped.ok()) {
        return ForwardRefusal{GatewayError::kBadRequest,
                              std::string(kParentSessionHeader) + ": " + scoped.status().message()};
      }
      ask.parent = *std::move(scoped);
    }
  }
  if (hint == ParentHintVerdict::kRejected) {
    metrics_.CountParentHintRejected();
    Log(LogLevel::kInfo, LogLine("parent_hint_rejected").Add("session", ask.session.value_or("-")));
  }
  return std::nullopt;
}

std::variant<std::string, ForwardRefusal> Gateway::Core::BeginForwardAttempt(
    const ForwardAsk& ask, bool awaits_admission, Clock::time_point started) {
  const std::string request_id = ask.client.rid.has_value() ? *ask.client.rid : NewRequestId();
  // Opening sessions in a loop would end every other client's idle session at --max-sessions.
  if (sessions_->WouldOpen(ask.session) && !AllowNewSession(ask.caller, started)) {
    return ForwardRefusal{
        GatewayError::kTooManyRequests,
        "too many new sessions from this client: at most " +
            std::to_string(options_.new_sessions_burst) + " at once and " +
            FormatRate(options_.max_new_sessions_per_s) +
            " a second (--new-sessions-burst, --max-new-sessions-per-s); retry later "
            "or continue an existing session"};
  }
  StatusOr<std::string> rid = sessions_->BeginAttempt(
      ask.session, request_id, started,
      control::AttemptSpec<std::string>{
          .awaits_admission = awaits_admission,
          .streamed = ask.client.stream,
          .prompt_tokens = EstimatePromptTokens(ask.client, ask.prompt_tokens),
          .retain = ask.retain,
          // With --agentic-subagent-demotion the flow delivers a parent's return to every
          // engine before its request goes on (the router may place it anywhere, and its
          // sub-agents were placed by their own sessions).
          .parent = ask.parent});
  if (rid.ok()) return *std::move(rid);
  // Unavailable: --max-sessions sessions, all busy or retained (not the upstream's fault);
  // ResourceExhausted: a retention mark past --max-retained-sessions (or, never in practice, 2^20
  // live attempts of one request id).
  if (rid.status().code() == StatusCode::kUnavailable) {
    return ForwardRefusal{GatewayError::kOverloaded, rid.status().message()};
  }
  if (rid.status().code() == StatusCode::kResourceExhausted) {
    return ForwardRefusal{GatewayError::kTooManyRequests, rid.status().message()};
  }
  return ForwardRefusal{ErrorFor(rid.status()), rid.status().message()};
}

control::AcquireRequest Gateway::Core::AcquireFor(const Exchange& ex, const ForwardAsk& ask,
                                                  const control::SessionHistory& history) const {
  control::AcquireRequest acquire{TicketFor(ex.rid), 0, ask.is_protected};
  acquire.holder.session = ex.session_id;
  // --agentic-admission-client-share bounds each tenant.
  if (ask.caller.kind == Caller::Kind::kTenant) acquire.holder.client = ask.caller.tenant;
  if (options_.agentic.agentic_admission_policy == control::AdmissionPolicy::kV2) {
    // The target engine is left to the fleet: the router (sgl-router) places the request, and
    // its hash ring is not the gateway's to reproduce.
    const control::UncachedReservation r = EstimateUncachedReservation(
        ex.client, ask.prompt_tokens, DecodeCap(), options_.default_max_tokens,
        history.held_prompt_tokens, ask.shared_prefix.has_value() ? ask.shared_prefix->tokens : 0);
    acquire.reservation_tokens = r.own_tokens;
    acquire.continuing = history.continuing;
    if (r.prefix_tokens > 0) {
      acquire.prefix_key = ask.shared_prefix->key;
      acquire.prefix_tokens = r.prefix_tokens;
    }
  } else {
    acquire.reservation_tokens = EstimateReservationTokens(
        ex.client, ask.prompt_tokens, DecodeCap(), options_.default_max_tokens);
  }
  return acquire;
}

int64_t Gateway::Core::DecodeCap() const {
  // Unset: SGLang's own clip of max_new_tokens in its admission estimate.
  return options_.agentic.agentic_admission_expected_decode_cap.value_or(kGatewayExpectedDecodeCap);
}

void Gateway::Core::StartWorkingSet(const std::shared_ptr<Exchange>& ex, const ForwardAsk& ask,
                                    std::optional<control::AcquireRequest> next) {
  // The working set first (program level), then the backend (request level), as simulated.
  ex->working_set = working_set_->Describe(
      TicketFor(ex->rid), ex->session_id, ex->parent, ex->pause, ask.trust.honour_bypass_headers,
      EstimateReservationTokens(ex->client, ask.prompt_tokens, DecodeCap(),
                                options_.default_max_tokens));
  {
    sync::MutexLock lock(&admission_mu_);
    if (shutting_down_.load()) {
      return Fail(ex, GatewayError::kShuttingDown, "the gateway is shutting down");
    }
    ++pending_acquires_;
    awaiting_.insert(ex->rid);
  }
  const Status asked = working_set_->Acquire(
      *ex->working_set,
      [self = shared_from_this(), ex, next](const control::WorkingSetDecision& d) {
        self->OnWorkingSet(ex, d, next);
        sync::MutexLock lock(&self->admission_mu_);
        --self->pending_acquires_;
        self->admission_cv_.SignalAll();
      });
  if (!asked.ok()) {
    {
      sync::MutexLock lock(&admission_mu_);
      awaiting_.erase(ex->rid);
      --pending_acquires_;
      admission_cv_.SignalAll();
    }
    return Fail(ex, ErrorFor(asked), "working set: " + asked.message());
  }
}

void Gateway::Core::StartAcquire(const std::shared_ptr<Exchange>& ex,
                                 control::AcquireRequest acquire) {
  {
    sync::MutexLock lock(&admission_mu_);
    if (shutting_down_.load()) {
      awaiting_.erase(ex->rid);
      return Fail(ex, GatewayError::kShuttingDown, "the gateway is shutting down");
    }
    ++pending_acquires_;
    awaiting_.insert(ex->rid);
  }
  backend_->Acquire(std::move(acquire),
                    [self = shared_from_this(), ex](const control::AdmissionDecision& d) {
                      self->OnAdmission(ex, d);
                      sync::MutexLock lock(&self->admission_mu_);
                      --self->pending_acquires_;
                      self->admission_cv_.SignalAll();
                    });
}

void Gateway::Core::OnWorkingSet(const std::shared_ptr<Exchange>& ex,
                                 const control::WorkingSetDecision& decision,
                                 std::optional<control::AcquireRequest> acquire) {
  if (LogsAt(LogLevel::kDebug)) {
    Log(LogLevel::kDebug, LogLine("working_set")
                              .Add("rid", ex->rid)
                              .Add("admitted", decision.admitted)
                              .Add("reason", control::WorkingSetReasonName(decision.reason))
                              .Add("wait_s", decision.wait.seconds()));
  }
  if (decision.admitted && acquire.has_value()) return StartAcquire(ex, *std::move(acquire));
  // Admitted by the working set alone (no lease), or cancelled: the flow's final decision.
  control::AdmissionDecision settled;
  settled.action =
      decision.admitted ? control::AdmissionAction::kAdmit : control::AdmissionAction::kBypass;
  settled.reason = decision.admitted ? control::AdmissionReason::kCapacityAvailable
                                     : control::AdmissionReason::kCancelled;
  settled.ticket = decision.ticket;
  settled.reservation_tokens = ex->working_set->request.reservation_tokens;
  settled.wait = decision.wait;
  OnAdmission(ex, settled);
}

void Gateway::Core::CancelAdmissionWait(const std::string& rid) {
  const std::string ticket = TicketFor(rid);
  if (working_set_ != nullptr && working_set_->Cancel(ticket)) return;
  if (admission_ && backend_ != nullptr) backend_->Cancel(ticket);
}

void Gateway::Core::OnAdmission(const std::shared_ptr<Exchange>& ex,
                                const control::AdmissionDecision& decision) {
  {
    sync::MutexLock lock(&admission_mu_);
    awaiting_.erase(ex->rid);
  }
  if (LogsAt(LogLevel::kDebug)) {
    Log(LogLevel::kDebug, LogLine("admission")
                              .Add("rid", ex->rid)
                              .Add("action", control::AdmissionActionName(decision.action))
                              .Add("reason", control::AdmissionReasonName(decision.reason))
                              .Add("tokens", decision.reservation_tokens)
                              .Add("wait_s", decision.wait.seconds()));
  }
  // The flow keeps the decision's lease until Finish returns it.
  StatusOr<control::AdmissionVerdict> verdict = sessions_->OnAdmission(ex->rid, decision);
  if (!verdict.ok()) return Fail(ex, GatewayError::kInternal, verdict.status().message());
  switch (*verdict) {
    case control::AdmissionVerdict::kClientGone:
      return Finish(ex, HttpStatusFor(GatewayError::kClientGone));
    case control::AdmissionVerdict::kRefused:
      if (decision.reason == control::AdmissionReason::kOverShare) {
        return Fail(ex, GatewayError::kTooManyRequests,
                    "the request's session holds more than its share (" +
                        std::to_string(decision.ceiling.value_or(0)) +
                        " tokens, --agentic-admission-session-share) of the admission ceiling, "
                        "and did for the whole maximum wait: let its requests in flight finish");
      }
      if (options_.agentic.agentic_admission_policy == control::AdmissionPolicy::kV2) {
        return Fail(ex, GatewayError::kBadRequest,
                    "the request reserves " + std::to_string(decision.reservation_tokens) +
                        " tokens (uncached prompt plus max tokens), more than the " +
                        std::to_string(decision.ceiling.value_or(0)) +
                        " tokens of KV the largest engine holds; it can never run: send fewer "
                        "tokens or a lower max_tokens");
      }
      return Fail(ex, GatewayError::kBadRequest,
                  "the request reserves " + std::to_string(decision.reservation_tokens) +
                      " tokens (prompt plus max tokens), more than the " +
                      std::to_string(decision.ceiling.value_or(0)) +
                      " tokens of KV the fleet's largest engine holds; it can never run: send "
                      "fewer tokens or a lower max_tokens");
    case control::AdmissionVerdict::kCancelled:
      if (shutting_down_.load())
        return Fail(ex, GatewayError::kShuttingDown, "the gateway is shutting down");
      return Fail(ex, GatewayError::kSessionClosing,
                  "the session was closed while the request waited for admission");
    case control::AdmissionVerdict::kDispatch:
      break;
  }
  Dispatch(ex);
}

void Gateway::Core::Dispatch(const std::shared_ptr<Exchange>& ex) {
  StatusOr<control::GenerateIdentity> identity = sessions_->Dispatch(ex->rid);
  if (!identity.ok()) return Fail(ex, ErrorFor(identity.status()), identity.status().message());
  StatusOr<std::string> body = BuildForwardBody(ex->client.body, EditsFor(*ex, *identity));
  if (!body.ok()) return Fail(ex, GatewayError::kInternal, body.status().message());
  net::HeaderList headers = UpstreamHeaders(ex->request);
  SetHeader(headers, "Content-Type", "application/json");
  if (lifecycle_ && ex->session_id.has_value() &&
      options_.router_policy == SglRouterPolicy::kConsistentHashing) {
    // A sub-agent routed by its parent's key lands on its parent's engine.
    SetHeader(headers, protocol::kRoutingKeyHeader,
              options_.route_subagents_by_parent && ex->parent.has_value() ? *ex->parent
                                                                           : *ex->session_id);
  }
  std::optional<std::string> upstream = UpstreamBase();
  if (!upstream.has_value())
    return Fail(ex, GatewayError::kUpstreamFailed, "no engine to forward to");
  const std::string base = *std::move(upstream);
  const std::string path(RoutePath(ex->route));
  std::shared_ptr<net::HttpClient::StreamHandle> handle =
      ex->client.stream ? CallStreamed(ex, base, path, std::move(headers), *std::move(body))
                        : CallBuffered(ex, base, path, std::move(headers), *std::move(body));
  bool gone = false;
  {
    sync::MutexLock lock(&ex->mu);
    ex->stream = handle;
    gone = ex->client_gone;
  }
  // The client left while the call was being made: the flow asked for the cut (and the abort)
  // before the handle existed.
  if (gone && handle) handle->Cancel();
}

ForwardEdits Gateway::Core::EditsFor(const Exchange& ex,
                                     const control::GenerateIdentity& identity) const {
  ForwardEdits edits;
  edits.rid = identity.rid;
  if (!ex.client.has_session_params) edits.session_id = identity.session_id;
  edits.parent_session = ex.parent;
  if (!ex.client.has_priority) edits.priority = options_.pause_priority.For(ex.pause);
  if (ex.program_priority.has_value()) edits.priority = ex.program_priority;
  if (options_.forward_pause && ex.pause != PauseKind::kUnknown) {
    edits.pause = std::string(PauseKindName(ex.pause));
  }
  return edits;
}

std::shared_ptr<net::HttpClient::StreamHandle> Gateway::Core::CallBuffered(
    const std::shared_ptr<Exchange>& ex, const std::string& base, const std::string& path,
    net::HeaderList headers, std::string body) {
  return data_client_->AsyncRequest(
      http::verb::post, base, path, std::move(headers), std::move(body),
      [this, ex](StatusOr<net::ClientResponse> response) {
        if (!response.ok()) {
          Log(LogLevel::kWarn, LogLine("upstream_failed")
                                   .Add("rid", ex->rid)
                                   .Quoted("error", response.status().message()));
          return Fail(ex, ErrorFor(response.status()), "upstream: " + response.status().message());
        }
        const int status = response->status;
        if (ex->working_set.has_value()) {
          const std::optional<int64_t> context = ContextTokensOfAnswer(response->body);
          sync::MutexLock lock(&ex->mu);
          ex->answer_context_tokens = context;
        }
        if (auto writer = ex->Writer()) writer->Reply(Relay(ex->request, *std::move(response)));
        Finish(ex, status);
      });
}

std::shared_ptr<net::HttpClient::StreamHandle> Gateway::Core::CallStreamed(
    const std::shared_ptr<Exchange>& ex, const std::string& base, const std::string& path,
    net::HeaderList headers, std::string body) {
  return data_client_->AsyncStream(
      http::verb::post, base, path, std::move(headers), std::move(body),
      [ex](int status, const net::HeaderList& upstream_headers) {
        net::HeaderList out;
        for (const auto& [name, value] : upstream_headers) {
          if (boost::beast::iequals(name, "Content-Type")) out.emplace_back("Content-Type", value);
        }
        std::shared_ptr<net::ResponseWriter> writer;
        {
          sync::MutexLock lock(&ex->mu);
          ex->upstream_status = status;
          writer = ex->writer;
        }
        if (writer) writer->StartStream(static_cast<http::status>(status), std::move(out));
      },
      [ex](std::string_view chunk) {
        if (auto writer = ex->Writer()) writer->WriteChunk(std::string(chunk));
      },
      [this, ex](Status status) { OnStreamEnd(ex, status); },
      // Backpressure: a client that reads slower than the engine streams slows its own
      // upstream read (the engine's socket fills and it waits), so the gateway holds at most
      // about kStreamHighWaterBytes per stream instead of buffering the difference.
      [ex](std::function<void()> resume) {
        std::shared_ptr<net::ResponseWriter> writer = ex->Writer();
        if (writer == nullptr || writer->stream_buffered_bytes() <= kStreamHighWaterBytes) {
          return true;
        }
        writer->OnStreamDrained(kStreamLowWaterBytes, std::move(resume));
        return false;
      });
}

void Gateway::Core::OnStreamEnd(const std::shared_ptr<Exchange>& ex, const Status& status) {
  int upstream_status = 0;
  bool gone = false;
  {
    sync::MutexLock lock(&ex->mu);
    upstream_status = ex->upstream_status;
    gone = ex->client_gone;
  }
  if (gone) return Finish(ex, upstream_status);  // Recorded as 499.
  if (upstream_status == 0) {
    return Fail(ex, ErrorFor(status), "upstream: " + status.message());
  }
  if (status.ok()) {
    if (auto writer = ex->Writer()) writer->EndStream();
    return Finish(ex, upstream_status);
  }
  // Broken mid-stream: drop the writer without the terminating chunk, so the client sees a
  // truncated stream rather than a complete one.
  Log(LogLevel::kWarn,
      LogLine("upstream_stream_broken").Add("rid", ex->rid).Quoted("error", status.message()));
  std::shared_ptr<net::ResponseWriter> writer;
  {
    sync::MutexLock lock(&ex->mu);
    writer = std::move(ex->writer);
  }
  writer.reset();
  Finish(ex, HttpStatusFor(GatewayError::kUpstreamFailed));
}

void Gateway::Core::OnClientGone(const std::shared_ptr<Exchange>& ex) {
  std::vector<control::FlowAction<std::string>> actions;
  std::shared_ptr<net::HttpClient::StreamHandle> stream;
  {
    // Under the exchange's lock, so that a finished exchange's rid (which a new sessionless
    // request may reuse) is never reported gone.
    sync::MutexLock lock(&ex->mu);
    if (ex->done || ex->client_gone) return;
    ex->client_gone = true;
    stream = ex->stream;
    actions = sessions_->ClientGone(ex->rid);
  }
  for (const control::FlowAction<std::string>& action : actions) {
    if (std::holds_alternative<control::CancelAttempt>(action)) {
      // Waiting for admission: the decision (kBypass `cancelled`) finishes the exchange.
      CancelAdmissionWait(ex->rid);
    } else if (std::holds_alternative<control::AbortOnEveryEngine>(action)) {
      AbortOnEveryEngine(ex->rid);
    } else if (std::holds_alternative<control::CutUpstream>(action)) {
      // Cutting the call ends the exchange and returns its lease at once; without a handle
      // yet, Dispatch cuts it as soon as it has one.
      if (stream) stream->Cancel();
    }
  }
}

void Gateway::Core::Fail(const std::shared_ptr<Exchange>& ex, GatewayError error,
                         std::string_view message) {
  if (auto writer = ex->Writer()) writer->Reply(JsonError(ex->request, error, message));
  Finish(ex, HttpStatusFor(error));
}

void Gateway::Core::Finish(const std::shared_ptr<Exchange>& ex, int code) {
  bool gone = false;
  {
    sync::MutexLock lock(&ex->mu);
    if (ex->done) return;
    ex->done = true;
    gone = ex->client_gone;
  }
  const Clock::time_point now = Clock::now();
  if (ex->working_set.has_value()) {
    // A served answer's context is held for the pause that follows it; a stream's usage is not
    // read, so its reservation (prompt + expected decode) stands for it.
    std::optional<int64_t> context;
    {
      sync::MutexLock lock(&ex->mu);
      context = ex->answer_context_tokens;
    }
    working_set_->Finish(*ex->working_set,
                         context.value_or(ex->working_set->request.reservation_tokens),
                         !gone && code / 100 == 2);
  }
  // Returns the attempt's lease (ReturnLease) and moves a draining session on.
  sessions_->Finish(ex->rid, now);
  metrics_.ObserveRequest(RoutePath(ex->route),
                          gone ? HttpStatusFor(GatewayError::kClientGone) : code,
                          std::chrono::duration<double>(now - ex->started).count());
  in_flight_.fetch_sub(1);
}

}  // namespace agentkv::service
