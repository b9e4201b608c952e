// Invariants (CheckInvariants makes them executable):
//  1. live_ holds every attempt begun and not finished; each attempt naming a session is in
//     that session's `live` under its seq, and in its `used` set.
//  2. A session's in_flight counts its live attempts with in_flight set, which are all
//     kDispatched. kDraining has in_flight > 0 and a drain deadline, and is in draining_ under
//     it exactly while draining; kClosing and kTerminal have in_flight == 0.
//  3. kActive: no attempt of it is cancelled, no reason is set; it is in idle_ exactly when it
//     has no live attempt and is not retained, under its last_activity. active_ counts kActive
//     sessions and is <= max_sessions except for the instant Close opens an unknown session to end
//     it. Only kActive sessions are retained; retained_ counts them and is <=
//     RetainedSessionBound().
//  4. A terminating (draining, closing) session has no attempt in kAdmitting or kReady that is
//     not cancelled. Waiters exist only while a session is draining or closing.
//  5. kClosing exists only with the lifecycle on. Counters: close <= closes emitted; 0 <=
//     close_failure <= close.
//  6. A session's ended rids number at most kMaxEndedAttemptsPerSession.
//  7. Parents (parent_return): parents_ and parents_order_ hold the same keys, each once, at
//     most max_sessions of them; none with parent_return off.
#include "agentkv/control/gateway_flow.h"

#include <algorithm>
#include <utility>

#include "agentkv/base/bounds.h"
#include "agentkv/base/check.h"

namespace agentkv::control {
namespace {

constexpr int64_t kMaxAttemptsPerRequestId = int64_t{1} << 20;

std::string KeyName(const std::string& key) { return key; }
std::string KeyName(SessionId key) { return std::to_string(key.value()); }

}  // namespace

Status GatewayFlowOptions::Validate() const {
  if (idle_timeout < TimeNs(0)) return InvalidArgumentError("idle_timeout must be >= 0");
  if (drain_timeout < TimeNs(0)) return InvalidArgumentError("drain_timeout must be >= 0");
  if (max_closed_sessions < 1) {
    return InvalidArgumentError("max_closed_sessions must be >= 1, got " +
                                std::to_string(max_closed_sessions));
  }
  if (max_sessions < 1) {
    return InvalidArgumentError("max_sessions must be >= 1, got " + std::to_string(max_sessions));
  }
  if (max_retained_sessions.has_value() &&
      (*max_retained_sessions < 0 || *max_retained_sessions > max_sessions)) {
    return InvalidArgumentError(
        "max_retained_sessions must be in [0, max_sessions = " + std::to_string(max_sessions) +
        "], got " + std::to_string(*max_retained_sessions));
  }
  return Status::Ok();
}

int64_t GatewayFlowOptions::RetainedSessionBound() const {
  return max_retained_sessions.value_or(max_sessions / 2);
}

std::string_view ParentReturnDeliveryName(ParentReturnDelivery delivery) {
  switch (delivery) {
    case ParentReturnDelivery::kOff:
      return "off";
    case ParentReturnDelivery::kOncePerReturn:
      return "once-per-return";
    case ParentReturnDelivery::kEveryAttempt:
      return "every-attempt";
  }
  return "unknown";
}

std::string_view AttemptPhaseName(AttemptPhase phase) {
  switch (phase) {
    case AttemptPhase::kAdmitting:
      return "admitting";
    case AttemptPhase::kReady:
      return "ready";
    case AttemptPhase::kDispatched:
      return "dispatched";
  }
  return "unknown";
}

std::string_view AdmissionVerdictName(AdmissionVerdict verdict) {
  switch (verdict) {
    case AdmissionVerdict::kDispatch:
      return "dispatch";
    case AdmissionVerdict::kRefused:
      return "refused";
    case AdmissionVerdict::kCancelled:
      return "cancelled";
    case AdmissionVerdict::kClientGone:
      return "client_gone";
  }
  return "unknown";
}

template <typename Key>
GatewayFlow<Key>::GatewayFlow(GatewayFlowOptions options) : options_(options) {
  const Status valid = options_.Validate();
  AGENTKV_CHECK(valid.ok()) << valid;
}

// --- Sessions ---

template <typename Key>
bool GatewayFlow<Key>::Opens(const Key& key) const {
  auto it = sessions_.find(key);
  if (it == sessions_.end()) return true;
  // An ended incarnation with nothing live is replaced by a new one (Open).
  return it->second.phase == SessionPhase::kTerminal && it->second.live.empty();
}

template <typename Key>
typename GatewayFlow<Key>::Session& GatewayFlow<Key>::Open(const Key& key, TimeNs now) {
  auto it = sessions_.find(key);
  if (it != sessions_.end()) {
    // Live or terminating, or an ended incarnation whose cancelled attempts have not all
    // reported Finish yet: keep it (the caller sees it terminating).
    if (!Opens(key)) return it->second;
    // An ended session used again: a new incarnation. Its tombstone entry goes stale.
    sessions_.erase(it);
  }
  Session& session = sessions_[key];
  session.last_activity = now;
  session.program_arrival = next_program_++;
  ++active_;
  UpdateIdle(key, session);
  return session;
}

template <typename Key>
void GatewayFlow<Key>::UpdateIdle(const Key& key, Session& session) {
  const bool idle =
      session.phase == SessionPhase::kActive && session.live.empty() && !session.retained;
  if (session.idle_since.has_value() && (!idle || *session.idle_since != session.last_activity)) {
    idle_.erase({*session.idle_since, key});
    session.idle_since.reset();
  }
  if (idle && !session.idle_since.has_value()) {
    idle_.emplace(session.last_activity, key);
    session.idle_since = session.last_activity;
  }
}

template <typename Key>
Status GatewayFlow<Key>::MakeRoom(TimeNs now) {
  if (active_ < options_.max_sessions) return Status::Ok();
  if (idle_.empty()) {
    ++refused_;
    return UnavailableError("the gateway holds its maximum of " +
                            std::to_string(options_.max_sessions) +
                            " active sessions (--max-sessions), each with a request in flight "
                            "or retained (" +
                            std::to_string(retained_) + " retained); retry later");
  }
  const Key victim = idle_.begin()->second;
  Terminate(victim, sessions_.at(victim), TerminalReason::kDropped, now);
  ++evicted_;
  return Status::Ok();
}

template <typename Key>
void GatewayFlow<Key>::SetRetained(const Key& key, Session& session, bool retained) {
  AGENTKV_CHECK(session.phase == SessionPhase::kActive);
  if (session.retained == retained) return;
  session.retained = retained;
  retained_ += retained ? 1 : -1;
  UpdateIdle(key, session);
}

template <typename Key>
void GatewayFlow<Key>::Terminate(const Key& key, Session& session, TerminalReason reason,
                                 TimeNs now) {
  if (session.phase != SessionPhase::kActive) return;
  session.phase = SessionPhase::kDraining;
  session.reason = reason;
  --active_;
  if (session.retained) {
    session.retained = false;
    --retained_;
  }
  UpdateIdle(key, session);
  // Cancel first, then abort: attempts that never reached an engine must not be dispatched by
  // a re-check racing the aborts.
  for (const auto& [seq, rid] : session.live) {
    Attempt& attempt = live_.at(rid);
    if (attempt.phase == AttemptPhase::kDispatched) continue;
    attempt.cancelled = true;
    outbox_.push_back(CancelAttempt{rid, attempt.phase == AttemptPhase::kAdmitting});
  }
  int64_t aborted = 0;
  for (const auto& [seq, rid] : session.live) {
    const Attempt& attempt = live_.at(rid);
    if (!attempt.in_flight) continue;
    outbox_.push_back(AbortOnEveryEngine{rid});
    ++aborted;
  }
  session.aborted = aborted;
  if (session.in_flight > 0) {
    session.drain_deadline = SaturatingAdd(now, options_.drain_timeout);
    draining_.emplace(*session.drain_deadline, key);
  } else {
    FinishDraining(key, session);
  }
}

template <typename Key>
void GatewayFlow<Key>::FinishDraining(const Key& key, Session& session) {
  AGENTKV_CHECK(session.phase == SessionPhase::kDraining);
  AGENTKV_CHECK_EQ(session.in_flight, 0);
  if (session.drain_deadline.has_value()) draining_.erase({*session.drain_deadline, key});
  session.drain_deadline.reset();
  if (options_.lifecycle) {
    session.phase = SessionPhase::kClosing;
    outbox_.push_back(CloseOnEveryEngine<Key>{key});
  } else {
    EndSession(key, session);
  }
}

template <typename Key>
void GatewayFlow<Key>::EndSession(const Key& key, Session& session) {
  session.phase = SessionPhase::kTerminal;
  ++counters_.terminated;
  // With the lifecycle off nothing is closed: the session simply ended.
  const bool closed = session.last_close_ok.value_or(true);
  for (uint64_t request : session.waiters) {
    outbox_.push_back(AnswerClose<Key>{request, CloseOutcome<Key>{key, closed, session.aborted}});
  }
  session.waiters.clear();
  Remember(key, session);
}

template <typename Key>
void GatewayFlow<Key>::Remember(const Key& key, Session& session) {
  if (session.tombstone != 0) return;
  session.tombstone = next_tombstone_++;
  closed_.emplace_back(key, session.tombstone);
  // Forget the oldest ended sessions; one whose cancelled attempts are still live goes to the
  // back (each entry is looked at once per call). `session` itself is never forgotten here: its
  // callers still hold it, and a later call forgets it in its turn.
  size_t budget = closed_.size();
  while (static_cast<int64_t>(closed_.size()) > options_.max_closed_sessions && budget-- > 0) {
    auto [oldest, tombstone] = closed_.front();
    closed_.pop_front();
    auto it = sessions_.find(oldest);
    if (it == sessions_.end() || it->second.tombstone != tombstone) continue;
    if (!it->second.live.empty() || &it->second == &session) {
      closed_.emplace_back(std::move(oldest), tombstone);
      continue;
    }
    sessions_.erase(it);
  }
}

template <typename Key>
void GatewayFlow<Key>::Close(const Key& key, TerminalReason reason, uint64_t request, TimeNs now) {
  if (!sessions_.contains(key)) Open(key, now);
  Session& session = sessions_.at(key);
  if (session.phase == SessionPhase::kTerminal) {
    // Idempotent: the remembered outcome, no second fan-out.
    outbox_.push_back(
        AnswerClose<Key>{request, CloseOutcome<Key>{key, session.last_close_ok.value_or(true), 0}});
    return;
  }
  session.waiters.push_back(request);
  Terminate(key, session, reason, now);
}

template <typename Key>
Status GatewayFlow<Key>::OnCloseOutcome(const Key& key, bool succeeded) {
  auto it = sessions_.find(key);
  if (it == sessions_.end() || it->second.phase != SessionPhase::kClosing) {
    return FailedPreconditionError("session '" + KeyName(key) + "' has no close outstanding");
  }
  ++counters_.close;
  // Fail-open: a failed close is counted, and the session still ends; its KV stays subject
  // to the engine's ordinary priority eviction.
  if (!succeeded) ++counters_.close_failure;
  it->second.last_close_ok = succeeded;
  EndSession(key, it->second);
  return Status::Ok();
}

template <typename Key>
int64_t GatewayFlow<Key>::Sweep(TimeNs now) {
  // The due sessions are prefixes of the two time-ordered indexes (idle_since is
  // last_activity for every session in idle_); they are acted on in key order, idle ones
  // first, the order a walk over sessions_ gives.
  std::vector<Key> idle;
  std::vector<Key> overdue;
  if (options_.idle_timeout > TimeNs(0)) {
    for (auto it = idle_.begin(); it != idle_.end() && now - it->first >= options_.idle_timeout;
         ++it) {
      idle.push_back(it->second);
    }
  }
  for (auto it = draining_.begin(); it != draining_.end() && now >= it->first; ++it) {
    overdue.push_back(it->second);
  }
  std::sort(idle.begin(), idle.end());
  std::sort(overdue.begin(), overdue.end());
  for (const Key& key : idle) Terminate(key, sessions_.at(key), TerminalReason::kDropped, now);
  for (const Key& key : overdue) {
    // The aborted attempts did not end in time: close anyway (their late Finish is accepted).
    Session& session = sessions_.at(key);
    for (const auto& [seq, rid] : session.live) live_.at(rid).in_flight = false;
    session.in_flight = 0;
    FinishDraining(key, session);
  }
  return static_cast<int64_t>(idle.size() + overdue.size());
}

template <typename Key>
std::optional<TimeNs> GatewayFlow<Key>::NextDrainDeadline() const {
  if (draining_.empty()) return std::nullopt;
  return draining_.begin()->first;
}

template <typename Key>
std::optional<TimeNs> GatewayFlow<Key>::NextIdleDeadline() const {
  if (options_.idle_timeout <= TimeNs(0) || idle_.empty()) return std::nullopt;
  return SaturatingAdd(idle_.begin()->first, options_.idle_timeout);
}

// --- Attempts ---

template <typename Key>
StatusOr<std::string> GatewayFlow<Key>::BeginAttempt(const std::optional<Key>& key,
                                                     std::string_view request_id,
                                                     AttemptSpec<Key> spec, TimeNs now) {
  if (request_id.empty()) return InvalidArgumentError("empty request id");
  if (spec.retain.value_or(false) && !key.has_value()) {
    return InvalidArgumentError("only a request with a session can retain it");
  }
  Attempt attempt;
  attempt.session = key;
  attempt.phase = spec.awaits_admission ? AttemptPhase::kAdmitting : AttemptPhase::kReady;
  attempt.streamed = spec.streamed;
  attempt.prompt_tokens = std::max<int64_t>(0, spec.prompt_tokens);
  if (!key.has_value()) {
    for (int64_t n = 0; n < kMaxAttemptsPerRequestId; ++n) {
      std::string rid = FormatAttemptRid(request_id, n);
      if (live_.contains(rid)) continue;
      attempt.seq = next_seq_++;
      attempt.program_arrival = next_program_++;
      live_.emplace(rid, std::move(attempt));
      NoteParentReturn(key, spec.parent);
      return rid;
    }
    return ResourceExhaustedError("too many live attempts of request " + std::string(request_id));
  }
  const bool opens = Opens(*key);
  // Refusals first, in the documented order, so that a refused attempt changes nothing.
  if (!opens && sessions_.at(*key).phase != SessionPhase::kActive) {
    return FailedPreconditionError("session " + KeyName(*key) + " is closing");
  }
  const bool retained_now = !opens && sessions_.at(*key).retained;
  if (spec.retain.value_or(false) && !retained_now &&
      retained_ >= options_.RetainedSessionBound()) {
    ++retain_refused_;
    return ResourceExhaustedError(
        "session " + KeyName(*key) + " cannot be retained: " + std::to_string(retained_) +
        " sessions are retained, the most allowed (--max-retained-sessions " +
        std::to_string(options_.RetainedSessionBound()) +
        "); close retained sessions that are done (POST /v1/sessions/{id}/close) or send the "
        "request without retention");
  }
  if (opens) AGENTKV_RETURN_IF_ERROR(MakeRoom(now));
  Session& session = Open(*key, now);
  AGENTKV_CHECK(session.phase == SessionPhase::kActive);
  if (session.next_attempt.size() > static_cast<size_t>(kMaxEndedAttemptsPerSession)) {
    session.next_attempt.clear();
  }
  int64_t& next = session.next_attempt[std::string(request_id)];
  for (; next < kMaxAttemptsPerRequestId; ++next) {
    std::string rid = FormatAttemptRid(request_id, next);
    if (live_.contains(rid) || session.used.contains(rid)) continue;
    ++next;
    attempt.seq = next_seq_++;
    attempt.program_arrival = session.program_arrival;
    session.live.emplace(attempt.seq, rid);
    session.used.insert(rid);
    session.last_activity = now;
    live_.emplace(rid, std::move(attempt));
    if (spec.retain.has_value()) SetRetained(*key, session, *spec.retain);
    UpdateIdle(*key, session);
    NoteParentReturn(key, spec.parent);
    return rid;
  }
  return ResourceExhaustedError("too many attempts of request " + std::string(request_id));
}

template <typename Key>
void GatewayFlow<Key>::NoteParentReturn(const std::optional<Key>& session,
                                        const std::optional<Key>& parent) {
  if (options_.parent_return == ParentReturnDelivery::kOff) return;
  if (parent.has_value()) {
    // Named again: its return is due again.
    auto [it, inserted] = parents_.try_emplace(*parent, true);
    it->second = true;
    if (inserted) {
      parents_order_.push_back(*parent);
      while (static_cast<int64_t>(parents_order_.size()) > options_.max_sessions) {
        parents_.erase(parents_order_.front());
        parents_order_.pop_front();
      }
    }
  }
  if (!session.has_value()) return;
  auto it = parents_.find(*session);
  if (it == parents_.end() || !it->second) return;
  if (options_.parent_return == ParentReturnDelivery::kOncePerReturn) it->second = false;
  outbox_.push_back(DeliverParentReturn<Key>{*session});
}

template <typename Key>
StatusOr<AdmissionVerdict> GatewayFlow<Key>::OnAdmission(std::string_view rid,
                                                         const AdmissionDecision& decision) {
  auto it = live_.find(rid);
  if (it == live_.end()) return NotFoundError("unknown attempt " + std::string(rid));
  Attempt& attempt = it->second;
  if (attempt.phase != AttemptPhase::kAdmitting) {
    return FailedPreconditionError("attempt " + std::string(rid) + " is " +
                                   std::string(AttemptPhaseName(attempt.phase)) +
                                   ", not waiting for admission");
  }
  attempt.phase = AttemptPhase::kReady;
  attempt.lease = decision.lease_id;
  if (attempt.client_gone) return AdmissionVerdict::kClientGone;
  // A close cancelled the wait: whatever the decision (a lease granted just before the
  // cancel reached the coordinator is returned at Finish), the attempt never runs.
  if (attempt.cancelled) return AdmissionVerdict::kCancelled;
  if (decision.action == AdmissionAction::kRefuse) return AdmissionVerdict::kRefused;
  if (decision.action == AdmissionAction::kBypass &&
      decision.reason == AdmissionReason::kCancelled) {
    return AdmissionVerdict::kCancelled;
  }
  return AdmissionVerdict::kDispatch;
}

template <typename Key>
StatusOr<DispatchIdentity<Key>> GatewayFlow<Key>::Dispatch(std::string_view rid) {
  auto it = live_.find(rid);
  if (it == live_.end()) return NotFoundError("unknown attempt " + std::string(rid));
  Attempt& attempt = it->second;
  if (attempt.cancelled) {
    return FailedPreconditionError("session " + KeyName(*attempt.session) +
                                   " was closed before the request was sent");
  }
  if (attempt.client_gone) {
    return FailedPreconditionError("the client left before the request was sent");
  }
  if (attempt.phase != AttemptPhase::kReady) {
    return FailedPreconditionError("attempt " + std::string(rid) + " is " +
                                   std::string(AttemptPhaseName(attempt.phase)) +
                                   "; only a ready attempt is dispatched");
  }
  attempt.phase = AttemptPhase::kDispatched;
  DispatchIdentity<Key> identity{std::string(rid), std::nullopt};
  if (!attempt.session.has_value()) return identity;
  Session& session = sessions_.at(*attempt.session);
  AGENTKV_CHECK(session.phase == SessionPhase::kActive)
      << "an attempt of a terminating session is cancelled";
  attempt.in_flight = true;
  ++session.in_flight;
  ++session.dispatched;
  session.held_prompt_tokens = attempt.prompt_tokens;
  if (options_.lifecycle) identity.session = *attempt.session;
  return identity;
}

template <typename Key>
void GatewayFlow<Key>::OnClientGone(std::string_view rid) {
  auto it = live_.find(rid);
  if (it == live_.end() || it->second.client_gone) return;
  Attempt& attempt = it->second;
  attempt.client_gone = true;
  switch (attempt.phase) {
    case AttemptPhase::kAdmitting:
      // The decision (kBypass `cancelled`) then ends the attempt.
      outbox_.push_back(CancelAttempt{std::string(rid), /*awaiting_admission=*/true});
      break;
    case AttemptPhase::kDispatched:
      // The upstream call is cut, which ends the attempt and returns its lease at once (a hung
      // engine must not hold it until the upstream timeout). A stream's engine sees its client
      // go and aborts; a plain request is also aborted on every engine, so that it stops using
      // KV for nobody.
      if (!attempt.streamed) outbox_.push_back(AbortOnEveryEngine{std::string(rid)});
      outbox_.push_back(CutUpstream{std::string(rid)});
      break;
    case AttemptPhase::kReady:  // Dispatch refuses it.
      break;
  }
}

template <typename Key>
void GatewayFlow<Key>::Finish(std::string_view rid, TimeNs now) {
  auto it = live_.find(rid);
  if (it == live_.end()) return;
  Attempt attempt = std::move(it->second);
  const std::string finished_rid = it->first;
  live_.erase(it);
  if (attempt.lease.has_value()) outbox_.push_back(ReturnLease{*attempt.lease});
  if (!attempt.session.has_value()) return;
  const Key& key = *attempt.session;
  Session& session = sessions_.at(key);
  session.live.erase(attempt.seq);
  session.last_activity = now;
  session.ended.push_back(finished_rid);
  while (static_cast<int64_t>(session.ended.size()) > kMaxEndedAttemptsPerSession) {
    session.used.erase(session.ended.front());
    session.ended.pop_front();
  }
  if (attempt.in_flight) {
    --session.in_flight;
    if (session.phase == SessionPhase::kDraining && session.in_flight == 0) {
      FinishDraining(key, session);
    }
  }
  UpdateIdle(key, session);
}

// --- Outbox and queries ---

template <typename Key>
std::vector<typename GatewayFlow<Key>::Action> GatewayFlow<Key>::TakeActions() {
  std::vector<Action> actions;
  actions.swap(outbox_);
  return actions;
}

template <typename Key>
SessionHistory GatewayFlow<Key>::History(const Key& key) const {
  auto it = sessions_.find(key);
  if (it == sessions_.end() || it->second.phase == SessionPhase::kTerminal) return {};
  return SessionHistory{it->second.dispatched > 0, it->second.held_prompt_tokens};
}

template <typename Key>
std::optional<uint64_t> GatewayFlow<Key>::ProgramArrival(const Key& key) const {
  auto it = sessions_.find(key);
  if (it == sessions_.end() || it->second.phase != SessionPhase::kActive) return std::nullopt;
  return it->second.program_arrival;
}

template <typename Key>
std::optional<uint64_t> GatewayFlow<Key>::AttemptProgramArrival(std::string_view rid) const {
  auto it = live_.find(rid);
  if (it == live_.end()) return std::nullopt;
  return it->second.program_arrival;
}

template <typename Key>
StatusOr<SessionPhase> GatewayFlow<Key>::phase(const Key& key) const {
  auto it = sessions_.find(key);
  if (it == sessions_.end()) return NotFoundError("unknown session '" + KeyName(key) + "'");
  return it->second.phase;
}

template <typename Key>
StatusOr<AttemptPhase> GatewayFlow<Key>::attempt_phase(std::string_view rid) const {
  auto it = live_.find(rid);
  if (it == live_.end()) return NotFoundError("unknown attempt " + std::string(rid));
  return it->second.phase;
}

template <typename Key>
std::optional<std::string> GatewayFlow<Key>::lease_of(std::string_view rid) const {
  auto it = live_.find(rid);
  if (it == live_.end()) return std::nullopt;
  return it->second.lease;
}

template <typename Key>
bool GatewayFlow<Key>::retained(const Key& key) const {
  auto it = sessions_.find(key);
  return it != sessions_.end() && it->second.retained;
}

template <typename Key>
int64_t GatewayFlow<Key>::terminating_sessions() const {
  int64_t terminating = 0;
  for (const auto& [key, session] : sessions_) {
    if (session.phase == SessionPhase::kDraining || session.phase == SessionPhase::kClosing) {
      ++terminating;
    }
  }
  return terminating;
}

template <typename Key>
std::vector<std::string> GatewayFlow<Key>::live_rids() const {
  std::vector<std::string> rids;
  rids.reserve(live_.size());
  for (const auto& [rid, attempt] : live_) rids.push_back(rid);
  return rids;
}

template <typename Key>
void GatewayFlow<Key>::CheckInvariants() const {
  const AttemptCounts counts = CheckAttempts();
  for (const auto& [key, session] : sessions_) CheckSession(key, session, counts);
  CheckSessionTotals();
  CheckParentReturns();
}

// Invariant 1, and the attempt side of 2 and 4.
template <typename Key>
typename GatewayFlow<Key>::AttemptCounts GatewayFlow<Key>::CheckAttempts() const {
  AttemptCounts counts;
  for (const auto& [rid, attempt] : live_) {
    if (attempt.in_flight) {
      AGENTKV_CHECK(attempt.phase == AttemptPhase::kDispatched) << "rid " << rid;
    }
    if (!attempt.session.has_value()) {
      AGENTKV_CHECK(!attempt.in_flight && !attempt.cancelled) << "sessionless rid " << rid;
      continue;
    }
    CheckAttemptOfSession(rid, attempt);
    ++counts.live[*attempt.session];
    if (attempt.in_flight) ++counts.in_flight[*attempt.session];
  }
  return counts;
}

template <typename Key>
void GatewayFlow<Key>::CheckAttemptOfSession(const std::string& rid, const Attempt& attempt) const {
  auto session = sessions_.find(*attempt.session);
  AGENTKV_CHECK(session != sessions_.end()) << "rid " << rid << " of an unknown session";
  auto indexed = session->second.live.find(attempt.seq);
  AGENTKV_CHECK(indexed != session->second.live.end() && indexed->second == rid)
      << "rid " << rid << " not indexed by its session";
  AGENTKV_CHECK(session->second.used.contains(rid)) << "rid " << rid << " not marked used";
  if (session->second.phase != SessionPhase::kActive && !attempt.cancelled) {
    AGENTKV_CHECK(attempt.phase == AttemptPhase::kDispatched)
        << "rid " << rid << " of a terminating session neither cancelled nor dispatched";
  }
  if (session->second.phase == SessionPhase::kActive) {
    AGENTKV_CHECK(!attempt.cancelled) << "cancelled rid " << rid << " of an active session";
  }
}

// Invariants 2, 3 and 6 for one session; its indexes.
template <typename Key>
void GatewayFlow<Key>::CheckSession(const Key& key, const Session& session,
                                    const AttemptCounts& counts) const {
  const auto count = [&key](const std::map<Key, int64_t>& of) {
    auto it = of.find(key);
    return it == of.end() ? int64_t{0} : it->second;
  };
  AGENTKV_CHECK_EQ(static_cast<int64_t>(session.live.size()), count(counts.live))
      << "session " << KeyName(key) << " live attempts";
  AGENTKV_CHECK_EQ(session.in_flight, count(counts.in_flight)) << "session " << KeyName(key);
  AGENTKV_CHECK_LE(static_cast<int64_t>(session.ended.size()), kMaxEndedAttemptsPerSession);
  const bool is_active = session.phase == SessionPhase::kActive;
  if (session.retained) {
    AGENTKV_CHECK(is_active) << "retained session " << KeyName(key) << " is not active";
  }
  const bool is_idle = is_active && session.live.empty() && !session.retained;
  AGENTKV_CHECK(is_idle == session.idle_since.has_value())
      << "session " << KeyName(key) << " idle index";
  if (is_idle) {
    AGENTKV_CHECK(idle_.contains({*session.idle_since, key})) << "session " << KeyName(key);
    AGENTKV_CHECK(*session.idle_since == session.last_activity) << "session " << KeyName(key);
  }
  if (session.phase == SessionPhase::kDraining) {
    AGENTKV_CHECK(session.drain_deadline.has_value() &&
                  draining_.contains({*session.drain_deadline, key}))
        << "session " << KeyName(key) << " drain index";
  }
  CheckSessionPhase(key, session);
}

// Invariants 2 to 5: what each phase allows.
template <typename Key>
void GatewayFlow<Key>::CheckSessionPhase(const Key& key, const Session& session) const {
  switch (session.phase) {
    case SessionPhase::kActive:
      AGENTKV_CHECK(!session.reason.has_value() && session.waiters.empty())
          << "active session " << KeyName(key);
      break;
    case SessionPhase::kDraining:
      AGENTKV_CHECK_LT(0, session.in_flight) << "draining session " << KeyName(key);
      AGENTKV_CHECK(session.drain_deadline.has_value()) << "session " << KeyName(key);
      break;
    case SessionPhase::kClosing:
      AGENTKV_CHECK(options_.lifecycle) << "closing session " << KeyName(key);
      [[fallthrough]];
    case SessionPhase::kTerminal:
      AGENTKV_CHECK_EQ(session.in_flight, 0) << "ended session " << KeyName(key);
      AGENTKV_CHECK(session.reason.has_value()) << "session " << KeyName(key);
      break;
  }
  if (session.phase == SessionPhase::kTerminal) {
    AGENTKV_CHECK(session.waiters.empty()) << "ended session " << KeyName(key) << " waiters";
    AGENTKV_CHECK_NE(session.tombstone, uint64_t{0}) << "ended session " << KeyName(key);
  }
}

// The counts and index sizes over every session (invariants 2, 3 and 5).
template <typename Key>
void GatewayFlow<Key>::CheckSessionTotals() const {
  int64_t active = 0;
  int64_t retained = 0;
  size_t idle = 0;
  size_t draining = 0;
  for (const auto& [key, session] : sessions_) {
    if (session.phase == SessionPhase::kActive) ++active;
    if (session.retained) ++retained;
    if (session.idle_since.has_value()) ++idle;
    if (session.phase == SessionPhase::kDraining) ++draining;
  }
  AGENTKV_CHECK_EQ(active, active_) << "active session count";
  AGENTKV_CHECK_EQ(retained, retained_) << "retained session count";
  AGENTKV_CHECK_LE(retained_, options_.RetainedSessionBound());
  AGENTKV_CHECK_EQ(idle, idle_.size()) << "idle index size";
  AGENTKV_CHECK_EQ(draining, draining_.size()) << "drain index size";
  AGENTKV_CHECK_GE(counters_.close_failure, 0);
  AGENTKV_CHECK_LE(counters_.close_failure, counters_.close);
}

// Invariant 7.
template <typename Key>
void GatewayFlow<Key>::CheckParentReturns() const {
  if (options_.parent_return == ParentReturnDelivery::kOff) {
    AGENTKV_CHECK(parents_.empty()) << "parents remembered with parent returns off";
  }
  AGENTKV_CHECK_EQ(parents_.size(), parents_order_.size()) << "parent index size";
  AGENTKV_CHECK_LE(static_cast<int64_t>(parents_.size()), options_.max_sessions);
  for (const Key& parent : parents_order_) {
    AGENTKV_CHECK(parents_.contains(parent)) << "parent " << KeyName(parent) << " not indexed";
  }
}

template class GatewayFlow<std::string>;
template class GatewayFlow<SessionId>;

}  // namespace agentkv::control
