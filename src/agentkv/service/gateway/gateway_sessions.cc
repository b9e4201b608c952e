#include "agentkv/service/gateway/gateway_sessions.h"

#include <algorithm>
#include <utility>
#include <variant>

#include "agentkv/base/check.h"

// Invariants (under mu_):
// - sessions_ holds exactly the planner's sessions (same ids); an ended session is either
//   remembered in closed_ (tombstone != 0) or waiting for its close outcome.
// - live_ holds every attempt begun and not finished; a session's open_attempts equals the
//   live attempts naming it.
// - close_outstanding is true exactly while the planner's phase is kClosing.
// - A session's waiters are non-empty only while it is draining or closing (they are answered
//   when it ends).
// - active_ counts the planner's kActive sessions; idle_ holds exactly the active sessions
//   with no open attempt, each once, keyed by its idle_since.

namespace agentkv::service {
namespace {

constexpr int64_t kMaxAttemptsPerRequestId = int64_t{1} << 20;

}  // namespace

SessionManager::SessionManager(SessionManagerOptions options, SessionEffects* effects)
    : options_(std::move(options)),
      effects_(effects),
      planner_(control::SessionLifecycleOptions{options_.lifecycle}) {
  AGENTKV_CHECK(effects_ != nullptr);
  AGENTKV_CHECK(options_.max_closed_sessions >= 1);
  AGENTKV_CHECK(options_.max_sessions >= 1);
}

SessionManager::SessionState& SessionManager::OpenLocked(const std::string& session_id,
                                                         SteadyTime now) {
  auto it = sessions_.find(session_id);
  if (it != sessions_.end()) {
    const StatusOr<control::SessionPhase> phase = planner_.phase(session_id);
    if (!phase.ok() || *phase != control::SessionPhase::kTerminal) return it->second;
    // Attempts of the ended incarnation (cancelled by its close) have not all reported
    // Finish yet: keep it; the caller sees it terminal.
    if (it->second.open_attempts > 0) return it->second;
    // An ended session used again: a new incarnation. Its tombstone entry goes stale.
    planner_.ForgetSession(session_id).IgnoreError();
    sessions_.erase(it);
  }
  AGENTKV_CHECK(planner_.OpenSession(session_id).ok());
  ++active_;
  SessionState& state = sessions_[session_id];
  state.last_activity = now;
  UpdateIdleLocked(session_id, state);
  return state;
}

void SessionManager::UpdateIdleLocked(const std::string& session_id, SessionState& state) {
  const StatusOr<control::SessionPhase> phase = planner_.phase(session_id);
  const bool idle =
      phase.ok() && *phase == control::SessionPhase::kActive && state.open_attempts == 0;
  if (state.idle_since.has_value() && (!idle || *state.idle_since != state.last_activity)) {
    idle_.erase({*state.idle_since, session_id});
    state.idle_since.reset();
  }
  if (idle && !state.idle_since.has_value()) {
    idle_.emplace(state.last_activity, session_id);
    state.idle_since = state.last_activity;
  }
}

bool SessionManager::OpensSessionLocked(const std::string& session_id) const {
  auto existing = sessions_.find(session_id);
  if (existing == sessions_.end()) return true;
  // An ended incarnation with nothing live is replaced by a new one (OpenLocked).
  const StatusOr<control::SessionPhase> phase = planner_.phase(session_id);
  return phase.ok() && *phase == control::SessionPhase::kTerminal &&
         existing->second.open_attempts == 0;
}

Status SessionManager::MakeRoomLocked(SteadyTime now, Pending& pending) {
  if (active_ < options_.max_sessions) return Status::Ok();
  if (idle_.empty()) {
    ++refused_;
    return ResourceExhaustedError(
        "the gateway holds its maximum of " + std::to_string(options_.max_sessions) +
        " active sessions (--max-sessions), each with a request in flight; retry later");
  }
  const std::string victim = idle_.begin()->second;
  TerminateLocked(victim, control::TerminalReason::kDropped, now, pending);
  ++evicted_;
  return Status::Ok();
}

StatusOr<std::string> SessionManager::BeginAttempt(const std::optional<std::string>& session_id,
                                                   std::string_view request_id, SteadyTime now) {
  if (request_id.empty()) return InvalidArgumentError("empty request id");
  Pending pending;
  StatusOr<std::string> rid = BeginAttemptLocked(session_id, request_id, now, pending);
  Run(std::move(pending));
  return rid;
}

StatusOr<std::string> SessionManager::BeginAttemptLocked(
    const std::optional<std::string>& session_id, std::string_view request_id, SteadyTime now,
    Pending& pending) {
  std::lock_guard<std::mutex> lock(mu_);
  if (!session_id.has_value()) {
    for (int64_t n = 0; n < kMaxAttemptsPerRequestId; ++n) {
      std::string rid = control::FormatAttemptRid(request_id, n);
      if (live_.contains(rid)) continue;
      live_.emplace(rid, std::string());
      return rid;
    }
    return ResourceExhaustedError("too many live attempts of request " + std::string(request_id));
  }
  if (OpensSessionLocked(*session_id)) AGENTKV_RETURN_IF_ERROR(MakeRoomLocked(now, pending));
  SessionState& state = OpenLocked(*session_id, now);
  const StatusOr<control::SessionPhase> phase = planner_.phase(*session_id);
  if (!phase.ok() || *phase != control::SessionPhase::kActive) {
    return FailedPreconditionError("session " + *session_id + " is closing");
  }
  if (state.next_attempt.size() > static_cast<size_t>(control::kMaxEndedAttemptsPerSession)) {
    state.next_attempt.clear();
  }
  int64_t& next = state.next_attempt[std::string(request_id)];
  for (; next < kMaxAttemptsPerRequestId; ++next) {
    const std::string rid = control::FormatAttemptRid(request_id, next);
    if (live_.contains(rid)) continue;
    StatusOr<std::string> begun = planner_.BeginAttempt(*session_id, request_id, next);
    if (!begun.ok() && begun.status().code() == StatusCode::kAlreadyExists) continue;
    if (!begun.ok()) return begun.status();
    ++next;
    live_.emplace(*begun, *session_id);
    ++state.open_attempts;
    state.last_activity = now;
    UpdateIdleLocked(*session_id, state);
    return begun;
  }
  return ResourceExhaustedError("too many attempts of request " + std::string(request_id));
}

StatusOr<control::GenerateIdentity> SessionManager::Dispatch(std::string_view rid) {
  std::lock_guard<std::mutex> lock(mu_);
  auto it = live_.find(rid);
  if (it == live_.end()) return NotFoundError("unknown attempt " + std::string(rid));
  if (it->second.empty()) return control::GenerateIdentity{std::string(rid), std::nullopt};
  StatusOr<control::GenerateIdentity> identity = planner_.MarkDispatched(rid);
  if (!identity.ok() && identity.status().code() == StatusCode::kFailedPrecondition) {
    return FailedPreconditionError("session " + it->second +
                                   " was closed before the request was sent");
  }
  return identity;
}

void SessionManager::Finish(std::string_view rid, SteadyTime now) {
  Pending pending;
  {
    std::lock_guard<std::mutex> lock(mu_);
    auto it = live_.find(rid);
    if (it == live_.end()) return;
    const std::string session_id = it->second;
    live_.erase(it);
    if (session_id.empty()) return;
    auto session = sessions_.find(session_id);
    AGENTKV_CHECK(session != sessions_.end()) << "live attempt of an unknown session";
    --session->second.open_attempts;
    session->second.last_activity = now;
    planner_.MarkFinished(rid).IgnoreError();
    UpdateIdleLocked(session_id, session->second);
    CollectLocked(pending);
    SettleLocked(session_id, session->second, pending);
  }
  Run(std::move(pending));
}

void SessionManager::TerminateLocked(const std::string& session_id, control::TerminalReason reason,
                                     SteadyTime now, Pending& pending) {
  SessionState& state = sessions_.at(session_id);
  StatusOr<control::TerminationPlan> plan = planner_.PlanTermination(session_id, reason);
  AGENTKV_CHECK(plan.ok()) << plan.status();
  if (plan->already_terminating) return;
  AGENTKV_CHECK(planner_.ApplyTermination(*plan).ok());
  --active_;
  UpdateIdleLocked(session_id, state);
  state.aborted = static_cast<int64_t>(plan->abort_rids.size());
  if (!plan->abort_rids.empty()) state.drain_deadline = now + options_.drain_timeout;
  CollectLocked(pending);
  SettleLocked(session_id, state, pending);
}

void SessionManager::CollectLocked(Pending& pending) {
  for (control::LifecycleAction& action : planner_.TakeActions()) {
    if (const auto* close = std::get_if<control::CloseSessionAction>(&action)) {
      SessionState& state = sessions_.at(close->session_id);
      state.close_outstanding = true;
      state.drain_deadline.reset();
    }
    pending.actions.push_back(std::move(action));
  }
}

void SessionManager::SettleLocked(const std::string& session_id, SessionState& state,
                                  Pending& pending) {
  const StatusOr<control::SessionPhase> phase = planner_.phase(session_id);
  if (!phase.ok() || *phase != control::SessionPhase::kTerminal || state.close_outstanding) return;
  state.drain_deadline.reset();
  // With the lifecycle off nothing is closed: the session simply ended.
  const bool closed = state.last_close_ok.value_or(true);
  for (auto& waiter : state.waiters) {
    pending.answers.emplace_back(std::move(waiter),
                                 SessionCloseResult{session_id, closed, state.aborted});
  }
  state.waiters.clear();
  if (state.tombstone != 0) return;
  state.tombstone = next_tombstone_++;
  closed_.emplace_back(session_id, state.tombstone);
  // Forget the oldest ended sessions; one whose cancelled attempts are still live goes to the
  // back (each entry is looked at once per call).
  size_t budget = closed_.size();
  while (static_cast<int64_t>(closed_.size()) > options_.max_closed_sessions && budget-- > 0) {
    auto [oldest, tombstone] = closed_.front();
    closed_.pop_front();
    auto it = sessions_.find(oldest);
    if (it == sessions_.end() || it->second.tombstone != tombstone) continue;
    if (it->second.open_attempts > 0) {
      closed_.emplace_back(std::move(oldest), tombstone);
      continue;
    }
    planner_.ForgetSession(oldest).IgnoreError();
    sessions_.erase(it);
  }
}

void SessionManager::Run(Pending pending) {
  for (const control::LifecycleAction& action : pending.actions) {
    if (const auto* cancel = std::get_if<control::CancelAttemptAction>(&action)) {
      effects_->CancelQueuedAttempt(cancel->rid);
    } else if (const auto* abort = std::get_if<control::AbortRequestAction>(&action)) {
      effects_->AbortOnEveryEngine(abort->rid);
    } else if (const auto* close = std::get_if<control::CloseSessionAction>(&action)) {
      const std::string session_id = close->session_id;
      effects_->CloseOnEveryEngine(session_id,
                                   [this, session_id](bool ok) { OnCloseDone(session_id, ok); });
    }
  }
  for (auto& [waiter, result] : pending.answers) waiter(result);
}

void SessionManager::OnCloseDone(const std::string& session_id, bool ok) {
  Pending pending;
  {
    std::lock_guard<std::mutex> lock(mu_);
    auto it = sessions_.find(session_id);
    AGENTKV_CHECK(it != sessions_.end()) << "close outcome of an unknown session";
    AGENTKV_CHECK(planner_.OnCloseOutcome(session_id, ok).ok());
    it->second.close_outstanding = false;
    it->second.last_close_ok = ok;
    CollectLocked(pending);
    SettleLocked(session_id, it->second, pending);
  }
  if (options_.on_close_outcome) options_.on_close_outcome(session_id, ok);
  Run(std::move(pending));
}

void SessionManager::Close(const std::string& session_id, control::TerminalReason reason,
                           SteadyTime now, std::function<void(SessionCloseResult)> done) {
  Pending pending;
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (!sessions_.contains(session_id)) OpenLocked(session_id, now);
    SessionState& state = sessions_.at(session_id);
    const StatusOr<control::SessionPhase> phase = planner_.phase(session_id);
    AGENTKV_CHECK(phase.ok());
    if (*phase == control::SessionPhase::kTerminal) {
      // Idempotent: the remembered outcome, no second fan-out.
      pending.answers.emplace_back(
          std::move(done), SessionCloseResult{session_id, state.last_close_ok.value_or(true), 0});
    } else {
      state.waiters.push_back(std::move(done));
      if (*phase == control::SessionPhase::kActive)
        TerminateLocked(session_id, reason, now, pending);
    }
  }
  Run(std::move(pending));
}

int64_t SessionManager::Sweep(SteadyTime now) {
  Pending pending;
  int64_t acted = 0;
  {
    std::lock_guard<std::mutex> lock(mu_);
    std::vector<std::string> idle;
    std::vector<std::string> overdue;
    for (auto& [id, state] : sessions_) {
      const StatusOr<control::SessionPhase> phase = planner_.phase(id);
      if (!phase.ok()) continue;
      if (*phase == control::SessionPhase::kActive && state.open_attempts == 0 &&
          options_.idle_timeout.count() > 0 && now - state.last_activity >= options_.idle_timeout) {
        idle.push_back(id);
      } else if (*phase == control::SessionPhase::kDraining && state.drain_deadline.has_value() &&
                 now >= *state.drain_deadline) {
        overdue.push_back(id);
      }
    }
    for (const std::string& id : idle) {
      TerminateLocked(id, control::TerminalReason::kDropped, now, pending);
      ++acted;
    }
    for (const std::string& id : overdue) {
      // The aborted attempts did not end in time: close anyway (their late answers are
      // ignored by the planner).
      AGENTKV_CHECK(planner_.OnAbortsJoined(id).ok());
      CollectLocked(pending);
      SettleLocked(id, sessions_.at(id), pending);
      ++acted;
    }
  }
  Run(std::move(pending));
  return acted;
}

control::SessionLifecycleCounters SessionManager::counters() const {
  std::lock_guard<std::mutex> lock(mu_);
  return planner_.counters();
}

int64_t SessionManager::active_sessions() const {
  std::lock_guard<std::mutex> lock(mu_);
  int64_t active = 0;
  for (const auto& [id, state] : sessions_) {
    const StatusOr<control::SessionPhase> phase = planner_.phase(id);
    if (phase.ok() && *phase == control::SessionPhase::kActive) ++active;
  }
  return active;
}

int64_t SessionManager::evicted() const {
  std::lock_guard<std::mutex> lock(mu_);
  return evicted_;
}

int64_t SessionManager::refused() const {
  std::lock_guard<std::mutex> lock(mu_);
  return refused_;
}

int64_t SessionManager::live_attempts() const {
  std::lock_guard<std::mutex> lock(mu_);
  return static_cast<int64_t>(live_.size());
}

std::vector<std::string> SessionManager::live_rids() const {
  std::lock_guard<std::mutex> lock(mu_);
  std::vector<std::string> rids;
  for (const auto& [rid, session] : live_) rids.push_back(rid);
  return rids;
}

void SessionManager::CheckInvariants() const {
  std::lock_guard<std::mutex> lock(mu_);
  planner_.CheckInvariants();
  AGENTKV_CHECK(planner_.session_count() == static_cast<int64_t>(sessions_.size()))
      << "registry and planner disagree on the session count";
  std::map<std::string, int64_t, std::less<>> open;
  for (const auto& [rid, session] : live_) {
    if (!session.empty()) ++open[session];
  }
  int64_t active = 0;
  size_t idle = 0;
  for (const auto& [id, state] : sessions_) {
    const StatusOr<control::SessionPhase> phase = planner_.phase(id);
    AGENTKV_CHECK(phase.ok()) << "session " << id << " unknown to the planner";
    const bool is_active = *phase == control::SessionPhase::kActive;
    if (is_active) ++active;
    const bool is_idle = is_active && state.open_attempts == 0;
    AGENTKV_CHECK(is_idle == state.idle_since.has_value()) << "session " << id << " idle index";
    if (is_idle) {
      ++idle;
      AGENTKV_CHECK(idle_.contains({*state.idle_since, id})) << "session " << id << " idle key";
    }
    auto it = open.find(id);
    AGENTKV_CHECK(state.open_attempts == (it == open.end() ? 0 : it->second))
        << "session " << id << " open attempts";
    AGENTKV_CHECK(state.close_outstanding == (*phase == control::SessionPhase::kClosing))
        << "session " << id << " close outstanding";
    const bool terminating =
        *phase == control::SessionPhase::kDraining || *phase == control::SessionPhase::kClosing;
    AGENTKV_CHECK(state.waiters.empty() || terminating) << "session " << id << " waiters";
  }
  AGENTKV_CHECK(active == active_) << "active session count";
  AGENTKV_CHECK(idle == idle_.size()) << "idle index size";
  AGENTKV_CHECK(active_ <= options_.max_sessions) << "more active sessions than the cap";
}

}  // namespace agentkv::service
