// Invariants (CheckInvariants makes them executable):
//  1. session_of_rid_ holds exactly the rids of the registered sessions' attempts, each
//     mapped to the session that holds it; rids are unique across the registry.
//  2. A session's in_flight equals the number of its attempts in kDispatched, and its ended
//     the number in kFinished or kCancelled; an active session holds at most
//     2 x kMaxEndedAttemptsPerSession ended attempts.
//  3. kActive: no attempt is kCancelled and no terminal reason is set.
//  4. kDraining: a terminal reason is set, no attempt is kQueued, and in_flight > 0 (the last
//     dispatched attempt to finish moves the session on).
//  5. kClosing and kTerminal: a terminal reason is set and every attempt is kFinished or
//     kCancelled. kClosing only exists with the lifecycle enabled.
//  6. Counters: close == closes_emitted_ - (sessions in kClosing), because each session emits
//     at most one close and consumes its outcome once; 0 <= close_failure <= close;
//     terminated == (sessions in kTerminal) + forgotten_. With the lifecycle off, no close is
//     ever emitted.
#include "agentkv/control/session_lifecycle.h"

#include <string>
#include <utility>

#include "agentkv/base/check.h"

namespace agentkv::control {

std::string FormatAttemptRid(std::string_view request_id, int64_t attempt) {
  AGENTKV_CHECK_GE(attempt, 0) << "attempt numbers start at 0";
  std::string rid(request_id);
  rid += ':';
  rid += std::to_string(attempt);
  return rid;
}

std::string_view AttemptStateName(AttemptState state) {
  switch (state) {
    case AttemptState::kQueued:
      return "queued";
    case AttemptState::kDispatched:
      return "dispatched";
    case AttemptState::kFinished:
      return "finished";
    case AttemptState::kCancelled:
      return "cancelled";
  }
  return "unknown";
}

std::string_view SessionPhaseName(SessionPhase phase) {
  switch (phase) {
    case SessionPhase::kActive:
      return "active";
    case SessionPhase::kDraining:
      return "draining";
    case SessionPhase::kClosing:
      return "closing";
    case SessionPhase::kTerminal:
      return "terminal";
  }
  return "unknown";
}

std::string_view TerminalReasonName(TerminalReason reason) {
  switch (reason) {
    case TerminalReason::kFinished:
      return "finished";
    case TerminalReason::kDiscarded:
      return "discarded";
    case TerminalReason::kFailed:
      return "failed";
    case TerminalReason::kDropped:
      return "dropped";
  }
  return "unknown";
}

bool CloseSucceededOnEveryEngine(std::span<const Status> per_engine_results) {
  if (per_engine_results.empty()) return false;
  for (const Status& result : per_engine_results) {
    if (!result.ok()) return false;
  }
  return true;
}

SessionLifecyclePlanner::SessionLifecyclePlanner(SessionLifecycleOptions options)
    : options_(options) {}

// --- Lookup ---

StatusOr<SessionLifecyclePlanner::Session*> SessionLifecyclePlanner::FindSession(
    std::string_view session_id) {
  auto it = sessions_.find(session_id);
  if (it == sessions_.end()) {
    return NotFoundError("unknown session '" + std::string(session_id) + "'");
  }
  return &it->second;
}

StatusOr<const SessionLifecyclePlanner::Session*> SessionLifecyclePlanner::FindSession(
    std::string_view session_id) const {
  auto it = sessions_.find(session_id);
  if (it == sessions_.end()) {
    return NotFoundError("unknown session '" + std::string(session_id) + "'");
  }
  return &it->second;
}

StatusOr<std::pair<const std::string*, SessionLifecyclePlanner::Attempt*>>
SessionLifecyclePlanner::FindAttempt(std::string_view rid) {
  auto owner = session_of_rid_.find(rid);
  if (owner == session_of_rid_.end()) {
    return NotFoundError("unknown attempt rid '" + std::string(rid) + "'");
  }
  auto session = sessions_.find(owner->second);
  AGENTKV_CHECK(session != sessions_.end()) << "rid " << rid << " of a missing session";
  for (Attempt& attempt : session->second.attempts) {
    if (attempt.rid == rid) return std::make_pair(&session->first, &attempt);
  }
  AGENTKV_CHECK(false) << "rid " << rid << " indexed but not held by its session";
  return InternalError("unreachable");
}

StatusOr<std::pair<const std::string*, const SessionLifecyclePlanner::Attempt*>>
SessionLifecyclePlanner::FindAttempt(std::string_view rid) const {
  auto owner = session_of_rid_.find(rid);
  if (owner == session_of_rid_.end()) {
    return NotFoundError("unknown attempt rid '" + std::string(rid) + "'");
  }
  auto session = sessions_.find(owner->second);
  AGENTKV_CHECK(session != sessions_.end()) << "rid " << rid << " of a missing session";
  for (const Attempt& attempt : session->second.attempts) {
    if (attempt.rid == rid) return std::make_pair(&session->first, &attempt);
  }
  AGENTKV_CHECK(false) << "rid " << rid << " indexed but not held by its session";
  return InternalError("unreachable");
}

// --- Registry ---

Status SessionLifecyclePlanner::OpenSession(std::string_view session_id) {
  if (session_id.empty()) return InvalidArgumentError("session id must not be empty");
  if (sessions_.contains(session_id)) {
    return AlreadyExistsError("session '" + std::string(session_id) + "' is already registered");
  }
  sessions_.emplace(std::string(session_id), Session{});
  return Status::Ok();
}

Status SessionLifecyclePlanner::SetKeepAlive(std::string_view session_id, bool keep_alive) {
  AGENTKV_ASSIGN_OR_RETURN(Session * session, FindSession(session_id));
  session->keep_alive = keep_alive;
  return Status::Ok();
}

Status SessionLifecyclePlanner::ForgetSession(std::string_view session_id) {
  auto it = sessions_.find(session_id);
  if (it == sessions_.end()) {
    return NotFoundError("unknown session '" + std::string(session_id) + "'");
  }
  if (it->second.phase != SessionPhase::kTerminal) {
    return FailedPreconditionError("session '" + std::string(session_id) + "' is " +
                                   std::string(SessionPhaseName(it->second.phase)) +
                                   ", not terminal; only terminal sessions can be forgotten");
  }
  for (const Attempt& attempt : it->second.attempts) session_of_rid_.erase(attempt.rid);
  sessions_.erase(it);
  ++forgotten_;
  return Status::Ok();
}

// --- Attempts ---

StatusOr<std::string> SessionLifecyclePlanner::BeginAttempt(std::string_view session_id,
                                                            std::string_view request_id,
                                                            int64_t attempt) {
  if (request_id.empty()) return InvalidArgumentError("request id must not be empty");
  if (attempt < 0) {
    return InvalidArgumentError("attempt must be >= 0, got " + std::to_string(attempt));
  }
  AGENTKV_ASSIGN_OR_RETURN(Session * session, FindSession(session_id));
  if (session->phase != SessionPhase::kActive) {
    return FailedPreconditionError("session '" + std::string(session_id) + "' is " +
                                   std::string(SessionPhaseName(session->phase)) +
                                   "; attempts can only begin in an active session");
  }
  std::string rid = FormatAttemptRid(request_id, attempt);
  if (session_of_rid_.contains(rid)) {
    return AlreadyExistsError("attempt rid '" + rid + "' was already used");
  }
  session_of_rid_.emplace(rid, std::string(session_id));
  session->attempts.push_back(Attempt{rid, AttemptState::kQueued});
  ++session->revision;
  return rid;
}

StatusOr<GenerateIdentity> SessionLifecyclePlanner::MarkDispatched(std::string_view rid) {
  AGENTKV_ASSIGN_OR_RETURN(auto found, FindAttempt(rid));
  auto [session_id, attempt] = found;
  Session& session = sessions_.find(*session_id)->second;
  if (session.phase != SessionPhase::kActive) {
    return FailedPreconditionError("session '" + *session_id + "' is " +
                                   std::string(SessionPhaseName(session.phase)) + "; attempt '" +
                                   std::string(rid) + "' must not be dispatched");
  }
  if (attempt->state != AttemptState::kQueued) {
    return FailedPreconditionError("attempt '" + std::string(rid) + "' is " +
                                   std::string(AttemptStateName(attempt->state)) +
                                   ", not queued; it must not be dispatched");
  }
  attempt->state = AttemptState::kDispatched;
  ++session.in_flight;
  ++session.revision;
  GenerateIdentity identity{std::string(rid), std::nullopt};
  if (generate_carries_session_id()) identity.session_id = *session_id;
  return identity;
}

Status SessionLifecyclePlanner::MarkFinished(std::string_view rid) {
  AGENTKV_ASSIGN_OR_RETURN(auto found, FindAttempt(rid));
  auto [session_id, attempt] = found;
  Session& session = sessions_.find(*session_id)->second;
  switch (attempt->state) {
    case AttemptState::kFinished:
    case AttemptState::kCancelled:
      return Status::Ok();
    case AttemptState::kQueued:
      attempt->state = AttemptState::kFinished;
      ++session.ended;
      ++session.revision;
      ForgetOldEndedAttempts(session);
      return Status::Ok();
    case AttemptState::kDispatched:
      attempt->state = AttemptState::kFinished;
      ++session.ended;
      --session.in_flight;
      ++session.revision;
      if (session.phase == SessionPhase::kDraining && session.in_flight == 0) {
        FinishDraining(*session_id, session);
      }
      ForgetOldEndedAttempts(session);
      return Status::Ok();
  }
  return InternalError("unknown attempt state");
}

void SessionLifecyclePlanner::ForgetOldEndedAttempts(Session& session) {
  if (session.phase != SessionPhase::kActive || session.ended <= 2 * kMaxEndedAttemptsPerSession) {
    return;
  }
  int64_t to_forget = session.ended - kMaxEndedAttemptsPerSession;
  std::vector<Attempt> kept;
  kept.reserve(session.attempts.size() - static_cast<size_t>(to_forget));
  for (Attempt& attempt : session.attempts) {
    const bool ended =
        attempt.state == AttemptState::kFinished || attempt.state == AttemptState::kCancelled;
    if (ended && to_forget > 0) {
      session_of_rid_.erase(attempt.rid);
      --to_forget;
      --session.ended;
    } else {
      kept.push_back(std::move(attempt));
    }
  }
  session.attempts = std::move(kept);
}

StatusOr<GenerateIdentity> SessionLifecyclePlanner::GenerateIdentityFor(
    std::string_view rid) const {
  AGENTKV_ASSIGN_OR_RETURN(auto found, FindAttempt(rid));
  GenerateIdentity identity{std::string(rid), std::nullopt};
  if (generate_carries_session_id()) identity.session_id = *found.first;
  return identity;
}

// --- Termination ---

StatusOr<TerminationPlan> SessionLifecyclePlanner::PlanTermination(std::string_view session_id,
                                                                   TerminalReason reason) const {
  AGENTKV_ASSIGN_OR_RETURN(const Session* session, FindSession(session_id));
  TerminationPlan plan;
  plan.session_id = std::string(session_id);
  plan.reason = reason;
  plan.revision = session->revision;
  if (session->phase != SessionPhase::kActive) {
    plan.already_terminating = true;
    return plan;
  }
  for (const Attempt& attempt : session->attempts) {
    if (attempt.state == AttemptState::kQueued) plan.cancel_rids.push_back(attempt.rid);
    if (attempt.state == AttemptState::kDispatched) plan.abort_rids.push_back(attempt.rid);
  }
  plan.close_immediately = plan.abort_rids.empty();
  return plan;
}

Status SessionLifecyclePlanner::ApplyTermination(const TerminationPlan& plan) {
  if (plan.already_terminating) return Status::Ok();
  auto it = sessions_.find(plan.session_id);
  if (it == sessions_.end()) {
    return NotFoundError("unknown session '" + plan.session_id + "'");
  }
  Session& session = it->second;
  if (session.revision != plan.revision || session.phase != SessionPhase::kActive) {
    return FailedPreconditionError(
        "termination plan for session '" + plan.session_id + "' is stale (session is " +
        std::string(SessionPhaseName(session.phase)) + " and changed since the plan); plan again");
  }
  // Cancel first, then abort: runners that never reached an engine must not be dispatched by
  // a re-check racing the aborts.
  for (Attempt& attempt : session.attempts) {
    if (attempt.state != AttemptState::kQueued) continue;
    attempt.state = AttemptState::kCancelled;
    ++session.ended;
    outbox_.push_back(CancelAttemptAction{it->first, attempt.rid});
  }
  for (const Attempt& attempt : session.attempts) {
    if (attempt.state != AttemptState::kDispatched) continue;
    outbox_.push_back(AbortRequestAction{it->first, attempt.rid});
  }
  session.reason = plan.reason;
  session.phase = SessionPhase::kDraining;
  ++session.revision;
  if (session.in_flight == 0) FinishDraining(it->first, session);
  return Status::Ok();
}

Status SessionLifecyclePlanner::Terminate(std::string_view session_id, TerminalReason reason) {
  AGENTKV_ASSIGN_OR_RETURN(TerminationPlan plan, PlanTermination(session_id, reason));
  return ApplyTermination(plan);
}

Status SessionLifecyclePlanner::OnAbortsJoined(std::string_view session_id) {
  auto it = sessions_.find(session_id);
  if (it == sessions_.end()) {
    return NotFoundError("unknown session '" + std::string(session_id) + "'");
  }
  Session& session = it->second;
  if (session.phase != SessionPhase::kDraining) {
    return FailedPreconditionError("session '" + std::string(session_id) + "' is " +
                                   std::string(SessionPhaseName(session.phase)) +
                                   ", not draining; there are no aborts to join");
  }
  for (Attempt& attempt : session.attempts) {
    if (attempt.state != AttemptState::kDispatched) continue;
    attempt.state = AttemptState::kFinished;
    ++session.ended;
  }
  session.in_flight = 0;
  ++session.revision;
  FinishDraining(it->first, session);
  return Status::Ok();
}

Status SessionLifecyclePlanner::OnCloseOutcome(std::string_view session_id, bool succeeded) {
  AGENTKV_ASSIGN_OR_RETURN(Session * session, FindSession(session_id));
  if (session->phase != SessionPhase::kClosing) {
    return FailedPreconditionError("session '" + std::string(session_id) + "' is " +
                                   std::string(SessionPhaseName(session->phase)) +
                                   "; no close outcome is outstanding");
  }
  ++counters_.close;
  // Fail-open: a failed close is counted, and the session still ends; its KV stays subject
  // to the engine's ordinary priority eviction.
  if (!succeeded) ++counters_.close_failure;
  EndSession(*session);
  return Status::Ok();
}

void SessionLifecyclePlanner::FinishDraining(const std::string& session_id, Session& session) {
  AGENTKV_CHECK(session.phase == SessionPhase::kDraining);
  AGENTKV_CHECK_EQ(session.in_flight, 0);
  if (lifecycle_enabled()) {
    session.phase = SessionPhase::kClosing;
    ++session.revision;
    ++closes_emitted_;
    outbox_.push_back(CloseSessionAction{session_id});
  } else {
    EndSession(session);
  }
}

void SessionLifecyclePlanner::EndSession(Session& session) {
  session.phase = SessionPhase::kTerminal;
  ++session.revision;
  ++counters_.terminated;
}

// --- Step end ---

std::vector<std::string> SessionLifecyclePlanner::PlanStepEnd() const {
  std::vector<std::string> dropped;
  for (const auto& [id, session] : sessions_) {
    if (session.phase == SessionPhase::kActive && !session.keep_alive) dropped.push_back(id);
  }
  return dropped;
}

int64_t SessionLifecyclePlanner::EndStep() {
  const std::vector<std::string> dropped = PlanStepEnd();
  for (const std::string& id : dropped) {
    const Status status = Terminate(id, TerminalReason::kDropped);
    AGENTKV_CHECK(status.ok()) << "dropping planned session " << id << ": " << status;
  }
  return static_cast<int64_t>(dropped.size());
}

// --- Outbox and queries ---

std::vector<LifecycleAction> SessionLifecyclePlanner::TakeActions() {
  std::vector<LifecycleAction> actions;
  actions.swap(outbox_);
  return actions;
}

StatusOr<SessionPhase> SessionLifecyclePlanner::phase(std::string_view session_id) const {
  AGENTKV_ASSIGN_OR_RETURN(const Session* session, FindSession(session_id));
  return session->phase;
}

StatusOr<AttemptState> SessionLifecyclePlanner::attempt_state(std::string_view rid) const {
  AGENTKV_ASSIGN_OR_RETURN(auto found, FindAttempt(rid));
  return found.second->state;
}

StatusOr<std::optional<TerminalReason>> SessionLifecyclePlanner::terminal_reason(
    std::string_view session_id) const {
  AGENTKV_ASSIGN_OR_RETURN(const Session* session, FindSession(session_id));
  return session->reason;
}

void SessionLifecyclePlanner::CheckInvariants() const {
  size_t attempt_count = 0;
  int64_t closing = 0;
  int64_t terminal = 0;
  for (const auto& [id, session] : sessions_) {
    int64_t dispatched = 0;
    int64_t queued = 0;
    int64_t cancelled = 0;
    for (const Attempt& attempt : session.attempts) {
      ++attempt_count;
      auto owner = session_of_rid_.find(attempt.rid);
      AGENTKV_CHECK(owner != session_of_rid_.end()) << "rid " << attempt.rid << " not indexed";
      AGENTKV_CHECK_EQ(owner->second, id) << "rid " << attempt.rid << " indexed elsewhere";
      if (attempt.state == AttemptState::kDispatched) ++dispatched;
      if (attempt.state == AttemptState::kQueued) ++queued;
      if (attempt.state == AttemptState::kCancelled) ++cancelled;
    }
    AGENTKV_CHECK_EQ(session.in_flight, dispatched) << "session " << id;
    AGENTKV_CHECK_EQ(session.ended,
                     static_cast<int64_t>(session.attempts.size()) - dispatched - queued)
        << "session " << id << " ended attempts";
    switch (session.phase) {
      case SessionPhase::kActive:
        AGENTKV_CHECK_LE(session.ended, 2 * kMaxEndedAttemptsPerSession) << "session " << id;
        AGENTKV_CHECK_EQ(cancelled, 0) << "active session " << id << " has cancelled attempts";
        AGENTKV_CHECK(!session.reason.has_value()) << "active session " << id << " has a reason";
        break;
      case SessionPhase::kDraining:
        AGENTKV_CHECK(session.reason.has_value()) << "session " << id;
        AGENTKV_CHECK_EQ(queued, 0) << "draining session " << id << " has queued attempts";
        AGENTKV_CHECK_LT(0, dispatched) << "draining session " << id << " has nothing in flight";
        break;
      case SessionPhase::kClosing:
        AGENTKV_CHECK(lifecycle_enabled()) << "closing session " << id << " with lifecycle off";
        ++closing;
        [[fallthrough]];
      case SessionPhase::kTerminal:
        if (session.phase == SessionPhase::kTerminal) ++terminal;
        AGENTKV_CHECK(session.reason.has_value()) << "session " << id;
        AGENTKV_CHECK_EQ(queued + dispatched, 0) << "ended session " << id << " has live attempts";
        break;
    }
  }
  AGENTKV_CHECK_EQ(attempt_count, session_of_rid_.size()) << "rid index has stale entries";
  AGENTKV_CHECK_EQ(counters_.close, closes_emitted_ - closing);
  AGENTKV_CHECK_GE(counters_.close_failure, 0);
  AGENTKV_CHECK_LE(counters_.close_failure, counters_.close);
  AGENTKV_CHECK_EQ(counters_.terminated, terminal + forgotten_);
  if (!lifecycle_enabled()) AGENTKV_CHECK_EQ(closes_emitted_, 0);
}

}  // namespace agentkv::control
