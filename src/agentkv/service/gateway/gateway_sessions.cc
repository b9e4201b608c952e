#include "agentkv/service/gateway/gateway_sessions.h"

#include <utility>
#include <variant>

#include "agentkv/base/check.h"
#include "agentkv/sync/mutex.h"

// Invariants (under mu_): close_waiters_ holds exactly the close requests the flow has not
// answered yet; every action the flow emitted under the lock is performed after it is released,
// in emission order, by the thread that caused it.

namespace agentkv::service {
namespace {

TimeNs ToTimeNs(SteadyTime time) {
  return TimeNs(
      std::chrono::duration_cast<std::chrono::nanoseconds>(time.time_since_epoch()).count());
}

TimeNs ToTimeNs(std::chrono::steady_clock::duration duration) {
  return TimeNs(std::chrono::duration_cast<std::chrono::nanoseconds>(duration).count());
}

control::GatewayFlowOptions FlowOptions(const SessionManagerOptions& options) {
  control::GatewayFlowOptions flow;
  flow.lifecycle = options.lifecycle;
  flow.idle_timeout = ToTimeNs(options.idle_timeout);
  flow.drain_timeout = ToTimeNs(options.drain_timeout);
  flow.max_closed_sessions = options.max_closed_sessions;
  flow.max_sessions = options.max_sessions;
  flow.max_retained_sessions = options.max_retained_sessions;
  flow.parent_return = options.subagent_demotion ? control::ParentReturnDelivery::kOncePerReturn
                                                 : control::ParentReturnDelivery::kOff;
  return flow;
}

}  // namespace

SessionManager::SessionManager(SessionManagerOptions options, SessionEffects* effects)
    : options_(std::move(options)), effects_(effects), flow_(FlowOptions(options_)) {
  AGENTKV_CHECK(effects_ != nullptr);
}

control::SessionHistory SessionManager::History(
    const std::optional<std::string>& session_id) const {
  if (!session_id.has_value()) return {};
  sync::MutexLock lock(&mu_);
  return flow_.History(*session_id);
}

std::optional<uint64_t> SessionManager::ProgramArrival(
    std::string_view rid, const std::optional<std::string>& parent) const {
  sync::MutexLock lock(&mu_);
  if (parent.has_value()) {
    if (std::optional<uint64_t> arrival = flow_.ProgramArrival(*parent); arrival.has_value()) {
      return arrival;
    }
  }
  return flow_.AttemptProgramArrival(rid);
}

StatusOr<std::string> SessionManager::BeginAttempt(const std::optional<std::string>& session_id,
                                                   std::string_view request_id, SteadyTime now,
                                                   control::AttemptSpec<std::string> spec) {
  Pending pending;
  StatusOr<std::string> rid = [&] {
    sync::MutexLock lock(&mu_);
    StatusOr<std::string> begun = flow_.BeginAttempt(session_id, request_id, spec, ToTimeNs(now));
    // Opening a session at the cap may end an idle one; a parent's return may be due.
    CollectLocked(pending);
    return begun;
  }();
  Run(std::move(pending));
  return rid;
}

bool SessionManager::WouldOpen(const std::optional<std::string>& session_id) const {
  if (!session_id.has_value()) return false;
  sync::MutexLock lock(&mu_);
  return flow_.Opens(*session_id);
}

StatusOr<control::AdmissionVerdict> SessionManager::OnAdmission(
    std::string_view rid, const control::AdmissionDecision& decision) {
  sync::MutexLock lock(&mu_);
  return flow_.OnAdmission(rid, decision);
}

StatusOr<control::GenerateIdentity> SessionManager::Dispatch(std::string_view rid) {
  sync::MutexLock lock(&mu_);
  AGENTKV_ASSIGN_OR_RETURN(control::DispatchIdentity<std::string> identity, flow_.Dispatch(rid));
  return control::GenerateIdentity{std::move(identity.rid), std::move(identity.session)};
}

std::vector<control::FlowAction<std::string>> SessionManager::ClientGone(std::string_view rid) {
  sync::MutexLock lock(&mu_);
  flow_.OnClientGone(rid);
  // Only this attempt's actions can be in the outbox: every other call empties it under the
  // lock it runs under.
  return flow_.TakeActions();
}

void SessionManager::Finish(std::string_view rid, SteadyTime now) {
  Pending pending;
  {
    sync::MutexLock lock(&mu_);
    flow_.Finish(rid, ToTimeNs(now));
    CollectLocked(pending);
  }
  Run(std::move(pending));
}

void SessionManager::Close(const std::string& session_id, control::TerminalReason reason,
                           SteadyTime now, std::function<void(SessionCloseResult)> done) {
  Pending pending;
  {
    sync::MutexLock lock(&mu_);
    const uint64_t request = next_close_request_++;
    close_waiters_.emplace(request, std::move(done));
    flow_.Close(session_id, reason, request, ToTimeNs(now));
    CollectLocked(pending);
  }
  Run(std::move(pending));
}

int64_t SessionManager::Sweep(SteadyTime now) {
  Pending pending;
  int64_t acted = 0;
  {
    sync::MutexLock lock(&mu_);
    acted = flow_.Sweep(ToTimeNs(now));
    CollectLocked(pending);
  }
  Run(std::move(pending));
  return acted;
}

void SessionManager::CollectLocked(Pending& pending) {
  for (control::FlowAction<std::string>& action : flow_.TakeActions()) {
    if (const auto* answer = std::get_if<control::AnswerClose<std::string>>(&action)) {
      auto waiter = close_waiters_.find(answer->request);
      AGENTKV_CHECK(waiter != close_waiters_.end()) << "close request answered twice";
      pending.answers.emplace(answer->request, std::move(waiter->second));
      close_waiters_.erase(waiter);
    }
    pending.actions.push_back(std::move(action));
  }
}

void SessionManager::Run(Pending pending) {
  for (const control::FlowAction<std::string>& action : pending.actions) {
    if (const auto* cancel = std::get_if<control::CancelAttempt>(&action)) {
      effects_->CancelQueuedAttempt(cancel->rid);
    } else if (const auto* abort = std::get_if<control::AbortOnEveryEngine>(&action)) {
      effects_->AbortOnEveryEngine(abort->rid);
    } else if (const auto* lease = std::get_if<control::ReturnLease>(&action)) {
      effects_->ReturnLease(lease->lease_id);
    } else if (const auto* close = std::get_if<control::CloseOnEveryEngine<std::string>>(&action)) {
      const std::string session_id = close->session;
      effects_->CloseOnEveryEngine(session_id,
                                   [this, session_id](bool ok) { OnCloseDone(session_id, ok); });
    } else if (const auto* answer = std::get_if<control::AnswerClose<std::string>>(&action)) {
      const control::CloseOutcome<std::string>& outcome = answer->outcome;
      pending.answers.at(answer->request)(
          SessionCloseResult{outcome.session, outcome.closed, outcome.aborted});
    } else if (const auto* delivery =
                   std::get_if<control::DeliverParentReturn<std::string>>(&action)) {
      effects_->DeliverParentReturn(delivery->parent);
    }
    // CutUpstream comes only from ClientGone, whose actions its caller performs.
  }
}

void SessionManager::OnCloseDone(const std::string& session_id, bool ok) {
  Pending pending;
  {
    sync::MutexLock lock(&mu_);
    const Status consumed = flow_.OnCloseOutcome(session_id, ok);
    AGENTKV_CHECK(consumed.ok()) << consumed;
    CollectLocked(pending);
  }
  if (options_.on_close_outcome) options_.on_close_outcome(session_id, ok);
  Run(std::move(pending));
}

control::SessionLifecycleCounters SessionManager::counters() const {
  sync::MutexLock lock(&mu_);
  return flow_.counters();
}

int64_t SessionManager::active_sessions() const {
  sync::MutexLock lock(&mu_);
  return flow_.active_sessions();
}

int64_t SessionManager::retained_sessions() const {
  sync::MutexLock lock(&mu_);
  return flow_.retained_sessions();
}

int64_t SessionManager::retain_refused() const {
  sync::MutexLock lock(&mu_);
  return flow_.retain_refused();
}

int64_t SessionManager::evicted() const {
  sync::MutexLock lock(&mu_);
  return flow_.evicted();
}

int64_t SessionManager::refused() const {
  sync::MutexLock lock(&mu_);
  return flow_.refused();
}

int64_t SessionManager::live_attempts() const {
  sync::MutexLock lock(&mu_);
  return flow_.live_attempts();
}

std::vector<std::string> SessionManager::live_rids() const {
  sync::MutexLock lock(&mu_);
  return flow_.live_rids();
}

void SessionManager::CheckInvariants() const {
  sync::MutexLock lock(&mu_);
  flow_.CheckInvariants();
}

}  // namespace agentkv::service
